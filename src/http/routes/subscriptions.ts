import type { SubscriptionRegistry } from '../../services/subscription-registry.js';
import type { HttpServer } from '../server.js';
import { pageOf } from './paging.js';

/**
 * Subscription registry routes (spec "Subscriptions" endpoints; WIRE.md "Subscriptions" up to "Streaming"):
 * `POST/GET /subscriptions`, `GET/PUT/DELETE /subscriptions/{subscription_id}`. Streaming, commits and
 * stats are registered elsewhere. `show_status`, `reader` and `token` of the listing are not handled here.
 */
export function subscriptionRoutes(http: HttpServer, registry: SubscriptionRegistry): void {
  http.route('POST', '/subscriptions', async (ctx) => {
    const { record, created } = await registry.create(await ctx.json());
    return { status: created ? 201 : 200, body: record, headers: { Location: `/subscriptions/${record.id}` } };
  });

  http.route('GET', '/subscriptions', async (ctx) => {
    const page = pageOf(ctx.query);
    const owningApplication = ctx.query.get('owning_application') ?? undefined;
    const eventTypes = ctx.query.getAll('event_type');
    const items = await registry.list({ owningApplication, eventTypes }, page);
    // Links repeat only the filters the client gave (WIRE.md "Subscriptions").
    const href = (offset: number) => {
      const query = new URLSearchParams();
      if (owningApplication !== undefined) query.append('owning_application', owningApplication);
      for (const eventType of eventTypes) query.append('event_type', eventType);
      query.append('offset', String(offset));
      query.append('limit', String(page.limit));
      return { href: `/subscriptions?${query.toString()}` };
    };
    const links = {
      ...(page.offset > 0 ? { prev: href(Math.max(0, page.offset - page.limit)) } : {}),
      ...(items.length === page.limit ? { next: href(page.offset + page.limit) } : {}),
    };
    return { status: 200, body: { items, _links: links } };
  });

  http.route('GET', '/subscriptions/:id', async (ctx) => ({ status: 200, body: await registry.get(subscriptionId(ctx.params)) }));

  http.route('PUT', '/subscriptions/:id', async (ctx) => {
    await registry.update(subscriptionId(ctx.params), await ctx.json());
    return { status: 204 };
  });

  http.route('DELETE', '/subscriptions/:id', async (ctx) => {
    await registry.delete(subscriptionId(ctx.params));
    return { status: 204 };
  });
}

/** The `{subscription_id}` path parameter (the registry answers 404 for one that is not a uuid). */
function subscriptionId(params: Readonly<Record<string, string>>): string {
  return params.id ?? '';
}
