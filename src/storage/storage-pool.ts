import type { BrokerConfig } from '../config/config-schema.js';
import { NODE_STORAGE_ID, type Storage } from '../domain/storages/storage.js';
import { brokerError } from '../errors/catalog.js';
import type { Logger } from '../observability/logger.js';
import { createKeys, type Keys } from './keys.js';
import { PartitionStore } from './partition-store.js';
import { PartitionWakeups } from './partition-wakeups.js';
import { connectCluster, connectRedis, duplicateForShardedSubscribe, type RedisClient } from './redis/redis-connection.js';
import { RedisMemoryWatch } from './redis/redis-memory.js';
import { openReplicatedAppender } from './replicated-append.js';
import type { ReplicatedAppend } from './replica-lanes.js';
import { Scripts } from './scripts.js';
import type { StorageStore } from './storage-store.js';
import { WatermarkRepair } from './watermark-repair.js';

/** One storage as this node uses it: its connection, scripts, key names, partition logs and notice hub. */
export interface StorageHandle {
  readonly id: string;
  readonly redis: RedisClient;
  readonly scripts: Scripts;
  readonly keys: Keys;
  readonly partitions: PartitionStore;
  readonly wakeups: PartitionWakeups;
  /** Appends confirmed by replicas (`publish.minReplicas` ≥ 1; standalone or cluster), with this storage's keys. */
  readonly replicated?: ReplicatedAppend;
  /** The memory of the deployment's masters, read periodically (docs/operations.md "Memory and retention"); shared by the storages of one deployment. */
  readonly memory: RedisMemoryWatch;
}

/** What a {@link StoragePool} is built from. */
export interface StoragePoolOptions {
  /** The node's own storage (id `default`), opened by the app. */
  readonly node: StorageHandle;
  /** Where storage records are read when a timeline first uses a storage. */
  readonly records: Pick<StorageStore, 'get'>;
  /** Connection settings (`redis.*` timeouts) for the connections to other deployments. */
  readonly redis: BrokerConfig['redis'];
  readonly logger: Logger;
  /**
   * `minReplicas`: appends to another deployment (standalone or cluster) wait for its replicas too,
   * at most `replicaTimeoutMs` milliseconds. Default: no replicas awaited (0, 1000).
   */
  readonly publish?: Pick<BrokerConfig['publish'], 'minReplicas' | 'replicaTimeoutMs'>;
  /** How the memory of another deployment's masters is watched (`redisMemory`); default: a mark at 90 %, read every second. */
  readonly memory?: Pick<BrokerConfig['redisMemory'], 'highWaterPercent' | 'checkIntervalMs'>;
  /**
   * `consumption.waitForReplicas`: where appends wait for replicas, reads stop at the high watermark
   * (docs/operations.md "Durability"). Default true.
   */
  readonly waitForReplicas?: boolean;
}

/**
 * The storages this node has opened (docs/operations.md "Storages and timelines"), by id. The node's own storage is
 * there from the start; another one is opened on first use by a timeline: a storage in the node's own
 * deployment (no `url`, no `cluster_nodes`) shares the node's connections with other key names; another
 * deployment gets its own command connection, scripts and notice subscriber, configured like the
 * node's (`redis.*` timeouts). Storage records never change once created (they can only be deleted
 * while no timeline uses them), so an opened handle stays valid until the node stops.
 */
export class StoragePool {
  private readonly handles = new Map<string, StorageHandle>();
  private readonly opening = new Map<string, Promise<StorageHandle>>();
  /** Connections this pool opened (closed on stop); the node's own are closed by the app. */
  private readonly owned: { redis: RedisClient; wakeups: PartitionWakeups; memory: RedisMemoryWatch; replicated?: ReplicatedAppend }[] = [];
  /** The watermark repairs of the storages this pool opened (stopped on close). */
  private readonly repairs: WatermarkRepair[] = [];

  private readonly records: Pick<StorageStore, 'get'>;
  private readonly config: BrokerConfig['redis'];
  private readonly logger: Logger;
  private readonly publish: Pick<BrokerConfig['publish'], 'minReplicas' | 'replicaTimeoutMs'>;
  private readonly memory: Pick<BrokerConfig['redisMemory'], 'highWaterPercent' | 'checkIntervalMs'>;
  private readonly waitForReplicas: boolean;

