import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, repoRoot, startBroker, type BrokerProcess } from '../../scripts/local-processes.js';
import { call } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';

// Starting, stopping and sharing a checkout: several nodes and builds of one checkout must not disturb
// each other. Every process here gets its own port
// (never 8080) and data directories under a temporary directory (never the checkout's ./data).

const cleanups: (() => Promise<unknown> | void)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A process whose output is collected; `waitFor` resolves on the first output matching, rejects on exit before. */
interface Spawned {
  readonly child: ChildProcess;
  output(): string;
  waitFor(pattern: string | RegExp, timeoutMs?: number): Promise<void>;
  /** Resolves with the exit code once the process exited. */
  readonly exited: Promise<number | null>;
}

function run(command: string, args: string[], options: { cwd?: string; env?: Record<string, string>; detached?: boolean } = {}): Spawned {
  const child = spawn(command, args, { cwd: options.cwd ?? repoRoot, env: { ...process.env, ...options.env }, stdio: ['ignore', 'pipe', 'pipe'], detached: options.detached === true });
  let output = '';
  const listeners = new Set<() => void>();
  const collect = (chunk: Buffer) => {
    output += chunk.toString();
    for (const listener of listeners) listener();
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) {
      if (options.detached && child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      else child.kill('SIGKILL');
    }
  });
  const matches = (pattern: string | RegExp) => (typeof pattern === 'string' ? output.includes(pattern) : pattern.test(output));
  return {
    child,
    output: () => output,
    exited,
    waitFor: (pattern, timeoutMs = 30_000) =>
      new Promise<void>((resolve, reject) => {
        const check = () => {
          if (!matches(pattern)) return;
          finish();
          resolve();
        };
        const timer = setTimeout(() => (finish(), reject(new Error(`no ${String(pattern)} within ${timeoutMs} ms; output:\n${output}`))), timeoutMs);
        const finish = () => {
          clearTimeout(timer);
          listeners.delete(check);
        };
        listeners.add(check);
        void exited.then(() => {
          if (matches(pattern)) return check();
          finish();
          reject(new Error(`exited before ${String(pattern)}; output:\n${output}`));
        });
        check();
      }),
  };
}

/** `npm start` in the checkout with its own port and data directory. */
function npmStart(port: number, dataDir: string): Spawned {
  return run('npm', ['start'], { env: { BROKER_PORT: String(port), BROKER_HOST: '127.0.0.1', BROKER_REDIS_URL: '', BROKER_EMBEDDED_REDIS_DATA_DIR: dataDir, BROKER_LOG_LEVEL: 'info', BROKER_PUBLISH_WORKER_THREADS: '1' } });
}

