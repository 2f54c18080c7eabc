import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPartition } from '../../src/domain/event-type/partitioner.js';
import type { RedisClient } from '../../src/storage/redis/redis-connection.js';
import { afterChangeNotice, call, harnessRedis, orderNumbers, publishOrders, startTestBroker, type TestBroker } from '../support/broker.js';
import { DeliveryChecker } from '../support/delivery-checker.js';
import { businessEventType } from '../support/fixtures.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';

/**
 * Repartitioning, `POST` (and `PUT`) `/event-types/{name}/partition-count` (docs/operations.md
 * "Repartitioning"). Two nodes `a` and `b` on one key prefix (everyone is an
 * administrator there, feature `repartitioning` on); a third node `guarded` on its own prefix where the
 * development subject is no administrator and the feature starts off.
 */

const NOT_US = '[{"data_type":"user","value":"someone-else"}]';
const REPARTITIONED = /repartitioning/;
const BEFORE_FIRST = '001-0001--1';
const FIRST = '001-0001-000000000000000000';

let a: TestBroker;
let b: TestBroker;
let guarded: TestBroker;
let redis: RedisClient;

beforeAll(async () => {
  const env = { BROKER_SUBSCRIPTIONS_LEASE_TTL_MS: '2000', BROKER_CONSUMPTION_POLL_INTERVAL_MS: '200' };
  a = await startTestBroker(env);
  [b, guarded] = await Promise.all([startTestBroker({ ...env, BROKER_REDIS_KEY_PREFIX: a.prefix }), startTestBroker({ ...env, BROKER_AUTH_INITIAL_ADMINS: NOT_US })]);
  redis = harnessRedis();
  expect((await call(a.url, 'POST', '/settings/features', { feature: 'repartitioning', enabled: true })).status).toBe(204);
  await eventually(async () => featureOn(b), 3000, 'node b sees the feature on');
});
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop(), guarded?.stop()]);
  redis?.disconnect();
});

// ---- helpers ----

async function featureOn(node: TestBroker): Promise<boolean> {
  const answer = await call(node.url, 'GET', '/settings/features');
  return (answer.json as { items: { feature: string; enabled: boolean }[] }).items.some((f) => f.feature === 'repartitioning' && f.enabled);
}

async function eventually(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<number> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > timeoutMs) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return Date.now() - started;
}

const statistic = (n: number) => ({ default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: n, write_parallelism: n } });

/** A hash-partitioned (on `order_number`) business event type with `partitions` partitions. */
async function hashEventType(node: TestBroker, name: string, partitions: number, extra: Record<string, unknown> = {}): Promise<void> {
  const created = await call(node.url, 'POST', '/event-types', businessEventType(name, { partition_strategy: 'hash', partition_key_fields: ['order_number'], ...statistic(partitions), ...extra }));
  expect(created.status, created.text).toBe(201);
}

function repartition(node: TestBroker, name: string, body: unknown): ReturnType<typeof call> {
  return call(node.url, 'POST', `/event-types/${name}/partition-count`, body);
}

/** The partition `hash` picks for an order number among `count` partitions. */
function partitionOf(orderNumber: string, count: number): string {
  return String(hashPartition({ order_number: orderNumber }, [['order_number']], count));
}

const publish = (node: TestBroker, name: string, numbers: readonly string[]): Promise<string[]> => publishOrders(node.url, name, numbers);
const keys = orderNumbers;

interface PartitionRecord {
  partition: string;
  oldest_available_offset: string;
  newest_available_offset: string;
}

async function partitions(node: TestBroker, name: string): Promise<PartitionRecord[]> {
  const answer = await call(node.url, 'GET', `/event-types/${name}/partitions`);
  expect(answer.status, answer.text).toBe(200);
  return answer.json as PartitionRecord[];
}

