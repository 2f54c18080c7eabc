import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatOffset as formatTimelineOffset } from '../../src/domain/cursor/offsets.js';
import type { RedisClient } from '../../src/storage/redis/redis-connection.js';
import { NOT_COMPACTED_DETAIL } from '../../src/services/deleted-events.js';
import { call, harnessRedis, startTestBroker, uniquePrefix, type TestBroker } from '../support/broker.js';
import { businessEventType } from '../support/fixtures.js';
import { StreamClient } from '../support/stream-client.js';

/**
 * Log compaction and deleted events (docs/concepts.md "Retention and compaction"; docs/publishing.md
 * "Deleting events of a compacted event type"): `cleanup_policy`, `metadata.partition_compaction_key`,
 * `POST /event-types/{name}/deleted-events`.
 *
 * The node compacts every 200 ms with no lag: an event is compacted once a later second began, so
 * tests wait for the expected state with a deadline instead of sleeping a fixed time.
 */

let broker: TestBroker;
let redis: RedisClient;
const cleanups: (() => Promise<unknown>)[] = [];

const FAST = {
  BROKER_COMPACTION_INTERVAL_MS: '200',
  BROKER_COMPACTION_LAG_MS: '0',
  BROKER_EVENT_TYPES_MIN_RETENTION_TIME_MS: '1000',
  BROKER_RETENTION_CHECK_INTERVAL_MS: '300',
};

beforeAll(async () => {
  broker = await startTestBroker(FAST);
  redis = harnessRedis();
});
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await broker.stop();
  redis.disconnect();
});

/** An offset of the first timeline in its wire form. */
const formatOffset = (offset: number): string => formatTimelineOffset(1, offset);

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A compacted business event type body: `order_number` and `value`, hash-partitioned on `order_number` unless overridden. */
function compactedType(name: string, partitions = 1, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return businessEventType(name, {
    cleanup_policy: 'compact',
    partition_strategy: 'hash',
    partition_key_fields: ['order_number'],
    default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: partitions, write_parallelism: partitions },
    ...overrides,
  });
}

async function create(body: Record<string, unknown>, node: TestBroker = broker): Promise<void> {
  const created = await call(node.url, 'POST', '/event-types', body);
  expect(created.status, created.text).toBe(201);
}

/** An event of key `key` carrying `value`; the compaction key is the key unless `compactionKey` is given (null = absent). */
function keyed(key: string, value: number, compactionKey: string | null = key): Record<string, unknown> {
  const metadata: Record<string, unknown> = { eid: randomUUID(), occurred_at: new Date().toISOString() };
  if (compactionKey !== null) metadata.partition_compaction_key = compactionKey;
  return { metadata, order_number: key, value };
}

async function publish(name: string, events: Record<string, unknown>[], node: TestBroker = broker): Promise<void> {
  const answer = await call(node.url, 'POST', `/event-types/${name}/events`, events);
  expect(answer.status, answer.text).toBe(200);
}

/** One event as a low-level consumer sees it. */
interface Seen {
  partition: string;
  offset: number;
  key: string;
  value: number;
}

/**
 * Reads partitions `0 .. partitions-1` from after `from` (BEGIN by default) over the low-level stream
 * until it goes quiet (one keep-alive per partition), one event per batch so each has its offset.
 */
async function readAll(name: string, partitions = 1, from = 'BEGIN', node: TestBroker = broker): Promise<Seen[]> {
  const cursors = Array.from({ length: partitions }, (_, p) => ({ partition: String(p), offset: from }));
  const client = await StreamClient.open(`${node.url}/event-types/${name}/events?batch_limit=1&batch_flush_timeout=1&stream_keep_alive_limit=1`, {
    headers: { 'X-Broker-Cursors': JSON.stringify(cursors) },
  });
  expect(client.status, JSON.stringify(client.problem)).toBe(200);
  const seen: Seen[] = [];
  for (const batch of await client.untilEnd(20_000)) {
    for (const event of batch.events ?? []) {
      seen.push({ partition: batch.cursor.partition, offset: Number(batch.cursor.offset.slice(-18)), key: String(event.order_number), value: Number(event.value) });
    }
  }
  return seen;
}

/** Reads until `done` holds for what the stream returns, or fails after `timeoutMs`. @returns the last read */
async function readUntil(name: string, partitions: number, done: (seen: Seen[]) => boolean, node: TestBroker = broker, timeoutMs = 15_000): Promise<Seen[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const seen = await readAll(name, partitions, 'BEGIN', node);
    if (done(seen) || Date.now() > deadline) return seen;
    await sleep(200);
  }
}

