/**
 * What every area of a node stands on (docs/architecture.md "A node"): Redis (a cluster when
 * `redis.clusterNodes` is set, else `redis.url`, else the embedded one) checked and watched, the script
 * loader, the event type store and cache, settings and access control, the authenticator, the worker
 * pool, tracing and metrics, the storages and the partition logs over them.
 */
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { DefaultAuthorizationPlugin, type AuthorizationPlugin } from '../auth/authorization-plugin.js';
import type { Authenticator } from '../auth/authenticator.js';
import { createAuthenticator } from '../auth/create-authenticator.js';
import { UNAUTHENTICATED } from '../auth/subject.js';
import type { BrokerConfig } from '../config/config-schema.js';
import { NODE_STORAGE_ID } from '../domain/storages/storage.js';
import type { Logger } from '../observability/logger.js';
import { BrokerMetrics } from '../observability/metrics.js';
import type { Tracing } from '../observability/traces.js';
import { createTracing } from '../observability/tracing.js';
import { AccessControl } from '../services/access-control.js';
import { EventFilters } from '../services/event-filters.js';
import { EventTypeCache } from '../services/event-types/event-type-cache.js';
import { Settings } from '../services/settings.js';
import { WorkerPool } from '../services/worker-pool.js';
import { EventTypeStore } from '../storage/event-type-store.js';
import { createKeys, type Keys } from '../storage/keys.js';
import { PartitionLogs } from '../storage/partition-logs.js';
import { PartitionStore } from '../storage/partition-store.js';
import { PartitionWakeups } from '../storage/partition-wakeups.js';
import { startEmbeddedRedis, type EmbeddedRedis } from '../storage/redis/embedded-redis.js';
import { assertRedisRequirements } from '../storage/redis/redis-checks.js';
import { connectCluster, connectRedis, duplicateForShardedSubscribe, duplicateForSubscribe, type RedisClient } from '../storage/redis/redis-connection.js';
import { RedisMemoryWatch } from '../storage/redis/redis-memory.js';
import { openReplicatedAppender } from '../storage/replicated-append.js';
import type { ReplicatedAppend } from '../storage/replica-lanes.js';
import { Scripts } from '../storage/scripts.js';
import { SettingsStore } from '../storage/settings-store.js';
import { StoragePool } from '../storage/storage-pool.js';
import { StorageStore } from '../storage/storage-store.js';
import { WatermarkRepair } from '../storage/watermark-repair.js';

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

/** The parts every area uses, opened by {@link openFoundation}. */
export interface Foundation {
  readonly config: BrokerConfig;
  readonly logger: Logger;
  /** The embedded Redis, when neither `redis.url` nor `redis.clusterNodes` is set. */
  readonly embedded: EmbeddedRedis | undefined;
  readonly cluster: boolean;
  /** The command connection. */
  readonly redis: RedisClient;
  /** The global channels' subscriber (`broker-subscriber`). */
  readonly subscriber: RedisClient;
  readonly memory: RedisMemoryWatch;
  readonly keys: Keys;
  readonly scripts: Scripts;
  readonly eventTypeStore: EventTypeStore;
  readonly cache: EventTypeCache;
  readonly settings: Settings;
  readonly access: AccessControl;
  readonly authenticator: Authenticator;
  readonly pool: WorkerPool;
  readonly tracing: Tracing | undefined;
  readonly metrics: BrokerMetrics;
  readonly eventFilters: EventFilters;
  readonly storages: StorageStore;
  readonly wakeups: PartitionWakeups;
  readonly replicated: ReplicatedAppend | undefined;
  readonly watermarks: WatermarkRepair | undefined;
  readonly partitionStore: PartitionStore;
  readonly storagePool: StoragePool;
  readonly logs: PartitionLogs;
}

/**
 * Connects Redis and checks it (version and eviction policy, before anything else starts: a refused
 * Redis leaves nothing running), then opens what every area uses.
 * @throws Error (EmbeddedRedisError, connection errors, a Redis that does not qualify, unusable auth keys)
 */
export async function openFoundation(config: BrokerConfig, logger: Logger, options: AppOptions): Promise<Foundation> {
  let embedded: EmbeddedRedis | undefined;
  const cluster = config.redis.clusterNodes.length > 0;
  const url = cluster ? '' : config.redis.url || (embedded = await startEmbeddedRedis(config.embeddedRedis, logger, config.port)).url;
  const redis: RedisClient = cluster ? await connectCluster(config.redis.clusterNodes, config.redis, logger) : await connectRedis(url, config.redis, logger);
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
  const base = { config, logger, embedded, cluster, redis, subscriber, memory, keys, scripts, eventTypeStore, cache, settings, access, authenticator, pool, tracing, metrics, eventFilters };
  return { ...base, ...(await openStorages(base)) };
}

/**
 * Storages and timelines (docs/operations.md "Storages and timelines"): the node's own storage is
 * registered (and the default) from the first start on; a timeline's partitions live in its storage,
 * opened on first use.
 */
async function openStorages(f: Pick<Foundation, 'config' | 'logger' | 'redis' | 'keys' | 'scripts' | 'memory'>): Promise<Pick<Foundation, 'storages' | 'wakeups' | 'replicated' | 'watermarks' | 'partitionStore' | 'storagePool' | 'logs'>> {
  const { config, logger, redis, keys, scripts, memory } = f;
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
  return { storages, wakeups, replicated, watermarks, partitionStore, storagePool, logs: new PartitionLogs(storagePool) };
}
