import { Validator } from '@seriousme/openapi-schema-validator';
import ajv2020 from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { NoAuthentication } from '../../src/auth/authenticator.js';
import { buildOpenApiDocument, type JsonDocValue } from '../../src/http/api/openapi.js';
import { INPUT_SCHEMA_EXTENSIONS } from '../../src/domain/json/input-check.js';
import { routeKey, routesOf } from '../../src/http/api/route-model.js';
import { assertEveryRouteDescribed, findRoute, missingRoutes, registerRoutes, ROUTES, type RouteDependencies } from '../../src/http/api/route-table.js';
import { NAMED_SCHEMAS } from '../../src/http/api/wire-schemas.js';
import { apiDocsDeps } from '../../src/http/routes/api-docs.js';
import { API_DOCS_ROUTES, OPERATION_ROUTES, type MetricsScrape } from '../../src/http/routes/operations.js';
import { HttpServer } from '../../src/http/server.js';
import { createLogger } from '../../src/observability/logger.js';
import { FEATURES } from '../../src/services/settings.js';
import { committedText, endpointMap, httpApiDoc } from '../../scripts/generate-docs.js';

// CommonJS modules seen as namespaces by NodeNext types: take `.default` (as src/domain/schema/schema-compiler.ts does).
const Ajv2020 = ajv2020.default;
const addFormats = ajvFormats.default;

const document = buildOpenApiDocument('0.0.0-test');
const paths = document.paths as Record<string, Record<string, { operationId: string; parameters: { name: string; in: string }[] }>>;

function server(): HttpServer {
  return new HttpServer(
    { maxBodyBytes: 1024, maxInflatedBodyBytes: 1024, maxControlBodyBytes: 1024, controlConcurrency: 1, controlQueueLength: 0, publishMaxInFlightBytes: 1024, corsAllowedOrigins: [] },
    new NoAuthentication(),
    createLogger({ logLevel: 'silent' }),
  );
}

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document (@seriousme/openapi-schema-validator)', async () => {
    const validator = new Validator();
    const result = await validator.validate(document);
    expect(result.errors, JSON.stringify(result.errors, null, 2)).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  it('has schemas that compile as JSON Schema 2020-12 (the dialect of OpenAPI 3.1), strictly', () => {
    const ajv = new Ajv2020({ strict: true, allErrors: true });
    addFormats(ajv);
    // The request schemas' own keywords (OpenAPI specification extensions, src/domain/json/input-check.ts).
    ajv.addVocabulary([...INPUT_SCHEMA_EXTENSIONS]);
    // The document's $refs name its components: each is added under an id of its own.
    const id = (ref: string): string => `https://broker.test/${ref.replace('#/components/schemas/', '')}`;
    const rewrite = (node: JsonDocValue): JsonDocValue => {
      if (Array.isArray(node)) return node.map(rewrite);
      if (typeof node !== 'object' || node === null) return node;
      return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, k === '$ref' && typeof v === 'string' ? id(v) : rewrite(v)]));
    };
    const components = (document.components as { schemas: Record<string, JsonDocValue> }).schemas;
    for (const [name, schema] of Object.entries(components)) ajv.addSchema({ ...(rewrite(schema) as object), $id: id(name) });
    let compiled = 0;
    const walk = (node: unknown): void => {
      if (Array.isArray(node)) return node.forEach(walk);
      if (typeof node !== 'object' || node === null) return;
      for (const [key, value] of Object.entries(node)) {
        if (key === 'schema' && typeof value === 'object' && value !== null && !Array.isArray(value)) {
          ajv.compile(rewrite(value as JsonDocValue) as Record<string, JsonDocValue>);
          compiled++;
        } else walk(value);
      }
    };
    walk(document.paths);
    expect(compiled).toBeGreaterThan(100);
  });

  it('describes every route of the table once, with unique operation ids and every path parameter', () => {
    const operations = Object.values(paths).flatMap((p) => Object.values(p));
    expect(operations).toHaveLength(ROUTES.length);
    expect(new Set(operations.map((o) => o.operationId)).size).toBe(ROUTES.length);
    expect(new Set(ROUTES.map((r) => routeKey(r.method, r.path))).size).toBe(ROUTES.length);
    for (const [path, methods] of Object.entries(paths)) {
      const names = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      for (const op of Object.values(methods)) expect(op.parameters.filter((p) => p.in === 'path').map((p) => p.name), `${op.operationId} ${path}`).toEqual(names);
    }
  });

  it('names the wire objects under components.schemas, each distinct, and refers to them', () => {
    const texts = Object.values(NAMED_SCHEMAS).map((s) => JSON.stringify(s));
    expect(new Set(texts).size).toBe(texts.length);
    const text = JSON.stringify(document);
    for (const name of ['EventType', 'Subscription', 'BatchItemResponse', 'Problem', 'SubscriptionCursor', 'StreamBatch', 'Partition', 'Timeline', 'Storage']) {
      expect(text, name).toContain(`"#/components/schemas/${name}"`);
    }
  });

  it('shows streams, problems, batch items, the stream headers and the auth modes', () => {
    const stream = paths['/subscriptions/{subscription_id}/events']?.get as unknown as { responses: Record<string, { content: Record<string, unknown>; headers: Record<string, unknown> }> };
    expect(Object.keys(stream.responses['200']?.content ?? {})).toEqual(['application/x-json-stream', 'text/event-stream']);
    expect(Object.keys(stream.responses['200']?.headers ?? {})).toEqual(['X-Flow-Id', 'X-Broker-StreamId']);
    expect(Object.keys(stream.responses['409']?.content ?? {})).toEqual(['application/problem+json']);
    const publish = paths['/event-types/{name}/events']?.post as unknown as { responses: Record<string, { content: Record<string, { schema: unknown }> }> };
    for (const status of ['207', '422']) expect(publish.responses[status]?.content['application/json']?.schema).toEqual({ type: 'array', items: { $ref: '#/components/schemas/BatchItemResponse' } });
    const lowLevel = paths['/event-types/{name}/events']?.get as unknown as { parameters: { name: string; in: string }[] };
    expect(lowLevel.parameters.filter((p) => p.in === 'header').map((p) => p.name)).toContain('X-Broker-Cursors');
    const components = document.components as { securitySchemes: Record<string, unknown> };
    expect(Object.keys(components.securitySchemes)).toEqual(['jwt', 'tokeninfo']);
    expect((paths['/health']?.get as unknown as { security: unknown[] }).security).toEqual([]);
    expect((paths['/event-types']?.get as unknown as { security: unknown[] }).security).toEqual([{ jwt: [] }, { tokeninfo: [] }, {}]);
  });

  it('catalogs the broker.io/ annotations, every feature and the config keys in its description', () => {
    const description = (document.info as { description: string }).description;
    expect(description).toContain('broker.io/subscription-max-event-send-count');
    expect(description).toContain('broker.io/unprocessable-event-policy');
    for (const feature of FEATURES) expect(description).toContain(`\`${feature}\``);
    for (const key of ['redis.url', 'http.maxBodyBytes', 'auth.mode', 'subscriptions.maxPartitions']) expect(description).toContain(`\`${key}\``);
  });
});

