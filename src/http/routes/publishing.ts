import type { Publisher } from '../../services/publisher.js';
import type { CursorService } from '../../services/cursor-service.js';
import { errors } from '../../errors/catalog.js';
import type { HttpServer } from '../server.js';
import { name } from './event-types.js';

/**
 * Publishing and partition routes (spec "Publishing", "Event type registry"; WIRE.md "Publishing",
 * "Offsets and cursors"): `POST /event-types/{name}/events`, partitions, cursor distances and lag.
 */
export function publishingRoutes(http: HttpServer, publisher: Publisher, cursors: CursorService): void {
  http.route('POST', '/event-types/:name/events', async (ctx) => {
    const eventType = name(ctx.params);
    const body = await ctx.body();
    if (body.byteLength === 0) throw errors.badRequest('the body must be a JSON array of events');
    const outcome = await publisher.publish(eventType, body, { publishedBy: 'unauthenticated', flowId: ctx.flowId });
    if (outcome.status === 200) return { status: 200 };
    return { status: outcome.status, body: outcome.items };
  });

  http.route('GET', '/event-types/:name/partitions', async (ctx) => ({ status: 200, body: await cursors.list(name(ctx.params)) }));

  http.route('GET', '/event-types/:name/partitions/:partition', async (ctx) => ({
    status: 200,
    body: await cursors.get(name(ctx.params), ctx.params.partition ?? ''),
  }));

  http.route('POST', '/event-types/:name/cursor-distances', async (ctx) => ({ status: 200, body: await cursors.distances(name(ctx.params), await ctx.json()) }));

  http.route('POST', '/event-types/:name/cursors-lag', async (ctx) => ({ status: 200, body: await cursors.lag(name(ctx.params), await ctx.json()) }));
}
