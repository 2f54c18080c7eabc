import { PartitionCountInputSchema } from '../../domain/event-type/repartitioning.js';
import type { AccessControl } from '../../services/access-control.js';
import type { AuditLog } from '../../services/audit-log.js';
import { requireRepartitioning, type Repartitioning } from '../../services/event-types/repartitioning.js';
import { empty, jsonBody, problems, routesOf, type Route, type RouteHandler } from '../api/route-model.js';
import { NameParam } from '../api/route-parts.js';
import { name } from './event-types.js';

/** The services the repartitioning routes use. */
export interface PartitionCountDeps {
  readonly repartitioning: Repartitioning;
  readonly access: AccessControl;
  readonly audit: AuditLog;
}

const route = routesOf<PartitionCountDeps>();

/**
 * Repartitions an event type (docs/concepts.md "Partitions"; docs/operations.md "Repartitioning"; see {@link Repartitioning}). Checks in
 * this order: 503 while `disable_db_write_operations` is on; 403 `Repartitioning is disabled (feature
 * repartitioning)` while the feature is off; 400 for a malformed body; 404 for an unknown event type;
 * 403 unless the caller is in the event type's `admins` or an administrator (like `PUT`/`DELETE
 * /event-types/{name}`); 422 for a count that is missing, not a positive integer, smaller than the
 * current one or above `eventTypes.maxPartitionCount`, or that would take a subscription over
 * `subscriptions.maxPartitions`. The same count answers 204 and changes nothing. A change is audited
 * as an update of the event type whose objects are `{"partition_count": N}` before and after.
 */
const repartition: RouteHandler<PartitionCountDeps, typeof NameParam, undefined, undefined> = async (ctx, { repartitioning, access, audit }) => {
  access.requireWritable();
  requireRepartitioning(access.enabled('repartitioning'));
  const eventType = name(ctx.params);
  const body = await ctx.json();
  const { previous, count } = await repartitioning.repartition(eventType, body, (existing) => access.requireEventType(ctx.subject, existing, 'admin'));
  if (count !== previous) audit.record({ subject: ctx.subject, resource: 'event_type', resourceId: eventType, op: 'U', previous: { partition_count: previous }, next: { partition_count: count } });
  return { status: 204 };
};

const partitionCountBody = jsonBody(PartitionCountInputSchema);
const partitionCountResponses = { '204': empty('repartitioned (or already that count)'), ...problems(400, 403, 404, 409, 422, 503) };
const partitionCountDescription = 'Grows the partition count (feature `repartitioning`; config `eventTypes.maxPartitionCount`, `subscriptions.maxPartitions`). Needs the event type\'s `admins`.';

/**
 * `POST /event-types/{name}/partition-count` with `{"partition_count": N}` → 204, and `PUT` on the same
 * path with the same body and answers: clients of the reference service send it as `PUT`.
 */
export const PARTITION_COUNT_ROUTES: readonly Route<PartitionCountDeps>[] = [
  route({
    method: 'POST', path: '/event-types/{name}/partition-count', operationId: 'repartition', tag: 'Event types', access: 'authenticated', params: NameParam,
    summary: 'Repartition an event type', description: partitionCountDescription, body: partitionCountBody, responses: partitionCountResponses,
    handler: repartition,
  }),
  route({
    method: 'PUT', path: '/event-types/{name}/partition-count', operationId: 'repartitionPut', tag: 'Event types', access: 'authenticated', params: NameParam,
    summary: 'Repartition an event type (PUT form)', description: partitionCountDescription, body: partitionCountBody, responses: partitionCountResponses,
    handler: repartition,
  }),
];

