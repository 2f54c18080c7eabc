/**
 * The OpenAPI 3.1 document of the node (docs/http-api.md), derived from the route declarations
 * (route-table.ts): paths with their parameters, bodies and answers (streams as
 * `application/x-json-stream` and `text/event-stream`, problems as `application/problem+json`,
 * BatchItemResponse arrays for 207/422), the answer headers (`X-Flow-Id` on every answer,
 * `X-Broker-StreamId`, `Location`, …), the security schemes of the auth modes, and in
 * `info.description` the catalogs of `broker.io/` annotations, feature toggles and configuration keys
 * (the last generated from the config schema).
 */
import type { TSchema } from '@sinclair/typebox';
import { configSchema } from '../../config/config-schema.js';
import { problemTypes } from '../../errors/catalog.js';
import { MAX_EVENT_SEND_COUNT_ANNOTATION, UNPROCESSABLE_EVENT_POLICY_ANNOTATION } from '../../domain/subscription/dead-letter.js';
import { FEATURES, type Feature } from '../../services/settings.js';
import { DEFAULT_PROBLEM, FLOW_ID_HEADER, TAGS, type HeaderSpec, type ResponseSpec, type RouteSpec } from './route-model.js';
import { ROUTES } from './route-table.js';
import { NAMED_SCHEMAS } from './wire-schemas.js';

/** A JSON value of the document. */
export type JsonDocValue = null | boolean | number | string | JsonDocValue[] | { [key: string]: JsonDocValue };
/** The document (and any object in it). */
export type OpenApiDocument = { [key: string]: JsonDocValue };

/** What each feature toggle does (docs/operations.md "Feature toggles"; `POST /settings/features`). Typed by {@link Feature}: a new feature must be described. */
export const FEATURE_NOTES: Readonly<Record<Feature, string>> = {
  disable_event_type_creation: 'POST /event-types answers 403',
  disable_event_type_deletion: 'DELETE /event-types/{name} answers 403 (administrators still may)',
  delete_event_type_with_subscriptions: 'deleting an event type also deletes its subscriptions (else 409)',
  event_type_deletion_only_admins: 'only administrators may delete event types',
  disable_subscription_creation: 'POST /subscriptions answers 403',
  remote_tokeninfo: 'auth mode tokeninfo asks the token-info service for every token not cached',
  kpi_collection: 'the node publishes KPI events (broker.access.log, broker.batch.published, …)',
  audit_log_collection: 'changes are published to the event type broker.audit-log',
  disable_db_write_operations: 'read-only mode: every change but feature toggles answers 503',
  force_event_type_authz: 'a new event type must have `authorization`',
  force_subscription_authz: 'a new subscription must have `authorization`',
  repartitioning: 'POST/PUT /event-types/{name}/partition-count is allowed',
  token_subscription_iteration: 'GET /subscriptions pages by `token`',
};

/** The service's annotations (docs/consuming.md). */
const ANNOTATIONS: readonly (readonly [string, string])[] = [
  [MAX_EVENT_SEND_COUNT_ANNOTATION, 'subscription: sends of an event without a commit before it is dead-lettered (1 to 1,000,000)'],
  [UNPROCESSABLE_EVENT_POLICY_ANNOTATION, 'subscription: `SKIP_EVENT` or `DEAD_LETTER_QUEUE` (to the event type `broker.dead.letter.queue`)'],
];

/** A property of a JSON object, as unknown. */
function field(value: unknown, key: string): unknown {
  return typeof value === 'object' && value !== null ? (Object.getOwnPropertyDescriptor(value, key)?.value as unknown) : undefined;
}

/** A table row `| key | description |` for every leaf of the config schema, dotted (docs/configuration.md has defaults and env names). */
function configKeys(schema: unknown, prefix = ''): string[] {
  const properties = field(schema, 'properties');
  if (typeof properties !== 'object' || properties === null) {
    const description = field(schema, 'description');
    return [`| \`${prefix}\` | ${typeof description === 'string' ? description.replace(/\|/g, '\\|') : ''} |`];
  }
  return Object.entries(properties).flatMap(([key, sub]: [string, unknown]) => configKeys(sub, prefix === '' ? key : `${prefix}.${key}`));
}