/** Where each event is stored: eid → {partition, offset, metadata.partition}, read with a low-level stream from BEGIN of `ids`. */
async function stored(node: TestBroker, name: string, ids: readonly string[], total: number): Promise<Map<string, { partition: string; offset: string; enriched: string }>> {
  const cursors = JSON.stringify(ids.map((partition) => ({ partition, offset: 'BEGIN' })));
  const stream = await StreamClient.open(`${node.url}/event-types/${name}/events?batch_limit=1&stream_limit=${total}&batch_flush_timeout=1`, { headers: { 'X-Broker-Cursors': cursors } });
  expect(stream.status, JSON.stringify(stream.problem)).toBe(200);
  const out = new Map<string, { partition: string; offset: string; enriched: string }>();
  for (const batch of await stream.untilEnd(10_000)) {
    for (const event of batch.events ?? []) {
      const metadata = event.metadata as { eid: string; partition: string };
      out.set(metadata.eid, { partition: batch.cursor.partition, offset: batch.cursor.offset, enriched: metadata.partition });
    }
  }
  return out;
}

async function subscription(node: TestBroker, name: string): Promise<string> {
  const answer = await call(node.url, 'POST', '/subscriptions', { owning_application: `app-${randomUUID()}`, event_types: [name], read_from: 'begin' });
  expect(answer.status, answer.text).toBe(201);
  return (answer.json as { id: string }).id;
}

function openStream(node: TestBroker, id: string): Promise<StreamClient> {
  return StreamClient.open(`${node.url}/subscriptions/${id}/events?batch_limit=5&max_uncommitted_events=1000&batch_flush_timeout=1`);
}

/** Reads until `count` events came, commits each batch as it arrives; @returns the batches with events */
async function consume(node: TestBroker, id: string, stream: StreamClient, checker: DeliveryChecker, count: number): Promise<StreamBatch[]> {
  const streamId = stream.headers.get('x-broker-streamid') ?? '';
  const out: StreamBatch[] = [];
  let seen = 0;
  while (seen < count) {
    const [batch] = await stream.events(1, 10_000);
    if (!batch) break;
    checker.batch(streamId, batch);
    out.push(batch);
    seen += batch.events?.length ?? 0;
    const committed = await call(node.url, 'POST', `/subscriptions/${id}/cursors`, { items: [batch.cursor] }, { 'X-Broker-StreamId': streamId });
    expect(committed.status, committed.text).toBe(204);
  }
  return out;
}

// ---- tests ----

describe('POST /event-types/{name}/partition-count: refusals', () => {
  it('is refused with 403 while the feature repartitioning is off; refused for a non-admin of the event type once on', async () => {
    // Open event type (no authorization section: every subject administers it) and a guarded one.
    await hashEventType(guarded, 'rp.open', 1);
    await hashEventType(guarded, 'rp.guarded', 1, {
      authorization: { admins: [{ data_type: 'user', value: 'someone-else' }], readers: [{ data_type: '*', value: '*' }], writers: [{ data_type: '*', value: '*' }] },
    });

    const off = await repartition(guarded, 'rp.open', { partition_count: 2 });
    expect(off.status).toBe(403);
    expect(off.headers.get('content-type')).toBe('application/problem+json');
    expect(off.json).toMatchObject({ title: 'Forbidden', status: 403, detail: 'Repartitioning is disabled (feature repartitioning)' });
    expect((await partitions(guarded, 'rp.open')).length).toBe(1);

    // The development subject is no administrator here: the feature is switched on in Redis directly.
    await redis.hset(guarded.keys.settingsFeatures, 'repartitioning', '1');
    await redis.publish(guarded.keys.settingsChannel, 'features');
    await eventually(async () => featureOn(guarded), 3000, 'the guarded node sees the feature on');

    const denied = await repartition(guarded, 'rp.guarded', { partition_count: 2 });
    expect(denied.status).toBe(403);
    expect(denied.json).toMatchObject({ status: 403, detail: 'Access on ADMIN event-type:rp.guarded denied' });
    expect((await partitions(guarded, 'rp.guarded')).length).toBe(1);

    // Without an authorization section every subject administers the event type.
    expect((await repartition(guarded, 'rp.open', { partition_count: 2 })).status).toBe(204);
    expect((await partitions(guarded, 'rp.open')).length).toBe(2);
  });

  it('answers 404 for an unknown event type, 422 for a smaller count or a bad count, 400 for a non-object body; the same count is 204 and changes nothing', async () => {
    const missing = await repartition(a, 'rp.missing', { partition_count: 2 });
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject({ detail: 'EventType "rp.missing" does not exist.' });

    await hashEventType(a, 'rp.rules', 3);
    const before = await publish(a, 'rp.rules', keys('r', 6));
    const shrink = await repartition(a, 'rp.rules', { partition_count: 2 });
    expect(shrink.status).toBe(422);
    expect(shrink.json).toMatchObject({ title: 'Unprocessable Entity', status: 422 });
    expect((shrink.json as { detail: string }).detail).toContain('can only grow');
    for (const body of [{}, { partition_count: null }, { partition_count: 0 }, { partition_count: 3.5 }, { partition_count: '4' }, { partition_count: 9 }]) {
      const answer = await repartition(a, 'rp.rules', body);
      expect(answer.status, JSON.stringify(body)).toBe(422);
    }
    expect((await repartition(a, 'rp.rules', [4])).status).toBe(400);
    expect((await repartition(a, 'rp.rules', '{not json')).status).toBe(400);

    const same = await repartition(a, 'rp.rules', { partition_count: 3 });
    expect(same.status).toBe(204);
    expect(same.text).toBe('');
    expect((await repartition(a, 'rp.rules', { partition_count: 3 })).status).toBe(204);
    const records = await partitions(b, 'rp.rules');
    expect(records.map((r) => r.partition)).toEqual(['0', '1', '2']);
    // Nothing moved: every event is where hashing over 3 put it.
    const where = await stored(a, 'rp.rules', ['0', '1', '2'], before.length);
    expect(where.size).toBe(before.length);
    for (const [, at] of where) expect(at.partition).toBe(at.enriched);
  });
});

