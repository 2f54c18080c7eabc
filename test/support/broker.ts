import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Cluster, Redis } from 'ioredis';
import { expect, inject } from 'vitest';
import { repoRoot, startBroker, type BrokerProcess } from '../../scripts/local-processes.js';
import type * as AppModule from '../../src/app.js';
import type * as ConfigModule from '../../src/config/load-config.js';
import type * as LoggerModule from '../../src/observability/logger.js';
import { settleBy } from '../../src/util/deadline.js';
import { createKeys, type Keys } from '../../src/storage/keys.js';
import { masterNodes, parseClusterNode, type RedisClient } from '../../src/storage/redis/redis-connection.js';
import { orderEvent } from './fixtures.js';
import { assertResponseMatches } from './response-schemas.js';

/**
 * A broker node for a test file, on the harness Redis under its own key prefix: a node in the test's
 * own process ({@link startTestBroker}) or a process of its own ({@link startTestBrokerProcess}).
 */
export interface TestBroker {
  readonly port: number;
  readonly url: string;
  readonly prefix: string;
  readonly keys: Keys;
  /** Everything the node logged (and, for a process, wrote to stdout and stderr) so far. */
  output(): string;
  /**
   * Stops the node like the signal does: SIGTERM or SIGINT drain and close it. A node in the test's
   * process cannot be killed (SIGKILL, SIGSTOP): start one with {@link startTestBrokerProcess} for that.
   * @returns the exit code (0 after a clean stop; null when a process was killed by the signal)
   * @throws Error for a signal an in-process node cannot take
   */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** A broker node in a process of its own: for what a test does to the process (signals, kills, exit codes, its pid). */
export interface TestBrokerProcess extends TestBroker, BrokerProcess {}

/** A fresh key prefix, so test files never see each other's data. */
export function uniquePrefix(): string {
  return `t${randomUUID().slice(0, 8)}:`;
}

/** True in the `cluster` test project: the harness Redis is a 3-master Redis Cluster. */
export function clusterRun(): boolean {
  return inject('clusterNodes').length > 0;
}

/**
 * The settings of a test node: the harness Redis (the harness cluster in the `cluster` project, unless
 * `env` names its own `BROKER_REDIS_URL`), a fresh key prefix unless `env` names one, one validation
 * thread, warnings and errors logged; then `env`.
 */
function testNodeEnv(env: Record<string, string>): Record<string, string> {
  const storage: Record<string, string> = clusterRun() && env.BROKER_REDIS_URL === undefined ? { BROKER_REDIS_CLUSTER_NODES: JSON.stringify(inject('clusterNodes')) } : { BROKER_REDIS_URL: inject('redisUrl') };
  return { ...storage, BROKER_REDIS_KEY_PREFIX: uniquePrefix(), BROKER_LOG_LEVEL: 'warn', BROKER_PUBLISH_WORKER_THREADS: '1', ...env };
}

/** The built node's modules (dist/, as `npm test` builds it), loaded once per test file. */
let built: Promise<{ app: typeof AppModule; config: typeof ConfigModule; logger: typeof LoggerModule }> | undefined;

function builtModules(): NonNullable<typeof built> {
  const load = async <T>(file: string): Promise<T> => (await import(pathToFileURL(path.join(repoRoot, 'dist', 'src', file)).href)) as T;
  built ??= Promise.all([load<typeof AppModule>('app.js'), load<typeof ConfigModule>('config/load-config.js'), load<typeof LoggerModule>('observability/logger.js')]).then(([app, config, logger]) => ({ app, config, logger }));
  return built;
}

/**
 * Starts a broker node inside the test's process (the built node's `createApp`, as `dist/src/main.js`
 * composes it) on a free port; see {@link testNodeEnv} for its settings. Several nodes of one file
 * share the process, each with its own connections, worker threads and HTTP server.
 * @param env further `BROKER_*` settings, as for a node process
 * @param options replaceable parts of the node (`AppOptions` of src/app.ts), e.g. a span processor over an
 *   in-memory exporter for a node with `BROKER_TRACING_ENABLED`
 * @throws Error when the node cannot start (its log lines in the message)
 */
export async function startTestBroker(env: Record<string, string> = {}, options: AppModule.AppOptions = {}): Promise<TestBroker> {
  const settings = testNodeEnv(env);
  const { app: appModule, config: configModule, logger: loggerModule } = await builtModules();
  const config = configModule.loadConfig({ BROKER_HOST: '127.0.0.1', BROKER_PORT: '0', ...settings });
  let output = '';
  const logger = loggerModule.createLogger(config, { write: (line: string) => void (output += line) });
  let app: AppModule.App;
  let port: number;
  try {
    app = await appModule.createApp(config, logger, options);
    port = await app.start();
  } catch (err) {
    throw new Error(`the node did not start: ${(err as Error).message}\n${output}`);
  }
  const prefix = config.redis.keyPrefix;
  let stopped: Promise<number> | undefined;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    prefix,
    keys: createKeys(prefix),
    output: () => output,
    stop: (signal: NodeJS.Signals = 'SIGTERM') => {
      if (signal !== 'SIGTERM' && signal !== 'SIGINT') throw new Error(`a node in the test's process cannot take ${signal}: start it with startTestBrokerProcess`);
      stopped ??= app.close().then(
        () => 0,
        (err: unknown) => {
          output += `close failed: ${(err as Error).message}\n`;
          return 1;
        },
      );
      return stopped;
    },
  };
}

