import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBroker, startRedis, type BrokerProcess, type RedisProcess } from '../../scripts/local-processes.js';
import { call, type Answer } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';

/**
 * A publish never waits for Redis longer than its own `redis.commandTimeoutMs` (docs/operations.md
 * "Redis stalls"). A dedicated redis-server (never the harness Redis other files
 * share) is paused with SIGSTOP while publishes reach one node at different moments; each answer must
 * come within its own timeout of its own request, not after the timeouts of the requests before it
 * (before the fix, ioredis's auto-pipelining held a command issued while another pipeline was in
 * flight until that one timed out: with a 1 s timeout the publish sent at 100 ms answered after 1.96 s).
 */

/** Scenario parameters: the command timeout, how long Redis stays paused, when each publish is sent. */
const TIMEOUT_MS = 1000;
const PAUSE_MS = 3500;
const SEND_AT_MS = [0, 0, 100, 1200, 2300];
/** Documented margin of an answer over its deadline (timer and event-loop delay, the HTTP answer). */
const MARGIN_MS = 400;

let redis: RedisProcess;
let broker: BrokerProcess;

beforeAll(async () => {
  redis = await startRedis();
  const env = { BROKER_REDIS_URL: redis.url, BROKER_LOG_LEVEL: 'warn', BROKER_PUBLISH_WORKER_THREADS: '1', BROKER_REDIS_COMMAND_TIMEOUT_MS: String(TIMEOUT_MS) };
  // Another node registers the event types and stops, so the node under test has certainly never read
  // `stall.cold` (its cache must miss during the pause).
  const creator = await startBroker(env);
  for (const name of ['stall.orders', 'stall.cold']) expect((await call(creator.url, 'POST', '/event-types', businessEventType(name))).status).toBe(201);
  expect(await creator.stop()).toBe(0);
  broker = await startBroker(env);
  // Warm: the event type is cached and its schema measured, so the paused phase only waits for Redis.
  for (let i = 0; i < 3; i++) expect((await call(broker.url, 'POST', '/event-types/stall.orders/events', [orderEvent(`warm-${i}`)])).status).toBe(200);
});
afterAll(async () => {
  redis?.process.kill('SIGCONT');
  await broker?.stop();
  await redis?.stop();
});

interface Timed {
  readonly sentMs: number;
  readonly waitedMs: number;
  readonly answer: Answer;
}

/** Events stored in partition 0 of `name` (newest offset + 1), read from Redis directly. */
async function stored(name: string): Promise<number> {
  const client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  try {
    const keys = await client.keys(`*{et:${name}:0}*:meta`);
    return keys.length === 0 ? 0 : Number((await client.hget(keys[0] as string, 'next')) ?? 0);
  } finally {
    client.disconnect();
  }
}

describe('publishing while Redis stalls', () => {
  it('answers every publish within its own redis.commandTimeoutMs, whatever the publishes before it wait for', async () => {
    const before = await stored('stall.orders');
    redis.process.kill('SIGSTOP');
    const pausedAt = performance.now();
    // The pause is the scenario: Redis resumes after PAUSE_MS whatever happens.
    const resumed = new Promise<void>((resolve) =>
      setTimeout(() => {
        redis.process.kill('SIGCONT');
        resolve();
      }, PAUSE_MS),
    );
    let results: Timed[];
    let cold: Timed;
    try {
      const send = (path: string, body: unknown, atMs: number): Promise<Timed> =>
        new Promise<void>((resolve) => setTimeout(resolve, atMs)).then(async () => {
          const sent = performance.now();
          const answer = await call(broker.url, 'POST', path, body);
          return { sentMs: sent - pausedAt, waitedMs: performance.now() - sent, answer };
        });
      // A publish to an event type this node has not cached yet waits for its lookup too.
      const coldPublish = send('/event-types/stall.cold/events', [orderEvent('cold')], 100);
      results = await Promise.all(SEND_AT_MS.map((at, i) => send('/event-types/stall.orders/events', [orderEvent(`stalled-${i}`)], at)));
      cold = await coldPublish;
    } finally {
      await resumed;
    }
    console.log(
      `redis stall (timeout ${TIMEOUT_MS} ms, paused ${PAUSE_MS} ms): ${results
        .map((r) => `sent at ${r.sentMs.toFixed(0)} ms → ${r.answer.status} after ${r.waitedMs.toFixed(0)} ms`)
        .join('; ')}; uncached event type: ${cold.answer.status} after ${cold.waitedMs.toFixed(0)} ms`,
    );
    for (const r of results) {
      // Every one was sent while Redis was paused and answered within its own deadline.
      expect(r.sentMs + TIMEOUT_MS).toBeLessThan(PAUSE_MS);
      expect(r.waitedMs, `publish sent at ${r.sentMs.toFixed(0)} ms`).toBeLessThanOrEqual(TIMEOUT_MS + MARGIN_MS);
      expect(r.waitedMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
      expect(r.answer.status).toBe(207);
      expect(r.answer.json).toEqual([expect.objectContaining({ publishing_status: 'failed', step: 'publishing', detail: 'timed out' })]);
    }
    // The lookup wrote nothing: 503.
    expect(cold.waitedMs).toBeLessThanOrEqual(TIMEOUT_MS + MARGIN_MS);
    expect(cold.answer.status).toBe(503);

    // What `timed out` means (docs/operations.md "Redis stalls"): the scripts were sent, so Redis writes them when it resumes. A
    // client that retries a failed item may store it twice (at-least-once).
    expect(await stored('stall.orders')).toBe(before + SEND_AT_MS.length);
    expect((await call(broker.url, 'POST', '/event-types/stall.orders/events', [orderEvent('after')])).status).toBe(200);
    expect((await call(broker.url, 'POST', '/event-types/stall.cold/events', [orderEvent('after')])).status).toBe(200);
  }, 30_000);
});
