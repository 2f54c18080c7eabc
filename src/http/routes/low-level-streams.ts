import type { LowLevelStreams } from '../../services/consumption/low-level-streams.js';
import type { HttpServer } from '../server.js';
import { inputOf } from '../request-inputs.js';
import { LowLevelStreamHeaders, LowLevelStreamQuery } from '../api/event-type-routes.js';
import { name } from './event-types.js';

/**
 * Low-level consumption route (spec "Low-level consumption (deprecated)"; WIRE.md "Low-level stream"):
 * `GET /event-types/{name}/events`, as JSON lines or, with `Accept: text/event-stream`, server-sent events.
 * Its query and cursor headers are checked by the pipeline against the route table's schemas first.
 */
export function lowLevelStreamRoutes(http: HttpServer, streams: LowLevelStreams): void {
  http.route('GET', '/event-types/:name/events', async (ctx) => {
    const headers = inputOf(LowLevelStreamHeaders, ctx.input.headers, 'header');
    const query = inputOf(LowLevelStreamQuery, ctx.input.query, 'query');
    return streams.start(name(ctx.params), { cursors: headers['X-Broker-Cursors'], lastEventId: headers['Last-Event-ID'], accept: ctx.headers.accept }, query, ctx.subject);
  });
}
