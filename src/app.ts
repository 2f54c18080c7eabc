/**
 * The composition root, read as a table of contents: what every area stands on (areas/foundation.ts), then
 * the four areas, each composing its own services — publishing (areas/publishing.ts), the registry of event
 * types and subscriptions (areas/registry.ts), consumption (areas/consumption.ts) and operations
 * (areas/operations.ts) — then the HTTP server with every route of the one route table
 * (http/api/route-table.ts), registered from one dependencies object. All of it is wired before the port opens.
 */
import type { BrokerConfig } from './config/config-schema.js';
import { registerRoutes, type RouteDependencies } from './http/api/route-table.js';
import { HttpServer } from './http/server.js';
import type { Logger } from './observability/logger.js';
import { composeConsumption, type Consumption } from './areas/consumption.js';
import { openFoundation, type AppOptions, type Foundation } from './areas/foundation.js';
import { composeOperations, type Operations } from './areas/operations.js';
import { composePublishing, type Publishing } from './areas/publishing.js';
import { composeRegistry, type Registry } from './areas/registry.js';

export type { AppOptions } from './areas/foundation.js';

/** A composed broker node. */
export interface App {
  /** Opens the HTTP port. @returns the bound port */
  start(): Promise<number>;
  /** Graceful stop: refuse new requests, finish in-flight ones (bounded by `http.shutdownGraceMs`), close pools and connections. */
  close(): Promise<void>;
}

/** Everything a node composed: the foundation, the four areas and the HTTP server. */
interface Node {
  readonly f: Foundation;
  readonly publishing: Publishing;
  readonly registry: Registry;
  readonly consumption: Consumption;
  readonly operations: Operations;
  readonly http: HttpServer;
}

/**
 * Composes a broker node: Redis (a cluster when `redis.clusterNodes` is set, else `redis.url`, else the
 * embedded one), scripts, stores, the areas' services and the HTTP routes.
 * @throws Error (EmbeddedRedisError, connection errors, unusable auth keys) when the node cannot start
 */
export async function createApp(config: BrokerConfig, logger: Logger, options: AppOptions = {}): Promise<App> {
  const f = await openFoundation(config, logger, options);
  const publishing = composePublishing(f);
  const registry = composeRegistry(f, publishing);
  const consumption = composeConsumption(f, publishing, registry);
  const operations = await composeOperations(f, publishing, registry, consumption);
  const http = createHttpServer(f, operations);
  registerRoutes(http, routeDependencies(f, publishing, registry, consumption, operations));
  const node: Node = { f, publishing, registry, consumption, operations, http };
  let closing = false;
  const prepared = prepareExisting(node, () => closing);
  return {
    start: () => startNode(node, prepared),
    close: () => {
      closing = true;
      return closeNode(node, prepared);
    },
  };
}

/** The HTTP server with both publish admission bounds; every answer is told to the KPIs. */
function createHttpServer(f: Foundation, operations: Operations): HttpServer {
  const { config, pool, metrics } = f;
  // Publish admission's second bound (docs/decisions/0028-publish-admission-by-queue-delay.md): the delay of the worker threads' queue.
  const publishQueueDelay = config.http.publishMaxQueueDelayMs > 0 ? { maxMs: config.http.publishMaxQueueDelayMs, exemptBytes: config.publish.inlineMaxBytes, minInFlight: config.http.publishQueueDelayMinInFlight, read: () => pool.queueDelayMs } : undefined;
  const http = new HttpServer({ ...config.http, ...(publishQueueDelay ? { publishQueueDelay } : {}) }, f.authenticator, f.logger, metrics);
  metrics.observePublishAdmission(() => ({ bytes: http.publishAdmission.bytesInFlight, requests: http.publishAdmission.inFlight }));
  http.onAnswered((entry) => operations.kpi.accessed(entry));
  return http;
}

