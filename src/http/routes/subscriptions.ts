import type { SubscriptionRegistry } from '../../services/subscription-registry.js';
import type { HttpServer } from '../server.js';
import { errors } from '../../errors/catalog.js';
import { pageOf } from './paging.js';

/**
 * Partition status of a subscription for `show_status=true` (WIRE.md "Subscriptions"): per event type,
 * each partition's `state`, `stream_id` and `assignment_type`.
 */
export type SubscriptionStatus = (id: string) => Promise<{ event_type: string; partitions: { partition: string; state: string; stream_id: string; assignment_type: string }[] }[]>;

/**
 * Subscription registry routes (spec "Subscriptions" endpoints; WIRE.md "Subscriptions" up to "Streaming"):
 * `POST/GET /subscriptions`, `GET/PUT/DELETE /subscriptions/{subscription_id}`. Streaming, commits and
 * stats are registered elsewhere. `show_status=true` adds each subscription's partition status (from
 * `status`); `reader` and `token` of the listing belong to issue 4 and are ignored.
 */
export function subscriptionRoutes(http: HttpServer, registry: SubscriptionRegistry, status?: SubscriptionStatus): void {
  http.route('POST', '/subscriptions', async (ctx) => {
    const { record, created } = await registry.create(await ctx.json());
    return { status: created ? 201 : 200, body: record, headers: { Location: `/subscriptions/${record.id}` } };
  });

  http.route('GET', '/subscriptions', async (ctx) => {
    const page = pageOf(ctx.query);
    const owningApplication = ctx.query.get('owning_application') ?? undefined;
    const eventTypes = ctx.query.getAll('event_type');
    const showStatus = ctx.query.get('show_status');
    if (showStatus !== null && showStatus !== 'true' && showStatus !== 'false') throw errors.badRequest('show_status must be true or false');
    const records = await registry.list({ owningApplication, eventTypes }, page);
    const items = showStatus === 'true' && status ? await Promise.all(records.map(async (r) => ({ ...r, status: await status(r.id) }))) : records;
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
