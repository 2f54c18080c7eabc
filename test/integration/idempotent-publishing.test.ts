import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fnv1a32 } from '../../src/domain/event-type/partitioner.js';
import type { RedisClient } from '../../src/storage/redis/redis-connection.js';
import { call, harnessRedis, startTestBroker, uniquePrefix, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { decodeEntry } from '../../src/domain/batch/entry-codec.js';

/**
 * Idempotent publishing (docs/publishing.md "Idempotent publishing"): with the event type annotation
 * `broker.io/idempotency-window-seconds`, an event whose `metadata.eid` a partition stored within the
 * window is not stored again and counts as submitted, on every node and across restarts.
 */

const WINDOW = 'broker.io/idempotency-window-seconds';
const prefix = uniquePrefix();
let first: TestBroker;
let second: TestBroker;
let redis: RedisClient;

beforeAll(async () => {
  [first, second] = await Promise.all([startTestBroker({ BROKER_REDIS_KEY_PREFIX: prefix }), startTestBroker({ BROKER_REDIS_KEY_PREFIX: prefix })]);
  redis = harnessRedis();
});
afterAll(async () => {
  await Promise.all([first.stop(), second.stop()]);
  redis.disconnect();
});

const fourPartitions = { default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: 4, write_parallelism: 4 } };

async function createEventType(name: string, overrides: Record<string, unknown> = {}): Promise<void> {
  const created = await call(first.url, 'POST', '/event-types', businessEventType(name, { ...fourPartitions, annotations: { [WINDOW]: '60' }, ...overrides }));
  expect(created.status, created.text).toBe(201);
}

/** `n` events with fresh eids (with `userDefined`, `metadata.partition` spread over 4 partitions). */
function events(n: number, userDefined = false): Record<string, unknown>[] {
  return Array.from({ length: n }, (_, i) => orderEvent(`order-${i}-${randomUUID()}`, { metadata: { eid: randomUUID(), occurred_at: new Date().toISOString(), ...(userDefined ? { partition: String(i % 4) } : {}) } }));
}

const eidOf = (event: Record<string, unknown>): string => (event.metadata as { eid: string }).eid;

/** How often each eid is stored in the event type's partitions `0..3`. */
async function storedEids(name: string): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (let p = 0; p < 4; p++) {
    // Read as the broker reads: an event type the annotation is off for stores its batches compressed (field `z`).
    for (const [, fields] of await redis.xrangeBuffer(first.keys.partitionLog(name, 1, String(p)), '-', '+')) {
      const data = decodeEntry(fields[2] ?? 'd', fields[3] ?? Buffer.alloc(0)).toString();
      for (const text of data.split('\n')) {
        const eid = (JSON.parse(text) as { metadata: { eid: string } }).metadata.eid;
        counts.set(eid, (counts.get(eid) ?? 0) + 1);
      }
    }
  }
  return counts;
}

/** Every eid of `batch` is stored exactly once, and nothing else is stored. */
async function expectStoredOnce(name: string, batch: readonly Record<string, unknown>[]): Promise<void> {
  const stored = await storedEids(name);
  expect([...stored.values()].every((n) => n === 1), JSON.stringify([...stored])).toBe(true);
  expect([...stored.keys()].sort()).toEqual(batch.map(eidOf).sort());
}

async function publish(node: TestBroker, name: string, batch: readonly Record<string, unknown>[]): Promise<number> {
  const answer = await call(node.url, 'POST', `/event-types/${name}/events`, batch);
  expect([200, 207], answer.text).toContain(answer.status);
  return answer.status;
}