const DESCRIPTION = [
  'HTTP/JSON event broker: event types with JSON Schemas, validated batch publishing into partitioned Redis Streams, subscriptions streamed with commits and rebalancing.',
  '',
  'Every answer carries `X-Flow-Id` (the request\'s, or a new one). Failures are RFC 7807 problems (`application/problem+json`).',
  '',
  'CORS: with origins listed in config `http.corsAllowedOrigins`, every path answers the `OPTIONS` preflight of a listed origin (204; 403 for others), and answers carry `Access-Control-Allow-Origin` for it; with none listed (the default) there is no CORS.',
  '',
  '## Authentication',
  'The node runs in one auth mode (config `auth.mode`): `off` — no token, every request is the subject `unauthenticated`; `jwt` — a bearer JWT verified locally (`auth.jwt.*`); `tokeninfo` — a bearer token checked by a token-info service (`auth.tokeninfo.*`). Public routes (`/health`, `/openapi.json`, `/docs`, `/problems`, `/ui` files) need no token in any mode.',
  '',
  '## Annotations under `broker.io/`',
  '`broker.io` is reserved: clients may not set other annotations or labels under it.',
  '',
  '| annotation | meaning |',
  '|---|---|',
  ...ANNOTATIONS.map(([name, meaning]) => `| \`${name}\` | ${meaning} |`),
  '',
  '## Feature toggles (`/settings/features`)',
  '| feature | when on |',
  '|---|---|',
  ...FEATURES.map((f) => `| \`${f}\` | ${FEATURE_NOTES[f]} |`),
  '',
  '## Problem types',
  'Every failure is an RFC 7807 problem whose `type` is `/problems/<code>`; `GET /problems/<code>` answers the entry below as JSON, `GET /problems` all of them. `detail` fills the template\'s `{placeholders}`.',
  '',
  '| type | status | meaning |',
  '|---|---|---|',
  ...problemTypes().map((t) => `| \`${t.type}\` | ${t.status} | ${t.meaning.replace(/\|/g, '\\|')} |`),
  '',
  '## Configuration keys',
  'Defaults and `BROKER_*` environment variables: docs/configuration.md.',
  '',
  '| key | meaning |',
  '|---|---|',
  ...configKeys(configSchema),
].join('\n');

/** The schema as plain JSON, with named schemas (other than `self`) replaced by `$ref`s. */
function toJson(schema: TSchema, refs: ReadonlyMap<string, string>, self?: string): JsonDocValue {
  const walk = (node: unknown, root: boolean): JsonDocValue => {
    if (Array.isArray(node)) return node.map((n) => walk(n, false));
    if (typeof node !== 'object' || node === null) return node as JsonDocValue;
    if (!root) {
      const name = refs.get(JSON.stringify(node));
      if (name !== undefined && name !== self) return { $ref: `#/components/schemas/${name}` };
    }
    const out: { [key: string]: JsonDocValue } = {};
    for (const [key, value] of Object.entries(node)) out[key] = walk(value, false);
    return out;
  };
  const name = refs.get(JSON.stringify(schema));
  if (name !== undefined && name !== self) return { $ref: `#/components/schemas/${name}` };
  return walk(schema, true);
}

/** Parameters of one location from an object schema. */
function parameters(where: 'path' | 'query' | 'header', schema: TSchema | undefined, refs: ReadonlyMap<string, string>): JsonDocValue[] {
  if (schema === undefined) return [];
  const properties = (field(schema, 'properties') ?? {}) as Readonly<Record<string, TSchema>>;
  const required = field(schema, 'required');
  return Object.entries(properties).map(([name, sub]) => {
    const described = field(sub, 'description');
    const isArray = field(sub, 'type') === 'array';
    return {
      name,
      in: where,
      required: where === 'path' || (Array.isArray(required) && required.includes(name)),
      ...(typeof described === 'string' ? { description: described } : {}),
      ...(where === 'query' && isArray ? { style: 'form', explode: true } : {}),
      schema: toJson(sub, refs),
    };
  });
}

