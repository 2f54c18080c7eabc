import type { LowLevelStreams } from '../../services/consumption/low-level-streams.js';
import type { HttpServer } from '../server.js';
import { name } from './event-types.js';

/** Low-level consumption route (spec "Low-level consumption (deprecated)"; WIRE.md "Low-level stream"): `GET /event-types/{name}/events`. */
export function lowLevelStreamRoutes(http: HttpServer, streams: LowLevelStreams): void {
  http.route('GET', '/event-types/:name/events', async (ctx) => streams.start(name(ctx.params), ctx.headers['x-broker-cursors'], ctx.query, ctx.subject));
}
