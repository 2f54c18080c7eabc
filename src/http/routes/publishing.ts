import type { Publisher } from '../../services/publisher.js';
import type { CursorService } from '../../services/cursor-service.js';
import { errors } from '../../errors/catalog.js';
import type { AccessControl } from '../../services/access-control.js';
import type { EventTypeRegistry } from '../../services/event-type-registry.js';
import type { HttpServer, RequestContext } from '../server.js';
import { name } from './event-types.js';

/**
 * Publishing and partition routes (spec "Publishing", "Event type registry"; WIRE.md "Publishing",
 * "Offsets and cursors"): `POST /event-types/{name}/events`, partitions, cursor distances and lag.
 * Publishing checks, in WIRE.md's order: blacklist (403), body (400), event type (404), the event
 * type's `writers` (403), then per event. The partition and cursor endpoints need its `readers`.
 */
export function publishingRoutes(http: HttpServer, publisher: Publisher, cursors: CursorService, registry: EventTypeRegistry, access: AccessControl): void {
  http.route('POST', '/event-types/:name/events', async (ctx) => {
    const eventType = name(ctx.params);
    access.requireProducerNotBlocked(ctx.subject, eventType);
    const body = await ctx.body();
    if (body.byteLength === 0) throw errors.badRequest('the body must be a JSON array of events');
    const outcome = await publisher.publish(eventType, body, {
      publishedBy: ctx.subject.id,
      flowId: ctx.flowId,
      authorize: (record) => access.requireEventType(ctx.subject, record, 'write'),
    });
    if (outcome.status === 200) return { status: 200 };
    return { status: outcome.status, body: outcome.items };
  });

  /** The `{name}` of a request whose subject may read that event type. @throws BrokerError 404, 403 */
  const readable = async (ctx: RequestContext): Promise<string> => {
    const eventType = name(ctx.params);
    access.requireEventType(ctx.subject, await registry.get(eventType), 'read');
    return eventType;
  };

  http.route('GET', '/event-types/:name/partitions', async (ctx) => ({ status: 200, body: await cursors.list(await readable(ctx)) }));

  http.route('GET', '/event-types/:name/partitions/:partition', async (ctx) => ({
    status: 200,
    body: await cursors.get(await readable(ctx), ctx.params.partition ?? ''),
  }));

  http.route('POST', '/event-types/:name/cursor-distances', async (ctx) => ({ status: 200, body: await cursors.distances(await readable(ctx), await ctx.json()) }));

  http.route('POST', '/event-types/:name/cursors-lag', async (ctx) => ({ status: 200, body: await cursors.lag(await readable(ctx), await ctx.json()) }));
}
