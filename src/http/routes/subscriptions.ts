import type { AuthorizationAttribute } from '../../domain/event-type.js';
import type { Subscription, SubscriptionAuthorization } from '../../domain/subscription.js';
import type { AuditLog } from '../../services/audit-log.js';
import { brokerError } from '../../errors/catalog.js';
import type { AccessControl } from '../../services/access-control.js';
import type { SubscriptionCursor, SubscriptionFilter, SubscriptionRegistry } from '../../services/subscription-registry.js';
import { ListSubscriptionsQuery } from '../api/subscription-routes.js';
import { SubscriptionParam } from '../api/route-parts.js';
import type { RequestContext } from '../handler.js';
import { inputOf } from '../request-inputs.js';
import type { HttpServer } from '../server.js';
import { pageOf } from './paging.js';

/**
 * Partition status of a subscription for `show_status=true` (WIRE.md "Subscriptions"): per event type,
 * each partition's `state`, `stream_id` and `assignment_type`.
 */
export type SubscriptionStatus = (id: string) => Promise<{ event_type: string; partitions: { partition: string; state: string; stream_id: string; assignment_type: string }[] }[]>;

/**
 * Subscription registry routes (spec "Subscriptions" endpoints, "Authentication"; WIRE.md
 * "Subscriptions" up to "Streaming"): `POST/GET /subscriptions`, `GET/PUT/DELETE /subscriptions/{subscription_id}`.
 * Streaming, commits and stats are registered elsewhere. `show_status=true` adds each subscription's
 * partition status (from `status`). Creating one (or getting the existing one of the same key) needs
 * read access to every one of its event types (issue 13 §3; 403 otherwise, as for streaming it). Update
 * and delete need the subscription's `admins` (or an administrator); a change of its readers ends every
 * stream of it (`onReadersChanged`). Creation and update run under the control-plane limiter.
 * With the feature `token_subscription_iteration`, the listing pages by `token` (links carry tokens).
 * Bodies are checked by the registry (src/domain/subscription-input.ts); the listing's query
 * (`ListSubscriptionsQuery`, `Paging`) by the pipeline against the route table, 400 when malformed,
 * before the handler runs. `:id` is the table's `{subscription_id}` (read with `inputOf`).
 */
export function subscriptionRoutes(
  http: HttpServer,
  registry: SubscriptionRegistry,
  access: AccessControl,
  onReadersChanged: (id: string) => Promise<void>,
  audit: AuditLog,
  status?: SubscriptionStatus,
): void {
  http.route('POST', '/subscriptions', async (ctx) => {
    access.requireWritable();
    const { record, created } = await registry.create(await ctx.json(), {
      check(input) {
        access.requireFeatureOff('disable_subscription_creation', 'Subscription creation');
        const problems = access.attributeProblems({ 'authorization.admins': input.authorization?.admins, 'authorization.readers': input.authorization?.readers });
        if (input.authorization === undefined && access.enabled('force_subscription_authz')) problems.push('Field "authorization" is required (feature force_subscription_authz)');
        if (problems.length > 0) throw brokerError('UNPROCESSABLE', { reason: problems.join('\n') });
      },
      authorizeRead: (eventTypes) => access.requireEventTypesReadable(ctx.subject, eventTypes),
    });
    if (created) audit.record({ subject: ctx.subject, resource: 'subscription', resourceId: record.id, op: 'C', next: record });
    return { status: created ? 201 : 200, body: record, headers: { Location: `/subscriptions/${record.id}` } };
  }, { limited: true });

  http.route('GET', '/subscriptions', async (ctx) => {
    const query = inputOf(ListSubscriptionsQuery, ctx.input.query, 'query');
    const page = pageOf(ctx.input.query);
    const filter: SubscriptionFilter = {
      owningApplication: query.owning_application,
      eventTypes: query.event_type ?? [],
      reader: query.reader === undefined ? undefined : attributeOf(query.reader),
    };
    const token = query.token;
    const byToken = token !== undefined && access.enabled('token_subscription_iteration');
    if (token !== undefined && !byToken) throw brokerError('BAD_REQUEST', { reason: 'token paging needs the feature token_subscription_iteration; use offset' });

    let records;
    let links: { prev?: { href: string }; next?: { href: string } };
    if (byToken) {
      const result = await registry.listByCursor(filter, token === 'new' ? undefined : decodeToken(token), page.limit);
      records = result.items;
      links = {
        ...(result.prev ? { prev: linkOf(filter, ['token', encodeToken(result.prev)], page.limit) } : {}),
        ...(result.next ? { next: linkOf(filter, ['token', encodeToken(result.next)], page.limit) } : {}),
      };
    } else {
      records = await registry.list(filter, page);
      links = {
        ...(page.offset > 0 ? { prev: linkOf(filter, ['offset', String(Math.max(0, page.offset - page.limit))], page.limit) } : {}),
        ...(records.length === page.limit ? { next: linkOf(filter, ['offset', String(page.offset + page.limit)], page.limit) } : {}),
      };
    }
    const items = query.show_status === 'true' && status ? await Promise.all(records.map(async (r) => ({ ...r, status: await status(r.id) }))) : records;
    return { status: 200, body: { items, _links: links } };
  });

  http.route('GET', '/subscriptions/:id', async (ctx) => ({ status: 200, body: await registry.get(subscriptionId(ctx)) }));

  http.route('PUT', '/subscriptions/:id', async (ctx) => {
    access.requireWritable();
    const id = subscriptionId(ctx);
    let readersChanged = false;
    let previous: Subscription | undefined;
    const record = await registry.update(id, await ctx.json(), (existing, next) => {
      access.requireSubscription(ctx.subject, existing, 'admin');
      previous = existing;
      const problems = access.attributeProblems({ 'authorization.admins': next.authorization?.admins, 'authorization.readers': next.authorization?.readers });
      if (problems.length > 0) throw brokerError('UNPROCESSABLE', { reason: problems.join('\n') });
      readersChanged = !sameReaders(existing.authorization, next.authorization);
    });
    if (readersChanged) await onReadersChanged(id);
    audit.record({ subject: ctx.subject, resource: 'subscription', resourceId: id, op: 'U', previous, next: record });
    return { status: 204 };
  }, { limited: true });

  http.route('DELETE', '/subscriptions/:id', async (ctx) => {
    access.requireWritable();
    const id = subscriptionId(ctx);
    let previous: Subscription | undefined;
    await registry.delete(id, (existing) => {
      access.requireSubscription(ctx.subject, existing, 'admin');
      previous = existing;
    });
    audit.record({ subject: ctx.subject, resource: 'subscription', resourceId: id, op: 'D', previous });
    return { status: 204 };
  });
}

