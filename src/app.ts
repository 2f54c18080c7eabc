import type { BrokerConfig } from './config/config-schema.js';
import { HttpServer } from './http/server.js';
import { eventTypeRoutes } from './http/routes/event-types.js';
import { partitionCountRoutes } from './http/routes/partition-count.js';
import { Repartitioning } from './services/repartitioning.js';
import { publishingRoutes } from './http/routes/publishing.js';
import { subscriptionRoutes } from './http/routes/subscriptions.js';
import { lowLevelStreamRoutes } from './http/routes/low-level-streams.js';
import { LowLevelStreams } from './services/consumption/low-level-streams.js';
import { PartitionWakeups } from './storage/partition-wakeups.js';
import { SubscriptionNotices } from './services/consumption/subscription-notices.js';
import { subscriptionStreamRoutes } from './http/routes/subscription-streams.js';
import { SubscriptionCursors } from './services/consumption/subscription-cursors.js';
import { SubscriptionStreams } from './services/consumption/subscription-streams.js';
import { QueueStateStore } from './storage/queue-state-store.js';
import { SubscriptionStateStore } from './storage/subscription-state-store.js';
import type { Logger } from './observability/logger.js';
import { CursorService } from './services/cursor-service.js';
import { AccessControl } from './services/access-control.js';
import { Settings } from './services/settings.js';
import { AuditLog } from './services/audit-log.js';
import { DeadLetterQueue } from './services/dead-letter-queue.js';
import { KpiCollector } from './services/kpi.js';
import type { StreamedListener } from './services/consumption/event-stream.js';
import { SettingsStore } from './storage/settings-store.js';
import { settingsRoutes } from './http/routes/settings.js';
import { PublishQuotas } from './services/publish-quotas.js';
import { QuotaStore } from './storage/quota-store.js';
import { avroSchemaRoutes } from './http/routes/avro-schemas.js';
import { storageRoutes } from './http/routes/storages.js';
import { StorageStore } from './storage/storage-store.js';
import { createAuthenticator } from './auth/create-authenticator.js';
import { DefaultAuthorizationPlugin, type AuthorizationPlugin } from './auth/authorization-plugin.js';
import { UNAUTHENTICATED } from './auth/subject.js';
import { EventTypeCache } from './services/event-type-cache.js';
import { EventTypeRegistry } from './services/event-type-registry.js';
import { Publisher } from './services/publisher.js';
import { RetentionTrimmer } from './services/retention.js';
import { Compactor } from './services/compaction.js';
import { DeletedEvents } from './services/deleted-events.js';
import { CompactionStore } from './storage/compaction-store.js';
import { deletedEventsRoutes } from './http/routes/deleted-events.js';
import { SubscriptionRegistry } from './services/subscription-registry.js';
import { WorkerPool } from './services/worker-pool.js';
import { EventFilters } from './services/event-filters.js';
import { startEmbeddedRedis, type EmbeddedRedis } from './storage/embedded-redis.js';
import { EventTypeStore } from './storage/event-type-store.js';
import { createKeys } from './storage/keys.js';
import { PartitionStore } from './storage/partition-store.js';
import { PartitionLogs } from './storage/partition-logs.js';
import { StoragePool } from './storage/storage-pool.js';
import { NODE_STORAGE_ID } from './domain/storage.js';
import type { StoredTimeline } from './domain/timeline.js';
import { Timelines } from './services/timelines.js';
import { timelineRoutes } from './http/routes/timelines.js';
import { openReplicatedAppender } from './storage/replicated-append.js';
import { WatermarkRepair } from './storage/watermark-repair.js';
import { connectCluster, connectRedis, duplicateForShardedSubscribe, duplicateForSubscribe, type RedisClient } from './storage/redis-connection.js';
import { Scripts } from './storage/scripts.js';
import { assertRedisRequirements } from './storage/redis-checks.js';
import { RedisMemoryWatch } from './storage/redis-memory.js';
import { StorageUsage } from './services/storage-usage.js';
import { StorageHeadroom } from './services/storage-headroom.js';
import { consoleRoutes, loadConsoleAssets } from './http/routes/console.js';
import { apiDocsRoutes } from './http/routes/api-docs.js';
import { operationRoutes } from './http/routes/operations.js';
import { SubscriptionStore } from './storage/subscription-store.js';
import { BrokerMetrics } from './observability/metrics.js';
import { ConsumerLagReader } from './services/consumption/consumer-lag.js';
import { createTracing } from './observability/tracing.js';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';

