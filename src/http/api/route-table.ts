/**
 * Every route the node serves, in one table: each API area's declarations (src/http/routes/*.ts: method,
 * path, parameters, body, answers and handler together; docs/http-api.md) with what its handlers need,
 * taken from the one {@link RouteDependencies} object the areas compose (src/areas/). The node registers
 * its routes from here ({@link registerRoutes}), the OpenAPI document (`GET /openapi.json`) and the
 * endpoint map of docs/http-api.md are derived from {@link ROUTES}, and the integration tests validate
 * every JSON answer against it.
 */
import type { AccessControl } from '../../services/access-control.js';
import type { AuditLog } from '../../services/audit-log.js';
import type { CursorService } from '../../services/cursor-service.js';
import type { DeletedEvents } from '../../services/deleted-events.js';
import type { EventTypeRegistry } from '../../services/event-types/event-type-registry.js';
import type { Repartitioning } from '../../services/event-types/repartitioning.js';
import type { Timelines } from '../../services/event-types/timelines.js';
import type { KpiCollector } from '../../services/kpi.js';
import type { Publisher } from '../../services/publishing/publisher.js';
import type { PublishQuotas } from '../../services/publish-quotas.js';
import type { Settings } from '../../services/settings.js';
import type { StorageHeadroomView } from '../../services/storage-headroom.js';
import type { SubscriptionRegistry } from '../../services/subscription-registry.js';
import type { LowLevelStreams } from '../../services/consumption/stream/low-level-streams.js';
import type { SubscriptionCursors } from '../../services/consumption/subscription-cursors.js';
import type { SubscriptionStreams } from '../../services/consumption/subscription-streams.js';
import type { PublishMeter } from '../../observability/meters.js';
import type { Tracing } from '../../observability/traces.js';
import type { HttpServer } from '../server.js';
import { routeKey, type Route, type RouteSpec } from './route-model.js';
import { EVENT_TYPE_ROUTES, type EventTypeDeps, type EventTypeSubscriptions } from '../routes/event-types.js';
import { PUBLISHING_ROUTES } from '../routes/publishing.js';
import { PARTITION_ROUTES } from '../routes/partitions.js';
import { CURSOR_ROUTES } from '../routes/cursors.js';
import { DELETED_EVENTS_ROUTES } from '../routes/deleted-events.js';
import { PARTITION_COUNT_ROUTES } from '../routes/partition-count.js';
import { TIMELINE_ROUTES } from '../routes/timelines.js';
import { LOW_LEVEL_STREAM_ROUTES } from '../routes/low-level-streams.js';
import { SUBSCRIPTION_ROUTES, type SubscriptionStatus } from '../routes/subscriptions.js';
import { SUBSCRIPTION_STREAM_ROUTES } from '../routes/subscription-streams.js';
import { SETTINGS_ROUTES } from '../routes/settings.js';
import { STORAGE_ROUTES, type StorageDeps } from '../routes/storages.js';
import { AVRO_SCHEMA_ROUTES } from '../routes/avro-schemas.js';
import { API_DOCS_ROUTES, OPERATION_ROUTES, type ApiDocsDeps, type MetricsScrape } from '../routes/operations.js';
import { CONSOLE_ROUTES, type ConsoleAsset, type ConsoleLookups } from '../routes/console.js';

/**
 * What the routes use, in one object: the services each area composes (src/areas/) under the names
 * below. Each row of {@link ROUTE_TABLE} picks its handlers' dependencies from it.
 */
export interface RouteDependencies {
  // Shared by the areas.
  readonly access: AccessControl;
  readonly audit: AuditLog;
  /** Traces (docs/tracing.md); absent with `tracing.enabled` false. */
  readonly tracing?: Tracing;
  // Registry: event types, their partition count, timelines and storages; subscriptions.
  readonly eventTypes: EventTypeRegistry;
  /** The subscriptions of an event type, for its deletion. */
  readonly eventTypeSubscriptions: EventTypeSubscriptions;
  /** The capacity warning of an event type change (docs/operations.md "Memory and retention"). */
  readonly capacity?: EventTypeDeps['capacity'];
  readonly repartitioning: Repartitioning;
  readonly timelines: Timelines;
  readonly storages: StorageDeps['store'];
  /** The event types with a timeline on a storage. */
  readonly storageUsers: (id: string) => Promise<string[]>;
  readonly subscriptions: SubscriptionRegistry;
  // Publishing: the publish path, partitions and cursors, quotas.
  readonly publisher: Publisher;
  readonly cursors: CursorService;
  readonly publishMeter?: PublishMeter;
  readonly kpi?: KpiCollector;
  readonly quotas?: PublishQuotas;
  // Consumption: streams and their cursors.
  readonly lowLevelStreams: LowLevelStreams;
  readonly subscriptionStreams: SubscriptionStreams;
  readonly subscriptionCursors: SubscriptionCursors;
  /** Closes a subscription's streams when its readers changed. */
  readonly onReadersChanged: (id: string) => Promise<void>;
  readonly subscriptionStatus?: SubscriptionStatus;
  // Operations: settings, deleted events, health and metrics, the console, the API description.
  readonly settings: Settings;
  readonly deletedEvents: DeletedEvents;
  readonly metricsScrape: MetricsScrape;
  readonly consoleAssets: ReadonlyMap<string, ConsoleAsset>;
  readonly consoleLookups: ConsoleLookups;
  readonly headroomView?: () => StorageHeadroomView;
  readonly apiDocs: ApiDocsDeps;
}