function canConnect(options: net.NetConnectOpts): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(options, () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

/** The broker's node process id from its `broker node listening` log line. */
function pidOf(output: string): number {
  const line = output.split('\n').find((l) => l.includes('broker node listening'));
  return (JSON.parse(line ?? '{}') as { pid?: number }).pid ?? -1;
}

async function publishes(url: string, eventType: string): Promise<number> {
  return (await call(url, 'POST', `/event-types/${eventType}/events`, [orderEvent('S1')])).status;
}

/** A node on the embedded default in `dataDir` (node started directly, as `npm start` ends up doing). */
async function embeddedNode(dataDir: string, env: Record<string, string> = {}): Promise<BrokerProcess> {
  const broker = await startBroker({ BROKER_REDIS_URL: '', BROKER_EMBEDDED_REDIS_DATA_DIR: dataDir, BROKER_LOG_LEVEL: 'info', BROKER_PUBLISH_WORKER_THREADS: '1', ...env });
  cleanups.push(() => broker.stop('SIGKILL'));
  return broker;
}

/** Runs the broker entry point until it exits (for refused starts). */
function refusedNode(env: Record<string, string>): Spawned {
  return run(process.execPath, [path.join(repoRoot, 'dist', 'src', 'main.js')], { env: { BROKER_HOST: '127.0.0.1', BROKER_PUBLISH_WORKER_THREADS: '1', ...env } });
}

describe('npm start', () => {
  it('a second start on a taken port exits 1 naming the port, the first keeps serving; kill of the npm process drains the node', async () => {
    const port = await freePort();
    const first = npmStart(port, path.join(tempDir('broker-start-a-'), 'data'));
    await first.waitFor('broker node listening');
    expect((await call(`http://127.0.0.1:${port}`, 'POST', '/event-types', businessEventType('start.one'))).status).toBe(201);

    const secondData = path.join(tempDir('broker-start-b-'), 'data');
    const second = npmStart(port, secondData);
    expect(await second.exited).toBe(1);
    expect(second.output()).toContain(`port ${port} on 127.0.0.1 is already in use`);
    expect(second.output()).toContain('BROKER_PORT');
    expect(existsSync(path.join(secondData, 'redis.owner'))).toBe(false); // refused before starting its Redis

    expect((await call(`http://127.0.0.1:${port}`, 'GET', '/health')).status).toBe(200);
    expect(await publishes(`http://127.0.0.1:${port}`, 'start.one')).toBe(200);

    // `kill <pid of npm start>`: npm forwards SIGTERM to its script, which is node itself (exec).
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(first.output()).toContain('"msg":"stopped"');
    expect(await canConnect({ host: '127.0.0.1', port })).toBe(false);
  });
});

describe('two nodes on one data directory (one checkout)', () => {
  it('the second refuses the owned embedded Redis and says how to use it; used as BROKER_REDIS_URL and stopped first, the owner is unaffected', async () => {
    const dataDir = path.join(tempDir('broker-share-'), 'data');
    const socket = path.join(dataDir, 'redis.sock');
    const owner = await embeddedNode(dataDir);
    await call(owner.url, 'POST', '/event-types', businessEventType('share.one'));
    expect(await publishes(owner.url, 'share.one')).toBe(200);

    const refused = refusedNode({ BROKER_PORT: String(await freePort()), BROKER_REDIS_URL: '', BROKER_EMBEDDED_REDIS_DATA_DIR: dataDir });
    expect(await refused.exited).toBe(1);
    const message = refused.output();
    expect(message).toContain(`belongs to another broker node (pid ${pidOf(owner.output())}, port `);
    expect(message).toContain(`BROKER_REDIS_URL=unix://${socket}`);
    expect(message).toContain('BROKER_EMBEDDED_REDIS_DATA_DIR');
    expect(await publishes(owner.url, 'share.one')).toBe(200); // the refused node shut nothing down

    // "Use it anyway": as an external Redis, which the second node never stops.
    const user = await startBroker({ BROKER_REDIS_URL: `unix://${socket}`, BROKER_LOG_LEVEL: 'info', BROKER_PUBLISH_WORKER_THREADS: '1' });
    cleanups.push(() => user.stop('SIGKILL'));
    expect(await publishes(user.url, 'share.one')).toBe(200);
    expect(await user.stop('SIGTERM')).toBe(0);

    expect(await canConnect({ path: socket })).toBe(true);
    expect((await call(owner.url, 'GET', '/health')).status).toBe(200);
    expect(await publishes(owner.url, 'share.one')).toBe(200);
    expect((await call(owner.url, 'GET', '/event-types/share.one/partitions/0')).json).toMatchObject({ newest_available_offset: '001-0001-000000000000000003' });

    expect(await owner.stop('SIGTERM')).toBe(0);
    expect(owner.output()).toContain('"msg":"stopped"');
    expect(await canConnect({ path: socket })).toBe(false); // only the owner stops it
    expect(existsSync(path.join(dataDir, 'redis.owner'))).toBe(false);
  });

  it('the owner stopped first stops its Redis (the other node then answers 503), and the next node starts its own on the kept data', async () => {
    const dataDir = path.join(tempDir('broker-share-'), 'data');
    const socket = path.join(dataDir, 'redis.sock');
    const owner = await embeddedNode(dataDir);
    await call(owner.url, 'POST', '/event-types', businessEventType('share.two'));
    const user = await startBroker({ BROKER_REDIS_URL: `unix://${socket}`, BROKER_LOG_LEVEL: 'info', BROKER_PUBLISH_WORKER_THREADS: '1' });
    cleanups.push(() => user.stop('SIGKILL'));
    expect(await publishes(user.url, 'share.two')).toBe(200);

    expect(await owner.stop('SIGTERM')).toBe(0);
    expect(await canConnect({ path: socket })).toBe(false);
    expect(await publishes(user.url, 'share.two')).toBe(503);
    expect(await user.stop('SIGTERM')).toBe(0);

    const next = await embeddedNode(dataDir);
    expect((await call(next.url, 'GET', '/event-types/share.two/partitions/0')).json).toMatchObject({ newest_available_offset: '001-0001-000000000000000000' });
    expect(await next.stop('SIGTERM')).toBe(0);
    expect(await canConnect({ path: socket })).toBe(false);
  });

  it('a Redis left running by a node killed with SIGKILL is adopted by the next node, which stops it on exit', async () => {
    const dataDir = path.join(tempDir('broker-adopt-'), 'data');
    const socket = path.join(dataDir, 'redis.sock');
    const killed = await embeddedNode(dataDir);
    await call(killed.url, 'POST', '/event-types', businessEventType('adopt.one'));
    expect(await publishes(killed.url, 'adopt.one')).toBe(200);
    await killed.stop('SIGKILL');
    expect(await canConnect({ path: socket })).toBe(true);
    expect((JSON.parse(readFileSync(path.join(dataDir, 'redis.owner'), 'utf8')) as { pid: number }).pid).toBe(pidOf(killed.output()));

    // Its maxmemory becomes what the adopting node is configured with.
    const next = await embeddedNode(dataDir, { BROKER_EMBEDDED_REDIS_MAXMEMORY_BYTES: '3000000000' });
    expect(next.output()).toContain('adopting the embedded Redis');
    const adopted = new Redis({ path: socket });
    expect(await adopted.config('GET', 'maxmemory')).toEqual(['maxmemory', '3000000000']);
    adopted.disconnect();
    expect((await call(next.url, 'GET', '/event-types/adopt.one/partitions/0')).json).toMatchObject({ newest_available_offset: '001-0001-000000000000000000' });
    expect(await next.stop('SIGTERM')).toBe(0);
    expect(await canConnect({ path: socket })).toBe(false);
  });
});

/** A port `p` with `p`..`p + count - 1` all free on the loopback address. */
async function freePortRun(count: number): Promise<number> {
  for (;;) {
    const base = await freePort();
    if (base + count > 65535) continue;
    const free = await Promise.all(
      Array.from({ length: count - 1 }, (_, i) => base + 1 + i).map(
        (p) =>
          new Promise<boolean>((resolve) => {
            const server = net.createServer();
            server.once('error', () => resolve(false));
            server.listen(p, '127.0.0.1', () => server.close(() => resolve(true)));
          }),
      ),
    );
    if (free.every(Boolean)) return base;
  }
}

describe('npm run cluster', () => {
  it('SIGINT to its npm process group (Ctrl+C in a terminal: npm gets it and forwards it too) drains: every node logs stopped, exit 0', async () => {
    const port = await freePortRun(4);
    const cluster = run('npm', ['run', 'cluster', '--', '--port', String(port), '--data-dir', path.join(tempDir('broker-cluster-'), 'redis')], {
      env: { BROKER_LOG_LEVEL: 'info', BROKER_PUBLISH_WORKER_THREADS: '1' },
      detached: true, // its own process group, as a terminal's foreground job
    });
    await cluster.waitFor('Local cluster up', 60_000);
    expect((await call(`http://127.0.0.1:${port}`, 'GET', '/health')).status).toBe(200);

    const npmPid = cluster.child.pid ?? 0;
    process.kill(-npmPid, 'SIGINT');
    // npm forwards its copy of the terminal's SIGINT to the launcher, which the kernel merges with the
    // terminal's when both are still pending: send npm one more once the launcher handled the first, so
    // the launcher surely sees the copy arrive while it drains.
    await cluster.waitFor('SIGINT: stopping the cluster');
    process.kill(npmPid, 'SIGINT');
    expect(await cluster.exited).toBe(0);
    const output = cluster.output();
    for (const node of ['broker-1', 'broker-2', 'broker-3']) expect(output).toMatch(new RegExp(`\\[${node}\\] .*"msg":"stopped"`));
    expect(output).toContain('nodes exited with 0, 0, 0; Redis stopped');
    expect(output).not.toContain('killing the cluster');
  }, 90_000);
});

describe('build', () => {
  it('several starts in one checkout build a stale dist/ once, the others wait and do not build again; a fresh dist/ is not rebuilt', async () => {
    // A checkout of its own, so the test never rebuilds the dist/ other tests run: the build script, its
    // configuration and the console as they are, and one small source file in place of the node's
    // sources (what is compiled does not change how builds wait for each other, only how long tsc takes).
    const copy = tempDir('broker-build-');
    for (const entry of ['scripts/build.mjs', 'ui', 'tsconfig.json', 'tsconfig.build.json', 'package.json', 'package-lock.json']) {
      cpSync(path.join(repoRoot, entry), path.join(copy, entry), { recursive: true });
    }
    mkdirSync(path.join(copy, 'src'));
    writeFileSync(path.join(copy, 'src', 'main.ts'), 'export const built = true;\n');
    symlinkSync(realpathSync(path.join(repoRoot, 'node_modules')), path.join(copy, 'node_modules'));
    mkdirSync(path.join(copy, 'dist'));

    const builds = [1, 2, 3].map(() => run(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: copy }));
    expect(await Promise.all(builds.map((b) => b.exited))).toEqual([0, 0, 0]);
    const outputs = builds.map((b) => b.output());
    expect(outputs.filter((o) => o.includes('build: built dist/'))).toHaveLength(1);
    // The others waited for it (or, started after it finished, found dist/ fresh): none built again.
    expect(outputs.filter((o) => o.includes('build: built dist/') || o.includes('build: waiting for the build of process') || o === '')).toHaveLength(3);
    expect(existsSync(path.join(copy, 'dist', 'src', 'main.js'))).toBe(true);
    expect(existsSync(path.join(copy, '.build.lock'))).toBe(false);
    expect(existsSync(path.join(copy, '.build-tmp'))).toBe(false);

    const again = run(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: copy });
    expect(await again.exited).toBe(0);
    expect(again.output()).toBe('');
  }, 120_000);
});