/** A listing link repeating only the filters the client gave (WIRE.md "Subscriptions"). */
function linkOf(filter: SubscriptionFilter, position: [string, string], limit: number): { href: string } {
  const query = new URLSearchParams();
  if (filter.owningApplication !== undefined) query.append('owning_application', filter.owningApplication);
  for (const eventType of filter.eventTypes) query.append('event_type', eventType);
  if (filter.reader !== undefined) query.append('reader', `${filter.reader.data_type}:${filter.reader.value}`);
  query.append(...position);
  query.append('limit', String(limit));
  return { href: `/subscriptions?${query.toString()}` };
}

/** A paging token: the position as base64url JSON `[direction, createdMs, id]`. */
function encodeToken(cursor: SubscriptionCursor): string {
  return Buffer.from(JSON.stringify([cursor.direction === 'next' ? 'n' : 'p', cursor.createdMs, cursor.id])).toString('base64url');
}

/** @throws BrokerError 400 for a token this node did not make */
function decodeToken(token: string): SubscriptionCursor {
  try {
    const value: unknown = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
    if (Array.isArray(value) && value.length === 3 && (value[0] === 'n' || value[0] === 'p') && Number.isSafeInteger(value[1]) && typeof value[2] === 'string') {
      return { direction: value[0] === 'n' ? 'next' : 'prev', createdMs: value[1] as number, id: value[2] };
    }
  } catch {
    // answered below
  }
  throw brokerError('BAD_PAGING_TOKEN');
}

function sameReaders(a: SubscriptionAuthorization | undefined, b: SubscriptionAuthorization | undefined): boolean {
  const key = (s: SubscriptionAuthorization | undefined) => JSON.stringify((s?.readers ?? []).map((r) => [r.data_type, r.value]).sort());
  return key(a) === key(b);
}

/** The `{subscription_id}` path parameter (the registry answers 404 for one that is not a uuid). */
function subscriptionId(ctx: RequestContext): string {
  return inputOf(SubscriptionParam, ctx.input.params, 'path').subscription_id;
}

/** A `reader` query value the route's schema accepted (`<data_type>:<value>`, split at the first colon). */
function attributeOf(text: string): AuthorizationAttribute {
  const colon = text.indexOf(':');
  return { data_type: text.slice(0, colon), value: text.slice(colon + 1) };
}