describe('the route table against the server', () => {
  it('finds the route of a request path, literal segments first', () => {
    expect(findRoute('GET', '/ui/api/access')?.operationId).toBe('consoleAccess');
    expect(findRoute('GET', '/ui/app/main.js')?.operationId).toBe('consoleAsset');
    expect(findRoute('PUT', '/storages/default/x')?.operationId).toBe('setDefaultStorage');
    expect(findRoute('GET', '/storages/default')?.operationId).toBe('getStorage');
    expect(findRoute('GET', '/event-types/a/schemas/1.0.0?x=1')?.operationId).toBe('getSchema');
    expect(findRoute('GET', '/nowhere')).toBeUndefined();
  });

  it('names the registered routes it lacks', () => {
    expect(missingRoutes([{ method: 'GET', path: '/event-types/:name' }, { method: 'GET', path: '/ui/*' }, { method: 'GET', path: '/nowhere/:x' }])).toEqual(['GET /nowhere/:x']);
  });

  it('is what a node registers: every route of the table once, in its order', () => {
    const http = server();
    // Registering reads no dependency: an empty object stands for the areas' services.
    registerRoutes(http, {} as RouteDependencies);
    expect(http.registeredRoutes().map((r) => routeKey(r.method, r.path))).toEqual(ROUTES.map((r) => routeKey(r.method, r.path)));
  });

  it('refuses a server with an undescribed route (the node does not start)', () => {
    const http = server();
    // `/health` is in the table; a PATCH of an event type is not.
    const undescribed = routesOf<MetricsScrape>()({
      method: 'PATCH', path: '/event-types/{name}', operationId: 'patchEventType', tag: 'Event types', access: 'authenticated', summary: 'not in the table', responses: {},
      handler: () => Promise.resolve({ status: 200 }),
    });
    http.register([...OPERATION_ROUTES.filter((r) => r.path === '/health'), undescribed], { scrape: () => Promise.resolve(''), contentTypeOf: () => 'text/plain', exemplars: false });
    expect(() => assertEveryRouteDescribed(http)).toThrow('the API document lacks 1 registered route(s): PATCH /event-types/:name');
    const described = server();
    described.register(API_DOCS_ROUTES, apiDocsDeps('test', new Map()));
    expect(() => assertEveryRouteDescribed(described)).not.toThrow();
    expect(described.registeredRoutes().map((r) => `${r.method} ${r.path}`)).toEqual(['GET /openapi.json', 'GET /docs', 'GET /docs/:asset', 'GET /problems', 'GET /problems/:type']);
  });
});

describe('the endpoint map of docs/http-api.md', () => {
  it('names every path of the route table with its methods, as npm run docs writes it', () => {
    const doc = httpApiDoc();
    expect(committedText({ file: 'docs/http-api.md', render: httpApiDoc }), 'docs/http-api.md is stale: run npm run docs').toBe(doc);
    const map = endpointMap();
    for (const route of ROUTES) expect(map, `${route.method} ${route.path}`).toMatch(new RegExp(`\`[A-Z, ]*\\b${route.method}\\b[A-Z, ]* ${route.path.replace(/[{}]/g, '\\$&')}\``));
  });
});