/**
 * Starts a broker node process (`node dist/src/main.js`) on a free port, with the settings of
 * {@link startTestBroker}: for tests of what happens to the process itself.
 * @param env further `BROKER_*` settings
 */
export async function startTestBrokerProcess(env: Record<string, string> = {}): Promise<TestBrokerProcess> {
  const settings = testNodeEnv(env);
  const broker = await startBroker(settings);
  const prefix = settings.BROKER_REDIS_KEY_PREFIX as string;
  return { ...broker, prefix, keys: createKeys(prefix) };
}

/** A client of the harness Redis (a cluster client in the `cluster` project), for checking what the broker stored. */
export function harnessRedis(): RedisClient {
  if (clusterRun()) return new Cluster(inject('clusterNodes').map(parseClusterNode), { redisOptions: { maxRetriesPerRequest: 1 } });
  return new Redis(inject('redisUrl'), { lazyConnect: false, maxRetriesPerRequest: 1 });
}

/**
 * A client of the harness Redis for sharded pub/sub (`SSUBSCRIBE`): on the harness cluster one with
 * ioredis's sharded subscribers, which subscribe each channel on the master owning its slot.
 */
export function harnessShardedSubscriber(): RedisClient {
  if (clusterRun()) return new Cluster(inject('clusterNodes').map(parseClusterNode), { shardedSubscribers: true, redisOptions: { maxRetriesPerRequest: 1 } });
  return new Redis(inject('redisUrl'), { lazyConnect: false, maxRetriesPerRequest: 1 });
}

/**
 * How many connections subscribe to each sharded channel matching `pattern`, over every master
 * (`PUBSUB SHARDCHANNELS` and `SHARDNUMSUB` answer for one node's shard only). Channels without
 * subscribers are absent.
 */
export async function shardChannels(redis: RedisClient, pattern: string): Promise<Map<string, number>> {
  await redis.ping();
  const out = new Map<string, number>();
  for (const node of masterNodes(redis)) {
    const channels = (await node.call('PUBSUB', 'SHARDCHANNELS', pattern)) as string[];
    if (channels.length === 0) continue;
    const counts = (await node.call('PUBSUB', 'SHARDNUMSUB', ...channels)) as (string | number)[];
    for (let i = 0; i + 1 < counts.length; i += 2) out.set(String(counts[i]), (out.get(String(counts[i])) ?? 0) + Number(counts[i + 1]));
  }
  return out;
}

