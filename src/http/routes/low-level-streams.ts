import { Type } from '@sinclair/typebox';
import type { LowLevelStreams } from '../../services/consumption/stream/low-level-streams.js';
import { problems, routesOf, type Route } from '../api/route-model.js';
import { NameParam, stream, streamQuery } from '../api/route-parts.js';
import { name } from './event-types.js';

/** The query of the low-level stream `GET /event-types/{name}/events`: the stream parameters, `cursors` and `filter` (docs/consuming.md "Filters"). */
export const LowLevelStreamQuery = Type.Object({
  ...streamQuery,
  cursors: Type.Optional(Type.String({ description: 'JSON array of cursors (for clients that cannot send headers); not with X-Broker-Cursors (400)' })),
  filter: Type.Optional(Type.String({ description: 'a draft-04 JSON Schema as JSON: only events (metadata included) it matches are sent, the others passed over; checked as an event type\'s schema (unusable: 422)' })),
});
/** The headers the low-level stream reads (their JSON is checked by src/domain/cursor/cursor-input.ts: 400). */
export const LowLevelStreamHeaders = Type.Object({
  'X-Broker-Cursors': Type.Optional(Type.String({ description: 'JSON array of cursors, each partition at most once; only those partitions are streamed' })),
  'Last-Event-ID': Type.Optional(Type.String({ description: 'the `id` of the last server-sent event received (an EventSource reconnecting)' })),
});

const route = routesOf<LowLevelStreams>();

/**
 * Low-level consumption route (docs/consuming.md "Low-level streams"): `GET /event-types/{name}/events`,
 * as JSON lines or, with `Accept: text/event-stream`, server-sent events. Its query and cursor headers
 * are checked by the pipeline against the route's schemas first.
 */
export const LOW_LEVEL_STREAM_ROUTES: readonly Route<LowLevelStreams>[] = [
  route({
    method: 'GET', path: '/event-types/{name}/events', operationId: 'lowLevelStream', tag: 'Low-level streams', access: 'authenticated', params: NameParam, deprecated: true,
    summary: 'Stream an event type (low-level, deprecated)',
    description: 'Cursors in `X-Broker-Cursors` (or `Last-Event-ID`, or the query parameter `cursors`); absent: every partition from its newest offset. `Accept: text/event-stream` asks for server-sent events. `Accept-Encoding: zstd` or `gzip` compresses the stream.',
    headers: LowLevelStreamHeaders,
    query: LowLevelStreamQuery,
    responses: {
      '200': stream('the stream: a batch per line; keep-alive batches have no `events`', { Warning: { description: 'the low-level interface is deprecated', schema: Type.String(), required: true } }, true),
      ...problems(400, 403, 404, 412, 422),
    },
    handler: async (ctx, streams) => {
      const headers = ctx.input.headers;
      return streams.start(name(ctx.params), { cursors: headers['X-Broker-Cursors'], lastEventId: headers['Last-Event-ID'], accept: ctx.headers.accept }, ctx.input.query, ctx.subject);
    },
  }),
];

