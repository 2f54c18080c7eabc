import { spawn } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot, startBroker, startRedis, type BrokerProcess, type RedisProcess } from '../../scripts/local-processes.js';
import { call, startTestBroker, startTestBrokerProcess } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { embeddedMaxmemoryBytes } from '../../src/storage/redis/embedded-redis.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

/** Runs the broker entry point to completion (for startup failures). */
function runToExit(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(repoRoot, 'dist', 'src', 'main.js')], { cwd: repoRoot, env: { ...process.env, BROKER_PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

describe('startup', () => {
  it('runs on the embedded default: a child redis-server with AOF on, a maxmemory and noeviction under the data directory, stopped on exit', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'broker-embedded-'));
    cleanups.push(() => Promise.resolve(rmSync(dataDir, { recursive: true, force: true })));
    const broker = await startBroker({ BROKER_REDIS_URL: '', BROKER_EMBEDDED_REDIS_DATA_DIR: dataDir, BROKER_LOG_LEVEL: 'info' });
    cleanups.push(() => broker.stop('SIGKILL'));
    expect((await call(broker.url, 'POST', '/event-types', businessEventType('embedded.et'))).status).toBe(201);
    expect((await call(broker.url, 'POST', '/event-types/embedded.et/events', [orderEvent('E1')])).status).toBe(200);

    const redis = new Redis({ path: path.join(dataDir, 'redis.sock') });
    expect(await redis.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
    expect(await redis.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
    expect(await redis.config('GET', 'dir')).toEqual(['dir', dataDir]);
    // Never unlimited: half the machine's memory by default (embeddedRedis.maxmemoryPercent).
    const [, maxmemory] = (await redis.config('GET', 'maxmemory')) as [string, string];
    expect(Number(maxmemory)).toBe(embeddedMaxmemoryBytes({ maxmemoryBytes: 0, maxmemoryPercent: 50 }));
    redis.disconnect();
    // So the node does not warn about an unlimited Redis.
    expect(broker.output()).not.toContain('has no maxmemory');

    expect(await broker.stop('SIGTERM')).toBe(0);
    const probe = new Redis({ path: path.join(dataDir, 'redis.sock'), lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    probe.on('error', () => undefined);
    await expect(probe.connect()).rejects.toThrow();
    probe.disconnect();

    // The data survives a restart (AOF).
    const again = await startBroker({ BROKER_REDIS_URL: '', BROKER_EMBEDDED_REDIS_DATA_DIR: dataDir });
    cleanups.push(() => again.stop('SIGKILL'));
    expect((await call(again.url, 'GET', '/event-types/embedded.et/partitions/0')).json).toMatchObject({ newest_available_offset: '001-0001-000000000000000000' });
    expect(await again.stop('SIGTERM')).toBe(0);
  });

  it('exits with a message saying how to install Redis or set BROKER_REDIS_URL when redis-server is missing', async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'broker-noredis-'));
    cleanups.push(() => Promise.resolve(rmSync(dataDir, { recursive: true, force: true })));
    const { code, output } = await runToExit({ BROKER_REDIS_URL: '', BROKER_EMBEDDED_REDIS_DATA_DIR: dataDir, BROKER_EMBEDDED_REDIS_BINARY: 'redis-server-that-is-not-installed' });
    expect(code).toBe(1);
    expect(output).toContain('was not found on PATH');
    expect(output).toContain('BROKER_REDIS_URL');
  });

  it('refuses invalid configuration with a message naming the key', async () => {
    const { code, output } = await runToExit({ BROKER_PUBLISH_MAX_EVENT_BYTES: 'lots' });
    expect(code).toBe(1);
    expect(output).toContain('publish.maxEventBytes');
    expect(output).toContain('BROKER_PUBLISH_MAX_EVENT_BYTES');
  });
});

describe('shutdown', () => {
  it('on SIGTERM finishes an in-flight publish, refuses nothing half-written, and exits 0', async () => {
    const broker = await startTestBrokerProcess();
    cleanups.push(() => broker.stop('SIGKILL'));
    await call(broker.url, 'POST', '/event-types', businessEventType('shutdown.et'));
    const big = Array.from({ length: 20_000 }, (_, i) => orderEvent(`S${i}`, { pad: 'x'.repeat(200) }));
    const { accepted, answer: inFlight } = postExpectingContinue(`${broker.url}/event-types/shutdown.et/events`, Buffer.from(JSON.stringify(big)));
    // The node has taken the request (its 100 Continue) before the signal: the publish is in flight.
    await accepted;
    const exit = broker.stop('SIGTERM');
    const answer = await inFlight;
    expect(answer.status).toBe(200);
    expect(await exit).toBe(0);
    const after = await startTestBroker({ BROKER_REDIS_KEY_PREFIX: broker.prefix });
    cleanups.push(() => after.stop());
    expect((await call(after.url, 'GET', '/event-types/shutdown.et/partitions/0')).json).toMatchObject({ newest_available_offset: '001-0001-000000000000019999' });
  });
});

/**
 * POSTs `body` as JSON with `Expect: 100-continue`: the body goes only after the node answered
 * 100 Continue, which it does once its handler has taken the request.
 * @returns `accepted` when the 100 Continue came (the body is then sent), `answer` with the final status
 */
function postExpectingContinue(url: string, body: Buffer): { accepted: Promise<void>; answer: Promise<{ status: number }> } {
  let accept: () => void = () => undefined;
  let refuse: (err: Error) => void = () => undefined;
  const accepted = new Promise<void>((resolve, reject) => ((accept = resolve), (refuse = reject)));
  const answer = new Promise<{ status: number }>((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': String(body.byteLength), expect: '100-continue' } });
    req.on('continue', () => {
      accept();
      req.end(body);
    });
    req.on('response', (res) => {
      refuse(new Error(`answered ${res.statusCode ?? 0} without 100 Continue`));
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
    });
    req.on('error', (err) => {
      refuse(err);
      reject(err);
    });
    req.flushHeaders();
  });
  return { accepted, answer };
}

