import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { call, startTestBroker, uniquePrefix, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent, schemaText } from '../support/fixtures.js';
import { parseExposition, valueOf } from '../support/prometheus-text.js';

/**
 * No cold path (docs/decisions/0019-validators-prepared-before-the-first-batch.md). Creating or changing
 * an event type compiles its validator in every worker thread before the registry answers, on the node that took the request, and on every other node when the
 * change notice reaches it; a cheap schema's validator is also instantiated on the main thread from code a
 * worker generated. So the first batch needs no compilation: a small one is validated on the main thread
 * (no worker task), a large one in a worker that holds the validator (one task: no round trip for the
 * schema text). A schema over the main thread's budget never gets a main-thread validator.
 */

const THREADS = 2;
let nodes: TestBroker[];
let prefix: string;

beforeAll(async () => {
  prefix = uniquePrefix();
  nodes = await Promise.all([0, 1].map(() => startTestBroker({ BROKER_REDIS_KEY_PREFIX: prefix, BROKER_PUBLISH_WORKER_THREADS: String(THREADS) })));
  // Both nodes register the broker's own event types as they start, and each prepares those the other
  // created when the change notice arrives, possibly after it listens: the counts the tests compare
  // are settled once every node holds the validators of every existing event type.
  const existing = JSON.parse((await call(node(0).url, 'GET', '/event-types')).text) as { category: string }[];
  const validated = existing.filter((e) => e.category !== 'undefined').length;
  for (const i of [0, 1]) await vi.waitFor(async () => expect((await counts(i)).workers).toBe(validated * THREADS), { timeout: 10_000, interval: 50 });
});
afterAll(async () => {
  const codes = await Promise.all(nodes.map((n) => n.stop()));
  expect(codes, nodes.map((n) => n.output()).join('\n')).toEqual([0, 0]);
});

const node = (i: number): TestBroker => nodes[i] as TestBroker;

interface Counts {
  main: number;
  workers: number;
  tasks: number;
}

async function counts(i: number): Promise<Counts> {
  const exposition = parseExposition((await call(node(i).url, 'GET', '/metrics')).text);
  return {
    main: valueOf(exposition, 'broker_cache_entries', { cache: 'main_thread_validators' }) ?? NaN,
    workers: valueOf(exposition, 'broker_cache_entries', { cache: 'worker_validators' }) ?? NaN,
    tasks: valueOf(exposition, 'broker_worker_pool_tasks_completed_total') ?? NaN,
  };
}

/** A schema whose one property expands to 2^levels subschema applications (`allOf` of two `$ref`s per level). */
function fanOutSchema(levels: number): string {
  const definitions: Record<string, unknown> = { d0: { type: 'string' } };
  for (let i = 1; i <= levels; i++) definitions[`d${i}`] = { allOf: [{ $ref: `#/definitions/d${i - 1}` }, { $ref: `#/definitions/d${i - 1}` }] };
  return schemaText({ order_number: { $ref: `#/definitions/d${levels}` } }, ['order_number'], { definitions });
}

