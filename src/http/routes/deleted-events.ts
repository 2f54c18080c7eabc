import { Type } from '@sinclair/typebox';
import { DeletedEventsInputSchema } from '../../domain/storages/deleted-events.js';
import { brokerError } from '../../errors/catalog.js';
import type { AccessControl } from '../../services/access-control.js';
import type { DeletedEvents } from '../../services/deleted-events.js';
import { batchItems, empty, jsonBody, problems, routesOf, type Route } from '../api/route-model.js';
import { NameParam } from '../api/route-parts.js';
import { name } from './event-types.js';

/** The response header a successful answer echoes the span context in (docs/publishing.md). */
const SPAN_CTX = 'span_ctx';
/**
 * Request headers carrying the span context. The HTTP engine (uWebSockets.js) drops any request whose
 * header names contain `_`, so `span_ctx` itself never arrives; `span-ctx` is the spelling that does.
 */
const SPAN_CTX_REQUEST = ['span_ctx', 'span-ctx'] as const;

/** The services the deleted-events route uses. */
export interface DeletedEventsDeps {
  readonly deletedEvents: DeletedEvents;
  readonly access: AccessControl;
}

const route = routesOf<DeletedEventsDeps>();

/**
 * `POST /event-types/{name}/deleted-events` (docs/publishing.md): body an array of events (not
 * validated; compaction key and partition data must be present). Authorization as for publishing:
 * blacklist (403), then the event type's `writers` (403). Answers 200 with an empty body and the
 * request's span context (header `span-ctx`; see {@link SPAN_CTX_REQUEST}) echoed as `span_ctx`; 422
 * problem for an event type with cleanup_policy `delete`; 422 / 207 with BatchItemResponse items like
 * publishing.
 */
export const DELETED_EVENTS_ROUTES: readonly Route<DeletedEventsDeps>[] = [
  route({
    method: 'POST', path: '/event-types/{name}/deleted-events', operationId: 'deleteEvents', tag: 'Publishing', access: 'authenticated', params: NameParam, bodyLimit: 'events',
    summary: 'Delete events of a compacted event type (tombstones)',
    description: 'Body: events with their compaction key and partition data. Authorization as for publishing. The request header `span-ctx` is echoed as `span_ctx`.',
    headers: Type.Object({ 'span-ctx': Type.Optional(Type.String({ description: 'span context, echoed in the answer header span_ctx' })) }),
    body: jsonBody(DeletedEventsInputSchema),
    responses: {
      '200': empty('the tombstones were written', { span_ctx: { description: 'the request\'s span-ctx', schema: Type.String() } }),
      '207': batchItems('some partitions could not be written'),
      '422': batchItems('some events were refused, one item per event; or a problem: the event type\'s cleanup_policy is `delete`. Nothing was written', true),
      ...problems(400, 403, 404, 413, 415, 503),
    },
    handler: async (ctx, { deletedEvents, access }) => {
      const eventType = name(ctx.params);
      access.requireProducerNotBlocked(ctx.subject, eventType);
      const body = await ctx.body();
      if (body.byteLength === 0) throw brokerError('BAD_REQUEST', { reason: 'the body must be a JSON array of events' });
      const outcome = await deletedEvents.delete(eventType, body, (record) => access.requireEventType(ctx.subject, record, 'write'));
      if (outcome.status !== 200) return { status: outcome.status, body: outcome.items };
      const spanCtx = SPAN_CTX_REQUEST.map((h) => ctx.headers[h]).find((v) => v !== undefined);
      return { status: 200, ...(spanCtx !== undefined && spanCtx !== '' ? { headers: { [SPAN_CTX]: spanCtx } } : {}) };
    },
  }),
];

