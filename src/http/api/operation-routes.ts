/** Route table entries of settings, storages, operations and the console (spec "Settings, storages and others"). */
import { Type, type TSchema } from '@sinclair/typebox';
import { AdminsInputSchema } from '../../domain/settings-input.js';
import { BLACKLIST_TYPES } from '../../services/settings.js';
import {
  AdminAuthorizationSchema,
  AvroSchemaVersionSchema,
  BlacklistSchema,
  ConsoleAccessSchema,
  FeatureInputSchema,
  FeatureListSchema,
  StorageInputSchema,
  StorageViewSchema,
} from './wire-schemas.js';
import { empty, json, jsonBody, problems, type RouteSpec } from './route-model.js';
import { Location, route } from './route-parts.js';

/**
 * `{type}` and `{name}` of `PUT`/`DELETE /settings/blacklist/{type}/{name}` (WIRE.md "Settings"): a
 * blacklist type in any case and a name of 1 to 255 characters; anything else is 400.
 */
export const BlacklistParams = Type.Object({
  type: Type.String({
    'x-any-case-enum': BLACKLIST_TYPES.map((t) => t.toLowerCase()),
    'x-status': 400,
    'x-messages': { 'x-any-case-enum': `has unknown blacklist type {value}; use ${BLACKLIST_TYPES.slice(0, -1).join(', ')} or ${BLACKLIST_TYPES.at(-1) ?? ''}` },
    description: `${BLACKLIST_TYPES.join(', ')} (any case)`,
  }),
  name: Type.String({ minLength: 1, maxLength: 255, 'x-status': 400, 'x-messages': { minLength: 'must have 1 to 255 characters', maxLength: 'must have 1 to 255 characters' }, description: 'the application or event type' }),
});

/** Settings (admins, blacklist, features), storages and the Avro envelope schemas. */
export const SETTINGS_ROUTES: RouteSpec[] = [
  route({
    method: 'GET', path: '/settings/admins', operationId: 'getAdmins', tag: 'Settings', access: 'authenticated',
    summary: 'The administrators', responses: { '200': json('the three lists', AdminAuthorizationSchema), ...problems(403) },
  }),
  ...(['POST', 'PUT'] as const).map((method) =>
    route({
      method, path: '/settings/admins', operationId: method === 'POST' ? 'setAdmins' : 'setAdminsPut', tag: 'Settings', access: 'authenticated',
      summary: 'Replace the administrators', body: jsonBody(AdminsInputSchema),
      responses: { '200': json('the new administrators', AdminAuthorizationSchema), ...problems(400, 403, 422, 503) },
    }),
  ),
  route({
    method: 'GET', path: '/settings/blacklist', operationId: 'getBlacklist', tag: 'Settings', access: 'authenticated',
    summary: 'The blacklist', responses: { '200': json('blocked producers and consumers', BlacklistSchema) },
  }),
  ...(['PUT', 'DELETE'] as const).map((method) =>
    route({
      method, path: '/settings/blacklist/{type}/{name}', operationId: method === 'PUT' ? 'block' : 'unblock', tag: 'Settings', access: 'authenticated',
      params: BlacklistParams,
      summary: method === 'PUT' ? 'Block an application or event type' : 'Unblock an application or event type',
      responses: { '204': empty(method === 'PUT' ? 'blocked' : 'unblocked'), ...problems(400, 403, 503) },
    }),
  ),
  route({
    method: 'GET', path: '/settings/features', operationId: 'getFeatures', tag: 'Settings', access: 'authenticated',
    summary: 'Feature toggles', responses: { '200': json('every feature and whether it is on', FeatureListSchema) },
  }),
  route({
    method: 'POST', path: '/settings/features', operationId: 'setFeature', tag: 'Settings', access: 'authenticated',
    summary: 'Turn a feature on or off', body: jsonBody(FeatureInputSchema),
    responses: { '204': empty('set'), ...problems(400, 403) },
  }),
  route({
    method: 'GET', path: '/storages', operationId: 'listStorages', tag: 'Storages and timelines', access: 'authenticated',
    summary: 'List storages', responses: { '200': json('every storage', Type.Array(StorageViewSchema)), ...problems(403) },
  }),
  route({
    method: 'POST', path: '/storages', operationId: 'createStorage', tag: 'Storages and timelines', access: 'authenticated',
    summary: 'Register a storage', body: jsonBody(StorageInputSchema),
    responses: { '201': json('registered', StorageViewSchema, { Location }), ...problems(400, 403, 409, 422, 503) },
  }),
  route({
    method: 'GET', path: '/storages/{id}', operationId: 'getStorage', tag: 'Storages and timelines', access: 'authenticated',
    params: Type.Object({ id: Type.String() }),
    summary: 'Get a storage', responses: { '200': json('the storage', StorageViewSchema), ...problems(403, 404) },
  }),
  route({
    method: 'DELETE', path: '/storages/{id}', operationId: 'deleteStorage', tag: 'Storages and timelines', access: 'authenticated',
    params: Type.Object({ id: Type.String() }),
    summary: 'Delete a storage', responses: { '204': empty('deleted'), ...problems(403, 404, 409, 503) },
  }),
  route({
    method: 'PUT', path: '/storages/default/{id}', operationId: 'setDefaultStorage', tag: 'Storages and timelines', access: 'authenticated',
    params: Type.Object({ id: Type.String() }),
    summary: 'Make a storage the default one', responses: { '200': json('the new default storage', StorageViewSchema), ...problems(403, 404, 503) },
  }),
  route({
    method: 'GET', path: '/avro-schemas/{name}/versions', operationId: 'listAvroSchemaVersions', tag: 'Settings', access: 'authenticated',
    params: Type.Object({ name: Type.String({ description: 'batch.publishing, batch.consumption or metadata' }) }),
    summary: 'Avro schemas of the service\'s envelopes', responses: { '200': json('newest first', Type.Object({ items: Type.Array(AvroSchemaVersionSchema) }, { additionalProperties: false })), ...problems(404) },
  }),
  route({
    method: 'GET', path: '/avro-schemas/{name}/versions/{version}', operationId: 'getAvroSchemaVersion', tag: 'Settings', access: 'authenticated',
    params: Type.Object({ name: Type.String(), version: Type.String() }),
    summary: 'One Avro schema version', responses: { '200': json('the version', AvroSchemaVersionSchema), ...problems(404) },
  }),
];