/** A composed broker node. */
export interface App {
  /** Opens the HTTP port. @returns the bound port */
  start(): Promise<number>;
  /** Graceful stop: refuse new requests, finish in-flight ones (bounded by `http.shutdownGraceMs`), close pools and connections. */
  close(): Promise<void>;
}

/** Replaceable parts of a node. */
export interface AppOptions {
  /** How authorization attributes are validated and matched (default {@link DefaultAuthorizationPlugin} over `auth.attributeClaims`). */
  readonly authorizationPlugin?: AuthorizationPlugin;
  /**
   * With `tracing.enabled`: where finished spans go instead of the OTLP exporter of `tracing.otlpEndpoint`
   * (tests give a `SimpleSpanProcessor` over OpenTelemetry's `InMemorySpanExporter`). Ignored with tracing off.
   */
  readonly spanProcessor?: SpanProcessor;
}

/**
 * Composition root, the one place where the parts are wired together: Redis (a cluster when `redis.clusterNodes` is set, else `redis.url`,
 * else the embedded one), scripts, stores, services and HTTP routes, all wired before the port opens.
 * @throws Error (EmbeddedRedisError, connection errors, unusable auth keys) when the node cannot start
 */
export async function createApp(config: BrokerConfig, logger: Logger, options: AppOptions = {}): Promise<App> {
  let embedded: EmbeddedRedis | undefined;
  const cluster = config.redis.clusterNodes.length > 0;
  const url = cluster ? '' : config.redis.url || (embedded = await startEmbeddedRedis(config.embeddedRedis, logger, config.port)).url;
  const redis: RedisClient = cluster ? await connectCluster(config.redis.clusterNodes, config.redis, logger) : await connectRedis(url, config.redis, logger);
  // Version and eviction policy, before anything else starts; a refused Redis leaves nothing running.
  await assertRedisRequirements(redis, logger).catch(async (err: unknown) => {
    redis.disconnect();
    await embedded?.stop();
    throw err;
  });
  // Redis memory as a budget (docs/operations.md "Memory and retention"): every master's used_memory and limit, read
  // before the node serves (a master without maxmemory is warned about now) and then every redisMemory.checkIntervalMs.
  const memory = new RedisMemoryWatch(redis, NODE_STORAGE_ID, config.redisMemory, logger);
  await memory.start();
  const subscriber = duplicateForSubscribe(redis, logger);
  const keys = createKeys(config.redis.keyPrefix);
  const scripts = new Scripts(redis);
  const eventTypeStore = new EventTypeStore(redis, scripts, keys);
  const cache = new EventTypeCache(eventTypeStore, redis, subscriber, keys, logger, { maxEntries: config.caches.eventTypeEntries, ttlMs: config.caches.eventTypeTtlMs });
  await cache.start();
  const initialAdmins = config.auth.initialAdmins.length > 0 ? config.auth.initialAdmins : [...UNAUTHENTICATED.attributes].map(([dataType, [value = '']]) => ({ data_type: dataType, value }));
  const settings = new Settings(new SettingsStore(redis, keys), keys, { admins: initialAdmins, readers: initialAdmins, writers: initialAdmins }, logger);
  await settings.start(subscriber);
  const access = new AccessControl(options.authorizationPlugin ?? new DefaultAuthorizationPlugin(Object.keys(config.auth.attributeClaims)), settings);
  const authenticator = createAuthenticator({ ...config.auth, tokenCacheEntries: config.caches.tokenEntries }, { useRemoteTokeninfo: () => settings.enabled('remote_tokeninfo') });
  const pool = new WorkerPool(config.publish, { maxEntries: config.caches.workerValidatorEntries, maxBytes: config.caches.workerValidatorBytes });
  // Traces (docs/tracing.md): nothing of OpenTelemetry exists with `tracing.enabled` false.
  const tracing = createTracing(config.tracing, { logger, ...(options.spanProcessor ? { spanProcessor: options.spanProcessor } : {}) });
  // This node's metrics, in a registry of its own (docs/metrics.md): served at GET /metrics; with tracing, in OpenMetrics with exemplars when asked.
  const metrics = new BrokerMetrics({ exemplars: tracing !== undefined });
  metrics.observeWorkerPool(() => pool.load);
  // Consumer filters (docs/consuming.md "Filters"): checked and tested in the worker threads.
  const eventFilters = new EventFilters(pool, config.eventTypes);
  // Storages and timelines (docs/operations.md "Storages and timelines"): the node's own storage is registered (and the default) from the
  // first start on; a timeline's partitions live in its storage, opened on first use.
  const storages = new StorageStore(redis, scripts, keys);
  await storages.ensureNodeStorage(config.redis.keyPrefix);
  const wakeups = new PartitionWakeups(duplicateForShardedSubscribe(redis, logger), logger);
  // `publish.minReplicas`: appends to the node's deployment (any key namespace) wait for its replicas
  // (on a cluster, the replicas of each master written to).
  const replicated = config.publish.minReplicas > 0 ? await openReplicatedAppender(redis, keys, config.publish.minReplicas, config.publish.replicaTimeoutMs, config.consumption.waitForReplicas) : undefined;
  // `consumption.waitForReplicas`: reads then stop at each partition's high watermark (docs/operations.md "Durability").
  const watermarks = replicated && config.consumption.waitForReplicas ? new WatermarkRepair(replicated, redis, keys, logger, config.publish.replicaTimeoutMs) : undefined;
  const partitionStore = new PartitionStore(redis, scripts, keys, watermarks);
  const storagePool = new StoragePool({
    node: { id: NODE_STORAGE_ID, redis, scripts, keys, partitions: partitionStore, wakeups, memory, ...(replicated ? { replicated } : {}) },
    records: storages,
    redis: config.redis,
    logger,
    publish: config.publish,
    memory: config.redisMemory,
    waitForReplicas: config.consumption.waitForReplicas,
  });
  const logs = new PartitionLogs(storagePool);
  const publisher = new Publisher({
    cache,
    pool,
    logs,
    redis,
    config: config.publish,
    redisTimeoutMs: config.redis.commandTimeoutMs,
    compileTimeoutMs: config.eventTypes.schemaCompileTimeoutMs,
    mainThreadValidators: { maxEntries: config.caches.mainThreadValidatorEntries, maxBytes: config.caches.mainThreadValidatorBytes },
    logger,
    storageFullMeter: metrics,
  });
  // What each event type holds in Redis, measured in bounded rounds; the headroom the metrics, the storage
  // readiness, the console and the capacity warning of event type changes show (docs/operations.md "Memory and retention").
  const storageUsage = new StorageUsage({ eventTypes: eventTypeStore, logs, config: config.redisMemory, jsonBytesPerEvent: (name) => metrics.publishedBytesPerEvent(name), logger });
  const headroom = new StorageHeadroom(() => storagePool.opened(), storageUsage, eventTypeStore, logs);
  metrics.observeStorage(() => headroom.snapshot());
  const registry = new EventTypeRegistry({
    store: eventTypeStore,
    cache,
    pool,
    config: config.eventTypes,
    logs,
    defaultStorage: async () => (await storages.list()).defaultId,
    prepare: (name) => publisher.prepare(name, true),
  });
  // No cold path (docs/decisions/0019-validators-prepared-before-the-first-batch.md): a node that learns of a created or changed event type by its change
  // notice compiles its validator in the workers then, not on its first batch.
  cache.onChange((name) => {
    if (name !== undefined) void publisher.prepare(name);
  });
  // Nothing outlives what it describes, so memory stays bounded: a deleted event type's series go, and validators of
  // schemas no event type uses any more are dropped on the main thread and in every worker thread.
  cache.onDeleted((name) => {
    metrics.forgetEventType(name);
    storageUsage.forget(name);
  });
  cache.onSchemaRetired((schemaKey) => void publisher.retire(schemaKey));
  metrics.observeCaches(() => {
    const eventTypes = cache.sizes;
    const main = publisher.cacheSizes;
    return {
      event_types: eventTypes.entries,
      event_type_generations: eventTypes.generations,
      retired_schema_keys: eventTypes.retired,
      main_thread_validators: main.validators,
      worker_validators: pool.validatorCount,
    };
  });
  const cursors = new CursorService(eventTypeStore, logs);
  const lowLevelStreams = new LowLevelStreams(access, settings, (listener) => cache.onChange(listener), eventTypeStore, logs, cache, config.consumption, logger, metrics.stream('low_level'), eventFilters);
  const subscriptionStore = new SubscriptionStore(redis, scripts, keys);
  const subscriptionState = new SubscriptionStateStore(redis, scripts, keys);
  const queueState = new QueueStateStore(redis, scripts, keys);
  const subscriptionRegistry = new SubscriptionRegistry(subscriptionStore, eventTypeStore, logs, config.subscriptions, eventFilters);
  // The dead-letter queue of subscriptions (docs/consuming.md "Dead letters"): its event type exists on every installation.
  const deadLetters = new DeadLetterQueue(publisher, settings, config.publish.maxEventBytes);
  const subscriptionStreams = new SubscriptionStreams({
    access,
    settings,
    eventTypeChanges: (listener) => cache.onChange(listener),
    subscriptions: subscriptionRegistry,
    eventTypes: cache,
    state: subscriptionState,
    logs,
    timelineSource: cache,
    config,
    logger,
    metrics,
    deadLetters,
    filters: eventFilters,
    queue: queueState,
  });
  // Subscription notices: a sharded channel per subscription, subscribed only while this node streams
  // it, so a node hears only about the subscriptions it serves; its own connection, like the partition wake-ups'.
  const subscriptionNotices = new SubscriptionNotices(duplicateForShardedSubscribe(redis, logger, 'broker-subscription-notices'), keys, logger, config.redis.commandTimeoutMs);
  subscriptionStreams.start(subscriptionNotices);
  const subscriptionCursors = new SubscriptionCursors(subscriptionStreams, subscriptionState, logs, metrics, queueState);
  const lag = new ConsumerLagReader(redis, keys, subscriptionStore, cache, logs, subscriptionState, queueState);
  metrics.observeLag(() => lag.read(), logger);
  const timelines = new Timelines(eventTypeStore, cache, logs, storages, logger);
  const retention = new RetentionTrimmer(redis, eventTypeStore, partitionStore, config.retention.checkIntervalMs, logger, logs, timelines);
  // Log compaction and deleted-events (docs/concepts.md "Retention and compaction"): one node per event type compacts (a lock in Redis), on
  // the storage of the event type's active timeline.
  const compactionStore = new CompactionStore(redis, scripts, keys);
  const compactionStoreOf = async (t: StoredTimeline): Promise<CompactionStore> => {
    const handle = await logs.storageOf(t);
    return handle === storagePool.node ? compactionStore : new CompactionStore(handle.redis, handle.scripts, handle.keys);
  };
  const compactor = new Compactor(redis, eventTypeStore, compactionStore, config.compaction, logger, compactionStoreOf);

  // The service's own event types exist on every installation (docs/operations.md "The broker's own event types"):
  // the audit log, the KPIs (events flow only while `kpi_collection` is on) and the dead-letter queue, created together.
  const audit = new AuditLog(publisher, settings, logger);
  const kpi = new KpiCollector(publisher, settings, logger);
  await Promise.all([audit.ensureEventType(registry), kpi.ensureEventTypes(registry), deadLetters.ensureEventType(registry)]);
  audit.onChange((entry) => kpi.changed(entry));
  // A deleted subscription's series go with it.
  audit.onChange((entry) => {
    if (entry.resource === 'subscription' && entry.op === 'D') metrics.forgetSubscription(entry.resourceId);
  });
  const streamed: StreamedListener = ({ subject, subscription, streamed: tallies }) => {
    if (!kpi.enabled) return;
    kpi.dataStreamed([...tallies].map(([eventType, t]) => ({ eventType, app: subject.id, ...(subscription === undefined ? {} : { subscription }), events: t.events, bytes: t.bytes, batches: t.batches })));
  };
  lowLevelStreams.onStreamEnd(streamed);
  subscriptionStreams.onStreamEnd(streamed);

  // Publish admission's second bound (docs/decisions/0028-publish-admission-by-queue-delay.md): the delay of the worker threads' queue.
  const publishQueueDelay = config.http.publishMaxQueueDelayMs > 0 ? { maxMs: config.http.publishMaxQueueDelayMs, exemptBytes: config.publish.inlineMaxBytes, minInFlight: config.http.publishQueueDelayMinInFlight, read: () => pool.queueDelayMs } : undefined;
  const http = new HttpServer({ ...config.http, ...(publishQueueDelay ? { publishQueueDelay } : {}) }, authenticator, logger, metrics);
  metrics.observePublishAdmission(() => ({ bytes: http.publishAdmission.bytesInFlight, requests: http.publishAdmission.inFlight }));
  http.onAnswered((entry) => kpi.accessed(entry));
  // /health, public; /metrics (Prometheus text format), authenticated like every route but /health (open in auth mode `off`).
  // /health/storage, public: whether this node's Redis masters have room for publishes (a readiness for balancers that route publishes).
  operationRoutes(http, metrics, () => headroom.readiness());
  eventTypeRoutes(http, registry, access, {
    of: async (name) => (await subscriptionRegistry.list({ eventTypes: [name] }, { offset: 0, limit: Number.MAX_SAFE_INTEGER })).map((s) => s.id),
    delete: (id) => subscriptionRegistry.delete(id),
  }, audit, (record) => headroom.capacityWarning(record));
  // Repartitioning (docs/operations.md "Repartitioning"): grows the partition count; nodes follow through the event type cache.
  const repartitioning = new Repartitioning(eventTypeStore, cache, subscriptionState, logs, (name) => subscriptionRegistry.list({ eventTypes: [name] }, { offset: 0, limit: Number.MAX_SAFE_INTEGER }), {
    maxPartitionCount: config.eventTypes.maxPartitionCount,
    maxSubscriptionPartitions: config.subscriptions.maxPartitions,
  });
  partitionCountRoutes(http, repartitioning, access, audit);
  // Publishing quotas counted for the cluster in Redis, failing open when it does not answer in time (docs/decisions/0034-cluster-wide-publishing-quotas.md).
  const quotas = new PublishQuotas((kind, name) => settings.quota(kind, name), new QuotaStore(scripts, keys), { timeoutMs: config.publish.quotaTimeoutMs, failOpenMs: config.publish.quotaFailOpenMs }, logger, metrics);
  settings.onChange(() => quotas.prune());
  publishingRoutes(http, publisher, cursors, registry, access, metrics, kpi, quotas, tracing);
  subscriptionRoutes(http, subscriptionRegistry, access, (id) => subscriptionStreams.disconnectAll(id), audit, (id) => subscriptionCursors.status(id));
  lowLevelStreamRoutes(http, lowLevelStreams);
  subscriptionStreamRoutes(http, subscriptionStreams, subscriptionCursors, access, tracing);
  settingsRoutes(http, settings, access, audit);
  avroSchemaRoutes(http);
  storageRoutes(http, storages, access, (id) => timelines.usersOf(id), audit);
  timelineRoutes(http, timelines, access, audit);
  deletedEventsRoutes(http, new DeletedEvents(cache, compactionStore, redis, compactionStoreOf), access);
  // The console (docs/console.md): its files from dist/ui, public; its API calls carry the user's token.
  consoleRoutes(http, loadConsoleAssets(), access, { eventType: (name) => registry.get(name), subscription: (id) => subscriptionRegistry.get(id) }, () => headroom.view());
  // The API document and reference page (docs/http-api.md "API description"), public; last: it checks every route above is described.
  apiDocsRoutes(http);

  let closing = false;
  /**
   * Event types created before this node started: no change notice makes it prepare their validators, so it
   * does so before it listens, for at most `eventTypes.prepareAtStartMs`; the rest go on in the background
   * (docs/decisions/0019-validators-prepared-before-the-first-batch.md). Settles when all are prepared;
   * never rejects.
   */
  const prepareExisting = (async (): Promise<void> => {
    const started = performance.now();
    try {
      const eventTypes = await eventTypeStore.list();
      const prepared = await publisher.prepareExisting(eventTypes, { maxEntries: config.caches.workerValidatorEntries, maxBytes: config.caches.workerValidatorBytes }, () => closing);
      logger.info({ prepared, eventTypes: eventTypes.length, ms: Math.round(performance.now() - started) }, 'validators of existing event types prepared');
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'could not list the event types to prepare their validators; their first batches compile them');
    }
  })();

  return {
    async start() {
      let timer: NodeJS.Timeout | undefined;
      const waited = await Promise.race([prepareExisting.then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), config.eventTypes.prepareAtStartMs)))]);
      clearTimeout(timer);
      if (!waited) logger.info({ waitedMs: config.eventTypes.prepareAtStartMs }, 'listening while the validators of existing event types are still being prepared');
      const port = await http.listen(config.port, config.host);
      retention.start();
      compactor.start();
      storageUsage.start();
      kpi.start();
      logger.info({ port, redis: embedded ? 'embedded' : cluster ? 'cluster' : 'external', workerThreads: pool.threads }, 'broker node listening');
      return port;
    },
    async close() {
      closing = true;
      const grace = new Promise<void>((resolve) => setTimeout(resolve, config.http.shutdownGraceMs).unref());
      // Subscription streams release their sessions at once; the HTTP server waits for live requests
      // (open streams end as it stops); the publisher also waits for batches whose client left.
      const releasing = subscriptionStreams.close();
      await Promise.race([Promise.all([http.shutdown(), publisher.drain(), releasing, prepareExisting]), grace]);
      await kpi.stop();
      await retention.stop();
      await compactor.stop();
      await storageUsage.stop();
      await memory.stop();
      settings.stop();
      cache.stop();
      watermarks?.close();
      replicated?.close();
      authenticator.close();
      await pool.close();
      subscriber.disconnect();
      await storagePool.close();
      wakeups.close();
      subscriptionNotices.close();
      await redis.quit().catch(() => redis.disconnect());
      await embedded?.stop();
      await tracing?.close();
    },
  };
}