/** Every key matching `pattern` (SCAN on each master of a cluster: a SCAN sees one node's keys), sorted. */
export async function scanKeys(redis: RedisClient, pattern: string): Promise<string[]> {
  await redis.ping(); // a cluster client knows its masters once connected
  const keys: string[] = [];
  for (const node of masterNodes(redis)) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
  }
  return keys.sort();
}

/** A JSON HTTP answer. */
export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

/**
 * Sends a request and reads the whole answer; `body` objects are sent as JSON. A JSON answer is checked
 * against its route's response schema (test/support/response-schemas.ts), so the API document cannot
 * drift from what the node sends.
 * @throws Error when the JSON answer does not match the schema the API document gives it
 */
export async function call(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
  }
  const res = await fetch(base + path, init);
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (json !== undefined) assertResponseMatches(method, path, res.status, res.headers.get('content-type'), json);
  return { status: res.status, headers: res.headers, text, json };
}

/**
 * The events a partition of a single-timeline event type holds from its start: the position of its
 * `newest_available_offset` + 1 (docs/concepts.md "Offsets and cursors"), read from the answer to
 * `GET /event-types/{name}/partitions/{partition}`; fails the test unless that answer is 200 with such an offset.
 */
export function eventsInPartition(partition: Answer): number {
  expect(partition.status, partition.text).toBe(200);
  const offset = (partition.json as { newest_available_offset: string }).newest_available_offset;
  const position = /^\d{3}-[0-9a-f]{4}-(-?\d+)$/.exec(offset)?.[1];
  expect(position, offset).toBeDefined();
  return Number(position) + 1;
}

/** Publishes one {@link orderEvent} per order number to `name` on the node at `base`, expecting 200. @returns their eids */
export async function publishOrders(base: string, name: string, orderNumbers: readonly string[]): Promise<string[]> {
  const events = orderNumbers.map((o) => orderEvent(o));
  const answer = await call(base, 'POST', `/event-types/${name}/events`, events);
  expect(answer.status, answer.text).toBe(200);
  return events.map((e) => (e.metadata as { eid: string }).eid);
}

/** `n` order numbers `<tag>-0` .. `<tag>-<n-1>`. */
export function orderNumbers(tag: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${tag}-${i}`);
}

/**
 * Runs `change` (a registry call that announces an event type change, e.g. creating or repartitioning
 * `name`) and resolves with its result once every Redis node has delivered the change notice naming
 * `name` to its subscribers. On a single Redis a notice reaches every subscriber before `PUBLISH`
 * answers, so a node has heard it before the change's answer arrives; on a cluster it reaches the other
 * nodes over the cluster bus, later, and a broker's subscriber connection may be on any of them. After
 * this, each broker node of the key prefix has the notice on its socket, and a publish (which yields an
 * event-loop turn before reading its cache) sees the change.
 * @throws Error when some node has not delivered the notice within 10 s
 */
export async function afterChangeNotice<T>(broker: TestBroker, name: string, change: () => Promise<T>): Promise<T> {
  const urls = clusterRun() ? inject('clusterNodes').map((node) => `redis://${node}`) : [inject('redisUrl')];
  const listeners = urls.map((url) => new Redis(url, { maxRetriesPerRequest: 1 }));
  try {
    const heard = listeners.map(
      (listener) =>
        new Promise<void>((resolve) => {
          listener.on('message', (channel: string, message: string) => {
            if (channel === broker.keys.metadataChannel && message === name) resolve();
          });
        }),
    );
    await Promise.all(listeners.map((listener) => listener.subscribe(broker.keys.metadataChannel)));
    const result = await change();
    await settleBy(Promise.all(heard), performance.now() + 10_000, () => {
      throw new Error(`the change notice of ${name} was not delivered by every Redis node within 10 s`);
    });
    return result;
  } finally {
    for (const listener of listeners) listener.disconnect();
  }
}