describe('PUT /event-types/{name}/partition-count', () => {
  it('is accepted as well as POST (the reference and its clients use PUT), with the same checks and answers', async () => {
    await hashEventType(a, 'rp.put', 1);
    const grown = await call(a.url, 'PUT', '/event-types/rp.put/partition-count', { partition_count: 3 });
    expect(grown.status, grown.text).toBe(204);
    expect(grown.text).toBe('');
    expect((await partitions(b, 'rp.put')).map((r) => r.partition)).toEqual(['0', '1', '2']);
    const shrink = await call(a.url, 'PUT', '/event-types/rp.put/partition-count', { partition_count: 2 });
    expect(shrink.status).toBe(422);
    expect((shrink.json as { detail: string }).detail).toContain('can only grow');
    expect((await call(a.url, 'PUT', '/event-types/rp.put/partition-count', [3])).status).toBe(400);
    expect((await call(a.url, 'PUT', '/event-types/rp.missing/partition-count', { partition_count: 2 })).status).toBe(404);
    // On the guarded node (the feature was switched on above) the development subject administers no guarded event type.
    const denied = await call(guarded.url, 'PUT', '/event-types/rp.guarded/partition-count', { partition_count: 2 });
    expect(denied.json).toMatchObject({ status: 403, detail: 'Access on ADMIN event-type:rp.guarded denied' });
    expect((await partitions(guarded, 'rp.guarded')).length).toBe(1);
  });
});

