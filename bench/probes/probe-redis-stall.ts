// Probe: how long publishes wait while Redis stalls, and why. Each mode starts its own
// redis-server on a free port (never a shared one) and pauses it with SIGSTOP.
//
//   npm run build && node dist/bench/probes/probe-redis-stall.js publish <pauseMs> <commandTimeoutMs> <sendAt,...>
//     a broker node; publishes of one event each sent at the given ms after the pause; prints each answer's
//     status and wait, and how many events Redis stored once it resumed (timed-out writes land late)
//   node dist/bench/probes/probe-redis-stall.js ioredis
//     a bare ioredis client (1 s commandTimeout), auto-pipelining on and off: commands issued at 0, 100
//     and 1,200 ms while Redis is paused 3.5 s, and when each one failed
//   node dist/bench/probes/probe-redis-stall.js throughput
//     16 concurrent script callers on one connection for 3 s, three rounds: auto-pipelining, plain writes,
//     and the broker's coalesced writes (`coalesceWrites`)
import { Redis } from 'ioredis';
import { coalesceWrites } from '../../src/storage/redis/redis-connection.js';
import { startBroker, startRedis } from '../../scripts/local-processes.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function publishMode(pauseMs: number, timeoutMs: number, sendAt: readonly number[]): Promise<void> {
  const redis = await startRedis();
  const broker = await startBroker({ BROKER_REDIS_URL: redis.url, BROKER_LOG_LEVEL: 'warn', BROKER_PUBLISH_WORKER_THREADS: '1', BROKER_REDIS_COMMAND_TIMEOUT_MS: String(timeoutMs) });
  const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; text: string }> => {
    const res = await fetch(broker.url + path, { method, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    return { status: res.status, text: await res.text() };
  };
  const event = (n: number): unknown => ({ n: String(n), metadata: { eid: crypto.randomUUID(), occurred_at: new Date().toISOString() } });
  try {
    const schema = JSON.stringify({ type: 'object', properties: { n: { type: 'string' } } });
    await call('POST', '/event-types', { name: 'probe.orders', owning_application: 'probe', category: 'business', enrichment_strategies: ['metadata_enrichment'], partition_strategy: 'random', schema: { type: 'json_schema', schema } });
    await call('POST', '/event-types/probe.orders/events', [event(0)]);
    redis.process.kill('SIGSTOP');
    const t0 = performance.now();
    const resumed = sleep(pauseMs).then(() => {
      redis.process.kill('SIGCONT');
      return performance.now() - t0;
    });
    const lines = await Promise.all(
      sendAt.map(async (at, i) => {
        await sleep(at);
        const sent = performance.now() - t0;
        const answer = await call('POST', '/event-types/probe.orders/events', [event(i + 1)]);
        const answered = performance.now() - t0;
        const detail = answer.status === 207 ? ` ${(JSON.parse(answer.text) as { detail: string }[])[0]?.detail ?? ''}` : '';
        return `publish ${i}: sent at ${sent.toFixed(0)} ms, answered ${answer.status} at ${answered.toFixed(0)} ms (waited ${(answered - sent).toFixed(0)} ms)${detail}`;
      }),
    );
    console.log(lines.join('\n'));
    console.log(`SIGCONT at ${(await resumed).toFixed(0)} ms`);
    const partitions = JSON.parse((await call('GET', '/event-types/probe.orders/partitions')).text) as { newest_available_offset: string }[];
    const stored = partitions.reduce((sum, p) => sum + Number(p.newest_available_offset.split('-').pop()) + 1, 0);
    console.log(`events stored after Redis resumed: ${stored} (1 before the pause + ${sendAt.length} sent during it)`);
  } finally {
    redis.process.kill('SIGCONT');
    await broker.stop();
    await redis.stop();
  }
}

async function ioredisMode(): Promise<void> {
  const redis = await startRedis();
  try {
    for (const auto of [true, false]) {
      const client = new Redis(redis.url, { commandTimeout: 1000, enableOfflineQueue: false, enableAutoPipelining: auto, maxRetriesPerRequest: 0 });
      await new Promise((resolve) => client.once('ready', resolve));
      redis.process.kill('SIGSTOP');
      const t0 = performance.now();
      const resumed = sleep(3500).then(() => redis.process.kill('SIGCONT'));
      const run = async (name: string, at: number): Promise<string> => {
        await sleep(at);
        const outcome = await client.set(`probe:${name}`, '1').then(
          () => 'ok',
          (err: unknown) => (err as Error).message,
        );
        return `${name} issued at ${at} ms: ${outcome} at ${(performance.now() - t0).toFixed(0)} ms`;
      };
      console.log(`auto-pipelining ${auto ? 'on' : 'off'}:`, await Promise.all([run('A', 0), run('B', 100), run('C', 1200)]));
      await resumed;
      client.disconnect();
    }
  } finally {
    redis.process.kill('SIGCONT');
    await redis.stop();
  }
}

async function throughputMode(): Promise<void> {
  const redis = await startRedis();
  try {
    for (let round = 1; round <= 3; round++) {
      for (const mode of ['auto-pipelining', 'plain', 'coalesced'] as const) {
        const client = new Redis(redis.url, { enableAutoPipelining: mode === 'auto-pipelining', lazyConnect: true });
        if (mode === 'coalesced') coalesceWrites(client);
        await client.connect();
        client.defineCommand('probeIncr', { numberOfKeys: 1, lua: "return redis.call('INCR', KEYS[1])" });
        const run = client as unknown as { probeIncr(key: string): Promise<number> };
        let calls = 0;
        const end = performance.now() + 3000;
        await Promise.all(
          Array.from({ length: 16 }, async (_, i) => {
            while (performance.now() < end) {
              await run.probeIncr(`probe:${i}`);
              calls++;
            }
          }),
        );
        console.log(`round ${round} ${mode}: ${Math.round(calls / 3)} script calls/s`);
        client.disconnect();
      }
    }
  } finally {
    await redis.stop();
  }
}

const [mode = 'publish', ...args] = process.argv.slice(2);
if (mode === 'publish') await publishMode(Number(args[0] ?? 7000), Number(args[1] ?? 5000), (args[2] ?? '0,0').split(',').map(Number));
else if (mode === 'ioredis') await ioredisMode();
else if (mode === 'throughput') await throughputMode();
else {
  console.error('modes: publish <pauseMs> <commandTimeoutMs> <sendAt,...> | ioredis | throughput');
  process.exit(2);
}
