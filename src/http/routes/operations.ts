import { Type } from '@sinclair/typebox';
import { brokerError, errorCatalog, type ProblemTypeDescription } from '../../errors/catalog.js';
import { empty, json, problems, routesOf, type Route } from '../api/route-model.js';

/**
 * What `/metrics` answers: the node's Prometheus text (src/observability/metrics.ts); and what
 * `/health/storage` answers: whether the Redis masters this node writes to have room (absent: no
 * master known, ready).
 */
export interface MetricsScrape {
  /** @param openMetrics OpenMetrics 1.0 with exemplars instead of Prometheus text format 0.0.4 */
  scrape(openMetrics: boolean): Promise<Buffer | string>;
  contentTypeOf(openMetrics: boolean): string;
  /** Whether the node keeps exemplars (tracing is on): only then is OpenMetrics answered. */
  readonly exemplars: boolean;
  /** Whether every Redis master this node writes to has room (`/health/storage`); absent: none known, ready. */
  readonly storageReadiness?: () => { readonly masters: number; readonly full: readonly unknown[] };
}

/**
 * Whether an `Accept` header prefers OpenMetrics to the text format, as Prometheus asks when it scrapes
 * (`application/openmetrics-text;version=1.0.0,…,text/plain;version=0.0.4;q=0.5,…`): an
 * `application/openmetrics-text` range with a quality above 0 and not below that of `text/plain`.
 */
export function prefersOpenMetrics(accept: string | undefined): boolean {
  if (accept === undefined || !accept.includes('application/openmetrics-text')) return false;
  let openMetrics = 0;
  let text = 0;
  for (const range of accept.split(',')) {
    const [type = '', ...parameters] = range.split(';').map((part) => part.trim().toLowerCase());
    const q = parameters.find((p) => p.startsWith('q='));
    const quality = q === undefined ? 1 : Number(q.slice(2));
    if (!Number.isFinite(quality)) continue;
    if (type === 'application/openmetrics-text') openMetrics = Math.max(openMetrics, quality);
    else if (type === 'text/plain') text = Math.max(text, quality);
  }
  return openMetrics > 0 && openMetrics >= text;
}

/** `Retry-After` of a `/health/storage` answered 503: as a `STORAGE_FULL` publish's. */
const STORAGE_RETRY_AFTER = errorCatalog.STORAGE_FULL.headers['Retry-After'];

const operation = routesOf<MetricsScrape>();

/**
 * Liveness, storage readiness and metrics (docs/operations.md, docs/metrics.md). `/health` and
 * `/health/storage` are public; `/metrics` is authenticated like every other route (open in auth mode `off`).
 */
