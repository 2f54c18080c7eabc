import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { freePort, repoRoot, startRedis, startRedisCluster } from '../../scripts/local-processes.js';

/**
 * A node refuses a Redis that does not meet the broker's requirements (src/storage/redis/redis-checks.ts):
 * it exits 1 with a message naming what it found and how to fix it, and never opens its HTTP port.
 * Each test starts Redis servers of its own, so the file runs once (project `integration`).
 */

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** Runs a broker node until it exits. @returns its exit code and everything it wrote */
async function refusedStart(port: number, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [path.join(repoRoot, 'dist', 'src', 'main.js')], {
    cwd: repoRoot,
    env: { ...process.env, BROKER_PORT: String(port), BROKER_HOST: '127.0.0.1', BROKER_PUBLISH_WORKER_THREADS: '1', BROKER_REDIS_KEY_PREFIX: `t${randomUUID().slice(0, 8)}:`, BROKER_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    return Promise.resolve();
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  return { code, output };
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port }, () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

/**
 * A stand-in for an old Redis on a free port: answers `INFO` as Redis `version` would (with noeviction),
 * `+OK` to `CLIENT`, `SELECT` and `PING`, an error to anything else. Enough for a node to connect and check it.
 */
async function oldRedis(version: string): Promise<{ port: number; close: () => Promise<void> }> {
  const info = `# Server\r\nredis_version:${version}\r\nredis_mode:standalone\r\n\r\n# Memory\r\nmaxmemory_policy:noeviction\r\n\r\n# Persistence\r\nloading:0\r\n`;
  const server = net.createServer((socket) => {
    let pending = '';
    socket.on('data', (chunk: Buffer) => {
      pending += chunk.toString('latin1');
      // Each command is a RESP array of bulk strings: *<n>\r\n($<len>\r\n<arg>\r\n)*n
      for (;;) {
        const match = /^\*(\d+)\r\n/.exec(pending);
        if (!match) return;
        const args: string[] = [];
        let at = match[0].length;
        for (let i = 0; i < Number(match[1]); i++) {
          const head = /^\$(\d+)\r\n/.exec(pending.slice(at));
          if (!head || pending.length < at + head[0].length + Number(head[1]) + 2) return;
          at += head[0].length;
          args.push(pending.slice(at, at + Number(head[1])));
          at += Number(head[1]) + 2;
        }
        pending = pending.slice(at);
        const name = (args[0] ?? '').toLowerCase();
        if (name === 'info') socket.write(`$${Buffer.byteLength(info)}\r\n${info}\r\n`);
        else if (name === 'client' || name === 'select' || name === 'ping') socket.write('+OK\r\n');
        else socket.write(`-ERR unknown command '${name}'\r\n`);
      }
    });
    socket.on('error', () => undefined);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

describe.skipIf(inject('clusterNodes').length > 0)('a Redis the broker cannot use', () => {
  it('a Redis older than 7.0: exit 1 naming the version found and the one needed', async () => {
    const old = await oldRedis('6.2.14');
    cleanups.push(() => old.close());
    const port = await freePort();
    const { code, output } = await refusedStart(port, { BROKER_REDIS_URL: `redis://127.0.0.1:${old.port}` });
    expect(code, output).toBe(1);
    expect(output).toContain(`the Redis at 127.0.0.1:${old.port} is version 6.2.14; the broker needs Redis 7.0.0 or later`);
    expect(output).not.toContain('maxmemory-policy');
    expect(await listening(port)).toBe(false);
  });

  it('maxmemory-policy allkeys-lru: exit 1 naming the policy and the fix, the HTTP port never opened', async () => {
    const redis = await startRedis({ extraArgs: ['--maxmemory-policy', 'allkeys-lru'] });
    cleanups.push(() => redis.stop());
    const port = await freePort();
    const { code, output } = await refusedStart(port, { BROKER_REDIS_URL: redis.url });
    expect(code, output).toBe(1);
    expect(output).toContain('maxmemory-policy allkeys-lru');
    expect(output).toContain(`127.0.0.1:${redis.port}`);
    expect(output).toContain('CONFIG SET maxmemory-policy noeviction');
    expect(output).not.toContain('broker node listening');
    expect(await listening(port)).toBe(false);
  });

  it('with CONFIG disabled (as managed services do), the policy is read from INFO and still refused', async () => {
    const redis = await startRedis({ extraArgs: ['--maxmemory-policy', 'volatile-lru', '--rename-command', 'CONFIG', '""'] });
    cleanups.push(() => redis.stop());
    const probe = new Redis(redis.url, { maxRetriesPerRequest: 0 });
    await expect(probe.call('CONFIG', 'GET', 'maxmemory-policy')).rejects.toThrow(/unknown command/i);
    probe.disconnect();
    const port = await freePort();
    const { code, output } = await refusedStart(port, { BROKER_REDIS_URL: redis.url });
    expect(code, output).toBe(1);
    expect(output).toContain('maxmemory-policy volatile-lru');
    expect(await listening(port)).toBe(false);
  });

  it('a Redis Cluster: every master is checked, the one evicting is named', async () => {
    const cluster = await startRedisCluster({ masters: 3 });
    cleanups.push(() => cluster.stop());
    const [seed, , last] = cluster.masters;
    const [host, lastPort] = (last ?? '').split(':');
    const node = new Redis(Number(lastPort), host ?? '127.0.0.1', { maxRetriesPerRequest: 0 });
    await node.config('SET', 'maxmemory-policy', 'allkeys-lfu');
    node.disconnect();
    const port = await freePort();
    // Only the first master is given: the others are found through it.
    const { code, output } = await refusedStart(port, { BROKER_REDIS_URL: '', BROKER_REDIS_CLUSTER_NODES: JSON.stringify([seed]) });
    expect(code, output).toBe(1);
    expect(output).toContain(`the Redis at ${last ?? ''} has maxmemory-policy allkeys-lfu`);
    expect(output).not.toContain(`the Redis at ${seed ?? ''} has`);
    expect(await listening(port)).toBe(false);
  });
});