describe('growing the partition count', () => {
  it('keeps stored events at their offsets, lists the new partitions empty, spreads hash partitioning over the new count, and low-level streams without cursors read them', async () => {
    const name = 'rp.grow';
    await hashEventType(a, name, 2);
    const oldKeys = keys('old', 20);
    const oldEids = await publish(a, name, oldKeys);
    const before = await stored(a, name, ['0', '1'], oldEids.length);
    expect(before.size).toBe(20);
    oldKeys.forEach((key, i) => expect(before.get(oldEids[i] ?? '')?.partition).toBe(partitionOf(key, 2)));

    // Node b has the event type cached with 2 partitions before a grows it.
    await publish(b, name, ['warm-up']);
    const warmUp = await partitions(a, name);

    // Awaited until every Redis node delivered its change notice (on a cluster it crosses the cluster bus
    // after the answer): b publishes below with the new count.
    const grown = await afterChangeNotice(a, name, () => repartition(a, name, { partition_count: 4 }));
    expect(grown.status, grown.text).toBe(204);
    // The new partitions are opened on the active timeline (an append to a partition never opened is refused).
    const [timeline] = JSON.parse((await redis.hget(a.keys.eventType(name), 'timelines')) ?? '[]') as { id: string }[];
    for (const p of ['2', '3']) expect(await redis.hgetall(a.keys.partitionMeta(name, 1, p))).toEqual({ next: '0', oldest: '0', timeline: timeline?.id });

    const records = await partitions(b, name);
    expect(records.map((r) => r.partition)).toEqual(['0', '1', '2', '3']);
    expect(records.slice(0, 2)).toEqual(warmUp);
    for (const r of records.slice(2)) expect(r).toEqual({ partition: r.partition, oldest_available_offset: FIRST, newest_available_offset: BEFORE_FIRST });
    const one = await call(a.url, 'GET', `/event-types/${name}/partitions/3`);
    expect(one.status).toBe(200);
    expect(one.json).toMatchObject({ partition: '3', newest_available_offset: BEFORE_FIRST });

    // A low-level stream without cursors (all partitions, from the newest offset) opened now reads the new ones.
    const tail = await StreamClient.open(`${a.url}/event-types/${name}/events?batch_limit=100&batch_flush_timeout=1&stream_timeout=10`);
    expect(tail.status).toBe(200);

    const newKeys = keys('new', 40);
    const newEids = await publish(b, name, newKeys);
    const after = await stored(a, name, ['0', '1', '2', '3'], 20 + 1 + 40);
    // Events stored before repartitioning are read at the same partition and offset.
    for (const eid of oldEids) expect(after.get(eid)).toEqual(before.get(eid));
    // Hashing maps over 4 partitions now, on the node that did not repartition too.
    newKeys.forEach((key, i) => {
      const at = after.get(newEids[i] ?? '');
      expect(at?.partition, key).toBe(partitionOf(key, 4));
      expect(at?.enriched).toBe(at?.partition);
    });
    const used = new Set(newKeys.map((k) => partitionOf(k, 4)));
    expect(used.has('2') || used.has('3')).toBe(true);

    const seen = new Set<string>();
    const tailPartitions = new Set<string>();
    while (seen.size < newEids.length) {
      const batch = await tail.next(10_000);
      if (!batch) break;
      for (const e of batch.events ?? []) {
        seen.add((e.metadata as { eid: string }).eid);
        tailPartitions.add(batch.cursor.partition);
      }
    }
    tail.close();
    expect([...seen].sort()).toEqual([...newEids].sort());
    expect([...tailPartitions].some((p) => p === '2' || p === '3')).toBe(true);
  });

  it('closes a streaming subscription; after reconnecting it gets every partition, new ones from their beginning, nothing lost or repeated', async () => {
    const name = 'rp.streaming';
    await hashEventType(a, name, 2);
    const id = await subscription(a, name);
    const checker = new DeliveryChecker();
    const delivered = new Map<string, number>();
    const count = (batches: StreamBatch[]) => {
      for (const batch of batches) for (const e of batch.events ?? []) {
        const eid = (e.metadata as { eid: string }).eid;
        delivered.set(eid, (delivered.get(eid) ?? 0) + 1);
      }
    };

    const first = await publish(a, name, keys('s1', 10));
    checker.submitted(first);
    const stream = await openStream(a, id);
    expect(stream.status).toBe(200);
    count(await consume(a, id, stream, checker, first.length));

    // Repartition on the other node while the stream is open: the stream ends and says why.
    expect((await repartition(b, name, { partition_count: 4 })).status).toBe(204);
    const rest = await stream.untilEnd(5_000);
    expect(rest.flatMap((x) => x.events ?? [])).toEqual([]);
    expect(rest.at(-1)?.info?.debug).toMatch(REPARTITIONED);

    // Published before the consumer is back: some land in the new partitions.
    const secondKeys = keys('s2', 30);
    const second = await publish(a, name, secondKeys);
    checker.submitted(second);
    expect(secondKeys.some((k) => Number(partitionOf(k, 4)) >= 2)).toBe(true);

    const again = await openStream(b, id);
    expect(again.status, JSON.stringify(again.problem)).toBe(200);
    const batches = await consume(b, id, again, checker, second.length);
    count(batches);
    expect(new Set(batches.map((x) => x.cursor.partition))).toEqual(new Set(secondKeys.map((k) => partitionOf(k, 4))));

    const third = await publish(b, name, keys('s3', 20));
    checker.submitted(third);
    count(await consume(a, id, again, checker, third.length));

    expect(checker.report()).toEqual([]);
    expect([...delivered.keys()].sort()).toEqual([...first, ...second, ...third].sort());
    expect([...delivered.values()].every((n) => n === 1)).toBe(true);

    // Stats and committed cursors show the four partitions, all consumed.
    const stats = await call(a.url, 'GET', `/subscriptions/${id}/stats`);
    const parts = (stats.json as { items: { partitions: { partition: string; state: string; unconsumed_events?: number }[] }[] }).items.flatMap((i) => i.partitions);
    expect(parts.map((p) => p.partition)).toEqual(['0', '1', '2', '3']);
    for (const p of parts) expect(p).toMatchObject({ state: 'assigned', unconsumed_events: 0 });
    const cursors = await call(b.url, 'GET', `/subscriptions/${id}/cursors`);
    expect((cursors.json as { items: { partition: string }[] }).items.map((c) => c.partition).sort()).toEqual(['0', '1', '2', '3']);
    again.close();
  });

  it('gives a subscription that is not streaming the new partitions from their beginning; its stats show them', async () => {
    const name = 'rp.idle';
    await hashEventType(a, name, 1);
    const id = await subscription(a, name);
    const checker = new DeliveryChecker();
    checker.submitted(await publish(a, name, keys('i1', 5)));
    const stream = await openStream(a, id);
    await consume(a, id, stream, checker, 5);
    stream.close();

    expect((await repartition(a, name, { partition_count: 3 })).status).toBe(204);
    const stats = await call(b.url, 'GET', `/subscriptions/${id}/stats`);
    const parts = (stats.json as { items: { partitions: { partition: string; unconsumed_events?: number }[] }[] }).items.flatMap((i) => i.partitions);
    expect(parts.map((p) => [p.partition, p.unconsumed_events])).toEqual([
      ['0', 0],
      ['1', 0],
      ['2', 0],
    ]);

    const later = await publish(b, name, keys('i2', 15));
    checker.submitted(later);
    const statsAfter = await call(b.url, 'GET', `/subscriptions/${id}/stats`);
    const unconsumed = (statsAfter.json as { items: { partitions: { unconsumed_events?: number }[] }[] }).items.flatMap((i) => i.partitions).reduce((n, p) => n + (p.unconsumed_events ?? 0), 0);
    expect(unconsumed).toBe(15);
    const again = await openStream(b, id);
    await consume(b, id, again, checker, 15);
    again.close();
    expect(checker.report()).toEqual([]);
  });

  it('two nodes: repartitioning on one, publishing on the other lands on a new partition within a second', async () => {
    const name = 'rp.nodes';
    await hashEventType(a, name, 1);
    // b has the event type cached with one partition.
    await publish(b, name, ['cache']);
    const key = keys('n', 100).find((k) => partitionOf(k, 4) === '3') ?? '';
    expect(key).not.toBe('');

    expect((await repartition(a, name, { partition_count: 4 })).status).toBe(204);
    const started = Date.now();
    await publish(b, name, [key]);
    const elapsed = await eventually(
      async () => {
        const records = await partitions(b, name);
        if (records[3]?.newest_available_offset !== BEFORE_FIRST) return true;
        await publish(b, name, [key]);
        return false;
      },
      1000,
      'an event published on b lands on partition 3',
    );
    expect(Date.now() - started).toBeLessThan(1000);
    expect(elapsed).toBeLessThan(1000);
  });
});
