import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBroker, startRedis, type BrokerProcess, type RedisProcess } from '../../scripts/local-processes.js';
import { call, type Answer } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { parseExposition, valueOf } from '../support/prometheus-text.js';

/**
 * Publish deadlines (docs/publishing.md "Refusals and deadlines"): `X-Timeout: <ms>` (cut to
 * `publish.maxTimeoutMs`; without it `publish.defaultTimeoutMs`). A batch not validated by its deadline
 * is answered 503 `PUBLISH_DEADLINE_EXCEEDED` at the deadline with nothing written (or, validated but
 * not yet written, 207 with every item `aborted`); writes already sent are awaited, so the answer tells
 * each item's true state and nothing is written after an answer said it was not.
 * A dedicated redis-server (never the harness Redis other files share) is stopped with SIGSTOP to hold a
 * publish at a known step: an event type this node has not cached waits for its lookup; a cached one
 * goes through validation and waits for its partition write.
 */

const MAX_TIMEOUT_MS = 400;
const DEFAULT_TIMEOUT_MS = 300;
/** Documented margin of an answer over its deadline (timer and event-loop delay, the HTTP answer). */
const MARGIN_MS = 400;

let redis: RedisProcess;
let broker: BrokerProcess;

beforeAll(async () => {
  redis = await startRedis();
  const env = {
    BROKER_REDIS_URL: redis.url,
    BROKER_LOG_LEVEL: 'warn',
    BROKER_PUBLISH_WORKER_THREADS: '1',
    BROKER_REDIS_COMMAND_TIMEOUT_MS: '10000',
    BROKER_PUBLISH_MAX_TIMEOUT_MS: String(MAX_TIMEOUT_MS),
    BROKER_PUBLISH_DEFAULT_TIMEOUT_MS: String(DEFAULT_TIMEOUT_MS),
    // Longer than any deadline here: a quota check waiting on a stopped Redis outlasts the deadline.
    BROKER_PUBLISH_QUOTA_TIMEOUT_MS: '1000',
  };
  // Another node registers the cold event types once the node under test runs, so that node has never
  // cached them (a node caches the existing event types it prepares at start, in the background; for a
  // change another node announces it only prepares validators): its cache must miss while Redis is stopped.
  broker = await startBroker(env);
  expect((await call(broker.url, 'POST', '/event-types', businessEventType('deadline.orders'))).status).toBe(201);
  const creator = await startBroker(env);
  for (const name of ['deadline.cold1', 'deadline.cold2', 'deadline.cold3']) {
    expect((await call(creator.url, 'POST', '/event-types', businessEventType(name))).status).toBe(201);
  }
  expect(await creator.stop()).toBe(0);
  // Warm: the event type is cached and its schema measured, so a stopped Redis holds only its write.
  for (let i = 0; i < 3; i++) expect((await call(broker.url, 'POST', '/event-types/deadline.orders/events', [orderEvent(`warm-${i}`)])).status).toBe(200);
});
afterAll(async () => {
  redis?.process.kill('SIGCONT');
  await broker?.stop();
  await redis?.stop();
});

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

/** Runs `work` while Redis is stopped; Redis resumes once `work` settled, or after `resumeAfterMs` when given (the scenario's timing). */
async function whileRedisStopped<T>(work: () => Promise<T>, resumeAfterMs?: number): Promise<{ value: T; resumedAt: number }> {
  redis.process.kill('SIGSTOP');
  await untilStopped();
  let resumedAt = Number.POSITIVE_INFINITY;
  const resume = (): void => {
    if (resumedAt !== Number.POSITIVE_INFINITY) return;
    redis.process.kill('SIGCONT');
    resumedAt = performance.now();
  };
  const timer = resumeAfterMs === undefined ? undefined : setTimeout(resume, resumeAfterMs);
  try {
    const value = await work();
    return { value, resumedAt };
  } finally {
    clearTimeout(timer);
    resume();
  }
}