/** GET `path` over a new connection (no kept-alive socket): proves the node still accepts connections. @returns the status */
function getOnNewConnection(url: string, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http.get(`${url}${path}`, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    }).on('error', reject);
  });
}

describe('signals other than SIGTERM and SIGINT', () => {
  it('SIGUSR1 (open the inspector) and SIGUSR2 leave the node serving new connections; SIGTERM still drains', async () => {
    // hyper-express's auto_close closed the listening socket on both and left the process running.
    const broker = await startTestBrokerProcess();
    cleanups.push(() => broker.stop('SIGKILL'));
    broker.process.kill('SIGUSR2');
    await expect.poll(() => broker.output(), { timeout: 10_000 }).toContain('signal ignored');
    expect(await getOnNewConnection(broker.url, '/health')).toBe(200);
    broker.process.kill('SIGUSR1');
    // Node answers SIGUSR1 by opening its inspector (or saying why it could not: the port may be taken).
    await expect.poll(() => broker.output(), { timeout: 10_000 }).toMatch(/Debugger listening|inspector/i);
    expect(await getOnNewConnection(broker.url, '/health')).toBe(200);
    expect(await broker.stop('SIGTERM')).toBe(0);
  });
});

describe('Redis outage', () => {
  let redis: RedisProcess;
  let broker: BrokerProcess;

  it('answers publishes quickly with 503 while Redis is down, and recovers by itself when it returns', async () => {
    redis = await startRedis();
    cleanups.push(() => redis.stop());
    broker = await startBroker({ BROKER_REDIS_URL: redis.url, BROKER_LOG_LEVEL: 'error', BROKER_REDIS_COMMAND_TIMEOUT_MS: '1000' });
    cleanups.push(() => broker.stop('SIGKILL'));
    await call(broker.url, 'POST', '/event-types', businessEventType('outage.et'));
    expect((await call(broker.url, 'POST', '/event-types/outage.et/events', [orderEvent('before')])).status).toBe(200);

    await redis.stop();
    for (let i = 0; i < 3; i++) {
      const started = Date.now();
      const answer = await call(broker.url, 'POST', '/event-types/outage.et/events', [orderEvent(`during${i}`)]);
      expect(Date.now() - started).toBeLessThan(2_500);
      expect(answer.status).toBe(503);
      expect(answer.headers.get('content-type')).toBe('application/problem+json');
      expect((answer.json as { detail: string }).detail).toMatch(/unavailable/i);
    }
    expect((await call(broker.url, 'GET', '/event-types/outage.et')).status).toBe(503);

    // Same port, new server (empty: nothing was persisted): the node reconnects without a restart.
    const restarted = await startRedisOnPort(redis.port);
    cleanups.push(() => restarted.stop());
    const deadline = Date.now() + 10_000;
    let status = 0;
    while (Date.now() < deadline) {
      status = (await call(broker.url, 'POST', '/event-types', businessEventType('outage.et2'))).status;
      if (status === 201) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(status).toBe(201);
    expect((await call(broker.url, 'POST', '/event-types/outage.et2/events', [orderEvent('after')])).status).toBe(200);
  });
});

async function startRedisOnPort(port: number): Promise<{ stop(): Promise<void> }> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const deadline = Date.now() + 10_000;
  for (;;) {
    const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
    probe.on('error', () => undefined);
    try {
      await probe.connect();
      probe.disconnect();
      break;
    } catch {
      probe.disconnect();
      if (Date.now() > deadline) throw new Error('redis did not restart');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return {
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGKILL');
      }),
  };
}

describe('retention', () => {
  it('trims events older than options.retention_time; offsets of kept events do not change', async () => {
    const broker = await startTestBroker({ BROKER_EVENT_TYPES_MIN_RETENTION_TIME_MS: '1000', BROKER_RETENTION_CHECK_INTERVAL_MS: '500' });
    cleanups.push(() => broker.stop());
    await call(broker.url, 'POST', '/event-types', businessEventType('retention.et', { options: { retention_time: 2000 } }));
    expect((await call(broker.url, 'POST', '/event-types/retention.et/events', [orderEvent('old1'), orderEvent('old2')])).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 3_200)); // old1 and old2 must outlive their 2 s retention_time
    expect((await call(broker.url, 'POST', '/event-types/retention.et/events', [orderEvent('new1')])).status).toBe(200);
    const deadline = Date.now() + 5_000;
    let partition: unknown;
    while (Date.now() < deadline) {
      partition = (await call(broker.url, 'GET', '/event-types/retention.et/partitions/0')).json;
      if ((partition as { oldest_available_offset: string }).oldest_available_offset === '001-0001-000000000000000002') break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(partition).toEqual({ partition: '0', oldest_available_offset: '001-0001-000000000000000002', newest_available_offset: '001-0001-000000000000000002' });
    const expired = await call(broker.url, 'POST', '/event-types/retention.et/cursors-lag', [{ partition: '0', offset: '001-0001-000000000000000000' }]);
    expect(expired.status).toBe(422);
    expect((expired.json as { detail: string }).detail).toContain('expired');
    const fromBegin = await call(broker.url, 'POST', '/event-types/retention.et/cursors-lag', [{ partition: '0', offset: 'BEGIN' }]);
    expect(fromBegin.json).toMatchObject([{ unconsumed_events: 1 }]);
  });
});
