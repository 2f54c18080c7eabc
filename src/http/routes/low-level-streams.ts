import type { LowLevelStreams } from '../../services/consumption/low-level-streams.js';
import type { HttpServer } from '../server.js';
import { name } from './event-types.js';

/**
 * Low-level consumption route (spec "Low-level consumption (deprecated)"; WIRE.md "Low-level stream"):
 * `GET /event-types/{name}/events`, as JSON lines or, with `Accept: text/event-stream`, server-sent events.
 */
export function lowLevelStreamRoutes(http: HttpServer, streams: LowLevelStreams): void {
  http.route('GET', '/event-types/:name/events', async (ctx) =>
    streams.start(name(ctx.params), { cursors: ctx.headers['x-broker-cursors'], lastEventId: ctx.headers['last-event-id'], accept: ctx.headers.accept }, ctx.query, ctx.subject),
  );
}
