import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { problemTypes } from '../../errors/catalog.js';
import { buildOpenApiDocument } from '../api/openapi.js';
import { REFERENCE_BUNDLE, REFERENCE_PAGE, type ApiDocsDeps, type DocsAsset } from './operations.js';

/** `dist/docs-assets`, beside `dist/src` (this module is `dist/src/http/routes/api-docs.js`); scripts/build.mjs copies the reference bundle there. */
export const DEFAULT_DOCS_DIR = fileURLToPath(new URL('../../../docs-assets', import.meta.url));

/** The reference page script's license, served beside it. */
export const REFERENCE_LICENSE = 'redoc.LICENSE.txt';

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

/**
 * What the API description routes (`API_DOCS_ROUTES`: the OpenAPI document derived from every
 * route declaration, its reference page and the problem catalog) serve, prepared once. The route table
 * registers them (src/http/api/route-table.ts, `registerRoutes`), last, and then refuses to start the node
 * when a registered route is missing from the table, so the document describes every route the node serves.
 * @param version the API version the document shows (the package's)
 */
export function apiDocsDeps(version: string = packageVersion(), assets: ReadonlyMap<string, DocsAsset> = loadDocsAssets()): ApiDocsDeps {
  const document = JSON.stringify(buildOpenApiDocument(version));
  const types = problemTypes();
  return {
    document,
    documentTag: etagOf(document),
    pageTag: etagOf(REFERENCE_PAGE),
    assets,
    problemTypes: types,
    problemsByType: new Map(types.map((t) => [t.type.slice('/problems/'.length), t])),
  };
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
