import type { AccessControl } from '../../services/access-control.js';
import type { AuditLog } from '../../services/audit-log.js';
import { requireRepartitioning, type Repartitioning } from '../../services/repartitioning.js';
import type { Handler, HttpServer } from '../server.js';
import { name } from './event-types.js';

/**
 * `POST /event-types/{name}/partition-count` with `{"partition_count": N}` → 204 (spec "Event type
 * registry"; see {@link Repartitioning}), and `PUT` on the same path with the same body and answers
 * (issue 14 §4.4: the reference serves it as `PUT`, and its clients use that). Checks in this order: 503 while `disable_db_write_operations`
 * is on; 403 `Repartitioning is disabled (feature repartitioning)` while the feature is off; 400 for a
 * malformed body; 404 for an unknown event type; 403 unless the caller is in the event type's `admins`
 * or an administrator (like `PUT`/`DELETE /event-types/{name}`); 422 for a count that is missing, not a
 * positive integer, smaller than the current one or above `eventTypes.maxPartitionCount`, or that
 * would take a subscription over `subscriptions.maxPartitions`. The same count answers 204 and
 * changes nothing. A change is audited as an update of the event type whose objects are
 * `{"partition_count": N}` before and after.
 */
export function partitionCountRoutes(http: HttpServer, repartitioning: Repartitioning, access: AccessControl, audit: AuditLog): void {
  const handler: Handler = async (ctx) => {
    access.requireWritable();
    requireRepartitioning(access.enabled('repartitioning'));
    const eventType = name(ctx.params);
    const body = await ctx.json();
    const { previous, count } = await repartitioning.repartition(eventType, body, (existing) => access.requireEventType(ctx.subject, existing, 'admin'));
    if (count !== previous) audit.record({ subject: ctx.subject, resource: 'event_type', resourceId: eventType, op: 'U', previous: { partition_count: previous }, next: { partition_count: count } });
    return { status: 204 };
  };
  http.route('POST', '/event-types/:name/partition-count', handler);
  http.route('PUT', '/event-types/:name/partition-count', handler);
}