function headerObject(spec: HeaderSpec, refs: ReadonlyMap<string, string>): JsonDocValue {
  return { description: spec.description, required: spec.required === true, schema: toJson(spec.schema, refs) };
}

function response(spec: ResponseSpec, refs: ReadonlyMap<string, string>): JsonDocValue {
  const headers: { [key: string]: JsonDocValue } = { 'X-Flow-Id': headerObject(FLOW_ID_HEADER, refs) };
  for (const [name, header] of Object.entries(spec.headers ?? {})) headers[name] = headerObject(header, refs);
  const content: { [key: string]: JsonDocValue } = {};
  for (const [media, schema] of Object.entries(spec.content ?? {})) content[media] = { schema: toJson(schema, refs) };
  return { description: spec.description, headers, ...(Object.keys(content).length > 0 ? { content } : {}) };
}

/** Security of an authenticated route: a bearer token in mode jwt or tokeninfo, none in mode off. */
const AUTHENTICATED_SECURITY: JsonDocValue = [{ jwt: [] }, { tokeninfo: [] }, {}];

function operation(route: RouteSpec, refs: ReadonlyMap<string, string>): JsonDocValue {
  const responses: { [key: string]: JsonDocValue } = {};
  for (const [status, spec] of Object.entries(route.responses)) responses[status] = response(spec, refs);
  responses.default = response(DEFAULT_PROBLEM, refs);
  const body = route.body;
  const requestBody: JsonDocValue | undefined =
    body === undefined
      ? undefined
      : {
          required: body.required,
          ...(body.description ? { description: body.description } : {}),
          content: Object.fromEntries(Object.entries(body.content).map(([media, schema]) => [media, { schema: toJson(schema, refs) }])),
        };
  return {
    operationId: route.operationId,
    summary: route.summary,
    ...(route.description ? { description: route.description } : {}),
    tags: [route.tag],
    ...(route.deprecated ? { deprecated: true } : {}),
    security: route.access === 'public' ? [] : AUTHENTICATED_SECURITY,
    parameters: [...parameters('path', route.params, refs), ...parameters('query', route.query, refs), ...parameters('header', route.headers, refs)],
    ...(requestBody !== undefined ? { requestBody } : {}),
    responses,
  };
}

/**
 * The OpenAPI 3.1 document of `routes`: their paths in the order given, the sections (tags) in
 * {@link TAGS} order.
 * @param version the API version shown (the package's)
 */
export function buildOpenApiDocument(version: string, routes: readonly RouteSpec[] = ROUTES): OpenApiDocument {
  const refs = new Map<string, string>();
  for (const [name, schema] of Object.entries(NAMED_SCHEMAS)) refs.set(JSON.stringify(schema), name);
  const paths: { [path: string]: { [method: string]: JsonDocValue } } = {};
  for (const route of routes) (paths[route.path] ??= {})[route.method.toLowerCase()] = operation(route, refs);
  const used = new Set(routes.map((r) => r.tag));
  const tags = TAGS.filter((tag) => used.has(tag)).map((name) => ({ name }));
  return {
    openapi: '3.1.0',
    info: { title: 'Event Broker', version, description: DESCRIPTION },
    servers: [{ url: '/' }],
    tags,
    paths,
    components: {
      schemas: Object.fromEntries(Object.entries(NAMED_SCHEMAS).map(([name, schema]) => [name, toJson(schema, refs, name)])),
      securitySchemes: {
        jwt: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'auth mode `jwt`: a JWT verified by the node (config `auth.jwt.*`)' },
        tokeninfo: { type: 'http', scheme: 'bearer', description: 'auth mode `tokeninfo`: an opaque token checked by the token-info service (config `auth.tokeninfo.*`)' },
      },
    },
  };
}
