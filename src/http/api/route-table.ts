/**
 * Every route the node serves, from the declarations of each API area (src/http/routes/*.ts: method,
 * path, parameters, body, answers and handler together; docs/http-api.md). The OpenAPI document
 * (`GET /openapi.json`) is derived from this list, the node refuses to start when it registers a route
 * missing from it ({@link missingRoutes}), and the integration tests validate every JSON answer against it.
 */
import { routeKey, type RouteSpec } from './route-model.js';
import { EVENT_TYPE_ROUTES } from '../routes/event-types.js';
import { PUBLISHING_ROUTES } from '../routes/publishing.js';
import { DELETED_EVENTS_ROUTES } from '../routes/deleted-events.js';
import { PARTITION_COUNT_ROUTES } from '../routes/partition-count.js';
import { TIMELINE_ROUTES } from '../routes/timelines.js';
import { LOW_LEVEL_STREAM_ROUTES } from '../routes/low-level-streams.js';
import { SUBSCRIPTION_ROUTES } from '../routes/subscriptions.js';
import { SUBSCRIPTION_STREAM_ROUTES } from '../routes/subscription-streams.js';
import { SETTINGS_ROUTES } from '../routes/settings.js';
import { STORAGE_ROUTES } from '../routes/storages.js';
import { AVRO_SCHEMA_ROUTES } from '../routes/avro-schemas.js';
import { API_DOCS_ROUTES, OPERATION_ROUTES } from '../routes/operations.js';
import { CONSOLE_ROUTES } from '../routes/console.js';

/** Every route the node serves, in the order the document lists them. */
export const ROUTES: readonly RouteSpec[] = [
  ...EVENT_TYPE_ROUTES,
  ...PUBLISHING_ROUTES,
  ...DELETED_EVENTS_ROUTES,
  ...PARTITION_COUNT_ROUTES,
  ...TIMELINE_ROUTES,
  ...LOW_LEVEL_STREAM_ROUTES,
  ...SUBSCRIPTION_ROUTES,
  ...SUBSCRIPTION_STREAM_ROUTES,
  ...SETTINGS_ROUTES,
  ...STORAGE_ROUTES,
  ...AVRO_SCHEMA_ROUTES,
  ...OPERATION_ROUTES,
  ...API_DOCS_ROUTES,
  ...CONSOLE_ROUTES,
];

/**
 * The routes a server registers that the table lacks, as `METHOD path` (the document must cover every
 * route). Paths compare with their parameters blanked ({@link routeKey}).
 */
export function missingRoutes(registered: readonly { readonly method: string; readonly path: string }[], table: readonly RouteSpec[] = ROUTES): string[] {
  const described = new Set(table.map((r) => routeKey(r.method, r.path)));
  return registered.filter((r) => !described.has(routeKey(r.method, r.path))).map((r) => `${r.method} ${r.path}`);
}

/**
 * The table's route for a request, or undefined: literal segments beat parameters (so
 * `/ui/api/access` is not the asset route `/ui/{asset}`), and a {@link RouteSpec.restOfPath} route's last
 * parameter takes the rest of the path.
 */
export function findRoute(method: string, path: string, table: readonly RouteSpec[] = ROUTES): RouteSpec | undefined {
  const segments = path.replace(/\?.*$/, '').replace(/\/$/, '').split('/');
  let best: { spec: RouteSpec; score: number } | undefined;
  for (const spec of table) {
    if (spec.method !== method.toUpperCase()) continue;
    const pattern = spec.path.split('/');
    const rest = spec.restOfPath === true;
    if (rest ? segments.length < pattern.length : segments.length !== pattern.length) continue;
    let score = 0;
    let ok = true;
    for (let i = 0; i < pattern.length && ok; i++) {
      const p = pattern[i] ?? '';
      if (p.startsWith('{')) continue;
      if (p === segments[i]) score++;
      else ok = false;
    }
    if (ok && (best === undefined || score > best.score)) best = { spec, score };
  }
  return best?.spec;
}
