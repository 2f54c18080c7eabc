import { brokerError } from '../../errors/catalog.js';
import type { AccessControl } from '../../services/access-control.js';
import type { DeletedEvents } from '../../services/deleted-events.js';
import type { HttpServer } from '../server.js';
import { name } from './event-types.js';

/** The response header a successful answer echoes the span context in (spec: "acknowledged with the span_ctx response header"). */
const SPAN_CTX = 'span_ctx';
/**
 * Request headers carrying the span context. The HTTP engine (uWebSockets.js) drops any request whose
 * header names contain `_`, so `span_ctx` itself never arrives; `span-ctx` is the spelling that does.
 */
const SPAN_CTX_REQUEST = ['span_ctx', 'span-ctx'] as const;

/**
 * `POST /event-types/{name}/deleted-events` (spec "Event type registry"; issue 6): body an array of
 * events (not validated; compaction key and partition data must be present). Authorization as for
 * publishing: blacklist (403), then the event type's `writers` (403). Answers 200 with an empty body
 * and the request's span context (header `span-ctx`; see {@link SPAN_CTX_REQUEST}) echoed as `span_ctx`; 422 problem for an event type with cleanup_policy
 * `delete`; 422 / 207 with BatchItemResponse items like publishing (WIRE.md "Publishing").
 */
export function deletedEventsRoutes(http: HttpServer, deletedEvents: DeletedEvents, access: AccessControl): void {
  http.route('POST', '/event-types/:name/deleted-events', async (ctx) => {
    const eventType = name(ctx.params);
    access.requireProducerNotBlocked(ctx.subject, eventType);
    const body = await ctx.body();
    if (body.byteLength === 0) throw brokerError('BAD_REQUEST', { reason: 'the body must be a JSON array of events' });
    const outcome = await deletedEvents.delete(eventType, body, (record) => access.requireEventType(ctx.subject, record, 'write'));
    if (outcome.status !== 200) return { status: outcome.status, body: outcome.items };
    const spanCtx = SPAN_CTX_REQUEST.map((h) => ctx.headers[h]).find((v) => v !== undefined);
    return { status: 200, ...(spanCtx !== undefined && spanCtx !== '' ? { headers: { [SPAN_CTX]: spanCtx } } : {}) };
  }, { body: 'events' });
}