/** The newest value of each key in what was read. */
function latest(seen: readonly Seen[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of seen) out.set(s.key, s.value);
  return out;
}

/** Compaction or retention rounds a node logged (pino JSON at debug) for event type `name`. */
function roundsOf(node: TestBroker, name: string, kind: 'compaction' | 'retention' = 'compaction'): number {
  return node
    .output()
    .split('\n')
    .filter((line) => line.includes(`"${kind} round"`) && line.includes(`"eventType":"${name}"`)).length;
}

describe('publishing to compacted event types', () => {
  it('needs metadata.partition_compaction_key exactly for compact and compact_and_delete (422 otherwise)', async () => {
    await create(compactedType('compaction.key-rules'));
    const without = await call(broker.url, 'POST', '/event-types/compaction.key-rules/events', [keyed('a', 1), keyed('b', 1, null)]);
    expect(without.status).toBe(422);
    expect(without.json).toMatchObject([{ publishing_status: 'aborted' }, { publishing_status: 'failed', step: 'validating' }]);
    expect((without.json as { detail: string }[])[1]?.detail).toContain('partition_compaction_key');
    const empty = await call(broker.url, 'POST', '/event-types/compaction.key-rules/events', [keyed('a', 1, '')]);
    expect(empty.status).toBe(422);

    await create(businessEventType('compaction.key-rules-delete', { cleanup_policy: 'delete' }));
    const withKey = await call(broker.url, 'POST', '/event-types/compaction.key-rules-delete/events', [keyed('a', 1)]);
    expect(withKey.status).toBe(422);
    expect(withKey.json).toMatchObject([{ publishing_status: 'failed', step: 'validating' }]);
    await publish('compaction.key-rules-delete', [keyed('a', 1, null)]);

    // Not available for category undefined (registry rule).
    const undefinedCategory = await call(broker.url, 'POST', '/event-types', businessEventType('compaction.undefined', { category: 'undefined', enrichment_strategies: [], cleanup_policy: 'compact' }));
    expect(undefinedCategory.status).toBe(422);
  });

  it('keeps the latest event per key; superseded events leave every read; offsets of survivors and the cursor tools stay', async () => {
    const name = 'compaction.latest';
    await create(compactedType(name));
    // Offsets 0..5 in this order: k1@0 k2@1 k3@2 | k1@3 | k4@4 | k1@5 (k1 twice superseded).
    await publish(name, [keyed('k1', 1), keyed('k2', 1), keyed('k3', 1)]);
    await publish(name, [keyed('k1', 2)]);
    await publish(name, [keyed('k4', 1)]);
    await publish(name, [keyed('k1', 3)]);

    const seen = await readUntil(name, 1, (s) => s.length === 4);
    expect(seen).toEqual([
      { partition: '0', offset: 1, key: 'k2', value: 1 },
      { partition: '0', offset: 2, key: 'k3', value: 1 },
      { partition: '0', offset: 4, key: 'k4', value: 1 },
      { partition: '0', offset: 5, key: 'k1', value: 3 },
    ]);
    expect(await redis.xlen(broker.keys.partitionLog(name, 1, '0'))).toBe(4);

    // A cursor in a gap is valid: streaming goes on with the next surviving event.
    expect((await readAll(name, 1, formatOffset(0))).map((s) => s.offset)).toEqual([1, 2, 4, 5]);
    expect((await readAll(name, 1, formatOffset(2))).map((s) => s.offset)).toEqual([4, 5]);

    // Partition range, distances and lag are offset arithmetic: they still count removed offsets.
    expect((await call(broker.url, 'GET', `/event-types/${name}/partitions/0`)).json).toEqual({ partition: '0', oldest_available_offset: formatOffset(0), newest_available_offset: formatOffset(5) });
    const lag = await call(broker.url, 'POST', `/event-types/${name}/cursors-lag`, [{ partition: '0', offset: 'BEGIN' }]);
    expect(lag.json).toMatchObject([{ partition: '0', unconsumed_events: 6 }]);
    const distance = await call(broker.url, 'POST', `/event-types/${name}/cursor-distances`, [{ initial_cursor: { partition: '0', offset: formatOffset(0) }, final_cursor: { partition: '0', offset: formatOffset(5) } }]);
    expect(distance.json).toMatchObject([{ distance: 5 }]);

    // A subscription reading from the beginning gets the survivors only.
    const sub = await call(broker.url, 'POST', '/subscriptions', { owning_application: 'compaction-test', event_types: [name], read_from: 'begin' });
    expect(sub.status).toBe(201);
    const stream = await StreamClient.open(`${broker.url}/subscriptions/${(sub.json as { id: string }).id}/events?batch_limit=10&batch_flush_timeout=1&max_uncommitted_events=100`);
    cleanups.push(() => Promise.resolve(stream.close()));
    const batches = await stream.events(4);
    const events = batches.flatMap((b) => b.events ?? []);
    expect(events.map((e) => [e.order_number, e.value])).toEqual([['k2', 1], ['k3', 1], ['k4', 1], ['k1', 3]]);
    expect(batches.at(-1)?.cursor.offset).toBe(formatOffset(5));
    stream.close();
  });

  it('keeps the last published value per key while publishing runs concurrently with compaction', async () => {
    const name = 'compaction.concurrent';
    const partitions = 3;
    await create(compactedType(name, partitions));
    const keys = Array.from({ length: 8 }, (_, i) => `key-${i}`);
    const rounds = 40;
    // Each key's publishes are sequential (so "last" is defined); keys publish concurrently with each other
    // and with the compaction rounds. Every fifth round sends two values of the key in one batch.
    const started = Date.now();
    await Promise.all(
      keys.map(async (key) => {
        for (let round = 1; round <= rounds; round++) {
          if (round % 5 === 0) await publish(name, [keyed(key, round * 10), keyed(key, round * 10 + 1)]);
          else await publish(name, [keyed(key, round * 10 + 1)]);
          if (round % 10 === 0) await sleep(300); // time for compaction rounds between the publishes (asserted below)
        }
      }),
    );
    expect(Date.now() - started).toBeGreaterThan(1000); // compaction rounds ran meanwhile
    const seen = await readUntil(name, partitions, (s) => s.length === keys.length);
    expect(seen).toHaveLength(keys.length);
    expect(latest(seen)).toEqual(new Map(keys.map((k) => [k, rounds * 10 + 1])));
    // Under hash partitioning each key stays in its partition.
    for (const s of seen) expect(Number(s.partition)).toBeLessThan(partitions);
  });

  it('compact_and_delete also trims by retention time; compact never does', async () => {
    await create(compactedType('compaction.and-delete', 1, { cleanup_policy: 'compact_and_delete', options: { retention_time: 1000 } }));
    await create(compactedType('compaction.forever', 1, { options: { retention_time: 1000 } }));
    await publish('compaction.and-delete', [keyed('a', 1), keyed('b', 1)]);
    await publish('compaction.forever', [keyed('a', 1), keyed('b', 1)]);
    await sleep(2500); // a and b must outlive their 1 s retention time
    await publish('compaction.and-delete', [keyed('c', 1)]);
    const deadline = Date.now() + 10_000;
    let range: unknown;
    while (Date.now() < deadline) {
      range = (await call(broker.url, 'GET', '/event-types/compaction.and-delete/partitions/0')).json;
      if ((range as { oldest_available_offset: string }).oldest_available_offset === formatOffset(2)) break;
      await sleep(200);
    }
    expect(range).toEqual({ partition: '0', oldest_available_offset: formatOffset(2), newest_available_offset: formatOffset(2) });
    expect((await readAll('compaction.and-delete')).map((s) => s.key)).toEqual(['c']);
    expect((await readAll('compaction.forever')).map((s) => s.key)).toEqual(['a', 'b']);
    // The compaction index forgets keys whose events retention removed (`c` too, once it expires).
    const index = broker.keys.partitionCompactionIndex('compaction.and-delete', 1, '0');
    const pruned = Date.now() + 5_000;
    while (Date.now() < pruned && (await redis.hexists(index, 'a')) + (await redis.hexists(index, 'b')) > 0) await sleep(200);
    expect(Object.keys(await redis.hgetall(index)).filter((k) => k !== 'c')).toEqual([]);
    expect(await redis.hlen(broker.keys.partitionCompactionIndex('compaction.forever', 1, '0'))).toBe(2);
  });
});