/** One row of the table: an area's routes and how their dependencies are taken from {@link RouteDependencies}. */
export interface RouteTableRow {
  readonly routes: readonly RouteSpec[];
  /** Registers the row's routes on `http` with their dependencies. */
  register(http: HttpServer, deps: RouteDependencies): void;
}

function row<D>(routes: readonly Route<D>[], depsOf: (deps: RouteDependencies, http: HttpServer) => D): RouteTableRow {
  return { routes, register: (http, deps) => http.register(routes, depsOf(deps, http)) };
}

/** Undefined-valued keys left out, so an optional dependency stays absent rather than `undefined`. */
function defined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}

/** Every route the node serves, by API area, in the order the document lists them. */
export const ROUTE_TABLE: readonly RouteTableRow[] = [
  row(EVENT_TYPE_ROUTES, (d) => defined({ registry: d.eventTypes, access: d.access, subscriptions: d.eventTypeSubscriptions, audit: d.audit, capacity: d.capacity })),
  row(PUBLISHING_ROUTES, (d) => ({ publisher: d.publisher, access: d.access, metrics: d.publishMeter, kpi: d.kpi, quotas: d.quotas, tracing: d.tracing })),
  row(PARTITION_ROUTES, (d) => ({ cursors: d.cursors, registry: d.eventTypes, access: d.access })),
  row(CURSOR_ROUTES, (d) => ({ cursors: d.cursors, registry: d.eventTypes, access: d.access })),
  row(DELETED_EVENTS_ROUTES, (d) => ({ deletedEvents: d.deletedEvents, access: d.access })),
  row(PARTITION_COUNT_ROUTES, (d) => ({ repartitioning: d.repartitioning, access: d.access, audit: d.audit })),
  row(TIMELINE_ROUTES, (d) => ({ timelines: d.timelines, access: d.access, audit: d.audit })),
  row(LOW_LEVEL_STREAM_ROUTES, (d) => d.lowLevelStreams),
  row(SUBSCRIPTION_ROUTES, (d) => ({ registry: d.subscriptions, access: d.access, onReadersChanged: d.onReadersChanged, audit: d.audit, status: d.subscriptionStatus })),
  row(SUBSCRIPTION_STREAM_ROUTES, (d, http) => defined({ streams: d.subscriptionStreams, cursors: d.subscriptionCursors, access: d.access, controlLimiter: http.controlLimiter, tracing: d.tracing })),
  row(SETTINGS_ROUTES, (d) => ({ settings: d.settings, access: d.access, audit: d.audit })),
  row(STORAGE_ROUTES, (d) => ({ store: d.storages, access: d.access, usersOf: d.storageUsers, audit: d.audit })),
  row(AVRO_SCHEMA_ROUTES, () => undefined),
  row(OPERATION_ROUTES, (d) => d.metricsScrape),
  row(API_DOCS_ROUTES, (d) => d.apiDocs),
  row(CONSOLE_ROUTES, (d) => defined({ assets: d.consoleAssets, access: d.access, lookups: d.consoleLookups, headroom: d.headroomView })),
];

/** Every route the node serves, in the order the document lists them. */
export const ROUTES: readonly RouteSpec[] = ROUTE_TABLE.flatMap((r) => r.routes);

/**
 * Registers every route of {@link ROUTE_TABLE} with its dependencies, in the table's order, then checks
 * that the table describes every route the server registered ({@link missingRoutes}).
 * @throws Error naming the registered routes the table lacks (the node does not start)
 */
export function registerRoutes(http: HttpServer, deps: RouteDependencies): void {
  for (const r of ROUTE_TABLE) r.register(http, deps);
  assertEveryRouteDescribed(http);
}

/**
 * Checks that the table describes every route `http` registered, so the document describes every route the node serves.
 * @throws Error naming the registered routes the table lacks
 */
export function assertEveryRouteDescribed(http: Pick<HttpServer, 'registeredRoutes'>): void {
  const missing = missingRoutes(http.registeredRoutes());
  if (missing.length > 0) throw new Error(`the API document lacks ${missing.length} registered route(s): ${missing.join(', ')} (list their declarations in src/http/api/route-table.ts)`);
}

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
