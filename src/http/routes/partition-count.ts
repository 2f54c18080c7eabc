import type { AccessControl } from '../../services/access-control.js';
import { requireRepartitioning, type Repartitioning } from '../../services/repartitioning.js';
import type { HttpServer } from '../server.js';
import { name } from './event-types.js';

/**
 * `POST /event-types/{name}/partition-count` with `{"partition_count": N}` → 204 (spec "Event type
 * registry"; see {@link Repartitioning}). Checks in this order: 503 while `disable_db_write_operations`
 * is on; 403 `Repartitioning is disabled (feature repartitioning)` while the feature is off; 400 for a
 * malformed body; 404 for an unknown event type; 403 unless the caller is in the event type's `admins`
 * or an administrator (like `PUT`/`DELETE /event-types/{name}`); 422 for a count that is missing, not a
 * positive integer, smaller than the current one or above `eventTypes.maxPartitionCount`, or that
 * would take a subscription over `subscriptions.maxPartitions`. The same count answers 204 and
 * changes nothing.
 */
export function partitionCountRoutes(http: HttpServer, repartitioning: Repartitioning, access: AccessControl): void {
  http.route('POST', '/event-types/:name/partition-count', async (ctx) => {
    access.requireWritable();
    requireRepartitioning(access.enabled('repartitioning'));
    const eventType = name(ctx.params);
    const body = await ctx.json();
    await repartitioning.repartition(eventType, body, (existing) => access.requireEventType(ctx.subject, existing, 'admin'));
    return { status: 204 };
  });
}