describe('cleanup_policy changes', () => {
  it('allows only delete -> compact_and_delete; keyless events written before stay', async () => {
    const name = 'compaction.policy-change';
    const body = businessEventType(name, { partition_strategy: 'hash', partition_key_fields: ['order_number'] });
    await create(body);
    await publish(name, [keyed('old', 1, null), keyed('old', 2, null)]);

    const toCompact = await call(broker.url, 'PUT', `/event-types/${name}`, { ...body, cleanup_policy: 'compact' });
    expect(toCompact.status).toBe(422);
    expect((toCompact.json as { detail: string }).detail).toContain('cleanup_policy');
    const changed = await call(broker.url, 'PUT', `/event-types/${name}`, { ...body, cleanup_policy: 'compact_and_delete' });
    expect(changed.status, changed.text).toBe(200);
    expect((changed.json as { cleanup_policy: string }).cleanup_policy).toBe('compact_and_delete');
    const back = await call(broker.url, 'PUT', `/event-types/${name}`, { ...body, cleanup_policy: 'delete' });
    expect(back.status).toBe(422);

    // Now the key is required, and compaction applies to the new events only.
    expect((await call(broker.url, 'POST', `/event-types/${name}/events`, [keyed('old', 3, null)])).status).toBe(422);
    await publish(name, [keyed('new', 1)]);
    await publish(name, [keyed('new', 2)]);
    const seen = await readUntil(name, 1, (s) => s.length === 3);
    expect(seen.map((s) => [s.key, s.value, s.offset])).toEqual([
      ['old', 1, 0],
      ['old', 2, 1],
      ['new', 2, 3],
    ]);

    await create(compactedType('compaction.policy-fixed'));
    const fromCompact = await call(broker.url, 'PUT', '/event-types/compaction.policy-fixed', { ...compactedType('compaction.policy-fixed'), cleanup_policy: 'compact_and_delete' });
    expect(fromCompact.status).toBe(422);
  });
});