/** The one object every route takes its dependencies from (src/http/api/route-table.ts). */
function routeDependencies(f: Foundation, publishing: Publishing, registry: Registry, consumption: Consumption, operations: Operations): RouteDependencies {
  const { subscriptions } = registry;
  const { subscriptionStreams, subscriptionCursors } = consumption;
  const ofEventType = (name: string) => subscriptions.list({ eventTypes: [name] }, { offset: 0, limit: Number.MAX_SAFE_INTEGER });
  return {
    ...operations.routes,
    access: f.access,
    audit: operations.audit,
    ...(f.tracing === undefined ? {} : { tracing: f.tracing }),
    eventTypes: registry.eventTypes,
    eventTypeSubscriptions: { of: async (name) => (await ofEventType(name)).map((s) => s.id), delete: (id) => subscriptions.delete(id) },
    repartitioning: registry.repartitioning,
    timelines: registry.timelines,
    storages: f.storages,
    storageUsers: (id) => registry.timelines.usersOf(id),
    subscriptions,
    publisher: publishing.publisher,
    cursors: publishing.cursors,
    publishMeter: f.metrics,
    kpi: operations.kpi,
    quotas: publishing.quotas,
    lowLevelStreams: consumption.lowLevelStreams,
    subscriptionStreams,
    subscriptionCursors,
    onReadersChanged: (id) => subscriptionStreams.disconnectAll(id),
    subscriptionStatus: (id) => subscriptionCursors.status(id),
    settings: f.settings,
    deletedEvents: operations.deletedEvents,
  };
}

/**
 * Event types created before this node started: no change notice makes it prepare their validators, so it
 * does so before it listens, for at most `eventTypes.prepareAtStartMs`; the rest go on in the background
 * (docs/decisions/0019-validators-prepared-before-the-first-batch.md). Settles when all are prepared;
 * never rejects.
 */
async function prepareExisting({ f, publishing }: Node, closing: () => boolean): Promise<void> {
  const started = performance.now();
  try {
    const eventTypes = await f.eventTypeStore.list();
    const prepared = await publishing.publisher.prepareExisting(eventTypes, { maxEntries: f.config.caches.workerValidatorEntries, maxBytes: f.config.caches.workerValidatorBytes }, closing);
    f.logger.info({ prepared, eventTypes: eventTypes.length, ms: Math.round(performance.now() - started) }, 'validators of existing event types prepared');
  } catch (err) {
    f.logger.warn({ err: (err as Error).message }, 'could not list the event types to prepare their validators; their first batches compile them');
  }
}

/** Waits for the validators of existing event types (bounded), opens the port, then starts the periodic jobs. */
async function startNode({ f, consumption, operations, http }: Node, prepared: Promise<void>): Promise<number> {
  const { config, logger } = f;
  let timer: NodeJS.Timeout | undefined;
  const waited = await Promise.race([prepared.then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), config.eventTypes.prepareAtStartMs)))]);
  clearTimeout(timer);
  if (!waited) logger.info({ waitedMs: config.eventTypes.prepareAtStartMs }, 'listening while the validators of existing event types are still being prepared');
  const port = await http.listen(config.port, config.host);
  operations.retention.start();
  operations.compactor.start();
  operations.storageUsage.start();
  operations.kpi.start();
  consumption.consumerStatus.start();
  logger.info({ port, redis: f.embedded ? 'embedded' : f.cluster ? 'cluster' : 'external', workerThreads: f.pool.threads }, 'broker node listening');
  return port;
}

/**
 * Subscription streams release their sessions at once; the HTTP server waits for live requests (open
 * streams end as it stops); the publisher also waits for batches whose client left — all within
 * `http.shutdownGraceMs`. Then the periodic jobs stop and every pool and connection closes.
 */
async function closeNode({ f, publishing, consumption, operations, http }: Node, prepared: Promise<void>): Promise<void> {
  const grace = new Promise<void>((resolve) => setTimeout(resolve, f.config.http.shutdownGraceMs).unref());
  const releasing = consumption.subscriptionStreams.close();
  await Promise.race([Promise.all([http.shutdown(), publishing.publisher.drain(), releasing, prepared]), grace]);
  await operations.kpi.stop();
  await consumption.consumerStatus.stop();
  await operations.retention.stop();
  await operations.compactor.stop();
  await operations.storageUsage.stop();
  await f.memory.stop();
  f.settings.stop();
  f.cache.stop();
  f.watermarks?.close();
  f.replicated?.close();
  f.authenticator.close();
  await f.pool.close();
  f.subscriber.disconnect();
  await f.storagePool.close();
  f.wakeups.close();
  consumption.subscriptionNotices.close();
  await f.redis.quit().catch(() => f.redis.disconnect());
  await f.embedded?.stop();
  await f.tracing?.close();
}
