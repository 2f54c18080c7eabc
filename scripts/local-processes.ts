/**
 * Plain-process topology for tests, benchmarks and local scale-out: a `redis-server` on a free
 * loopback port and broker nodes (`node dist/src/main.js`) on free ports. Used by the test harness
 * (`test/support`), `bench/` and scripts; no Docker needed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../src/storage/free-port.js';

export { freePort };

/** Repository root, from `scripts/` or `dist/scripts/`. */
export const repoRoot = (() => {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const up = path.resolve(here, '..');
  return path.basename(up) === 'dist' ? path.dirname(up) : up;
})();

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
 */
export async function startRedis(options: { appendonly?: boolean; extraArgs?: string[] } = {}): Promise<RedisProcess> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'broker-redis-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', options.appendonly ? 'yes' : 'no', '--maxmemory-policy', 'noeviction', ...(options.extraArgs ?? [])];
  const child = spawn('redis-server', args, { stdio: 'ignore' });
  child.once('error', () => undefined);
  await waitForPort(port, 10_000, child);
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    process: child,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await exited(child);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Node flags a broker runs with, as in `npm start`: a 64 MB young generation halves the scavenges under
 * many small requests (single-event publish p99 5.5 → 4.5 ms in bench/single-event.ts).
 */
export const BROKER_NODE_FLAGS = ['--max-semi-space-size=64'] as const;

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
 */
export async function startBroker(env: Record<string, string>): Promise<BrokerProcess> {
  const port = await freePort();
  let output = '';
  const child = spawn(process.execPath, [...BROKER_NODE_FLAGS, path.join(repoRoot, 'dist', 'src', 'main.js')], {
    cwd: repoRoot,
    env: { ...process.env, BROKER_PORT: String(port), BROKER_HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  try {
    await waitForPort(port, 20_000, child);
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