describe('POST /event-types/{name}/deleted-events', () => {
  it('removes earlier events of the keys at the next compaction; the tombstone goes too; later events stay', async () => {
    const name = 'compaction.deleted';
    // Random partitioning over 2 partitions: a key may be in either, so tombstones go to both.
    await create(compactedType(name, 2, { partition_strategy: 'random', partition_key_fields: undefined }));
    await publish(name, [keyed('gone', 1), keyed('kept', 1), keyed('gone', 2), keyed('gone', 3)]);

    // The span context comes as `span-ctx`: the HTTP engine drops requests with `_` in a header name.
    const deleted = await call(broker.url, 'POST', `/event-types/${name}/deleted-events`, [{ metadata: { partition_compaction_key: 'gone' } }], { 'span-ctx': '{"trace":"t1"}' });
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.text).toBe('');
    expect(deleted.headers.get('span_ctx')).toBe('{"trace":"t1"}');
    await publish(name, [keyed('gone', 4)]);

    const seen = await readUntil(name, 2, (s) => s.length === 2);
    expect(seen.map((s) => [s.key, s.value]).sort()).toEqual([
      ['gone', 4],
      ['kept', 1],
    ]);
    // The tombstones were dropped once compaction passed them.
    for (const p of ['0', '1']) {
      const deadline = Date.now() + 5_000;
      while (Date.now() < deadline && (await redis.zcard(broker.keys.partitionTombstones(name, 1, p))) > 0) await sleep(200);
      expect(await redis.zcard(broker.keys.partitionTombstones(name, 1, p))).toBe(0);
      const index = await redis.hgetall(broker.keys.partitionCompactionIndex(name, 1, p));
      for (const value of Object.values(index)) expect(value).toMatch(/^\d+$/);
    }
  });

  it('deletes a key under hash partitioning in the partition its compaction key hashes to and answers 422 items for events without key', async () => {
    const name = 'compaction.deleted-hash';
    await create(compactedType(name, 3));
    await publish(name, [keyed('x', 1), keyed('y', 1), keyed('z', 1)]);
    const missing = await call(broker.url, 'POST', `/event-types/${name}/deleted-events`, [
      { metadata: { partition_compaction_key: 'x' }, order_number: 'x' },
      { metadata: { eid: 'e2' }, order_number: 'y' },
      { metadata: { partition_compaction_key: 'z' } },
    ]);
    expect(missing.status).toBe(422);
    expect(missing.json).toEqual([
      { eid: '', publishing_status: 'aborted', step: 'validating', detail: expect.any(String) as unknown },
      { eid: 'e2', publishing_status: 'failed', step: 'validating', detail: expect.stringContaining('partition_compaction_key') as unknown },
      { eid: '', publishing_status: 'aborted', step: 'none', detail: expect.any(String) as unknown },
    ]);
    expect((await call(broker.url, 'POST', `/event-types/${name}/deleted-events`, '{"not":"an array"}')).status).toBe(400);
    expect((await call(broker.url, 'POST', '/event-types/compaction.nope/deleted-events', [])).status).toBe(404);

    const ok = await call(broker.url, 'POST', `/event-types/${name}/deleted-events`, [{ metadata: { partition_compaction_key: 'y' }, order_number: 'y' }]);
    expect(ok.status).toBe(200);
    const seen = await readUntil(name, 3, (s) => s.length === 2);
    expect(seen.map((s) => s.key).sort()).toEqual(['x', 'z']);
  });

  it('is refused for event types with cleanup_policy delete', async () => {
    await create(businessEventType('compaction.not-compacted'));
    const answer = await call(broker.url, 'POST', '/event-types/compaction.not-compacted/deleted-events', [{ metadata: { partition_compaction_key: 'a' }, order_number: 'a' }]);
    expect(answer.status).toBe(422);
    expect(answer.headers.get('content-type')).toContain('application/problem+json');
    expect(answer.json).toMatchObject({ status: 422, title: 'Unprocessable Entity', detail: NOT_COMPACTED_DETAIL });
  });
});

