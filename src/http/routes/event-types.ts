import { WILDCARD } from '../../auth/authorization-plugin.js';
import type { Subject } from '../../auth/subject.js';
import { ENRICHMENT_STRATEGIES, PARTITION_STRATEGIES, type AuthorizationAttribute, type EventType } from '../../domain/event-type.js';
import { brokerError } from '../../errors/catalog.js';
import type { AccessControl } from '../../services/access-control.js';
import type { AuditLog } from '../../services/audit-log.js';
import type { EventTypeRegistry, RegistryCaller } from '../../services/event-type-registry.js';
import type { HttpServer } from '../server.js';
import { inputOf } from '../request-inputs.js';
import { AddSchemaQuery, ListEventTypesQuery, SchemaListQuery } from '../api/event-type-routes.js';

/** What deleting an event type needs to know and do about the subscriptions that read it. */
export interface EventTypeSubscriptions {
  /** Ids of the subscriptions reading `name`. */
  of(name: string): Promise<string[]>;
  /** Deletes one (its streams close). */
  delete(id: string): Promise<void>;
}

/**
 * Event type registry routes (spec "Event type registry"; WIRE.md "Event types"; issue 14 §4.2):
 * `GET/POST /event-types`, `GET/PUT/DELETE /event-types/{name}`, schema versions (listed, read, added
 * with `POST .../schemas`, found with `?fetch=true`, checked with `POST .../schemas/{version}/compatibility-check`),
 * and the registry listings of strategies. Authorization (spec "Authentication"): reading, finding and
 * checking a schema need only authentication; update, schema addition and delete need the event type's
 * `admins` (or an administrator); creation and deletion follow the feature toggles; nothing changes
 * while `disable_db_write_operations` is on. Creation, update and schema
 * addition run under the control-plane limiter (issue 13 §2.3).
 */
