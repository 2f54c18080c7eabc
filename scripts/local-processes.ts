/**
 * Plain-process topology for tests, benchmarks and local scale-out: a `redis-server` on a free
 * loopback port and broker nodes (`node dist/src/main.js`) on free ports. Used by the test harness
 * (`test/support`), `bench/` and scripts; no Docker needed.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { freePort } from '../src/util/free-port.js';

export { freePort };

/** Repository root, from `scripts/` or `dist/scripts/`. */
export const repoRoot = (() => {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const up = path.resolve(here, '..');
  return path.basename(up) === 'dist' ? path.dirname(up) : up;
})();

/**
 * Children this process started and has not seen exit (detached ones are left out: their owner stops
 * them on its own). When this process exits — a test file whose test timed out before its clean-up, a
 * script that failed — they are killed with it, so nothing keeps a port, a core or memory afterwards.
 */
const liveChildren = new Set<ChildProcess>();
let killOnExitInstalled = false;

function killOnExit(child: ChildProcess): void {
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
  if (killOnExitInstalled) return;
  killOnExitInstalled = true;
  process.once('exit', () => {
    for (const c of liveChildren) c.kill('SIGKILL');
  });
}

async function waitForPort(port: number, timeoutMs: number, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`process on port ${port} did not come up (exit code ${String(child.exitCode)})`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/**
 * Waits until a broker node answers HTTP on `port` (any status of `GET /health`). An open port is not
 * enough: the node's start-up check (`assertPortFree`) listens on the port for a moment before Redis is
 * set up, and a connection made then is accepted and closed (the next request is refused).
 */
async function waitForHttp(port: number, timeoutMs: number, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answered = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2_000) }).then(
      async (res) => {
        await res.arrayBuffer();
        return true;
      },
      () => false,
    );
    if (answered) return;
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`process on port ${port} did not come up (exit code ${String(child.exitCode)})`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((resolve) => child.once('exit', () => resolve()));
}

/** A redis-server child process. */
export interface RedisProcess {
  readonly port: number;
  readonly url: string;
  readonly process: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Starts `redis-server` on a free loopback port with nothing persisted (tests, benchmarks), or with
 * AOF when `appendonly` is set, in a fresh temporary directory removed on stop.
 * @param extraArgs further `--option value` arguments
 * @param dataDir a directory to keep the data in instead (created if missing, kept on stop; `stop`
 *   then sends SIGTERM so Redis flushes its AOF before exiting, instead of SIGKILL)
 * @param detached run in its own process group, so a Ctrl+C in the terminal reaches only the parent,
 *   which stops the children in order (`npm run cluster`)
 */
export async function startRedis(options: { appendonly?: boolean; extraArgs?: string[]; dataDir?: string; detached?: boolean } = {}): Promise<RedisProcess> {
  // A port found free can be taken by another process before redis-server binds it (tests run in
  // parallel): a server that exits at once is started again on another port, a few times.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startRedisOnce(options);
    } catch (err) {
      if (attempt >= 5 || !(err instanceof Error) || !err.message.includes('did not come up (exit code')) throw err;
    }
  }
}

/** A free port for a Redis Cluster node: its cluster bus listens on port + 10000, which must be free too. */
function freeClusterPort(): Promise<number> {
  return freePort([10_000]);
}

async function startRedisOnce(options: { appendonly?: boolean; extraArgs?: string[]; dataDir?: string; detached?: boolean }): Promise<RedisProcess> {
  const port = options.extraArgs?.includes('--cluster-enabled') === true ? await freeClusterPort() : await freePort();
  const kept = options.dataDir !== undefined;
  const dir = options.dataDir !== undefined ? path.resolve(options.dataDir) : mkdtempSync(path.join(os.tmpdir(), 'broker-redis-'));
  if (kept) mkdirSync(dir, { recursive: true });
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', options.appendonly ? 'yes' : 'no', '--maxmemory-policy', 'noeviction', ...(options.extraArgs ?? [])];
  const child = spawn('redis-server', args, { stdio: 'ignore', detached: options.detached === true });
  child.once('error', () => undefined);
  if (options.detached !== true) killOnExit(child);
  await waitForPort(port, 10_000, child);
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    process: child,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(kept ? 'SIGTERM' : 'SIGKILL');
        await exited(child);
      }
      if (!kept) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Node flags a broker runs with, as in `npm start`: none, V8's default young generation. A 64 MB one
 * (`--max-semi-space-size=64`, used before) bought nothing measurable and cost memory and tail latency:
 * same session, alternated, two runs each (docs/decisions/0010-young-generation-v8-default.md):
 * publish-to-delivery p99 13.4 / 15.3 ms with it, 6.0 / 4.9 ms without; churn RSS growth 144 / 113 MB,
 * 83 / 79 MB without; 1000-event publish 155k (one clean run) vs 159k / 160k events/s.
 */