/**
 * Resolves once the kernel reports the redis-server stopped (`/proc/<pid>/status` state `T`): a SIGSTOP
 * sent soon after a SIGCONT can take effect late, letting a command through.
 */
async function untilStopped(): Promise<void> {
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline) {
    const state = readFileSync(`/proc/${redis.process.pid}/status`, 'utf8').split('\n').find((line) => line.startsWith('State:'));
    if (state?.includes('T') === true) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  throw new Error('redis-server did not stop');
}

/** A publish and how long its answer took, ms. */
async function timedPublish(name: string, events: readonly Record<string, unknown>[], headers: Record<string, string> = {}): Promise<{ answer: Answer; ms: number; answeredAt: number }> {
  const started = performance.now();
  const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, events, headers);
  const answeredAt = performance.now();
  return { answer, ms: answeredAt - started, answeredAt };
}

/** The deadline problem: 503, `Retry-After: 1`, naming the deadline and where it came from. */
function expectDeadlineProblem(answer: Answer, timeoutMs: number, source: string): void {
  expect(answer.status, answer.text).toBe(503);
  expect(answer.headers.get('retry-after')).toBe('1');
  expect(answer.headers.get('content-type')).toBe('application/problem+json');
  const problem = answer.json as { type: string; detail: string };
  expect(problem.type).toBe('/problems/publish-deadline-exceeded');
  expect(problem.detail).toBe(`The batch was not validated within its deadline of ${timeoutMs} ms (${source}); nothing was written`);
}