/** Two nodes on one fresh key prefix, logging at debug (their rounds are counted from the log). */
async function twoNodes(): Promise<[TestBroker, TestBroker]> {
  const env = { ...FAST, BROKER_LOG_LEVEL: 'debug', BROKER_REDIS_KEY_PREFIX: uniquePrefix() };
  const a = await startTestBroker(env);
  cleanups.push(() => a.stop());
  const b = await startTestBroker(env);
  cleanups.push(() => b.stop());
  return [a, b];
}

describe('one node trims', () => {
  it('two nodes on one key prefix: only the retention lock holder trims an event type; the other takes over when it stops', async () => {
    const [a, b] = await twoNodes();
    const name = 'retention.single-node';
    await create(businessEventType(name, { options: { retention_time: 1000 } }), a);
    // More than 3 rounds between the two nodes (their debug log lines), however long that takes.
    await expect.poll(() => roundsOf(a, name, 'retention') + roundsOf(b, name, 'retention'), { timeout: 15_000, interval: 100 }).toBeGreaterThan(3);
    const [ra, rb] = [roundsOf(a, name, 'retention'), roundsOf(b, name, 'retention')];
    expect(ra + rb).toBeGreaterThan(3);
    expect(Math.min(ra, rb)).toBe(0);
    const holder = ra > 0 ? a : b;
    const other = holder === a ? b : a;
    expect(await redis.get(a.keys.retentionLock(name))).not.toBeNull();

    // The lock outlives its holder by at most max(3 intervals, 5 s); then the other node trims.
    await holder.stop();
    const deadline = Date.now() + 12_000;
    while (Date.now() < deadline && roundsOf(other, name, 'retention') === 0) await sleep(200);
    expect(roundsOf(other, name, 'retention')).toBeGreaterThan(0);
  }, 40_000);
});

describe('one node compacts', () => {
  it('two nodes on one key prefix: only the lock holder compacts; the other takes over when it stops', async () => {
    const [a, b] = await twoNodes();
    const name = 'compaction.single-node';
    await create(compactedType(name), a);
    await publish(name, [keyed('k', 1)], a);
    await publish(name, [keyed('k', 2)], b);
    // More than 3 rounds between the two nodes (their debug log lines), however long that takes.
    await expect.poll(() => roundsOf(a, name) + roundsOf(b, name), { timeout: 15_000, interval: 100 }).toBeGreaterThan(3);

    const [ra, rb] = [roundsOf(a, name), roundsOf(b, name)];
    expect(ra + rb).toBeGreaterThan(3);
    expect(Math.min(ra, rb)).toBe(0);
    const holder = ra > 0 ? a : b;
    const other = holder === a ? b : a;
    expect(await redis.get(a.keys.compactionLock(name))).not.toBeNull();
    // Rounds counted above may have run before the second publish: wait for the one that compacted it.
    expect((await readUntil(name, 1, (s) => s.length === 1, other)).map((s) => s.value)).toEqual([2]);

    // The lock outlives its holder by at most max(3 intervals, 5 s); then the other node compacts.
    await holder.stop();
    await publish(name, [keyed('k', 3)], other);
    const deadline = Date.now() + 12_000;
    while (Date.now() < deadline && roundsOf(other, name) === 0) await sleep(200);
    expect(roundsOf(other, name)).toBeGreaterThan(0);
    const seen = await readUntil(name, 1, (s) => s.length === 1, other);
    expect(seen.map((s) => s.value)).toEqual([3]);
  }, 40_000);
});
