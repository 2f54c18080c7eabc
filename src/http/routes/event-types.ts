import { Type } from '@sinclair/typebox';
import { WILDCARD } from '../../auth/authorization-plugin.js';
import type { Subject } from '../../auth/subject.js';
import { ENRICHMENT_STRATEGIES, PARTITION_STRATEGIES, type AuthorizationAttribute, type EventType } from '../../domain/event-type/event-type.js';
import { CompatibilityCheckInputSchema, SchemaVersionInputSchema } from '../../domain/schema/schema-version-input.js';
import { brokerError } from '../../errors/catalog.js';
import type { AccessControl } from '../../services/access-control.js';
import type { AuditLog } from '../../services/audit-log.js';
import type { EventTypeRegistry, RegistryCaller } from '../../services/event-types/event-type-registry.js';
import { empty, json, jsonBody, problems, routesOf, type Route } from '../api/route-model.js';
import { Bool, CapacityWarning, Location, NameParam, pageOf, Paging } from '../api/route-parts.js';
import { warningHeader } from '../../domain/storages/memory-budget.js';
import { CompatibilityCheckSchema, EventTypeInputSchema, EventTypeRecordSchema, EventTypeSchemaSchema, PageLinksSchema } from '../api/wire-schemas.js';

/** What deleting an event type needs to know and do about the subscriptions that read it. */
export interface EventTypeSubscriptions {
  /** Ids of the subscriptions reading `name`. */
  of(name: string): Promise<string[]>;
  /** Deletes one (its streams close). */
  delete(id: string): Promise<void>;
}

/** The services the event type routes use. */
export interface EventTypeDeps {
  readonly registry: EventTypeRegistry;
  readonly access: AccessControl;
  readonly subscriptions: EventTypeSubscriptions;
  readonly audit: AuditLog;
  /**
   * The capacity check of a created or updated event type (docs/operations.md "Memory and retention"):
   * the text of the answer's `Warning` header when its declared traffic cannot fit, else undefined. Never throws.
   */
  readonly capacity?: (record: EventType) => Promise<string | undefined>;
}

/** The `Warning` header of an event type change whose declared traffic cannot fit, or nothing. */
async function capacityHeaders(record: EventType, capacity: EventTypeDeps['capacity']): Promise<Record<string, string>> {
  const warning = await capacity?.(record);
  return warning === undefined ? {} : { Warning: warningHeader(warning) };
}

/** The query of `POST /event-types/{name}/schemas`: `fetch` (any case; absent: false). */
export const AddSchemaQuery = Type.Object({ fetch: Type.Optional(Bool('find the stored version equal to the body instead of adding one', true)) });

/**
 * An authorization attribute as a query parameter, `<data_type>:<value>` (split at the first colon,
 * both parts non-empty; another value is 400): `writer` of `GET /event-types`, `reader` of `GET /subscriptions`.
 */
export const AttributeQueryParam = (description: string) =>
  Type.String({ pattern: '^[^:]+:[\\s\\S]+$', 'x-status': 400, 'x-messages': { pattern: 'must have the form <data_type>:<value>, e.g. user:alice' }, description });

/** The query of `GET /event-types` (docs/concepts.md): both filters optional. */
export const ListEventTypesQuery = Type.Object({
  owning_application: Type.Optional(Type.String({ description: 'only the event types of this application' })),
  writer: Type.Optional(AttributeQueryParam('`<data_type>:<value>`: only the event types whose `writers` name this attribute explicitly')),
});

/** The query of `GET /event-types/{name}/schemas`: paging (limit 1..1000, default 20). */
export const SchemaListQuery = Type.Object(Paging);

const route = routesOf<EventTypeDeps>();

/**
 * Event type registry routes (docs/concepts.md "Event types"; docs/security.md for who may do what):
 * `GET/POST /event-types`, `GET/PUT/DELETE /event-types/{name}`, schema versions (listed, read, added
 * with `POST .../schemas`, found with `?fetch=true`, checked with `POST .../schemas/{version}/compatibility-check`),
 * and the registry listings of strategies. Reading, finding and checking a schema need only
 * authentication; update, schema addition and delete need the event type's `admins` (or an
 * administrator); creation and deletion follow the feature toggles; nothing changes while
 * `disable_db_write_operations` is on. Creation, update, schema addition and the compatibility check
 * run under the control-plane limiter: their work grows with the schema sent.
 */