describe('validators are ready before the first batch', () => {
  it('a cheap schema: compiled in every worker and instantiated on the main thread of both nodes; the first batches compile nothing', async () => {
    const before = await Promise.all([counts(0), counts(1)]);
    expect((await call(node(0).url, 'POST', '/event-types', businessEventType('warmup.cheap'))).status).toBe(201);

    // The node that took the request is ready when it answers.
    const created = await counts(0);
    expect(created.main).toBe((before[0]).main + 1);
    expect(created.workers).toBe((before[0]).workers + THREADS);
    // The other node once the change notice reached it.
    await expect.poll(async () => (await counts(1)).main, { timeout: 10_000 }).toBe((before[1]).main + 1);
    await expect.poll(async () => (await counts(1)).workers, { timeout: 10_000 }).toBe((before[1]).workers + THREADS);

    // A small batch on the other node: validated on its main thread, no worker task.
    const ready = await counts(1);
    expect((await call(node(1).url, 'POST', '/event-types/warmup.cheap/events', [orderEvent('o1')])).status).toBe(200);
    expect((await counts(1)).tasks).toBe(ready.tasks);
    // A large batch: one worker task, which held the validator (no second task carrying the schema text).
    const large = Array.from({ length: 200 }, (_, i) => orderEvent(`o${i}`));
    expect((await call(node(1).url, 'POST', '/event-types/warmup.cheap/events', large)).status).toBe(200);
    expect((await counts(1)).tasks).toBe(ready.tasks + 1);
  });

  it('a node that only heard of an event type drops its validators when it is deleted', async () => {
    const before = await counts(1);
    expect((await call(node(0).url, 'POST', '/event-types', businessEventType('warmup.gone', { schema: { type: 'json_schema', schema: schemaText({ gone: { type: 'string' } }) } }))).status).toBe(201);
    await expect.poll(async () => (await counts(1)).main, { timeout: 10_000 }).toBe(before.main + 1);
    await expect.poll(async () => (await counts(1)).workers, { timeout: 10_000 }).toBe(before.workers + THREADS);
    expect((await call(node(0).url, 'DELETE', '/event-types/warmup.gone')).status).toBe(200);
    await expect.poll(async () => (await counts(1)).main, { timeout: 10_000 }).toBe(before.main);
    await expect.poll(async () => (await counts(1)).workers, { timeout: 10_000 }).toBe(before.workers);
  });

  it('a schema over the main thread budget: compiled in the workers only', async () => {
    const before = await counts(0);
    const body = businessEventType('warmup.costly', { schema: { type: 'json_schema', schema: fanOutSchema(6) } });
    const answer = await call(node(0).url, 'POST', '/event-types', body);
    expect(answer.status, answer.text).toBe(201);
    const after = await counts(0);
    expect(after.workers).toBe(before.workers + THREADS);
    expect(after.main).toBe(before.main);
    // Its first small batch goes to a worker that holds the validator: one task.
    expect((await call(node(0).url, 'POST', '/event-types/warmup.costly/events', [orderEvent('o1')])).status).toBe(200);
    expect((await counts(0)).tasks).toBe(after.tasks + 1);
  });

  it('a schema change: the new version is compiled before the update answers', async () => {
    expect((await call(node(0).url, 'POST', '/event-types', businessEventType('warmup.changed'))).status).toBe(201);
    const before = await counts(0);
    const changed = businessEventType('warmup.changed', {
      schema: { type: 'json_schema', schema: schemaText({ order_number: { type: 'string' }, amount: { type: 'number' }, note: { type: 'string' } }, ['order_number']) },
    });
    const answer = await call(node(0).url, 'PUT', '/event-types/warmup.changed', changed);
    expect(answer.status, answer.text).toBe(200);
    // The old schema key was retired (dropped everywhere), the new one compiled: the counts are unchanged,
    // and a small batch of the new version runs on the main thread.
    const after = await counts(0);
    expect(after.main).toBe(before.main);
    // The workers report their counts as they answer tasks: the retired key's `forget` round may answer later.
    await expect.poll(async () => (await counts(0)).workers, { timeout: 10_000 }).toBe(before.workers);
    const settled = await counts(0);
    expect((await call(node(0).url, 'POST', '/event-types/warmup.changed/events', [orderEvent('o1', { note: 'n' })])).status).toBe(200);
    expect((await counts(0)).tasks).toBe(settled.tasks);
  });

  it('a node started after an event type was created prepares it before it listens: its first batches compile nothing', async () => {
    expect((await call(node(0).url, 'POST', '/event-types', businessEventType('warmup.existing'))).status).toBe(201);
    const later = await startTestBroker({ BROKER_REDIS_KEY_PREFIX: prefix, BROKER_PUBLISH_WORKER_THREADS: String(THREADS) });
    try {
      nodes.push(later);
      // Prepared before it answered anything: validators in its workers and, for the cheap schemas, on its main thread.
      const ready = await counts(2);
      expect(ready.workers).toBeGreaterThanOrEqual(THREADS);
      expect(ready.main).toBeGreaterThan(0);
      // A small batch: validated on the main thread, no worker task.
      expect((await call(later.url, 'POST', '/event-types/warmup.existing/events', [orderEvent('o1')])).status).toBe(200);
      expect((await counts(2)).tasks).toBe(ready.tasks);
      // A large batch: one worker task, which held the validator.
      const large = Array.from({ length: 200 }, (_, i) => orderEvent(`o${i}`));
      expect((await call(later.url, 'POST', '/event-types/warmup.existing/events', large)).status).toBe(200);
      expect((await counts(2)).tasks).toBe(ready.tasks + 1);
    } finally {
      nodes.pop();
      expect(await later.stop(), later.output()).toBe(0);
    }
  });

  it('a starting node prepares no more existing event types than its worker validator cache holds (bytes)', async () => {
    // The two newest event types are prepared first; room for one validator (each is estimated at 32 KB or more).
    for (const name of ['warmup.bytes1', 'warmup.bytes2']) expect((await call(node(0).url, 'POST', '/event-types', businessEventType(name))).status).toBe(201);
    const later = await startTestBroker({ BROKER_REDIS_KEY_PREFIX: prefix, BROKER_PUBLISH_WORKER_THREADS: String(THREADS), BROKER_CACHES_WORKER_VALIDATOR_BYTES: '60000', BROKER_LOG_LEVEL: 'info' });
    try {
      const line = later
        .output()
        .split('\n')
        .find((l) => l.includes('validators of existing event types prepared'));
      expect(line, later.output()).toBeDefined();
      const logged = JSON.parse(line ?? '{}') as { prepared?: number; eventTypes?: number };
      expect(logged.prepared).toBe(1);
      expect(logged.eventTypes).toBeGreaterThan(1);
    } finally {
      expect(await later.stop(), later.output()).toBe(0);
    }
  });
});