export function eventTypeRoutes(http: HttpServer, registry: EventTypeRegistry, access: AccessControl, subscriptions: EventTypeSubscriptions, audit: AuditLog): void {
  http.route('GET', '/event-types', async (ctx) => {
    const query = inputOf(ListEventTypesQuery, ctx.input.query, 'query');
    const writer = query.writer === undefined ? undefined : attributeOf(query.writer);
    return { status: 200, body: await registry.listJson({ owningApplication: query.owning_application, writer }), contentType: 'application/json' };
  });

  http.route('POST', '/event-types', async (ctx) => {
    access.requireWritable();
    access.requireFeatureOff('disable_event_type_creation', 'Event type creation');
    const record = await registry.create(await ctx.json(), callerOf(ctx.subject, access));
    audit.record({ subject: ctx.subject, resource: 'event_type', resourceId: record.name, op: 'C', next: record });
    return { status: 201, body: record, headers: { Location: `/event-types/${record.name}` } };
  }, { limited: true });

  http.route('GET', '/event-types/:name', async (ctx) => ({ status: 200, body: await registry.get(name(ctx.params)) }));

  http.route('PUT', '/event-types/:name', async (ctx) => {
    access.requireWritable();
    const caller = callerOf(ctx.subject, access);
    let previous: EventType | undefined;
    const record = await registry.update(name(ctx.params), await ctx.json(), {
      ...caller,
      requireAdmin: (existing) => {
        caller.requireAdmin(existing);
        previous = existing;
      },
    });
    audit.record({ subject: ctx.subject, resource: 'event_type', resourceId: record.name, op: 'U', previous, next: record });
    return { status: 200, body: record };
  }, { limited: true });

  http.route('DELETE', '/event-types/:name', async (ctx) => {
    access.requireWritable();
    const caller = callerOf(ctx.subject, access);
    let previous: EventType | undefined;
    await registry.delete(name(ctx.params), caller, async (existing) => {
      previous = existing;
      if (!caller.isAdmin) access.requireFeatureOff('disable_event_type_deletion', 'Event type deletion');
      const ids = await subscriptions.of(existing.name);
      if (ids.length === 0) return;
      if (!access.enabled('delete_event_type_with_subscriptions')) {
        throw brokerError('EVENT_TYPE_HAS_SUBSCRIPTIONS', { name: existing.name, count: ids.length, ids: `${ids.slice(0, 5).join(', ')}${ids.length > 5 ? ', ...' : ''}` });
      }
      for (const id of ids) {
        await subscriptions.delete(id);
        audit.record({ subject: ctx.subject, resource: 'subscription', resourceId: id, op: 'D' });
      }
    });
    audit.record({ subject: ctx.subject, resource: 'event_type', resourceId: name(ctx.params), op: 'D', previous });
    return { status: 200 };
  });

  http.route('GET', '/event-types/:name/schemas', async (ctx) => {
    const eventType = name(ctx.params);
    const query = inputOf(SchemaListQuery, ctx.input.query, 'query');
    const page = { offset: query.offset ?? 0, limit: query.limit ?? 20 };
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

  // Issue 14 §4.2. With `?fetch=true`: the stored schema version equal to the one sent (a read, open to
  // every subject). Otherwise a schema update, as a PUT that changes only the schema: the event type's
  // admins, checks and audit entry (only when a new version was stored); answers the latest schema.
  http.route('POST', '/event-types/:name/schemas', async (ctx) => {
    const eventType = name(ctx.params);
    if (inputOf(AddSchemaQuery, ctx.input.query, 'query').fetch?.toLowerCase() === 'true') return { status: 200, body: await registry.findSchema(eventType, await ctx.json()) };
    access.requireWritable();
    const added = await registry.addSchema(eventType, await ctx.json(), callerOf(ctx.subject, access));
    if (added.changed) audit.record({ subject: ctx.subject, resource: 'event_type', resourceId: eventType, op: 'U', previous: added.previous, next: added.record });
    return { status: 200, body: added.record.schema };
  }, { limited: true });

  // Issue 14 §4.2: stores nothing, so open to every subject, like reading the schemas.
  http.route('POST', '/event-types/:name/schemas/:version/compatibility-check', async (ctx) => ({
    status: 200,
    body: await registry.checkCompatibility(name(ctx.params), ctx.params.version ?? '', await ctx.json()),
  }), { limited: true });

  http.route('GET', '/registry/partition-strategies', () => Promise.resolve({ status: 200, body: PARTITION_STRATEGIES }));
  http.route('GET', '/registry/enrichment-strategies', () => Promise.resolve({ status: 200, body: ENRICHMENT_STRATEGIES }));
}

/**
 * The registry's view of a caller (see {@link RegistryCaller}): administrator rights, the plugin's
 * attribute validation plus `force_event_type_authz`, and the admin check on existing event types.
 */
function callerOf(subject: Subject, access: AccessControl): RegistryCaller {
  return {
    isAdmin: access.isAdministrator(subject),
    authorizationProblems(input: Pick<EventType, 'authorization' | 'event_owner_selector'>, creating: boolean): string[] {
      const section = input.authorization;
      const problems = access.attributeProblems({ 'authorization.admins': section?.admins, 'authorization.readers': section?.readers, 'authorization.writers': section?.writers });
      const selector = input.event_owner_selector;
      // The selector's name is a data type of the plugin; the wildcard is not one.
      const selectorProblem =
        selector === undefined ? undefined : selector.name === WILDCARD ? 'the wildcard "*" is not a data type' : access.plugin.validate({ data_type: selector.name, value: '*' });
      if (selectorProblem !== undefined) problems.push(`Field "event_owner_selector.name": ${selectorProblem}`);
      if (creating && section === undefined && access.enabled('force_event_type_authz')) problems.push('Field "authorization" is required (feature force_event_type_authz)');
      return problems;
    },
    requireAdmin: (existing) => access.requireEventType(subject, existing, 'admin'),
  };
}

/**
 * An attribute query parameter such as `writer=user:alice` (`<data_type>:<value>`); undefined when absent.
 * (`GET /subscriptions?reader=`; `GET /event-types?writer=` reads its checked value with {@link attributeOf}.)
 * @throws BrokerError 400 when it is not of that form
 */
export function attributeQuery(query: URLSearchParams, parameter: string): AuthorizationAttribute | undefined {
  const text = query.get(parameter);
  if (text === null) return undefined;
  const colon = text.indexOf(':');
  if (colon <= 0 || colon === text.length - 1) throw brokerError('BAD_REQUEST', { reason: `${parameter} must have the form <data_type>:<value>, e.g. user:alice` });
  return { data_type: text.slice(0, colon), value: text.slice(colon + 1) };
}

/** `<data_type>:<value>` split at its first colon: a value `AttributeQueryParam` (route table) accepted. */
export function attributeOf(text: string): AuthorizationAttribute {
  const colon = text.indexOf(':');
  return { data_type: text.slice(0, colon), value: text.slice(colon + 1) };
}

const NAME = /^[a-zA-Z][-0-9a-zA-Z_]*(\.[0-9a-zA-Z][-0-9a-zA-Z_]*)*$/;

/** The `{name}` path parameter; a name that cannot exist is 404 like an unknown one (it never reaches a Redis key). */
export function name(params: Readonly<Record<string, string>>): string {
  const value = params.name ?? '';
  if (value.length > 255 || !NAME.test(value)) throw brokerError('EVENT_TYPE_NOT_FOUND', { name: value });
  return value;
}
