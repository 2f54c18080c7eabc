import type { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { BrokerConfig } from '../../config/config-schema.js';
import { brokerError } from '../../errors/catalog.js';
import type { Logger } from '../../observability/logger.js';
import { isOutOfMemory, storageFull } from '../storage-full.js';

/**
 * A connection to the storage: a standalone `Redis` or a Redis `Cluster` (the same code serves both, so
 * a deployment can move to a cluster without another build; docs/operations.md "Redis Cluster"). Both
 * expose the same commands, pipelines, MULTI, scripts and pub/sub; what differs in a cluster is that one
 * command, MULTI, script or explicit pipeline must stay in one slot (one node for a pipeline), which the
 * key builder's hash tags (keys.ts) and the stores take care of.
 */
export type RedisClient = Redis | Cluster;

/** The first connection attempt may take this many `redis.connectTimeoutMs` before startup fails. */
const CONNECT_ATTEMPT_FACTOR = 3;

/**
 * Parses a cluster seed node `host:port` (IPv6 as `[::1]:7000`).
 * @throws Error when the text is not `host:port` with a port in 1..65535
 */
export function parseClusterNode(node: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(node);
  const port = Number(match?.[3]);
  const host = match?.[1] ?? match?.[2];
  if (!match || host === undefined || port < 1 || port > 65535) throw new Error(`not a cluster node "host:port": ${JSON.stringify(node)}`);
  return { host, port };
}

/** Logs each distinct connection error once, and its recovery. */
function logConnectionState(client: RedisClient, logger: Logger, name: string): void {
  let lastError = '';
  client.on('error', (err: Error) => {
    if (err.message !== lastError) logger.warn({ err: err.message, connection: name }, 'redis connection error');
    lastError = err.message;
  });
  client.on('ready', () => {
    if (lastError) logger.info({ connection: name }, 'redis connection restored');
    lastError = '';
  });
}

/**
 * Opens the command connection to a standalone Redis. Commands never wait in an
 * offline queue: while Redis is unreachable they fail at once, and a command that gets no answer fails
 * `redis.commandTimeoutMs` after it was issued, so no request hangs and every command has its own
 * deadline (docs/operations.md "Redis stalls"). ioredis's auto-pipelining is off: it keeps one pipeline in flight per
 * connection and holds every later command — unsent, its timer not started — until that pipeline is
 * answered or timed out, so during a Redis stall each wave of commands would wait for the one before
 * (measured: commands issued at 0, 100 and 1,200 ms with a 1 s timeout failed at 1.0, 2.0 and 3.0 s).
 * {@link coalesceWrites} batches the socket writes of one event-loop turn instead. The client
 * reconnects by itself (backoff up to 1 s).
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
    enableAutoPipelining: false,
    maxRetriesPerRequest: 0,
    lazyConnect: true,
    connectionName: `broker-${name}`,
    retryStrategy: (times) => Math.min(times * 100, 1000),
  };
  const redis = url.startsWith('unix://') ? new Redis({ ...options, path: url.slice('unix://'.length) }) : new Redis(url, options);
  coalesceWrites(redis);
  logConnectionState(redis, logger, name);
  const deadline = Date.now() + config.connectTimeoutMs * CONNECT_ATTEMPT_FACTOR;
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

/**
 * Batches the socket writes of one event-loop turn on a standalone connection: the first command sent
 * in a turn corks the socket and the turn's end (`setImmediate`) uncorks it, so the commands of
 * concurrent requests leave in one write, as with ioredis's auto-pipelining, but each command is
 * handed to the socket (and its `commandTimeout` timer starts) when it is issued, and a command never
 * waits for the answers of earlier ones. Measured with 16 concurrent script callers on
 * one connection (`node dist/bench/probes/probe-redis-stall.js throughput`): at least the calls per second of
 * auto-pipelining and of uncorked writes.
 */
export function coalesceWrites(redis: Redis): void {
  const send = redis.sendCommand.bind(redis);
  const corked = new WeakSet<object>();
  redis.sendCommand = (command, stream) => {
    const socket = redis.stream as Redis['stream'] | undefined;
    if (socket !== undefined && !corked.has(socket) && socket.writable) {
      corked.add(socket);
      socket.cork();
      setImmediate(() => {
        corked.delete(socket);
        socket.uncork();
      });
    }
    return send(command, stream);
  };
}

/**
 * Opens the command connection to a Redis Cluster (config `redis.clusterNodes`; docs/operations.md "Redis
 * Cluster"). Same contract as {@link connectRedis}: no offline queue (commands fail at once while the
 * cluster is unreachable), `redis.commandTimeoutMs` per command, reconnection by itself. ioredis keeps
 * the slot map: a MOVED reply updates it and resends the command, ASK is followed, and TRYAGAIN,
 * CLUSTERDOWN and a closed node connection (a master that died) are retried every 100 ms with a slot
 * map refresh, at most 16 redirections per command; after that the command fails (503, or 207 for a
 * partition of a batch). Auto-pipelining groups concurrent commands per node; unlike the standalone
 * connection (see {@link connectRedis}) it holds a command behind a node's pipeline in flight, so during a
 * stall a command may be sent late (the publisher's own deadline still bounds the answer).
 *
 * @param nodes seed nodes `host:port`; any reachable one is enough, the rest of the cluster is discovered
 * @returns a client whose slot map is loaded and whose cluster reported `cluster_state:ok`
 * @throws Error when the cluster is not ready within `redis.connectTimeoutMs` × 3
 */
export async function connectCluster(nodes: readonly string[], config: BrokerConfig['redis'], logger: Logger, name = 'command'): Promise<Cluster> {
  const options: ClusterOptions = {
    lazyConnect: true,
    enableOfflineQueue: false,
    enableAutoPipelining: true,
    enableReadyCheck: true,
    scaleReads: 'master',
    maxRedirections: 16,
    retryDelayOnFailover: 100,
    retryDelayOnClusterDown: 100,
    retryDelayOnTryAgain: 100,
    slotsRefreshTimeout: config.connectTimeoutMs,
    // Also notices a failover that no command of this node ran into.
    slotsRefreshInterval: 5000,
    clusterRetryStrategy: (times) => Math.min(times * 100, 1000),
    redisOptions: {
      connectTimeout: config.connectTimeoutMs,
      commandTimeout: config.commandTimeoutMs,
      maxRetriesPerRequest: 0,
      connectionName: `broker-${name}`,
    },
  };
  const cluster = new Cluster(nodes.map(parseClusterNode), options);
  logConnectionState(cluster, logger, name);
  cluster.on('-node', (_redis: unknown, key: unknown) => logger.warn({ node: key, connection: name }, 'redis cluster node connection closed'));
  const timeoutMs = config.connectTimeoutMs * CONNECT_ATTEMPT_FACTOR;
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`cluster not ready within ${timeoutMs} ms`)), timeoutMs);
      cluster.once('ready', () => {
        clearTimeout(timer);
        resolve();
      });
      // A failed first attempt is retried by clusterRetryStrategy; only the deadline gives up.
      cluster.connect().catch(() => undefined);
    });
    return cluster;
  } catch (err) {
    cluster.disconnect();
    throw new Error(`cannot connect to the Redis Cluster at ${nodes.join(',')}: ${(err as Error).message}`);
  }
}

