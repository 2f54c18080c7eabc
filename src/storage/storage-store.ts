import { NODE_STORAGE_ID, type Storage } from '../domain/storages/storage.js';
import type { Keys } from './keys.js';
import { Cluster, Redis } from 'ioredis';
import { parseClusterNode, storageError, type RedisClient } from './redis/redis-connection.js';
import type { Scripts } from './scripts.js';

/**
 * The storages (docs/concepts.md "Timelines and storages") in Redis under the `{settings}` hash
 * tag: a hash id → record and the default id, changed atomically by the scripts `deleteStorage` and
 * `setDefaultStorage` (src/storage/lua; both keys in one slot).
 * Redis failures surface as `STORAGE_UNAVAILABLE` (503).
 */
export class StorageStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly scripts: Scripts,
    private readonly keys: Keys,
  ) {}

  /**
   * Registers the node's own storage (`default`: its `redis.*` configuration, key prefix `keyPrefix`)
   * and makes it the default, both unless already there (every node at startup; the first wins).
   */
  async ensureNodeStorage(keyPrefix: string): Promise<void> {
    const own: Storage = { id: NODE_STORAGE_ID, storage_type: 'redis', redis_configuration: { key_prefix: keyPrefix } };
    await this.redis.multi().hsetnx(this.keys.storages, own.id, JSON.stringify(own)).set(this.keys.defaultStorage, own.id, 'NX').exec().catch(storageError);
  }

  /** Every storage, ordered by id, with the default id. */
  async list(): Promise<{ storages: Storage[]; defaultId: string }> {
    const [all, defaultId] = await Promise.all([this.redis.hgetall(this.keys.storages), this.redis.get(this.keys.defaultStorage)]).catch(storageError);
    const storages = Object.values(all).map((text) => JSON.parse(text) as Storage);
    storages.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return { storages, defaultId: defaultId ?? NODE_STORAGE_ID };
  }

  /** @returns the storage, or undefined */
  async get(id: string): Promise<Storage | undefined> {
    const text = await this.redis.hget(this.keys.storages, id).catch(storageError);
    return text === null ? undefined : (JSON.parse(text) as Storage);
  }

  /** @returns false when the id exists already (nothing changed) */
  async create(storage: Storage): Promise<boolean> {
    return (await this.redis.hsetnx(this.keys.storages, storage.id, JSON.stringify(storage)).catch(storageError)) === 1;
  }

  /** @returns 'deleted', 'absent', or 'default' (refused: it is the default storage) */
  async delete(id: string): Promise<'deleted' | 'absent' | 'default'> {
    const result = Number(await this.scripts.run('deleteStorage', [this.keys.storages, this.keys.defaultStorage], [id]).catch(storageError));
    return result === 1 ? 'deleted' : result === 0 ? 'absent' : 'default';
  }

  /** @returns false when no such storage exists */
  async setDefault(id: string): Promise<boolean> {
    return Number(await this.scripts.run('setDefaultStorage', [this.keys.storages, this.keys.defaultStorage], [id]).catch(storageError)) === 1;
  }
}

/**
 * Checks that a storage's Redis deployment answers PING within `timeoutMs` (creation refuses a
 * storage nobody could write to). A storage without `url` or `cluster_nodes` is the node's own
 * deployment and is not probed.
 * @returns undefined when reachable, else why not
 */
export async function probeStorage(storage: Storage, timeoutMs = 2000): Promise<string | undefined> {
  const { url, cluster_nodes: seeds } = storage.redis_configuration;
  if (url === undefined && seeds === undefined) return undefined;
  const client: RedisClient =
    url !== undefined
      ? new Redis(url, { lazyConnect: true, connectTimeout: timeoutMs, maxRetriesPerRequest: 0, retryStrategy: () => null, enableOfflineQueue: false })
      : new Cluster((seeds ?? []).map(parseClusterNode), { lazyConnect: true, clusterRetryStrategy: () => null, enableOfflineQueue: false, redisOptions: { connectTimeout: timeoutMs, maxRetriesPerRequest: 0 } });
  client.on('error', () => undefined); // reported through the promise below
  const timer = new Promise<string>((resolve) => setTimeout(() => resolve(`no answer within ${timeoutMs} ms`), timeoutMs).unref());
  try {
    return await Promise.race([
      client
        .connect()
        .then(() => client.ping())
        .then(() => undefined)
        .catch((err: unknown) => (err instanceof Error ? err.message : String(err))),
      timer,
    ]);
  } finally {
    client.disconnect();
  }
}