export const EVENT_TYPE_ROUTES: readonly Route<EventTypeDeps>[] = [
  route({
    method: 'GET', path: '/event-types', operationId: 'listEventTypes', tag: 'Event types', access: 'authenticated',
    summary: 'List event types',
    query: ListEventTypesQuery,
    responses: { '200': json('every event type (filtered)', Type.Array(EventTypeRecordSchema)), ...problems(400) },
    handler: async (ctx, { registry }) => {
      const query = ctx.input.query;
      const writer = query.writer === undefined ? undefined : attributeOf(query.writer);
      return { status: 200, body: await registry.listJson({ owningApplication: query.owning_application, writer }), contentType: 'application/json' };
    },
  }),
  route({
    method: 'POST', path: '/event-types', operationId: 'createEventType', tag: 'Event types', access: 'authenticated', limited: true,
    summary: 'Create an event type',
    description: 'Refused while the feature `disable_event_type_creation` is on; `authorization` is required with `force_event_type_authz`. Runs under the control-plane limiter. A `Warning` header (`299 - "…"`) says when the memory its `default_statistic` and `retention_time` need exceeds the room below the high-water mark of its storage (docs/operations.md "Memory and retention"); it is created anyway.',
    body: jsonBody(EventTypeInputSchema),
    responses: { '201': json('created', EventTypeRecordSchema, { Location, Warning: CapacityWarning }), ...problems(400, 403, 409, 422, 503) },
    handler: async (ctx, { registry, access, audit, capacity }) => {
      access.requireWritable();
      access.requireFeatureOff('disable_event_type_creation', 'Event type creation');
      const record = await registry.create(await ctx.json(), callerOf(ctx.subject, access));
      audit.record({ subject: ctx.subject, resource: 'event_type', resourceId: record.name, op: 'C', next: record });
      return { status: 201, body: record, headers: { Location: `/event-types/${record.name}`, ...(await capacityHeaders(record, capacity)) } };
    },
  }),
  route({
    method: 'GET', path: '/event-types/{name}', operationId: 'getEventType', tag: 'Event types', access: 'authenticated', params: NameParam,
    summary: 'Get an event type',
    responses: { '200': json('the event type', EventTypeRecordSchema), ...problems(404) },
    handler: async (ctx, { registry }) => ({ status: 200, body: await registry.get(name(ctx.params)) }),
  }),
  route({
    method: 'PUT', path: '/event-types/{name}', operationId: 'updateEventType', tag: 'Event types', access: 'authenticated', params: NameParam, limited: true,
    summary: 'Update an event type', description: 'Needs the event type\'s `admins` (or an administrator). A schema change is checked against `compatibility_mode`. A `Warning` header as on creation when its declared traffic cannot fit.',
    body: jsonBody(EventTypeInputSchema),
    responses: { '200': json('the updated event type', EventTypeRecordSchema, { Warning: CapacityWarning }), ...problems(400, 403, 404, 409, 422, 503) },
    handler: async (ctx, { registry, access, audit, capacity }) => {
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
      return { status: 200, body: record, headers: await capacityHeaders(record, capacity) };
    },
  }),
  route({
    method: 'DELETE', path: '/event-types/{name}', operationId: 'deleteEventType', tag: 'Event types', access: 'authenticated', params: NameParam,
    summary: 'Delete an event type',
    description: 'Needs its `admins`; features `disable_event_type_deletion`, `event_type_deletion_only_admins`, `delete_event_type_with_subscriptions` apply.',
    responses: { '200': empty('deleted'), ...problems(403, 404, 409, 503) },
    handler: async (ctx, { registry, access, subscriptions, audit }) => {
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
    },
  }),
  route({
    method: 'GET', path: '/event-types/{name}/schemas', operationId: 'listSchemas', tag: 'Schemas', access: 'authenticated', params: NameParam,
    summary: 'List the schema versions of an event type (newest first)', query: SchemaListQuery,
    responses: { '200': json('a page of versions', Type.Object({ _links: PageLinksSchema, items: Type.Array(EventTypeSchemaSchema) }, { additionalProperties: false })), ...problems(400, 404) },
    handler: async (ctx, { registry }) => {
      const eventType = name(ctx.params);
      const page = pageOf(ctx.input.query);
      const all = await registry.schemas(eventType);
      const items = all.slice(page.offset, page.offset + page.limit);
      const href = (offset: number) => ({ href: `/event-types/${eventType}/schemas?offset=${offset}&limit=${page.limit}` });
      const links = {
        ...(page.offset > 0 ? { prev: href(Math.max(0, page.offset - page.limit)) } : {}),
        ...(page.offset + page.limit < all.length ? { next: href(page.offset + page.limit) } : {}),
      };
      return { status: 200, body: { _links: links, items } };
    },
  }),
  route({
    method: 'POST', path: '/event-types/{name}/schemas', operationId: 'addSchema', tag: 'Schemas', access: 'authenticated', params: NameParam, limited: true,
    summary: 'Add a schema version, or find one (`fetch=true`)',
    description:
      'Without `fetch`: a schema update (needs the event type\'s `admins`), answering the latest schema; the body is checked as the event type\'s `schema` field (problems name `schema.type`, `schema.schema`). With `fetch=true`: the stored version equal to the schema sent (404 when none is); there any field missing or of the wrong type is 422.',
    query: AddSchemaQuery,
    body: jsonBody(SchemaVersionInputSchema),
    responses: { '200': json('the latest (or found) schema version', EventTypeSchemaSchema), ...problems(400, 403, 404, 422, 503) },
    // With `?fetch=true`: the stored schema version equal to the one sent (a read, open to every
    // subject). Otherwise a schema update, as a PUT that changes only the schema: the event type's
    // admins, checks and audit entry (only when a new version was stored); answers the latest schema.
    handler: async (ctx, { registry, access, audit }) => {
      const eventType = name(ctx.params);
      if (ctx.input.query.fetch?.toLowerCase() === 'true') return { status: 200, body: await registry.findSchema(eventType, await ctx.json()) };
      access.requireWritable();
      const added = await registry.addSchema(eventType, await ctx.json(), callerOf(ctx.subject, access));
      if (added.changed) audit.record({ subject: ctx.subject, resource: 'event_type', resourceId: eventType, op: 'U', previous: added.previous, next: added.record });
      return { status: 200, body: added.record.schema };
    },
  }),
  route({
    method: 'GET', path: '/event-types/{name}/schemas/{version}', operationId: 'getSchema', tag: 'Schemas', access: 'authenticated',
    params: Type.Object({ name: Type.String(), version: Type.String({ description: 'a semantic version, or `latest`' }) }),
    summary: 'Get one schema version',
    responses: { '200': json('the schema version', EventTypeSchemaSchema), ...problems(404) },
    handler: async (ctx, { registry }) => ({ status: 200, body: await registry.schema(name(ctx.params), ctx.input.params.version) }),
  }),
  route({
    method: 'POST', path: '/event-types/{name}/schemas/{version}/compatibility-check', operationId: 'checkSchemaCompatibility', tag: 'Schemas', access: 'authenticated', limited: true,
    params: Type.Object({ name: Type.String(), version: Type.String({ description: 'the version to compare with, or `latest`' }) }),
    summary: 'Check a schema against a stored version (stores nothing)',
    body: jsonBody(CompatibilityCheckInputSchema),
    responses: { '200': json('whether the schema would be accepted', CompatibilityCheckSchema), ...problems(400, 404, 422) },
    // Stores nothing, so open to every subject, like reading the schemas.
    handler: async (ctx, { registry }) => ({ status: 200, body: await registry.checkCompatibility(name(ctx.params), ctx.input.params.version, await ctx.json()) }),
  }),
  route({
    method: 'GET', path: '/registry/partition-strategies', operationId: 'listPartitionStrategies', tag: 'Event types', access: 'authenticated',
    summary: 'Partition strategies', responses: { '200': json('their names', Type.Array(Type.String())) },
    handler: () => Promise.resolve({ status: 200, body: PARTITION_STRATEGIES }),
  }),
  route({
    method: 'GET', path: '/registry/enrichment-strategies', operationId: 'listEnrichmentStrategies', tag: 'Event types', access: 'authenticated',
    summary: 'Enrichment strategies', responses: { '200': json('their names', Type.Array(Type.String())) },
    handler: () => Promise.resolve({ status: 200, body: ENRICHMENT_STRATEGIES }),
  }),
];

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

/** `<data_type>:<value>` split at its first colon: a value {@link AttributeQueryParam} accepted. */
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
