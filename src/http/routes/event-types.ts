import { ENRICHMENT_STRATEGIES, PARTITION_STRATEGIES } from '../../domain/event-type.js';
import { errors } from '../../errors/catalog.js';
import type { EventTypeRegistry } from '../../services/event-type-registry.js';
import type { HttpServer } from '../server.js';
import { pageOf } from './paging.js';

/**
 * Event type registry routes (spec "Event type registry"; WIRE.md "Event types"):
 * `GET/POST /event-types`, `GET/PUT/DELETE /event-types/{name}`, schema versions, and the registry
 * listings of strategies.
 */
export function eventTypeRoutes(http: HttpServer, registry: EventTypeRegistry): void {
  // Until authorization exists (issue 4) no caller is an administrator.
  const caller = { isAdmin: false };

  http.route('GET', '/event-types', async (ctx) => {
    const owningApplication = ctx.query.get('owning_application') ?? undefined;
    return { status: 200, body: await registry.list({ owningApplication }) };
  });

  http.route('POST', '/event-types', async (ctx) => {
    const record = await registry.create(await ctx.json(), caller);
    return { status: 201, body: record, headers: { Location: `/event-types/${record.name}` } };
  });

  http.route('GET', '/event-types/:name', async (ctx) => ({ status: 200, body: await registry.get(name(ctx.params)) }));

  http.route('PUT', '/event-types/:name', async (ctx) => ({ status: 200, body: await registry.update(name(ctx.params), await ctx.json(), caller) }));

  http.route('DELETE', '/event-types/:name', async (ctx) => {
    await registry.delete(name(ctx.params));
    return { status: 200 };
  });

  http.route('GET', '/event-types/:name/schemas', async (ctx) => {
    const eventType = name(ctx.params);
    const page = pageOf(ctx.query);
    const all = await registry.schemas(eventType);
    const items = all.slice(page.offset, page.offset + page.limit);
    const href = (offset: number) => ({ href: `/event-types/${eventType}/schemas?offset=${offset}&limit=${page.limit}` });
    const links = {
      ...(page.offset > 0 ? { prev: href(Math.max(0, page.offset - page.limit)) } : {}),
      ...(page.offset + page.limit < all.length ? { next: href(page.offset + page.limit) } : {}),
    };
    return { status: 200, body: { _links: links, items } };
  });

  http.route('GET', '/event-types/:name/schemas/:version', async (ctx) => ({
    status: 200,
    body: await registry.schema(name(ctx.params), ctx.params.version ?? ''),
  }));

  http.route('GET', '/registry/partition-strategies', () => Promise.resolve({ status: 200, body: PARTITION_STRATEGIES }));
  http.route('GET', '/registry/enrichment-strategies', () => Promise.resolve({ status: 200, body: ENRICHMENT_STRATEGIES }));
}

const NAME = /^[a-zA-Z][-0-9a-zA-Z_]*(\.[0-9a-zA-Z][-0-9a-zA-Z_]*)*$/;

/** The `{name}` path parameter; a name that cannot exist is 404 like an unknown one (it never reaches a Redis key). */
export function name(params: Readonly<Record<string, string>>): string {
  const value = params.name ?? '';
  if (value.length > 255 || !NAME.test(value)) throw errors.eventTypeNotFound(value);
  return value;
}
