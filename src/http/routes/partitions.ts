import { Type } from '@sinclair/typebox';
import type { AccessControl } from '../../services/access-control.js';
import type { CursorService } from '../../services/cursor-service.js';
import type { EventTypeRegistry } from '../../services/event-types/event-type-registry.js';
import { json, problems, routesOf, type Route } from '../api/route-model.js';
import { NameParam } from '../api/route-parts.js';
import { PartitionSchema } from '../api/wire-schemas.js';
import type { RequestContext } from '../server.js';
import { name } from './event-types.js';

/** The services the partition and cursor routes use (cursors.ts shares them). */
export interface PartitionDeps {
  readonly cursors: CursorService;
  readonly registry: EventTypeRegistry;
  readonly access: AccessControl;
}

/** The query of `GET /event-types/{name}/partitions`. */
export const PartitionsQuery = Type.Object({ cursors: Type.Optional(Type.String({ description: 'JSON array of cursors, each partition at most once: adds unconsumed_events to their partitions (malformed: 422)' })) });
/** The query of `GET /event-types/{name}/partitions/{partition}`. */
export const PartitionQuery = Type.Object({ consumed_offset: Type.Optional(Type.String({ description: 'adds unconsumed_events after this offset (invalid: 422)' })) });

const route = routesOf<PartitionDeps>();

/** The `{name}` of a request whose subject may read that event type. @throws BrokerError 404, 403 */
export async function readable(ctx: Pick<RequestContext, 'params' | 'subject'>, { registry, access }: PartitionDeps): Promise<string> {
  const eventType = name(ctx.params);
  access.requireEventType(ctx.subject, await registry.get(eventType), 'read');
  return eventType;
}

/**
 * Partition routes (docs/concepts.md "Offsets and cursors"): the partitions of an event type, with
 * `unconsumed_events` for given cursors, and one partition. They need the event type's `readers`.
 */
export const PARTITION_ROUTES: readonly Route<PartitionDeps>[] = [
  route({
    method: 'GET', path: '/event-types/{name}/partitions', operationId: 'listPartitions', tag: 'Partitions and cursors', access: 'authenticated', params: NameParam,
    summary: 'List partitions',
    query: PartitionsQuery,
    responses: { '200': json('the partitions', Type.Array(PartitionSchema)), ...problems(400, 403, 404, 422) },
    // `?cursors=<JSON array of cursors>` adds unconsumed_events to the partitions named there.
    handler: async (ctx, deps) => ({ status: 200, body: await deps.cursors.list(await readable(ctx, deps), ctx.input.query.cursors) }),
  }),
  route({
    method: 'GET', path: '/event-types/{name}/partitions/{partition}', operationId: 'getPartition', tag: 'Partitions and cursors', access: 'authenticated',
    params: Type.Object({ name: Type.String(), partition: Type.String() }),
    summary: 'Get one partition',
    query: PartitionQuery,
    responses: { '200': json('the partition', PartitionSchema), ...problems(400, 403, 404, 422) },
    // `?consumed_offset=<offset>` adds unconsumed_events after it.
    handler: async (ctx, deps) => ({ status: 200, body: await deps.cursors.get(await readable(ctx, deps), ctx.input.params.partition, ctx.input.query.consumed_offset) }),
  }),
];