const TEXT_ASSET: TSchema = Type.String({ description: 'the file' });

/** One entry of the error catalog as `/problems` describes it (`ProblemTypeDescription`, src/errors/catalog.ts). */
const PROBLEM_TYPE = Type.Object(
  {
    type: Type.String({ description: 'the problem `type`: `/problems/<code in kebab case>`' }),
    code: Type.String({ description: 'the catalog code, e.g. `EVENT_TYPE_NOT_FOUND`' }),
    status: Type.Integer({ description: 'the HTTP status of such a problem' }),
    title: Type.String({ description: 'the problem `title` (the status\'s reason phrase)' }),
    detail_template: Type.String({ description: 'the problem `detail` with `{name}` placeholders, filled per failure' }),
    meaning: Type.String({ description: 'when it happens' }),
  },
  { additionalProperties: false },
);

/** Health, metrics, this document and its reference page, the console. */
export const OPERATION_ROUTES: RouteSpec[] = [
  route({
    method: 'GET', path: '/health', operationId: 'health', tag: 'Operations', access: 'public',
    summary: 'Liveness', responses: { '200': { description: 'the node serves', content: { 'text/plain': Type.Literal('OK') } }, ...problems(503) },
  }),
  route({
    method: 'GET', path: '/metrics', operationId: 'metrics', tag: 'Operations', access: 'authenticated',
    summary: 'Prometheus metrics (text format)', description: 'README "Metrics" lists the series.',
    responses: { '200': { description: 'Prometheus text exposition format', content: { 'text/plain; version=0.0.4; charset=utf-8': Type.String() } } },
  }),
  route({
    method: 'GET', path: '/openapi.json', operationId: 'openapi', tag: 'Operations', access: 'public',
    summary: 'This document (OpenAPI 3.1)', responses: { '200': json('the OpenAPI document', Type.Object({ openapi: Type.String() })), '304': empty('not modified (If-None-Match)') },
  }),
  route({
    method: 'GET', path: '/docs', operationId: 'apiReference', tag: 'Operations', access: 'public',
    summary: 'The API reference page (Redoc, served by the node)', responses: { '200': { description: 'an HTML page', content: { 'text/html': TEXT_ASSET } }, '304': empty('not modified (If-None-Match)'), ...problems(404) },
  }),
  route({
    method: 'GET', path: '/docs/{asset}', operationId: 'apiReferenceAsset', tag: 'Operations', access: 'public',
    params: Type.Object({ asset: Type.String({ description: 'a file of the reference page' }) }),
    summary: 'A file of the API reference page', responses: { '200': { description: 'the file', content: { 'text/javascript': TEXT_ASSET, 'text/plain': TEXT_ASSET } }, '304': empty('not modified (If-None-Match)'), ...problems(404) },
  }),
  route({
    method: 'GET', path: '/problems', operationId: 'problemTypes', tag: 'Operations', access: 'public',
    summary: 'Every problem type a failure can carry (the error catalog)', description: 'The same list as this document\'s "Problem types" section.',
    responses: { '200': json('the problem types, in catalog order', Type.Object({ items: Type.Array(PROBLEM_TYPE) })) },
  }),
  route({
    method: 'GET', path: '/problems/{type}', operationId: 'problemType', tag: 'Operations', access: 'public',
    params: Type.Object({ type: Type.String({ description: 'the last segment of a problem\'s `type`, e.g. `event-type-not-found`' }) }),
    summary: 'One problem type: what a problem\'s `type` URI resolves to', responses: { '200': json('the problem type', PROBLEM_TYPE), ...problems(404) },
  }),
  route({
    method: 'GET', path: '/ui', operationId: 'console', tag: 'Console', access: 'public',
    summary: 'The console (web page)', responses: { '200': { description: 'the page', content: { 'text/html': TEXT_ASSET } }, '304': empty('not modified (If-None-Match)'), ...problems(404) },
  }),
  route({
    method: 'GET', path: '/ui/{asset}', restOfPath: true, operationId: 'consoleAsset', tag: 'Console', access: 'public',
    params: Type.Object({ asset: Type.String({ description: 'path of a console file (may contain /)' }) }),
    summary: 'A file of the console', responses: { '200': { description: 'the file (html, js, css, json, png, svg, txt)', content: { 'application/octet-stream': TEXT_ASSET } }, '304': empty('not modified (If-None-Match)'), ...problems(404) },
  }),
  route({
    method: 'GET', path: '/ui/api/access', operationId: 'consoleAccess', tag: 'Console', access: 'authenticated',
    summary: 'What the caller may do (for the console)',
    query: Type.Object({ event_type: Type.Optional(Type.String()), subscription: Type.Optional(Type.String()) }),
    responses: { '200': json('the caller\'s rights', ConsoleAccessSchema), ...problems(404) },
  }),
];