export const OPERATION_ROUTES: readonly Route<MetricsScrape>[] = [
  operation({
    method: 'GET', path: '/health', operationId: 'health', tag: 'Operations', access: 'public',
    summary: 'Liveness', responses: { '200': { description: 'the node serves', content: { 'text/plain': Type.Literal('OK') } }, ...problems(503) },
    handler: () => Promise.resolve({ status: 200, body: 'OK', contentType: 'text/plain' }),
  }),
  operation({
    method: 'GET', path: '/health/storage', operationId: 'storageReadiness', tag: 'Operations', access: 'public',
    summary: 'Readiness for publishing: whether the Redis masters have room',
    description:
      'Whether every Redis master this node writes to is below its high-water mark (config `redisMemory.highWaterPercent`). 200 `OK`; 503 with `Retry-After` and a line counting the full masters while publishes to their partitions are refused with 507. A node answering 503 here is healthy (`/health` stays 200) and serves everything else: reads, commits, streams, the control plane. Meant for a balancer that routes publishes (docs/operations.md "Memory and retention"); a liveness or whole-node readiness probe must stay on `/health`, since every node of a deployment shares the same masters.',
    responses: {
      '200': { description: 'every master has room', content: { 'text/plain': Type.String() } },
      '503': { description: 'a master is at or above its high-water mark; `Retry-After`', content: { 'text/plain': Type.String() } },
    },
    handler: (_ctx, deps) => {
      const readiness = deps.storageReadiness?.() ?? { masters: 0, full: [] };
      if (readiness.full.length === 0) return Promise.resolve({ status: 200, body: `OK: ${readiness.masters} Redis master(s) below their high-water mark\n`, contentType: 'text/plain' });
      const body = `FULL: ${readiness.full.length} of ${readiness.masters} Redis master(s) at or above their high-water mark; publishes to their partitions are refused with 507\n`;
      return Promise.resolve({ status: 503, body, contentType: 'text/plain', headers: { 'Retry-After': STORAGE_RETRY_AFTER } });
    },
  }),
  operation({
    method: 'GET', path: '/metrics', operationId: 'metrics', tag: 'Operations', access: 'authenticated',
    summary: 'Prometheus metrics (text format; OpenMetrics with exemplars on a node with tracing)',
    description: 'docs/metrics.md lists the series. With config `tracing.enabled`, an `Accept` header that prefers `application/openmetrics-text` (as Prometheus sends) gets OpenMetrics 1.0, whose latency histograms carry trace ids as exemplars (docs/tracing.md); otherwise the Prometheus text format.',
    responses: {
      '200': {
        description: 'Prometheus text exposition format, or OpenMetrics 1.0',
        content: { 'text/plain; version=0.0.4; charset=utf-8': Type.String(), 'application/openmetrics-text; version=1.0.0; charset=utf-8': Type.String() },
      },
    },
    handler: async (ctx, metrics) => {
      const openMetrics = metrics.exemplars && prefersOpenMetrics(ctx.headers.accept);
      return { status: 200, body: await metrics.scrape(openMetrics), contentType: metrics.contentTypeOf(openMetrics) };
    },
  }),
];

/** The reference page's script (Redoc's standalone bundle, from the npm package `redoc`). */
export const REFERENCE_BUNDLE = 'redoc.standalone.js';

/** A file of the reference page. */
export interface DocsAsset {
  readonly body: Buffer;
  readonly contentType: string;
  readonly etag: string;
}