/**
 * A second connection for pub/sub (a subscribed connection cannot run commands). On a cluster, plain
 * `SUBSCRIBE` is served by one node of the cluster (messages are broadcast to every node); ioredis moves
 * it to another node when that one leaves. Errors are logged as `redis connection error` with
 * `connection: broker-subscriber`.
 * @param logger where connection errors go (once per distinct message until the connection is ready again)
 */
export function duplicateForSubscribe(redis: RedisClient, logger: Logger): RedisClient {
  return duplicateSubscriber(redis, 'broker-subscriber', false, logger);
}

/**
 * A connection for sharded pub/sub (`SSUBSCRIBE`; docs/architecture.md "Wake-ups on sharded channels").
 * On a cluster, a shard channel is only served by the node owning its slot: ioredis (`shardedSubscribers`)
 * keeps one subscriber connection per master and moves the channels of a slot when the slot map changes
 * (failover, resharding).
 * @param logger where connection errors go
 * @param connectionName the name Redis lists it under (`CLIENT LIST`); also the log lines' `connection`
 */
export function duplicateForShardedSubscribe(redis: RedisClient, logger: Logger, connectionName = 'broker-notices'): RedisClient {
  return duplicateSubscriber(redis, connectionName, true, logger);
}

/**
 * A subscriber connection never runs ioredis's ready check (`INFO`): a connection that already heard
 * a subscribe answer refuses every other command, so when it reconnected at the wrong moment (seen after
 * a multi-second event-loop stall: the answers of the queued `SSUBSCRIBE`s arrived before the check) the
 * check failed, the connection stayed down and its channels' notices were lost until the node restarted.
 * Pub/sub does not depend on the dataset being loaded, which is all the check waits for.
 */
