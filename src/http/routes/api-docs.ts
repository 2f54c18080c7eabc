import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { brokerError, problemTypes } from '../../errors/catalog.js';
import { buildOpenApiDocument } from '../api/openapi.js';
import { missingRoutes } from '../api/route-table.js';
import type { HttpServer } from '../server.js';

/** `dist/docs-assets`, beside `dist/src` (this module is `dist/src/http/routes/api-docs.js`); scripts/build.mjs copies the reference bundle there. */
export const DEFAULT_DOCS_DIR = fileURLToPath(new URL('../../../docs-assets', import.meta.url));

/** The reference page's script (Redoc's standalone bundle, from the npm package `redoc`). */
export const REFERENCE_BUNDLE = 'redoc.standalone.js';
/** Its license, served beside it. */
export const REFERENCE_LICENSE = 'redoc.LICENSE.txt';

/** A file of the reference page. */
interface DocsAsset {
  readonly body: Buffer;
  readonly contentType: string;
  readonly etag: string;
}

/**
 * The reference page's files: from `dir` (a build's `dist/docs-assets`), else from the `redoc` package
 * in node_modules (a checkout whose dev dependencies are installed); none when neither exists (then
 * `/docs` answers 404 naming the build step).
 */
export function loadDocsAssets(dir: string = DEFAULT_DOCS_DIR): Map<string, DocsAsset> {
  const assets = new Map<string, DocsAsset>();
  const sources: [string, string | undefined][] = [
    [REFERENCE_BUNDLE, existsSync(path.join(dir, REFERENCE_BUNDLE)) ? path.join(dir, REFERENCE_BUNDLE) : resolvePackageFile('redoc/bundles/redoc.standalone.js')],
    [REFERENCE_LICENSE, existsSync(path.join(dir, REFERENCE_LICENSE)) ? path.join(dir, REFERENCE_LICENSE) : resolvePackageFile('redoc/LICENSE')],
  ];
  for (const [name, file] of sources) {
    if (file === undefined) continue;
    const body = readFileSync(file);
    assets.set(name, { body, contentType: name.endsWith('.js') ? 'text/javascript; charset=utf-8' : 'text/plain; charset=utf-8', etag: etagOf(body) });
  }
  return assets;
}

/** A package file's path, or undefined when the package is not installed. */
function resolvePackageFile(specifier: string): string | undefined {
  try {
    const file = createRequire(import.meta.url).resolve(specifier);
    return existsSync(file) ? file : undefined;
  } catch {
    return undefined;
  }
}

function etagOf(body: Buffer | string): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 32)}"`;
}

/** The reference page: Redoc rendering `/openapi.json`, its script from this node (no CDN). */
const PAGE = `<!doctype html>
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

/**
 * The node's API description (issue 16 §2):
 * - `GET /openapi.json` → the OpenAPI 3.1 document generated from the route table (src/http/api);
 * - `GET /docs` → an API reference page of it (Redoc), `GET /docs/<file>` → the page's script and its
 *   license, shipped in the build (`dist/docs-assets`; no CDN at run time).
 *
 * All public, like `/health` and the console's files: they describe the API and hold no data (every
 * call a reader makes from the page still carries its own token). Registered last: it refuses to start
 * the node when a registered route is missing from the route table.
 * @param version the API version the document shows (the package's)
 * @throws Error naming the routes the table lacks
 */
export function apiDocsRoutes(http: HttpServer, version: string = packageVersion(), assets: ReadonlyMap<string, DocsAsset> = loadDocsAssets()): void {
  const document = JSON.stringify(buildOpenApiDocument(version));
  const documentTag = etagOf(document);
  const pageTag = etagOf(PAGE);
  const cached = { 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' };

  http.route('GET', '/openapi.json', (ctx) =>
    Promise.resolve(
      ctx.headers['if-none-match'] === documentTag
        ? { status: 304, headers: { ...cached, ETag: documentTag } }
        : { status: 200, body: document, contentType: 'application/json', headers: { ...cached, ETag: documentTag } },
    ), { public: true });

  http.route('GET', '/docs', (ctx) => {
    if (!assets.has(REFERENCE_BUNDLE)) throw brokerError('API_REFERENCE_NOT_BUILT');
    const headers = { ...cached, ETag: pageTag, 'Content-Security-Policy': PAGE_POLICY, 'Referrer-Policy': 'no-referrer' };
    if (ctx.headers['if-none-match'] === pageTag) return Promise.resolve({ status: 304, headers });
    return Promise.resolve({ status: 200, body: PAGE, contentType: 'text/html; charset=utf-8', headers });
  }, { public: true });

  http.route('GET', '/docs/:asset', (ctx) => {
    const asset = assets.get(ctx.params.asset ?? '');
    if (asset === undefined) throw brokerError('API_REFERENCE_ASSET_NOT_FOUND', { path: ctx.path });
    const headers = { ...cached, ETag: asset.etag };
    if (ctx.headers['if-none-match'] === asset.etag) return Promise.resolve({ status: 304, headers });
    return Promise.resolve({ status: 200, body: asset.body, contentType: asset.contentType, headers });
  }, { public: true });

  // A problem's `type` resolves (RFC 7807 §3.1): the catalog entry behind it (issue 16 §3.1).
  const types = problemTypes();
  const byType = new Map(types.map((t) => [t.type.slice('/problems/'.length), t]));
  http.route('GET', '/problems', () => Promise.resolve({ status: 200, body: { items: types }, headers: cached }), { public: true });
  http.route('GET', '/problems/:type', (ctx) => {
    const found = byType.get(ctx.params.type ?? '');
    if (found === undefined) throw brokerError('PROBLEM_TYPE_NOT_FOUND', { type: ctx.params.type ?? '' });
    return Promise.resolve({ status: 200, body: found, headers: cached });
  }, { public: true });

  const missing = missingRoutes(http.registeredRoutes());
  if (missing.length > 0) throw new Error(`the API document lacks ${missing.length} registered route(s): ${missing.join(', ')} (describe them in src/http/api/route-table.ts)`);
}

/** The package's version, from the package.json three levels up (`src/http/routes`) or four (`dist/src/http/routes`). */
function packageVersion(): string {
  for (const candidate of ['../../../package.json', '../../../../package.json']) {
    try {
      const parsed: unknown = JSON.parse(readFileSync(new URL(candidate, import.meta.url), 'utf8'));
      const name: unknown = typeof parsed === 'object' && parsed !== null ? Reflect.get(parsed, 'name') : undefined;
      const version: unknown = typeof parsed === 'object' && parsed !== null ? Reflect.get(parsed, 'version') : undefined;
      if (name === 'event-broker' && typeof version === 'string') return version;
    } catch {
      // not there: try the next
    }
  }
  return 'unknown';
}
