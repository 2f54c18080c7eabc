import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeEntry } from '../../src/domain/batch/entry-codec.js';
import type { RedisClient } from '../../src/storage/redis/redis-connection.js';
import { call, harnessRedis, startTestBroker, uniquePrefix, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { SseClient } from '../support/sse-client.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';

/**
 * Events stored compressed (docs/operations.md "Memory and retention"; docs/decisions/0032-events-stored-compressed.md):
 * a partition's share of a batch of at least `publish.storedCompressionMinBytes` is one zstd frame in the
 * stream entry's field `z`; smaller shares, and every entry a node with `publish.storedCompression` off
 * writes (as every node wrote before), are plain in field `d`. Each case builds such a mixed log in one
 * partition — a compressed batch, a plain single event, a plain batch from the node with compression off,
 * a compressed batch — and reads it with one kind of reader, which must see exactly the events published.
 */

let on: TestBroker;
let off: TestBroker;
let redis: RedisClient;

beforeAll(async () => {
  const prefix = uniquePrefix();
  const fast = { BROKER_REDIS_KEY_PREFIX: prefix, BROKER_COMPACTION_INTERVAL_MS: '200', BROKER_COMPACTION_LAG_MS: '0' };
  [on, off] = await Promise.all([startTestBroker({ ...fast, BROKER_PUBLISH_STORED_COMPRESSION_MIN_BYTES: '1024' }), startTestBroker({ ...fast, BROKER_PUBLISH_STORED_COMPRESSION: 'false' })]);
  redis = harnessRedis();
});
afterAll(async () => {
  await Promise.all([on.stop(), off.stop()]);
  redis.disconnect();
});

/** About 300 bytes enriched: a 5-event batch is compressed, a single event is not. */
const NOTE = 'a note that repeats itself, a note that repeats itself';

async function createEventType(name: string, overrides: Record<string, unknown> = {}): Promise<void> {
  const created = await call(on.url, 'POST', '/event-types', businessEventType(name, overrides));
  expect(created.status, created.text).toBe(201);
}

async function publish(node: TestBroker, name: string, orders: readonly string[]): Promise<void> {
  const answer = await call(node.url, 'POST', `/event-types/${name}/events`, orders.map((n) => orderEvent(n, { note: NOTE })));
  expect(answer.status, answer.text).toBe(200);
}

/** Each stream entry's field name in offset order (`z` compressed, `d` plain) and the events it holds. */
async function storedEntries(name: string): Promise<{ field: string; orders: string[] }[]> {
  const entries = await redis.xrangeBuffer(on.keys.partitionLog(name, 1, '0'), '-', '+');
  return entries.map(([, fields]) => ({
    field: fields[2]?.toString() ?? '',
    orders: decodeEntry(fields[2] ?? 'd', fields[3] ?? Buffer.alloc(0))
      .toString()
      .split('\n')
      .map((text) => String((JSON.parse(text) as { order_number: string }).order_number)),
  }));
}

/**
 * A one-partition event type whose log mixes compressed and plain entries: 5 events compressed, 1 plain,
 * 5 plain (written with compression off), 5 compressed.
 * @returns its name and the order numbers in offset order
 */
async function mixedLog(tag: string): Promise<{ name: string; orders: string[] }> {
  const name = `stored.${tag}.${randomUUID().slice(0, 8)}`;
  await createEventType(name);
  const batches = [
    { node: on, orders: ['a0', 'a1', 'a2', 'a3', 'a4'] },
    { node: on, orders: ['b0'] },
    { node: off, orders: ['c0', 'c1', 'c2', 'c3', 'c4'] },
    { node: on, orders: ['d0', 'd1', 'd2', 'd3', 'd4'] },
  ];
  for (const batch of batches) await publish(batch.node, name, batch.orders.map((o) => `${name}-${o}`));
  const orders = batches.flatMap((b) => b.orders.map((o) => `${name}-${o}`));
  expect((await storedEntries(name)).map((e) => e.field)).toEqual(['z', 'd', 'd', 'z']);
  return { name, orders };
}

const ordersOf = (batches: readonly StreamBatch[]): string[] => batches.flatMap((b) => (b.events ?? []).map((e) => String(e.order_number)));

async function subscribe(name: string, annotations: Record<string, string> = {}, extra: Record<string, unknown> = {}): Promise<string> {
  const answer = await call(on.url, 'POST', '/subscriptions', { owning_application: `app-${randomUUID()}`, event_types: [name], read_from: 'begin', annotations, ...extra });
  expect(answer.status, answer.text).toBe(201);
  return (answer.json as { id: string }).id;
}

/** Reads a stream until `count` events arrived (keep-alives skipped). */
async function read(stream: StreamClient, count: number): Promise<StreamBatch[]> {
  expect(stream.status, JSON.stringify(stream.problem)).toBe(200);
  return stream.events(count, 15_000);
}

describe('a log mixing compressed and plain entries', () => {
  it('is stored as published: a compressed entry holds the same texts a plain one would', async () => {
    const { name, orders } = await mixedLog('stored');
    const entries = await storedEntries(name);
    expect(entries.flatMap((e) => e.orders)).toEqual(orders);
  });

  it('a subscription stream delivers every event in order; one created at a cursor inside a compressed entry starts right after it', async () => {
    const { name, orders } = await mixedLog('subscription');
    const id = await subscribe(name);
    const stream = await StreamClient.open(`${on.url}/subscriptions/${id}/events?batch_limit=3&max_uncommitted_events=100&batch_flush_timeout=1`);
    const batches = await read(stream, orders.length);
    expect(ordersOf(batches)).toEqual(orders);
    stream.close();
    // After the first batch: inside the first (compressed) entry.
    const [first] = batches;
    const after = ordersOf(first ? [first] : []).length;
    expect(after).toBeLessThan(5);
    const cursor = { event_type: name, partition: '0', offset: first?.cursor.offset };
    const resumed = await subscribe(name, {}, { read_from: 'cursors', initial_cursors: [cursor] });
    const rest = await StreamClient.open(`${on.url}/subscriptions/${resumed}/events?batch_limit=100&max_uncommitted_events=100&batch_flush_timeout=1`);
    expect(ordersOf(await read(rest, orders.length - after))).toEqual(orders.slice(after));
    rest.close();
  });

  it('a queue-mode subscription delivers every event once', async () => {
    const { name, orders } = await mixedLog('queue');
    const id = await subscribe(name, { 'broker.io/consumption-mode': 'queue' });
    const stream = await StreamClient.open(`${on.url}/subscriptions/${id}/events?batch_limit=4&max_uncommitted_events=100&batch_flush_timeout=1`);
    const batches = await read(stream, orders.length);
    expect(ordersOf(batches).sort()).toEqual([...orders].sort());
    stream.close();
  });

  it('a low-level stream delivers every event, and continues from a cursor inside a compressed entry', async () => {
    const { name, orders } = await mixedLog('low-level');
    const begin = encodeURIComponent(JSON.stringify([{ partition: '0', offset: 'BEGIN' }]));
    const all = await StreamClient.open(`${on.url}/event-types/${name}/events?cursors=${begin}&batch_limit=2&batch_flush_timeout=1&stream_limit=${orders.length}`);
    const batches = await read(all, orders.length);
    expect(ordersOf(batches)).toEqual(orders);
    all.close();
    // The cursor after the 14th event (inside the last, compressed, entry), wherever the batches ended.
    let seen = 0;
    const cursor = batches.find((b) => (seen += b.events?.length ?? 0) >= 14)?.cursor;
    expect(seen).toBe(14);
    const rest = await StreamClient.open(`${on.url}/event-types/${name}/events?batch_limit=2&batch_flush_timeout=1&stream_limit=2`, { headers: { 'X-Broker-Cursors': JSON.stringify([cursor]) } });
    expect(ordersOf(await read(rest, 2))).toEqual(orders.slice(14));
    rest.close();
  });

  it('server-sent events carry every event', async () => {
    const { name, orders } = await mixedLog('sse');
    const begin = encodeURIComponent(JSON.stringify([{ partition: '0', offset: 'BEGIN' }]));
    const sse = await SseClient.open(`${on.url}/event-types/${name}/events?cursors=${begin}&batch_flush_timeout=1&stream_limit=${orders.length}`);
    expect(sse.status).toBe(200);
    const frames = await sse.untilEnd(20_000);
    const events = frames.flatMap((f) => (f.data === undefined ? [] : ((JSON.parse(f.data) as StreamBatch).events ?? [])));
    expect(events.map((e) => e.order_number)).toEqual(orders);
  });

  it('filters test the events of compressed entries (subscription and low-level)', async () => {
    const { name, orders } = await mixedLog('filter');
    const filter = { properties: { order_number: { type: 'string', pattern: '-(a1|b0|c2|d4)$' } } };
    const matching = orders.filter((o) => /-(a1|b0|c2|d4)$/.test(o));
    const id = await subscribe(name, {}, { filter });
    const subscription = await StreamClient.open(`${on.url}/subscriptions/${id}/events?batch_limit=10&max_uncommitted_events=100&batch_flush_timeout=1`);
    expect(ordersOf(await read(subscription, matching.length))).toEqual(matching);
    subscription.close();
    const begin = encodeURIComponent(JSON.stringify([{ partition: '0', offset: 'BEGIN' }]));
    const low = await StreamClient.open(`${on.url}/event-types/${name}/events?cursors=${begin}&filter=${encodeURIComponent(JSON.stringify(filter))}&batch_flush_timeout=1&stream_limit=${matching.length}`);
    expect(ordersOf(await read(low, matching.length))).toEqual(matching);
    low.close();
  });

  it('the dead-letter queue stores events of compressed entries as they were published', async () => {
    const { name, orders } = await mixedLog('dlq');
    const id = await subscribe(name, { 'broker.io/consumption-mode': 'queue', 'broker.io/subscription-max-event-send-count': '1', 'broker.io/unprocessable-event-policy': 'DEAD_LETTER_QUEUE' });
    const stream = await StreamClient.open(`${on.url}/subscriptions/${id}/events?batch_limit=${orders.length}&max_uncommitted_events=100&batch_flush_timeout=1`);
    const batches = await read(stream, orders.length);
    const headers = { 'X-Broker-StreamId': stream.headers.get('x-broker-streamid') ?? '' };
    for (const batch of batches) expect((await call(on.url, 'POST', `/subscriptions/${id}/cursors/hand-back`, { items: [batch.cursor] }, headers)).status).toBe(204);
    const dlq = await subscribe('broker.dead.letter.queue');
    const reader = await StreamClient.open(`${on.url}/subscriptions/${dlq}/events?batch_limit=100&max_uncommitted_events=100&batch_flush_timeout=1`);
    expect(reader.status, JSON.stringify(reader.problem)).toBe(200);
    const dead: Record<string, unknown>[] = [];
    while (dead.length < orders.length) {
      const batch = await reader.next(15_000);
      if (!batch) throw new Error('the dead-letter stream ended');
      for (const e of batch.events ?? []) if (e.subscription_id === id) dead.push(e.event as Record<string, unknown>);
    }
    reader.close();
    stream.close();
    expect(dead.map((e) => e.order_number).sort()).toEqual([...orders].sort());
    expect(dead.every((e) => e.note === NOTE)).toBe(true);
  });

  it('cursors at a time seek into compressed entries by their events’ received_at', async () => {
    const { name, orders } = await mixedLog('time');
    const begin = encodeURIComponent(JSON.stringify([{ partition: '0', offset: 'BEGIN' }]));
    const all = await StreamClient.open(`${on.url}/event-types/${name}/events?cursors=${begin}&batch_limit=${orders.length}&batch_flush_timeout=1&stream_limit=${orders.length}`);
    const events = (await read(all, orders.length)).flatMap((b) => b.events ?? []);
    all.close();
    const receivedAt = (e: Record<string, unknown>): number => Date.parse(String((e.metadata as { received_at: string }).received_at));
    // The last batch's time: the seek ends inside the log, at the first event received then or later.
    const at = receivedAt(events[events.length - 1] ?? {});
    const expected = events.filter((e) => receivedAt(e) >= at).map((e) => String(e.order_number));
    const answer = await call(on.url, 'GET', `/event-types/${name}/cursors-at-time?time=${encodeURIComponent(new Date(at).toISOString())}`);
    expect(answer.status, answer.text).toBe(200);
    const from = await StreamClient.open(`${on.url}/event-types/${name}/events?batch_limit=${expected.length}&batch_flush_timeout=1&stream_limit=${expected.length}`, { headers: { 'X-Broker-Cursors': JSON.stringify(answer.json) } });
    expect(ordersOf(await read(from, expected.length))).toEqual(expected);
    from.close();
  });

  it('a compacted event type stores its events plain, one entry each, and compaction keeps the newest per key', async () => {
    const name = `stored.compact.${randomUUID().slice(0, 8)}`;
    await createEventType(name, { cleanup_policy: 'compact', partition_strategy: 'hash', partition_key_fields: ['order_number'] });
    const keyed = (key: string, value: number) => ({ metadata: { eid: randomUUID(), occurred_at: new Date().toISOString(), partition_compaction_key: key }, order_number: key, amount: value, note: NOTE });
    const keys = ['k0', 'k1', 'k2', 'k3', 'k4'];
    for (const value of [1, 2]) {
      const answer = await call(on.url, 'POST', `/event-types/${name}/events`, keys.map((k) => keyed(k, value)));
      expect(answer.status, answer.text).toBe(200);
    }
    expect(new Set((await storedEntries(name)).map((e) => e.field))).toEqual(new Set(['d']));
    const begin = encodeURIComponent(JSON.stringify([{ partition: '0', offset: 'BEGIN' }]));
    await expect
      .poll(
        async () => {
          const stream = await StreamClient.open(`${on.url}/event-types/${name}/events?cursors=${begin}&batch_limit=100&batch_flush_timeout=1&stream_keep_alive_limit=1`);
          const seen = (await stream.untilEnd(10_000)).flatMap((b) => b.events ?? []).map((e) => `${String(e.order_number)}=${String(e.amount)}`);
          return seen;
        },
        { timeout: 15_000, interval: 300 },
      )
      .toEqual(keys.map((k) => `${k}=2`));
  });
});
