/**
 * Every route the node serves, with its parameters, body and answers as TypeBox schemas (issue 16 §1.3,
 * §2.1; spec "Endpoints"; WIRE.md). The OpenAPI document (`GET /openapi.json`) is generated from this
 * table, the node refuses to start when a registered route is missing from it
 * ({@link missingRoutes}), and the integration tests validate every JSON answer against it.
 */
import { routeKey, type RouteSpec } from './route-model.js';
import { EVENT_TYPE_ROUTES, PUBLISHING_ROUTES } from './event-type-routes.js';
import { SUBSCRIPTION_ROUTES } from './subscription-routes.js';
import { OPERATION_ROUTES, SETTINGS_ROUTES } from './operation-routes.js';

/** Every route the node serves. */
export const ROUTES: readonly RouteSpec[] = [...EVENT_TYPE_ROUTES, ...PUBLISHING_ROUTES, ...SUBSCRIPTION_ROUTES, ...SETTINGS_ROUTES, ...OPERATION_ROUTES];

/**
 * The routes a server registers that the table lacks, as `METHOD path` (issue 16 §2.1: the document
 * covers every route). Paths compare with their parameters blanked ({@link routeKey}).
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