/** What {@link guardStoppedShardedSubscribers} uses of ioredis's per-shard subscriber of a cluster connection (`built/cluster/ShardedSubscriber.js`). */
interface ShardedSubscriberClass {
  readonly prototype: { stop: (this: { instance: EventEmitter | null }) => void };
}
let shardedSubscribersGuarded = false;

/**
 * ioredis stops a shard's subscriber of a cluster connection with sharded subscribers when the topology
 * changes (a failover): it disconnects the shard's connection and then removes all its listeners, the
 * 'error' listener among them. A reply already on that socket — a SUNSUBSCRIBE Redis sends when a shard
 * channel's slot leaves the node — is still parsed, finds no command waiting, and ioredis emits it as an
 * 'error' that no one listens to any more: an uncaught exception that would end the node (seen in the
 * cluster failover tests). The stopped connection keeps a listener that drops such errors: it is gone,
 * its channels are subscribed again on the new master, nothing is lost. Installed once per process.
 */
export function guardStoppedShardedSubscribers(): void {
  if (shardedSubscribersGuarded) return;
  shardedSubscribersGuarded = true;
  const { default: ShardedSubscriber } = createRequire(import.meta.url)('ioredis/built/cluster/ShardedSubscriber.js') as { default: ShardedSubscriberClass };
  const stop = ShardedSubscriber.prototype.stop;
  ShardedSubscriber.prototype.stop = function stopKeepingAnErrorListener(this: { instance: EventEmitter | null }): void {
    const instance = this.instance;
    stop.call(this);
    instance?.on('error', () => undefined);
  };
}

function duplicateSubscriber(redis: RedisClient, connectionName: string, sharded: boolean, logger: Logger): RedisClient {
  if (sharded && redis instanceof Cluster) guardStoppedShardedSubscribers();
  const subscriber =
    redis instanceof Cluster
      ? redis.duplicate([], {
          enableOfflineQueue: true,
          ...(sharded ? { shardedSubscribers: true } : {}),
          // A subscriber connection waits for messages without a deadline.
          redisOptions: { ...redis.options.redisOptions, commandTimeout: undefined, enableReadyCheck: false, connectionName },
        })
      : redis.duplicate({ enableOfflineQueue: true, commandTimeout: undefined, enableReadyCheck: false, connectionName });
  logConnectionState(subscriber, logger, connectionName);
  return subscriber;
}

/**
 * Runs `listener` whenever a subscribed connection may have missed messages: it (re)connected, or, on a
 * cluster, a node left (the subscription may have moved to another node meanwhile). Listeners reload
 * what the messages would have told them.
 */
export function onResubscribed(subscriber: RedisClient, listener: () => void): void {
  subscriber.on('ready', listener);
  if (subscriber instanceof Cluster) subscriber.on('-node', listener);
}

/**
 * The masters of a cluster (each one once), or the connection itself when standalone: for commands
 * that act on one node's keyspace (`SCAN`, `PUBSUB SHARDNUMSUB`, `INFO`).
 */
export function masterNodes(redis: RedisClient): Redis[] {
  return redis instanceof Cluster ? redis.nodes('master') : [redis];
}

/** Errors that mean the storage is (for now) unreachable or moving, never a bug. */
const UNAVAILABLE =
  /timed out|enableOfflineQueue|Connection is closed|ECONNREFUSED|ECONNRESET|EPIPE|ENOENT|LOADING|MASTERDOWN|CLUSTERDOWN|TRYAGAIN|\b(MOVED|ASK) \d+ |Too many Cluster redirections|None of startup nodes|Cluster isn't ready|Cluster is (ended|disconnect)|Failed to refresh slots cache|slots allocation group/i;

/**
 * Maps a Redis failure to the client-facing error: connection down, command timed out, or a cluster
 * moving slots during a failover (MOVED/ASK/TRYAGAIN/CLUSTERDOWN left after ioredis's retries) → 503
 * `STORAGE_UNAVAILABLE` with `Retry-After: 1`; Redis refusing a write for lack of memory (`OOM …`, a
 * master at its `maxmemory`) → 507 `STORAGE_FULL` (storage-full.ts), never Redis's text. Other errors are
 * rethrown unchanged (bugs, answered 500).
 */
export function storageError(err: unknown): never {
  const message = err instanceof Error ? err.message : String(err);
  if (UNAVAILABLE.test(message)) {
    throw brokerError('STORAGE_UNAVAILABLE', { reason: message });
  }
  if (isOutOfMemory(err)) throw storageFull(undefined, 'out_of_memory');
  throw err;
}