  constructor(options: StoragePoolOptions) {
    this.records = options.records;
    this.config = options.redis;
    this.logger = options.logger;
    this.publish = options.publish ?? { minReplicas: 0, replicaTimeoutMs: 1000 };
    this.memory = options.memory ?? { highWaterPercent: 90, checkIntervalMs: 1000 };
    this.waitForReplicas = options.waitForReplicas ?? true;
    this.handles.set(NODE_STORAGE_ID, options.node);
  }

  /** The node's own storage (id `default`). */
  get node(): StorageHandle {
    return this.handles.get(NODE_STORAGE_ID) as StorageHandle;
  }

  /** An opened storage, or undefined when it was not opened on this node yet. */
  peek(id: string): StorageHandle | undefined {
    return this.handles.get(id);
  }

  /**
   * The storage with this id, opening it on first use.
   * @throws BrokerError 503 when the storage record is missing or its deployment cannot be reached
   */
  async open(id: string): Promise<StorageHandle> {
    const known = this.handles.get(id);
    if (known) return known;
    let pending = this.opening.get(id);
    if (!pending) {
      pending = this.connect(id).finally(() => this.opening.delete(id));
      this.opening.set(id, pending);
    }
    return pending;
  }

  private async connect(id: string): Promise<StorageHandle> {
    const record = await this.records.get(id);
    if (!record) throw brokerError('STORAGE_NOT_REGISTERED', { id });
    const handle = await this.handleFor(record).catch((err: unknown) => {
      throw brokerError('STORAGE_UNREACHABLE', { id, reason: (err as Error).message });
    });
    this.handles.set(id, handle);
    this.logger.info({ storage: id }, 'storage opened');
    return handle;
  }

  private async handleFor(record: Storage): Promise<StorageHandle> {
    const { url, cluster_nodes: seeds, key_prefix: prefix } = record.redis_configuration;
    const keys = createKeys(prefix);
    if (url === undefined && seeds === undefined) {
      // The node's deployment: its connections, notice hub, replica lanes and memory watch, with other key names.
      const { redis, scripts, wakeups, replicated, memory } = this.node;
      return { id: record.id, redis, scripts, keys, wakeups, memory, partitions: new PartitionStore(redis, scripts, keys, this.watermarks(replicated, redis, keys)), ...(replicated ? { replicated } : {}) };
    }
    const redis: RedisClient = seeds !== undefined ? await connectCluster(seeds, this.config, this.logger, `storage-${record.id}`) : await connectRedis(url ?? '', this.config, this.logger, `storage-${record.id}`);
    let replicated: ReplicatedAppend | undefined;
    if (this.publish.minReplicas > 0) {
      replicated = await openReplicatedAppender(redis, keys, this.publish.minReplicas, this.publish.replicaTimeoutMs, this.waitForReplicas).catch((err: unknown) => {
        redis.disconnect();
        throw err;
      });
    }
    const scripts = new Scripts(redis);
    const wakeups = new PartitionWakeups(duplicateForShardedSubscribe(redis, this.logger), this.logger);
    // Its masters' memory is known before the first publish to it.
    const memory = new RedisMemoryWatch(redis, record.id, this.memory, this.logger);
    await memory.start();
    this.owned.push({ redis, wakeups, memory, ...(replicated ? { replicated } : {}) });
    return { id: record.id, redis, scripts, keys, wakeups, memory, partitions: new PartitionStore(redis, scripts, keys, this.watermarks(replicated, redis, keys)), ...(replicated ? { replicated } : {}) };
  }

  /** Every opened storage's handle (the node's own first). */
  opened(): StorageHandle[] {
    return [...this.handles.values()];
  }

  /** The watermark repair of a storage whose appends wait for replicas, when reads wait too; else undefined (reads do not stop at a watermark). */
  private watermarks(replicated: ReplicatedAppend | undefined, redis: RedisClient, keys: Keys): WatermarkRepair | undefined {
    if (replicated === undefined || !this.waitForReplicas) return undefined;
    const repair = new WatermarkRepair(replicated, redis, keys, this.logger, this.publish.replicaTimeoutMs);
    this.repairs.push(repair);
    return repair;
  }

  /** Closes the connections this pool opened (not the node's own). */
  async close(): Promise<void> {
    for (const repair of this.repairs) repair.close();
    this.repairs.length = 0;
    for (const { redis, wakeups, memory, replicated } of this.owned) {
      await memory.stop();
      replicated?.close();
      wakeups.close();
      await redis.quit().catch(() => redis.disconnect());
    }
    this.owned.length = 0;
  }
}