describe('idempotent publishing', () => {
  for (const strategy of ['random', 'hash', 'user_defined'] as const) {
    it(`stores a batch sent twice once, and a batch mixing stored and new eids only the new ones, in order (${strategy})`, async () => {
      const name = `idem.twice-${strategy.replace('_', '-')}`;
      await createEventType(name, { partition_strategy: strategy, ...(strategy === 'hash' ? { partition_key_fields: ['order_number'] } : {}) });
      const batch = events(40, strategy === 'user_defined');
      expect(await publish(first, name, batch)).toBe(200);
      const answer = await call(first.url, 'POST', `/event-types/${name}/events`, batch);
      expect(answer.status).toBe(200);
      await expectStoredOnce(name, batch);
      const more = events(10, strategy === 'user_defined');
      const mixed = [batch[0], more[0], batch[1], ...more.slice(1)] as Record<string, unknown>[];
      expect(await publish(first, name, mixed)).toBe(200);
      await expectStoredOnce(name, [...batch, ...more]);
      // The new events are stored in the order they were sent, after the earlier ones, per partition.
      const stored = (await redis.xrange(first.keys.partitionLog(name, 1, '0'), '-', '+')).flatMap(([, f]) => (f[f.indexOf('d') + 1] ?? '').split('\n').map((t) => (JSON.parse(t) as { metadata: { eid: string } }).metadata.eid));
      const expected = [...batch, ...more].filter((e) => stored.includes(eidOf(e))).map(eidOf);
      expect(stored).toEqual(expected);
    });
  }

  it('with random partitioning, derives each partition from the eid, so a retry lands where the first attempt did', async () => {
    const name = 'idem.random-partition';
    await createEventType(name);
    const batch = events(20);
    await publish(first, name, batch);
    for (let p = 0; p < 4; p++) {
      const entries = await redis.xrange(first.keys.partitionLog(name, 1, String(p)), '-', '+');
      const eids = entries.flatMap(([, f]) => (f[f.indexOf('d') + 1] ?? '').split('\n').map((t) => (JSON.parse(t) as { metadata: { eid: string } }).metadata.eid));
      for (const eid of eids) expect(fnv1a32(eid) % 4).toBe(p);
    }
  });

  for (const cleanup of ['delete', 'compact'] as const) {
    it(`stores only the first event of an eid a batch repeats, beside new and stored eids, in order (cleanup_policy ${cleanup})`, async () => {
      const name = `idem.repeats-${cleanup}`;
      await createEventType(name, { partition_strategy: 'user_defined', cleanup_policy: cleanup });
      const inPartition0 = (batch: readonly Record<string, unknown>[]): Record<string, unknown>[] =>
        batch.map((e) => ({ ...e, metadata: { ...(e.metadata as object), partition: '0', ...(cleanup === 'compact' ? { partition_compaction_key: eidOf(e) } : {}) } }));
      const stored = inPartition0(events(3));
      const fresh = inPartition0(events(3));
      const once = inPartition0(events(1));
      expect(await publish(first, name, stored)).toBe(200);
      const [s0, s1] = stored as [Record<string, unknown>, Record<string, unknown>];
      const [f0, f1, f2] = fresh as [Record<string, unknown>, Record<string, unknown>, Record<string, unknown>];
      const [o] = once as [Record<string, unknown>];
      expect(await publish(first, name, [f0, s0, f0, f1, s1, f1, f2, f0])).toBe(200);
      expect(await publish(second, name, [o, o, o])).toBe(200);
      const log = (await redis.xrange(first.keys.partitionLog(name, 1, '0'), '-', '+')).flatMap(([, f]) => (f[f.indexOf('d') + 1] ?? '').split('\n').map((t) => (JSON.parse(t) as { metadata: { eid: string } }).metadata.eid));
      expect(log).toEqual([...stored, ...fresh, ...once].map(eidOf));
    });
  }

  it('compares eids as uuids: the same uuid in upper case or with a urn:uuid: prefix is the same eid', async () => {
    const name = 'idem.uuid-texts';
    await createEventType(name);
    const batch = events(12);
    expect(await publish(first, name, batch)).toBe(200);
    const retexted = batch.map((e, i) => {
      const eid = eidOf(e);
      return { ...e, metadata: { ...(e.metadata as object), eid: i % 2 === 0 ? eid.toUpperCase() : `urn:uuid:${eid}` } };
    });
    expect(await publish(second, name, retexted)).toBe(200);
    await expectStoredOnce(name, batch);
  });

  it('after a 207, the whole batch retried stores every eid once', async () => {
    const name = 'idem.partial';
    await createEventType(name);
    const batch = events(40);
    // Break partition 1's counters so its script fails while the other partitions write normally.
    const meta = first.keys.partitionMeta(name, 1, '1');
    const saved = await redis.hgetall(meta);
    await redis.del(meta);
    await redis.set(meta, 'not a hash');
    const answer = await call(first.url, 'POST', `/event-types/${name}/events`, batch);
    expect(answer.status).toBe(207);
    const items = answer.json as { eid: string; publishing_status: string }[];
    expect(items.filter((i) => i.publishing_status === 'failed').length).toBe(batch.filter((e) => fnv1a32(eidOf(e)) % 4 === 1).length);
    await redis.del(meta);
    await redis.hset(meta, saved);
    // The client cannot know what was stored: it sends the whole batch again.
    expect(await publish(first, name, batch)).toBe(200);
    await expectStoredOnce(name, batch);
  });

  it('a retry after the client gave up before the answer stores every eid once', async () => {
    const name = 'idem.gave-up';
    await createEventType(name);
    const batch = events(200);
    const body = JSON.stringify(batch);
    // The client sends the whole body and closes the connection without waiting for the answer.
    await new Promise<void>((resolve, reject) => {
      const url = new URL(`${first.url}/event-types/${name}/events`);
      const request = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } });
      request.on('error', () => resolve());
      request.on('finish', () => {
        request.destroy();
        resolve();
      });
      request.on('response', () => reject(new Error('an answer came before the client gave up')));
      request.end(body);
    });
    expect(await publish(first, name, batch)).toBe(200);
    await expectStoredOnce(name, batch);
  });

  it('the same batch sent to two nodes at once is stored once, and a node started later still knows the eids', async () => {
    const name = 'idem.two-nodes';
    await createEventType(name);
    const batch = events(300);
    const answers = await Promise.all([call(first.url, 'POST', `/event-types/${name}/events`, batch), call(second.url, 'POST', `/event-types/${name}/events`, batch)]);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    await expectStoredOnce(name, batch);
    // A node that was not running when the batch was stored (a restart): the eids live in Redis.
    const third = await startTestBroker({ BROKER_REDIS_KEY_PREFIX: prefix });
    try {
      expect(await publish(third, name, batch)).toBe(200);
    } finally {
      await third.stop();
    }
    await expectStoredOnce(name, batch);
  });

  it('stores an eid again once the window has passed', async () => {
    const name = 'idem.window';
    await createEventType(name, { annotations: { [WINDOW]: '1' } });
    const batch = events(4);
    await publish(first, name, batch);
    const storedAt = Date.now();
    await publish(first, name, batch);
    await expectStoredOnce(name, batch);
    // Retried until the 1 s window is over: then the eids are stored a second time. Each partition
    // starts its generations when its own script runs, so one retry can fall just past one partition's
    // boundary and just before another's: on the way, an eid is stored once or twice, never more.
    const deadline = Date.now() + 10_000;
    for (;;) {
      await publish(first, name, batch);
      const counts = [...(await storedEids(name)).values()];
      if (counts.every((n) => n === 2)) break;
      expect(counts.every((n) => n === 1 || n === 2), JSON.stringify(counts)).toBe(true);
      if (Date.now() > deadline) throw new Error('the eids were never stored again');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(Date.now() - storedAt).toBeGreaterThanOrEqual(1000);
  });

  it('turning the annotation on and off on an existing event type turns deduplication on and off', async () => {
    const name = 'idem.toggle';
    const body = businessEventType(name, fourPartitions);
    expect((await call(first.url, 'POST', '/event-types', body)).status).toBe(201);
    const off = events(8);
    await publish(first, name, off);
    await publish(first, name, off);
    expect([...(await storedEids(name)).values()].every((n) => n === 2)).toBe(true);

    const put = async (annotations: Record<string, string> | undefined): Promise<void> => {
      const current = (await call(first.url, 'GET', `/event-types/${name}`)).json as Record<string, unknown>;
      const answer = await call(first.url, 'PUT', `/event-types/${name}`, { ...current, annotations });
      expect(answer.status, answer.text).toBe(200);
    };
    await put({ [WINDOW]: '60' });
    const on = events(8);
    // Both nodes take the change (the second through its change notice) before they dedupe.
    for (const node of [first, second]) {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const probe = events(1);
        await publish(node, name, probe);
        await publish(node, name, probe);
        if ((await storedEids(name)).get(eidOf(probe[0] as Record<string, unknown>)) === 1) break;
        if (Date.now() > deadline) throw new Error('the node never took the annotation');
      }
    }
    await publish(first, name, on);
    await publish(second, name, on);
    const stored = await storedEids(name);
    for (const e of on) expect(stored.get(eidOf(e))).toBe(1);

    await put({});
    const deadline = Date.now() + 10_000;
    for (;;) {
      await publish(first, name, on);
      if (((await storedEids(name)).get(eidOf(on[0] as Record<string, unknown>)) ?? 0) > 1) break;
      if (Date.now() > deadline) throw new Error('deduplication never turned off');
    }
  });

  it('keeps at most publish.idempotencyMaxEidsPerPartition eids per generation: a full one starts the next and the oldest are forgotten', async () => {
    const bounded = await startTestBroker({ BROKER_REDIS_KEY_PREFIX: prefix, BROKER_PUBLISH_IDEMPOTENCY_MAX_EIDS_PER_PARTITION: '10' });
    try {
      const name = 'idem.count-bound';
      const created = await call(bounded.url, 'POST', '/event-types', businessEventType(name, { annotations: { [WINDOW]: '3600' } }));
      expect(created.status, created.text).toBe(201);
      const generations = [bounded.keys.partitionEids(name, 1, '0', 'a'), bounded.keys.partitionEids(name, 1, '0', 'b')];
      const sizes = async (): Promise<number[]> => Promise.all(generations.map((key) => redis.scard(key)));
      const batches = Array.from({ length: 4 }, () => events(8));
      for (const batch of batches) {
        expect(await publish(bounded, name, batch)).toBe(200);
        // A generation takes a whole batch's share, then is full (8 + 8 ≥ 10): at most 10 + one share.
        for (const size of await sizes()) expect(size).toBeLessThan(10 + 8);
      }
      // The fourth batch filled the second generation: the first (batches 1 and 2) was dropped.
      expect((await sizes()).sort()).toEqual([0, 16]);
      const [oldest = [], older = [], newer = [], newest = []] = batches;
      expect(await publish(bounded, name, [...newer, ...newest])).toBe(200);
      expect(await publish(bounded, name, [...oldest, ...older])).toBe(200);
      const stored = await storedEids(name);
      for (const e of [...oldest, ...older]) expect(stored.get(eidOf(e))).toBe(2);
      for (const e of [...newer, ...newest]) expect(stored.get(eidOf(e))).toBe(1);
    } finally {
      await bounded.stop();
    }
  });

  it('holds for compacted event types too', async () => {
    const name = 'idem.compacted';
    await createEventType(name, { cleanup_policy: 'compact', partition_strategy: 'hash', partition_key_fields: ['order_number'] });
    const batch = events(20).map((e) => ({ ...e, metadata: { ...(e.metadata as object), partition_compaction_key: String(e.order_number) } }));
    await publish(first, name, batch);
    await publish(second, name, batch);
    await expectStoredOnce(name, batch);
  });

  it('refuses a window that is not an integer from 1 to 86400, and the annotation on category undefined (422)', async () => {
    for (const value of ['0', '86401', '1.5', 'abc', '']) {
      const answer = await call(first.url, 'POST', '/event-types', businessEventType(`idem.bad-${randomUUID().slice(0, 8)}`, { annotations: { [WINDOW]: value } }));
      expect(answer.status, value).toBe(422);
      expect(answer.text).toContain(WINDOW);
    }
    const undefinedCategory = await call(first.url, 'POST', '/event-types', {
      ...businessEventType('idem.undefined-category', { annotations: { [WINDOW]: '60' } }),
      category: 'undefined',
      enrichment_strategies: [],
    });
    expect(undefinedCategory.status).toBe(422);
    expect(undefinedCategory.text).toContain('category undefined');
  });
});