export const BROKER_NODE_FLAGS: readonly string[] = [];

/**
 * The flags {@link startBroker} gives a node: {@link BROKER_NODE_FLAGS}, or, for a benchmark comparing
 * V8 settings, the space-separated flags of `BENCH_BROKER_NODE_FLAGS` (bench/run.ts names them in the
 * recorded command).
 */
export function brokerNodeFlags(): readonly string[] {
  const override = process.env.BENCH_BROKER_NODE_FLAGS;
  return override === undefined ? BROKER_NODE_FLAGS : override.split(' ').filter((flag) => flag !== '');
}

/** A broker node child process. */
export interface BrokerProcess {
  readonly port: number;
  readonly url: string;
  readonly process: ChildProcess;
  /** Everything the node wrote to stdout and stderr so far. */
  output(): string;
  /** Sends a signal and waits for exit. @returns the exit code (null when killed by the signal) */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts a broker node from `dist/` (run `npm run build` first) on a free port.
 * @param env extra environment, e.g. `BROKER_REDIS_URL`, `BROKER_REDIS_KEY_PREFIX`
 * @param options.port listen on this port instead of a free one (the caller makes sure it is free);
 *   without it, a node that exits at start because its port was taken meanwhile is started again on
 *   another port, a few times (tests run in parallel)
 * @param options.detached run in its own process group (see {@link startRedis})
 */
export async function startBroker(env: Record<string, string>, options: { port?: number; detached?: boolean } = {}): Promise<BrokerProcess> {
  if (options.port !== undefined) return startBrokerOnce(env, options.port, options);
  for (let attempt = 1; ; attempt++) {
    try {
      return await startBrokerOnce(env, await freePort(), options);
    } catch (err) {
      if (attempt >= 5 || !(err instanceof Error) || !err.message.includes('is already in use')) throw err;
    }
  }
}

/** How long a node process may take to answer `/health` before its start counts as failed, ms. */
const NODE_START_TIMEOUT_MS = 60_000;

async function startBrokerOnce(env: Record<string, string>, port: number, options: { detached?: boolean }): Promise<BrokerProcess> {
  let output = '';
  const child = spawn(process.execPath, [...brokerNodeFlags(), path.join(repoRoot, 'dist', 'src', 'main.js')], {
    cwd: repoRoot,
    env: { ...process.env, BROKER_PORT: String(port), BROKER_HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached === true,
  });
  if (options.detached !== true) killOnExit(child);
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  try {
    // A second or two on a quiet machine; far longer while every core is busy (the stress lane's CPU burners).
    await waitForHttp(port, NODE_START_TIMEOUT_MS, child);
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${(err as Error).message}\n${output}`);
  }
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    process: child,
    output: () => output,
    stop: async (signal: NodeJS.Signals = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(signal);
        await exited(child);
      }
      return child.exitCode;
    },
  };
}

/** A Redis Cluster of `redis-server` children on free loopback ports (see {@link startRedisCluster}). */
export interface RedisClusterProcesses {
  /** Every node as `127.0.0.1:<port>`, masters first: the seed list for `redis.clusterNodes`. */
  readonly nodes: readonly string[];
  /** The masters at creation, each owning a third (for 3) of the slots. */
  readonly masters: readonly string[];
  /** Replica node → the master it replicates, at creation. */
  readonly replicaOf: ReadonlyMap<string, string>;
  /** SIGKILLs one node (`host:port` from `nodes`) and waits for it to exit; its data directory stays until `stop`. */
  kill(node: string): Promise<void>;
  /** Sends a signal to one node (`host:port` from `nodes`) without waiting, e.g. SIGSTOP / SIGCONT to pause a replica. */
  signal(node: string, signal: NodeJS.Signals): void;
  /** Kills every node and removes their directories. */
  stop(): Promise<void>;
}

const execFileAsync = promisify(execFile);

/**
 * Starts a Redis Cluster for tests and local scale-out: `masters × (1 + replicasPerMaster)`
 * `redis-server` processes with `--cluster-enabled yes` (nothing persisted, each in a temporary
 * directory), joined by `redis-cli --cluster create`; resolves once every node reports
 * `cluster_state:ok` and knows every other node, and every replica's link to its master is up.
 * Needs `redis-server` and `redis-cli` (Redis ≥ 7) on PATH.
 * @param options.masters masters (≥ 3, Redis's minimum for a cluster; default 3)
 * @param options.replicasPerMaster replicas of each master (default 0)
 * @param options.nodeTimeoutMs `cluster-node-timeout`: how long a master may be unreachable before its
 *   replica takes over (default 2000; the failover test uses 1000)
 * @param options.detached run each node in its own process group (see {@link startRedis}; `npm run cluster`)
 * @throws Error when a process does not start or the cluster is not ready within `readyTimeoutMs` (default 30 s)
 */
export async function startRedisCluster(options: { masters?: number; replicasPerMaster?: number; nodeTimeoutMs?: number; readyTimeoutMs?: number; detached?: boolean } = {}): Promise<RedisClusterProcesses> {
  const masterCount = options.masters ?? 3;
  const replicas = options.replicasPerMaster ?? 0;
  const clusterArgs = ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', String(options.nodeTimeoutMs ?? 2000)];
  const processes: RedisProcess[] = [];
  const stop = async () => {
    await Promise.all(processes.map((p) => p.stop()));
  };
  try {
    for (let i = 0; i < masterCount * (1 + replicas); i++) processes.push(await startRedis({ extraArgs: clusterArgs, detached: options.detached === true }));
    const nodes = processes.map((p) => `127.0.0.1:${p.port}`);
    await execFileAsync('redis-cli', ['--cluster', 'create', ...nodes, '--cluster-replicas', String(replicas), '--cluster-yes'], { timeout: 60_000 });
    const roles = await waitForCluster(processes, options.readyTimeoutMs ?? 30_000);
    const masters = nodes.filter((n) => !roles.has(n));
    return {
      nodes: [...masters, ...nodes.filter((n) => roles.has(n))],
      masters,
      replicaOf: roles,
      signal: (node, signal) => {
        const target = processes.find((p) => `127.0.0.1:${p.port}` === node);
        if (!target) throw new Error(`no cluster node ${node}`);
        target.process.kill(signal);
      },
      kill: async (node) => {
        const target = processes.find((p) => `127.0.0.1:${p.port}` === node);
        if (!target) throw new Error(`no cluster node ${node}`);
        if (target.process.exitCode === null && target.process.signalCode === null) {
          target.process.kill('SIGKILL');
          await exited(target.process);
        }
      },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Polls every node until the cluster is whole. @returns replica → master (`host:port`) */
async function waitForCluster(processes: readonly RedisProcess[], timeoutMs: number): Promise<Map<string, string>> {
  const clients = processes.map((p) => new Redis(p.port, '127.0.0.1', { maxRetriesPerRequest: 1, lazyConnect: false }));
  const deadline = Date.now() + timeoutMs;
  let last = '';
  try {
    for (;;) {
      const infos = await Promise.all(clients.map((c) => c.cluster('INFO')));
      const whole = infos.every((info) => info.includes('cluster_state:ok') && info.includes(`cluster_known_nodes:${processes.length}\r`));
      if (whole) {
        const roles = replicaRoles((await clients[0]?.cluster('NODES')) as string);
        const links = await Promise.all(clients.map((c) => c.info('replication')));
        if (links.every((info) => !info.includes('role:slave') || info.includes('master_link_status:up'))) return roles;
        last = 'replica links not up';
      } else {
        last = infos.find((info) => !info.includes('cluster_state:ok')) ?? 'not every node knows every other';
      }
      if (Date.now() > deadline) throw new Error(`Redis Cluster not ready within ${timeoutMs} ms: ${last}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } finally {
    for (const c of clients) c.disconnect();
  }
}

/** Replica → master address from `CLUSTER NODES` (`<id> <ip:port@bus> <flags> <master id> ...`). */
function replicaRoles(clusterNodes: string): Map<string, string> {
  const rows = clusterNodes
    .trim()
    .split('\n')
    .map((line) => line.split(' '))
    .map(([id = '', address = '', flags = '', master = '']) => ({ id, address: address.split('@')[0] ?? '', flags, master }));
  const addressOf = new Map(rows.map((r) => [r.id, r.address]));
  const roles = new Map<string, string>();
  for (const r of rows) if (r.flags.includes('slave')) roles.set(r.address, addressOf.get(r.master) ?? '');
  return roles;
}