describe('publish deadlines', () => {
  it('X-Timeout passing while the event type is looked up: 503 at the deadline, nothing written', async () => {
    const { value: published } = await whileRedisStopped(() => timedPublish('deadline.cold1', [orderEvent('cold1')], { 'X-Timeout': '150' }));
    expectDeadlineProblem(published.answer, 150, 'X-Timeout');
    expect(published.ms).toBeGreaterThanOrEqual(140);
    expect(published.ms).toBeLessThan(150 + MARGIN_MS);
    expect(await stored('deadline.cold1')).toBe(0);
    // The node goes on: the same batch is written once Redis answers.
    expect((await call(broker.url, 'POST', '/event-types/deadline.cold1/events', [orderEvent('cold1-again')])).status).toBe(200);
  });

  it('an X-Timeout above publish.maxTimeoutMs is cut to it', async () => {
    const { value: published } = await whileRedisStopped(() => timedPublish('deadline.cold2', [orderEvent('cold2')], { 'X-Timeout': '600000' }));
    expectDeadlineProblem(published.answer, MAX_TIMEOUT_MS, 'X-Timeout');
    expect(published.ms).toBeLessThan(MAX_TIMEOUT_MS + MARGIN_MS);
    expect(await stored('deadline.cold2')).toBe(0);
  });

  it('without X-Timeout the deadline is publish.defaultTimeoutMs', async () => {
    const { value: published } = await whileRedisStopped(() => timedPublish('deadline.cold3', [orderEvent('cold3')]));
    expectDeadlineProblem(published.answer, DEFAULT_TIMEOUT_MS, 'publish.defaultTimeoutMs');
    expect(published.ms).toBeLessThan(DEFAULT_TIMEOUT_MS + MARGIN_MS);
    expect(await stored('deadline.cold3')).toBe(0);
  });

  it('a write already sent when the deadline passes is awaited: the answer says what was stored', async () => {
    const before = await stored('deadline.orders');
    const events = [orderEvent('in-flight-1'), orderEvent('in-flight-2')];
    // The scenario: Redis stays stopped three times the deadline, then resumes whatever happened.
    const { value: published, resumedAt } = await whileRedisStopped(() => timedPublish('deadline.orders', events, { 'X-Timeout': '100' }), 300);
    // The write was sent before the deadline (the event type is cached, the batch validated inline): the
    // node waited for it past the deadline, and its answer is the truth.
    expect(published.answeredAt).toBeGreaterThanOrEqual(resumedAt);
    expect(published.answer.status, published.answer.text).toBe(200);
    expect(await stored('deadline.orders')).toBe(before + events.length);
  });

  it('a batch still being validated at its deadline: answered with nothing written (503, or 207 with every item aborted)', async () => {
    const before = await stored('deadline.orders');
    // About 2 MB: validating it in a worker takes far longer than 1 ms.
    const events = Array.from({ length: 4000 }, (_, i) => orderEvent(`large-${i}`, { note: 'x'.repeat(400) }));
    const published = await timedPublish('deadline.orders', events, { 'X-Timeout': '1' });
    if (published.answer.status === 503) expectDeadlineProblem(published.answer, 1, 'X-Timeout');
    else {
      expect(published.answer.status, published.answer.text).toBe(207);
      const items = published.answer.json as { publishing_status: string; step: string }[];
      expect(items).toHaveLength(events.length);
      expect(new Set(items.map((i) => `${i.publishing_status} ${i.step}`))).toEqual(new Set(['aborted publishing']));
    }
    // The batch finishes in the one worker thread and is dropped: a batch behind it in that thread's queue
    // (too large for the main thread) is written after it, and the count shows that only that one was.
    const behind = Array.from({ length: 20 }, (_, i) => orderEvent(`behind-${i}`, { note: 'x'.repeat(400) }));
    expect((await call(broker.url, 'POST', '/event-types/deadline.orders/events', behind)).status).toBe(200);
    expect(await stored('deadline.orders')).toBe(before + behind.length);
  });

  it('a batch validated in time whose deadline passes before its write (a quota check waiting on Redis): 207 with every item aborted, nothing written', async () => {
    // A quota on the event type's owning application makes the publish ask Redis once the batch is
    // validated; with Redis stopped that check waits publish.quotaTimeoutMs (1,000 ms here) and lets the
    // batch go on (fail open), past its 200 ms deadline: the write is not sent.
    expect((await call(broker.url, 'PUT', '/settings/quotas/owning_application/test-app', { events_per_second: 1_000_000 })).status).toBe(200);
    try {
      const before = await stored('deadline.orders');
      const events = [orderEvent('late-1'), orderEvent('late-2')];
      const { value: published } = await whileRedisStopped(() => timedPublish('deadline.orders', events, { 'X-Timeout': '200' }));
      expect(published.answer.status, published.answer.text).toBe(207);
      const items = published.answer.json as { publishing_status: string; step: string; detail: string }[];
      expect(items.map((i) => [i.publishing_status, i.step])).toEqual([['aborted', 'publishing'], ['aborted', 'publishing']]);
      expect(items[0]?.detail).toBe('the deadline of 200 ms (X-Timeout) passed before the batch was written; nothing was written');
      expect(await stored('deadline.orders')).toBe(before);
    } finally {
      expect((await call(broker.url, 'DELETE', '/settings/quotas/owning_application/test-app')).status).toBe(204);
    }
  });

  it('refusals at the deadline are counted (a scrape reads every event type, so it comes after the cold lookups)', async () => {
    const refused = valueOf(parseExposition((await call(broker.url, 'GET', '/metrics')).text), 'broker_publish_refused_total', { reason: 'deadline' });
    expect(refused).toBeGreaterThanOrEqual(3);
  });

  it('a malformed X-Timeout is refused with 400, a zero one at once with 503; nothing written', async () => {
    const before = await stored('deadline.orders');
    const notNumber = await call(broker.url, 'POST', '/event-types/deadline.orders/events', [orderEvent('bad-header')], { 'X-Timeout': 'soon' });
    expect(notNumber.status, notNumber.text).toBe(400);
    expect((notNumber.json as { detail: string }).detail).toContain('X-Timeout');
    // 0 (or less): the deadline has passed already.
    const zero = await call(broker.url, 'POST', '/event-types/deadline.orders/events', [orderEvent('zero')], { 'X-Timeout': '0' });
    expectDeadlineProblem(zero, 0, 'X-Timeout');
    expect(await stored('deadline.orders')).toBe(before);
  });
});
