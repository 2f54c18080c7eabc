import { Redis, type RedisOptions } from 'ioredis';
import type { BrokerConfig } from '../config/config-schema.js';
import { BrokerError } from '../errors/catalog.js';
import type { Logger } from '../observability/logger.js';

/**
 * Opens the command connection to Redis (DESIGN.md §1, §4). Commands never wait in an offline queue:
 * while Redis is unreachable they fail at once, and a command that gets no answer fails after
 * `redis.commandTimeoutMs`, so no request hangs. The client reconnects by itself (backoff up to 1 s).
 *
 * @param url `redis://…` or `unix:///path/to/socket`
 * @returns a connected client (resolves once Redis answered)
 * @throws Error when the first connection cannot be made within `redis.connectTimeoutMs` × 3
 */
export async function connectRedis(url: string, config: BrokerConfig['redis'], logger: Logger, name = 'command'): Promise<Redis> {
  const options: RedisOptions = {
    connectTimeout: config.connectTimeoutMs,
    commandTimeout: config.commandTimeoutMs,
    enableOfflineQueue: false,
    enableAutoPipelining: true,
    maxRetriesPerRequest: 0,
    lazyConnect: true,
    connectionName: `broker-${name}`,
    retryStrategy: (times) => Math.min(times * 100, 1000),
  };
  const redis = url.startsWith('unix://') ? new Redis({ ...options, path: url.slice('unix://'.length) }) : new Redis(url, options);
  let lastError = '';
  redis.on('error', (err: Error) => {
    if (err.message !== lastError) logger.warn({ err: err.message, connection: name }, 'redis connection error');
    lastError = err.message;
  });
  redis.on('ready', () => {
    if (lastError) logger.info({ connection: name }, 'redis connection restored');
    lastError = '';
  });
  const deadline = Date.now() + config.connectTimeoutMs * 3;
  for (;;) {
    try {
      await redis.connect();
      return redis;
    } catch (err) {
      if (Date.now() > deadline) {
        redis.disconnect();
        throw new Error(`cannot connect to Redis at ${url}: ${(err as Error).message}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

/** A second connection for pub/sub (a subscribed connection cannot run commands). */
export function duplicateForSubscribe(redis: Redis): Redis {
  return redis.duplicate({ enableOfflineQueue: true, commandTimeout: undefined, connectionName: 'broker-subscriber' });
}

/**
 * Maps a Redis failure to the client-facing error: connection down or command timed out → 503
 * `STORAGE_UNAVAILABLE`. Other errors are rethrown unchanged (bugs, answered 500).
 */
export function storageError(err: unknown): never {
  const message = err instanceof Error ? err.message : String(err);
  if (/timed out|enableOfflineQueue|Connection is closed|ECONNREFUSED|ECONNRESET|EPIPE|ENOENT|LOADING|MASTERDOWN|CLUSTERDOWN/i.test(message)) {
    throw new BrokerError('STORAGE_UNAVAILABLE', `Storage is unavailable: ${message}`, { 'Retry-After': '1' });
  }
  throw err;
}
