import { brokerError, BrokerError } from '../errors/catalog.js';

/**
 * Where a storage keeps its keys: a Redis deployment (`url`, or `cluster_nodes` seeds) or, with
 * neither, the node's own deployment; `key_prefix` is the namespace inside it (spec "Storage": the
 * record's fields are not shown there, this is ours).
 */
export interface RedisConfiguration {
  /** `redis://` or `rediss://` URL of a standalone deployment (credentials are never shown back). */
  readonly url?: string;
  /** `host:port` seeds of a Redis Cluster. */
  readonly cluster_nodes?: readonly string[];
  /** Prefix of every key of the storage, 0 to 64 characters of `[A-Za-z0-9:._-]`. */
  readonly key_prefix: string;
}

/** A storage backend (spec "Storage"; `GET/POST /storages`). */
export interface Storage {
  /** 1 to 64 characters of `[A-Za-z0-9._-]`. */
  readonly id: string;
  readonly storage_type: 'redis';
  readonly redis_configuration: RedisConfiguration;
}

/** A storage as served: with whether it is the default one. */
export interface StorageView extends Storage {
  readonly default: boolean;
}

/** The id of the storage every node starts with (its own `redis.*` configuration). */
export const NODE_STORAGE_ID = 'default';

const ID = /^[A-Za-z0-9._-]{1,64}$/;
const PREFIX = /^[A-Za-z0-9:._-]{0,64}$/;
const SEED = /^[A-Za-z0-9.-]{1,253}:\d{1,5}$/;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Parses a `POST /storages` body.
 * @returns the storage as it will be stored
 * @throws BrokerError 400 when the body is not an object; 422 naming every broken rule (id, type,
 *   configuration: exactly one of `url`, `cluster_nodes` or neither, a well-formed `key_prefix`)
 */
export function parseStorage(body: unknown): Storage {
  if (!isObject(body)) throw brokerError('BAD_REQUEST', { reason: 'the body must be a Storage object' });
  const problems: string[] = [];
  const { id, storage_type: type, redis_configuration: configuration } = body;
  if (typeof id !== 'string' || !ID.test(id)) problems.push('id: 1 to 64 characters of letters, digits, ".", "_" and "-"');
  if (type !== 'redis') problems.push('storage_type: must be "redis"');
  for (const key of Object.keys(body)) if (!['id', 'storage_type', 'redis_configuration', 'default'].includes(key)) problems.push(`${key}: unknown field`);
  if (!isObject(configuration)) {
    problems.push('redis_configuration: must be an object with key_prefix and optionally url or cluster_nodes');
    throw brokerError('UNPROCESSABLE', { reason: problems.join('\n') });
  }
  const { url, cluster_nodes: seeds, key_prefix: prefix } = configuration;
  for (const key of Object.keys(configuration)) if (!['url', 'cluster_nodes', 'key_prefix'].includes(key)) problems.push(`redis_configuration.${key}: unknown field`);
  if (typeof prefix !== 'string' || !PREFIX.test(prefix)) problems.push('redis_configuration.key_prefix: 0 to 64 characters of letters, digits, ":", ".", "_" and "-"');
  if (url !== undefined && seeds !== undefined) problems.push('redis_configuration: give url or cluster_nodes, not both');
  if (url !== undefined && (typeof url !== 'string' || !/^rediss?:\/\/[^\s]+$/.test(url))) problems.push('redis_configuration.url: a redis:// or rediss:// URL');
  if (seeds !== undefined && (!Array.isArray(seeds) || seeds.length === 0 || seeds.some((s) => typeof s !== 'string' || !SEED.test(s)))) {
    problems.push('redis_configuration.cluster_nodes: a non-empty array of "host:port"');
  }
  if (problems.length > 0) throw brokerError('UNPROCESSABLE', { reason: problems.join('\n') });
  const redis: RedisConfiguration = {
    key_prefix: prefix as string,
    ...(typeof url === 'string' ? { url } : {}),
    ...(Array.isArray(seeds) ? { cluster_nodes: seeds as string[] } : {}),
  };
  return { id: id as string, storage_type: 'redis', redis_configuration: redis };
}

/** The storage as answered: the URL's password replaced by `***`. */
export function storageView(storage: Storage, defaultId: string): StorageView {
  const { url } = storage.redis_configuration;
  const shown = url === undefined ? storage.redis_configuration : { ...storage.redis_configuration, url: url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@') };
  return { ...storage, redis_configuration: shown, default: storage.id === defaultId };
}

/** @throws BrokerError 404 */
export function storageNotFound(id: string): BrokerError {
  return brokerError('STORAGE_NOT_FOUND', { id });
}
