import { Type } from '@sinclair/typebox';
import type { Subscription, SubscriptionAuthorization } from '../../domain/subscription/subscription.js';
import type { AuditLog } from '../../services/audit-log.js';
import { brokerError } from '../../errors/catalog.js';
import type { AccessControl } from '../../services/access-control.js';
import type { SubscriptionCursor, SubscriptionFilter, SubscriptionRegistry } from '../../services/subscription-registry.js';
import { empty, json, jsonBody, problems, routesOf, type Route } from '../api/route-model.js';
import { Bool, Location, pageOf, Paging, SubscriptionParam } from '../api/route-parts.js';
import { SubscriptionInputSchema, SubscriptionListSchema, SubscriptionRecordSchema, SubscriptionUpdateSchema } from '../api/wire-schemas.js';
import { AttributeQueryParam, attributeOf } from './event-types.js';

/**
 * Partition status of a subscription for `show_status=true` (docs/consuming.md): per event type, each
 * partition's `state`, `stream_id` and `assignment_type`.
 */
export type SubscriptionStatus = (id: string) => Promise<{ event_type: string; partitions: { partition: string; state: string; stream_id: string; assignment_type: string }[] }[]>;

/** The services the subscription registry routes use. */
export interface SubscriptionDeps {
  readonly registry: SubscriptionRegistry;
  readonly access: AccessControl;
  /** Ends every stream of a subscription whose readers changed. */
  readonly onReadersChanged: (id: string) => Promise<void>;
  readonly audit: AuditLog;
  /** The partition status `show_status=true` adds; none: not added. */
  readonly status?: SubscriptionStatus;
}

/**
 * The query of `GET /subscriptions` (docs/consuming.md "Subscriptions"): filters, paging by offset or
 * (feature `token_subscription_iteration`) by token. A malformed value is 400.
 */
export const ListSubscriptionsQuery = Type.Object({
  owning_application: Type.Optional(Type.String({ description: 'only subscriptions of this application' })),
  event_type: Type.Optional(
    Type.Array(Type.String(), {
      description:
        'only subscriptions reading every event type named: repeat the parameter (`event_type=a&event_type=b`) or separate names by commas (`event_type=a,b`), or both; event type names contain no commas',
    }),
  ),
  reader: Type.Optional(AttributeQueryParam('`<data_type>:<value>`: only subscriptions whose `authorization.readers` list this attribute')),
  show_status: Type.Optional(Bool('add each partition\'s state')),
  token: Type.Optional(Type.String({ description: 'paging token (feature token_subscription_iteration); `new` for the first page' })),
  ...Paging,
});

const route = routesOf<SubscriptionDeps>();

/**
 * Subscription registry routes (docs/consuming.md "Subscriptions"; docs/security.md): `POST/GET
 * /subscriptions`, `GET/PUT/DELETE /subscriptions/{subscription_id}`. Streaming, commits and stats are
 * declared in subscription-streams.ts. Creating one (or getting the existing one of the same key) needs
 * read access to every one of its event types (403 otherwise, as for streaming it: a subscription
 * shows positions in its event types). Update and delete need the subscription's `admins` (or an
 * administrator); a change of its readers ends every stream of it. Creation and update run under the
 * control-plane limiter. Bodies are checked by the registry (src/domain/subscription/subscription-input.ts); the
 * listing's query by the pipeline, 400 when malformed, before the handler runs.
 */
export const SUBSCRIPTION_ROUTES: readonly Route<SubscriptionDeps>[] = [
  route({
    method: 'POST', path: '/subscriptions', operationId: 'createSubscription', tag: 'Subscriptions', access: 'authenticated', limited: true,
    summary: 'Create a subscription (or get the one with the same key)',
    description: 'Key: owning_application, the set of event_types, consumer_group. Needs read access to every event type. Feature `disable_subscription_creation`, `force_subscription_authz`.',
    body: jsonBody(SubscriptionInputSchema),
    responses: { '201': json('created', SubscriptionRecordSchema, { Location }), '200': json('the existing subscription of that key', SubscriptionRecordSchema, { Location }), ...problems(400, 403, 422, 503) },
    handler: async (ctx, { registry, access, audit }) => {
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
    },
  }),
  route({
    method: 'GET', path: '/subscriptions', operationId: 'listSubscriptions', tag: 'Subscriptions', access: 'authenticated',
    summary: 'List subscriptions (newest first)',
    query: ListSubscriptionsQuery,
    responses: { '200': json('a page', SubscriptionListSchema), ...problems(400) },
    // With the feature `token_subscription_iteration`, the listing pages by `token` (links carry tokens).
    handler: async (ctx, { registry, access, status }) => {
      const query = ctx.input.query;
      const page = pageOf(query);
      const filter: SubscriptionFilter = {
        owningApplication: query.owning_application,
        eventTypes: eventTypesOf(query.event_type),
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
    },
  }),
  route({
    method: 'GET', path: '/subscriptions/{subscription_id}', operationId: 'getSubscription', tag: 'Subscriptions', access: 'authenticated', params: SubscriptionParam,
    summary: 'Get a subscription', responses: { '200': json('the subscription', SubscriptionRecordSchema), ...problems(404) },
    // The registry answers 404 for an id that is not a uuid.
    handler: async (ctx, { registry }) => ({ status: 200, body: await registry.get(ctx.input.params.subscription_id) }),
  }),
  route({
    method: 'PUT', path: '/subscriptions/{subscription_id}', operationId: 'updateSubscription', tag: 'Subscriptions', access: 'authenticated', params: SubscriptionParam, limited: true,
    summary: 'Update a subscription\'s authorization, annotations and labels', description: 'Needs its `admins`; a change of its readers ends its streams.',
    body: jsonBody(SubscriptionUpdateSchema, 'the subscription\'s fields, each optional (absent: unchanged); only authorization, annotations and labels may differ from the stored ones'),
    responses: { '204': empty('updated'), ...problems(400, 403, 404, 422, 503) },
    handler: async (ctx, { registry, access, onReadersChanged, audit }) => {
      access.requireWritable();
      const id = ctx.input.params.subscription_id;
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
    },
  }),
  route({
    method: 'DELETE', path: '/subscriptions/{subscription_id}', operationId: 'deleteSubscription', tag: 'Subscriptions', access: 'authenticated', params: SubscriptionParam,
    summary: 'Delete a subscription', responses: { '204': empty('deleted'), ...problems(403, 404, 503) },
    handler: async (ctx, { registry, access, audit }) => {
      access.requireWritable();
      const id = ctx.input.params.subscription_id;
      let previous: Subscription | undefined;
      await registry.delete(id, (existing) => {
        access.requireSubscription(ctx.subject, existing, 'admin');
        previous = existing;
      });
      audit.record({ subject: ctx.subject, resource: 'subscription', resourceId: id, op: 'D', previous });
      return { status: 204 };
    },
  }),
];

/** A listing link repeating only the filters the client gave (docs/http-api.md). */
/**
 * The event types of `GET /subscriptions?event_type=` (docs/consuming.md "Subscriptions"): every value
 * split at commas, so `event_type=a,b` filters as `event_type=a&event_type=b` does. An empty part names no
 * event type and matches nothing, as an empty value does.
 */
export function eventTypesOf(values: readonly string[] | undefined): string[] {
  return (values ?? []).flatMap((value) => value.split(','));
}

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