/** The reference page: Redoc rendering `/openapi.json`, its script from this node (no CDN). */
export const REFERENCE_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Event Broker API</title>
<link rel="icon" href="data:,">
</head>
<body>
<redoc spec-url="/openapi.json"></redoc>
<script src="/docs/${REFERENCE_BUNDLE}"></script>
</body>
</html>
`;

/**
 * The page's Content-Security-Policy: scripts and data from this origin only; Redoc's styles are
 * inline (styled-components) and its search runs in a worker it makes from a blob. Redoc's sidebar
 * footer links a logo from cdn.redoc.ly, which this policy blocks (the image then hides itself), so
 * the page fetches nothing from anywhere but the node.
 */
const PAGE_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** What the API description routes serve, prepared once when they are registered (src/http/routes/api-docs.ts). */
export interface ApiDocsDeps {
  /** The OpenAPI document as JSON text, and its ETag. */
  readonly document: string;
  readonly documentTag: string;
  /** The ETag of {@link REFERENCE_PAGE}. */
  readonly pageTag: string;
  /** The reference page's files by name. */
  readonly assets: ReadonlyMap<string, DocsAsset>;
  /** The error catalog's problem types, in catalog order. */
  readonly problemTypes: readonly ProblemTypeDescription[];
  /** The same by the last segment of their `type` (`event-type-not-found`). */
  readonly problemsByType: ReadonlyMap<string, ProblemTypeDescription>;
}

const TEXT_ASSET = Type.String({ description: 'the file' });

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

/** Headers of every answer of the API description: revalidated each time, never sniffed. */
const CACHED = { 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' };

const docs = routesOf<ApiDocsDeps>();

/**
 * The node's API description (docs/http-api.md):
 * - `GET /openapi.json` → the OpenAPI 3.1 document derived from the route declarations (src/http/api);
 * - `GET /docs` → an API reference page of it (Redoc), `GET /docs/<file>` → the page's script and its
 *   license, shipped in the build (`dist/docs-assets`; no CDN at run time);
 * - `GET /problems`, `GET /problems/{type}` → the error catalog: a problem's `type` resolves to the
 *   catalog entry behind it (RFC 7807 §3.1).
 *
 * All public, like `/health` and the console's files: they describe the API and hold no data (every
 * call a reader makes from the page still carries its own token).
 */
export const API_DOCS_ROUTES: readonly Route<ApiDocsDeps>[] = [
  docs({
    method: 'GET', path: '/openapi.json', operationId: 'openapi', tag: 'Operations', access: 'public',
    summary: 'This document (OpenAPI 3.1)', responses: { '200': json('the OpenAPI document', Type.Object({ openapi: Type.String() })), '304': empty('not modified (If-None-Match)') },
    handler: (ctx, { document, documentTag }) =>
      Promise.resolve(
        ctx.headers['if-none-match'] === documentTag
          ? { status: 304, headers: { ...CACHED, ETag: documentTag } }
          : { status: 200, body: document, contentType: 'application/json', headers: { ...CACHED, ETag: documentTag } },
      ),
  }),
  docs({
    method: 'GET', path: '/docs', operationId: 'apiReference', tag: 'Operations', access: 'public',
    summary: 'The API reference page (Redoc, served by the node)', responses: { '200': { description: 'an HTML page', content: { 'text/html': TEXT_ASSET } }, '304': empty('not modified (If-None-Match)'), ...problems(404) },
    handler: (ctx, { assets, pageTag }) => {
      if (!assets.has(REFERENCE_BUNDLE)) throw brokerError('API_REFERENCE_NOT_BUILT');
      const headers = { ...CACHED, ETag: pageTag, 'Content-Security-Policy': PAGE_POLICY, 'Referrer-Policy': 'no-referrer' };
      if (ctx.headers['if-none-match'] === pageTag) return Promise.resolve({ status: 304, headers });
      return Promise.resolve({ status: 200, body: REFERENCE_PAGE, contentType: 'text/html; charset=utf-8', headers });
    },
  }),
  docs({
    method: 'GET', path: '/docs/{asset}', operationId: 'apiReferenceAsset', tag: 'Operations', access: 'public',
    params: Type.Object({ asset: Type.String({ description: 'a file of the reference page' }) }),
    summary: 'A file of the API reference page', responses: { '200': { description: 'the file', content: { 'text/javascript': TEXT_ASSET, 'text/plain': TEXT_ASSET } }, '304': empty('not modified (If-None-Match)'), ...problems(404) },
    handler: (ctx, { assets }) => {
      const asset = assets.get(ctx.input.params.asset);
      if (asset === undefined) throw brokerError('API_REFERENCE_ASSET_NOT_FOUND', { path: ctx.path });
      const headers = { ...CACHED, ETag: asset.etag };
      if (ctx.headers['if-none-match'] === asset.etag) return Promise.resolve({ status: 304, headers });
      return Promise.resolve({ status: 200, body: asset.body, contentType: asset.contentType, headers });
    },
  }),
  docs({
    method: 'GET', path: '/problems', operationId: 'problemTypes', tag: 'Operations', access: 'public',
    summary: 'Every problem type a failure can carry (the error catalog)', description: 'The same list as this document\'s "Problem types" section.',
    responses: { '200': json('the problem types, in catalog order', Type.Object({ items: Type.Array(PROBLEM_TYPE) })) },
    handler: (_ctx, { problemTypes }) => Promise.resolve({ status: 200, body: { items: problemTypes }, headers: CACHED }),
  }),
  docs({
    method: 'GET', path: '/problems/{type}', operationId: 'problemType', tag: 'Operations', access: 'public',
    params: Type.Object({ type: Type.String({ description: 'the last segment of a problem\'s `type`, e.g. `event-type-not-found`' }) }),
    summary: 'One problem type: what a problem\'s `type` URI resolves to', responses: { '200': json('the problem type', PROBLEM_TYPE), ...problems(404) },
    handler: (ctx, { problemsByType }) => {
      const type = ctx.input.params.type;
      const found = problemsByType.get(type);
      if (found === undefined) throw brokerError('PROBLEM_TYPE_NOT_FOUND', { type });
      return Promise.resolve({ status: 200, body: found, headers: CACHED });
    },
  }),
];
