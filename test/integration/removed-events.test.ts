import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatOffset as formatTimelineOffset } from '../../src/domain/cursor/offsets.js';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';

/**
 * Offsets with no event behind them (docs/consuming.md "Events removed before they were read"):
 * retention removed events before a subscription read them, or compaction removed superseded
 * versions between kept events. Such offsets are never in flight — they never count against
 * `max_uncommitted_events`, the commit window or `stream_limit` — and need no commit; a stream whose
 * cursor lies in the removed range continues at the oldest kept event and says how many events expired
 * unread (`info.expired_events`, the stats, the metric). Retention runs every 300 ms with a 1 s
 * retention time, compaction every 200 ms with no lag: tests wait for the removal with a deadline.
 */

let broker: TestBroker;

const FAST = {
  BROKER_EVENT_TYPES_MIN_RETENTION_TIME_MS: '1000',
  BROKER_RETENTION_CHECK_INTERVAL_MS: '300',
  BROKER_COMPACTION_INTERVAL_MS: '200',
  BROKER_COMPACTION_LAG_MS: '0',
};
/** Retention set once the old events are gone, so the new ones stay for the test. */
const LONG_RETENTION_MS = 172_800_000;

beforeAll(async () => {
  broker = await startTestBroker(FAST);
});
afterAll(async () => {
  await broker.stop();
});

const offset = (n: number): string => formatTimelineOffset(1, n);
const offsetOf = (batch: StreamBatch): number => Number(batch.cursor.offset.slice(-18));
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `check` returns a value other than undefined, or fails after `timeoutMs`. */
async function until<T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** A business event type with `partitions` user-defined partitions and a 1 s retention. */
async function createEventType(name: string, partitions = 1): Promise<void> {
  const body = businessEventType(name, {
    partition_strategy: 'user_defined',
    options: { retention_time: 1000 },
    default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: partitions, write_parallelism: partitions },
  });
  const created = await call(broker.url, 'POST', '/event-types', body);
  expect(created.status, created.text).toBe(201);
}

/** Publishes `n` events to `partition` in one request. */
async function publish(name: string, n: number, partition = '0'): Promise<void> {
  const events = Array.from({ length: n }, (_, i) => orderEvent(`${name}-${partition}-${i}-${randomUUID()}`, { metadata: { eid: randomUUID(), occurred_at: new Date().toISOString(), partition } }));
  const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, events);
  expect(answer.status, answer.text).toBe(200);
}

/** Waits until retention removed everything before offset `oldest` of each partition, then makes retention long. */
async function expireThrough(name: string, oldest: number, partitions = 1): Promise<void> {
  for (let p = 0; p < partitions; p++) {
    await until(`retention of ${name}/${p}`, async () => {
      const partition = (await call(broker.url, 'GET', `/event-types/${name}/partitions/${p}`)).json as { oldest_available_offset: string };
      return partition.oldest_available_offset === offset(oldest) ? true : undefined;
    });
  }
  const current = (await call(broker.url, 'GET', `/event-types/${name}`)).json as Record<string, unknown>;
  const updated = await call(broker.url, 'PUT', `/event-types/${name}`, { ...current, options: { retention_time: LONG_RETENTION_MS } });
  expect(updated.status, updated.text).toBe(200);
}

async function createSubscription(eventType: string, extra: Record<string, unknown> = { read_from: 'begin' }): Promise<string> {
  const created = await call(broker.url, 'POST', '/subscriptions', { owning_application: `removed-${randomUUID()}`, event_types: [eventType], ...extra });
  expect(created.status, created.text).toBe(201);
  return (created.json as { id: string }).id;
}

async function openStream(id: string, query: string): Promise<{ client: StreamClient; streamId: string }> {
  const client = await StreamClient.open(`${broker.url}/subscriptions/${id}/events?${query}`);
  expect(client.status, JSON.stringify(client.problem)).toBe(200);
  return { client, streamId: client.headers.get('x-broker-streamid') ?? '' };
}

async function commit(id: string, streamId: string, batch: StreamBatch): Promise<number> {
  const answer = await call(broker.url, 'POST', `/subscriptions/${id}/cursors`, { items: [batch.cursor] }, { 'X-Broker-StreamId': streamId });
  expect([200, 204], answer.text).toContain(answer.status);
  return answer.status;
}

/**
 * Reads batches until `n` events arrived, committing each data batch's cursor as a consumer does.
 * @returns every batch read (keep-alives included)
 */
async function consume(id: string, stream: { client: StreamClient; streamId: string }, n: number, timeoutMs = 15_000): Promise<StreamBatch[]> {
  const batches: StreamBatch[] = [];
  let events = 0;
  const deadline = Date.now() + timeoutMs;
  while (events < n) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`only ${events} of ${n} events arrived`);
    const batch = await stream.client.next(left);
    if (batch === undefined) throw new Error(`the stream ended after ${events} of ${n} events`);
    batches.push(batch);
    if (batch.events !== undefined && batch.events.length > 0) {
      events += batch.events.length;
      expect(await commit(id, stream.streamId, batch)).toBe(204);
    }
  }
  return batches;
}

/** `info.expired_events` of a batch (0 when absent). */
const expiredIn = (batch: StreamBatch): number => Number((batch.info as { expired_events?: number } | undefined)?.expired_events ?? 0);

/** The stats of one subscription as `partition → {unconsumed_events, expired_events}` of its single event type. */
async function stats(id: string): Promise<Map<string, { unconsumed_events?: number; expired_events?: number }>> {
  const answer = (await call(broker.url, 'GET', `/subscriptions/${id}/stats`)).json as { items: { partitions: { partition: string; unconsumed_events?: number; expired_events?: number }[] }[] };
  return new Map((answer.items[0]?.partitions ?? []).map((p) => [p.partition, p]));
}

/**
 * The checks every retention case ends with: the `count` events published after the removal arrive in
 * order from `first` on, the first batch of the partition after the jump says `expired` events expired
 * unread (no earlier batch says anything), every data batch commits, and stats and metrics count them.
 */
async function expectContinuesAfterRemoval(id: string, name: string, stream: { client: StreamClient; streamId: string }, first: number, count: number, expired: number): Promise<void> {
  const batches = await consume(id, stream, count);
  const data = batches.filter((b) => (b.events?.length ?? 0) > 0);
  const offsets = data.flatMap((b) => {
    const last = offsetOf(b);
    const n = b.events?.length ?? 0;
    return Array.from({ length: n }, (_, i) => last - n + 1 + i);
  });
  expect(offsets).toEqual(Array.from({ length: count }, (_, i) => first + i));
  const reporting = batches.findIndex((b) => expiredIn(b) > 0);
  expect(reporting, 'a batch reports the expired events').toBeGreaterThanOrEqual(0);
  expect(expiredIn(batches[reporting] as StreamBatch)).toBe(expired);
  expect(reporting).toBeLessThanOrEqual(batches.indexOf(data[0] as StreamBatch));
  expect(batches.filter((b) => expiredIn(b) > 0)).toHaveLength(1);
  stream.client.close();
  await until('the expired events in the stats', async () => {
    const partition = (await stats(id)).get('0');
    return partition?.expired_events === expired && partition.unconsumed_events === 0 ? true : undefined;
  });
  const metrics = (await call(broker.url, 'GET', '/metrics')).text;
  expect(metrics).toContain(`broker_subscription_expired_events_total{subscription_id="${id}",event_type="${name}"} ${expired}`);
}

describe('a subscription whose cursor lies in offsets retention removed', () => {
  for (const old of [200, 20]) {
    const size = old > 100 ? 'larger' : 'smaller';
    it(`continues from a committed cursor at the oldest kept event (gap ${size} than max_uncommitted_events)`, async () => {
      const name = `removed.committed-${old}`;
      await createEventType(name);
      await publish(name, old);
      const id = await createSubscription(name);
      // The first stream sends one batch (stream_limit=5) whose cursor is committed, and ends with
      // nothing uncommitted: its partition is free at once.
      const first = await openStream(id, 'batch_limit=5&stream_limit=5');
      await consume(id, first, 5);
      await first.client.untilEnd();
      await expireThrough(name, old);
      await publish(name, 10);
      const second = await openStream(id, 'batch_limit=5&max_uncommitted_events=100&batch_flush_timeout=1&stream_timeout=30');
      await expectContinuesAfterRemoval(id, name, second, old, 10, old - 5);
      // The metric's series ends with the subscription.
      expect((await call(broker.url, 'DELETE', `/subscriptions/${id}`)).status).toBe(204);
      await until('the series of the deleted subscription gone', async () => ((await call(broker.url, 'GET', '/metrics')).text.includes(`subscription_id="${id}"`) ? undefined : true));
    });

    it(`continues from an initial cursor at the oldest kept event (gap ${size} than max_uncommitted_events)`, async () => {
      const name = `removed.initial-${old}`;
      await createEventType(name);
      await publish(name, old);
      const id = await createSubscription(name, { read_from: 'cursors', initial_cursors: [{ event_type: name, partition: '0', offset: offset(2) }] });
      // An empty reset only initializes: the initial cursor becomes the committed offset now.
      expect((await call(broker.url, 'PATCH', `/subscriptions/${id}/cursors`, { items: [] })).status).toBe(204);
      await expireThrough(name, old);
      await publish(name, 10);
      const stream = await openStream(id, 'batch_limit=5&max_uncommitted_events=10&batch_flush_timeout=1');
      await expectContinuesAfterRemoval(id, name, stream, old, 10, old - 3);
    });

    it(`continues from cursors reset into the removed range (gap ${size} than max_uncommitted_events)`, async () => {
      const name = `removed.reset-${old}`;
      await createEventType(name);
      await publish(name, old);
      const id = await createSubscription(name);
      const reset = await call(broker.url, 'PATCH', `/subscriptions/${id}/cursors`, { items: [{ event_type: name, partition: '0', offset: offset(9), cursor_token: randomUUID() }] });
      expect(reset.status, reset.text).toBe(204);
      await expireThrough(name, old);
      await publish(name, 10);
      const stream = await openStream(id, 'batch_limit=5&max_uncommitted_events=10&batch_flush_timeout=1');
      await expectContinuesAfterRemoval(id, name, stream, old, 10, old - 10);
    });
  }

  it('continues from BEGIN on every partition, and from a committed cursor on another, with more removed than max_uncommitted_events', async () => {
    const name = 'removed.begin';
    await createEventType(name, 4);
    for (let p = 0; p < 4; p++) await publish(name, 50, String(p));
    const id = await createSubscription(name);
    // One partition is read and committed up to offset 4; the other three stay at BEGIN.
    const first = await openStream(id, 'batch_limit=5&stream_limit=5');
    const batch = (await consume(id, first, 5)).find((b) => (b.events?.length ?? 0) > 0) as StreamBatch;
    await first.client.untilEnd();
    const committedPartition = batch.cursor.partition;
    await expireThrough(name, 50, 4);
    for (let p = 0; p < 4; p++) await publish(name, p === 3 ? 29 : 27, String(p));
    const stream = await openStream(id, 'batch_limit=5&max_uncommitted_events=10&batch_flush_timeout=1');
    const batches = await consume(id, stream, 110);
    stream.client.close();
    const expiredBy = new Map<string, number>();
    for (const b of batches) if (expiredIn(b) > 0) expiredBy.set(b.cursor.partition, (expiredBy.get(b.cursor.partition) ?? 0) + expiredIn(b));
    expect(Object.fromEntries(expiredBy)).toEqual(Object.fromEntries(['0', '1', '2', '3'].map((p) => [p, p === committedPartition ? 45 : 50])));
    await until('every partition consumed in the stats', async () => {
      const partitions = await stats(id);
      return [...partitions.values()].every((p) => p.unconsumed_events === 0) && partitions.get(committedPartition)?.expired_events === 45 ? true : undefined;
    });
  });

  it('commits the cursors of batches delivered before and after the removal as it would without it', async () => {
    const name = 'removed.live';
    await createEventType(name);
    await publish(name, 200);
    const id = await createSubscription(name);
    const stream = await openStream(id, 'batch_limit=5&max_uncommitted_events=5&batch_flush_timeout=1');
    const delivered = (await stream.client.events(5)).find((b) => (b.events?.length ?? 0) > 0) as StreamBatch;
    expect(offsetOf(delivered)).toBe(4);
    // The stream waits for the commit of offsets 0-4 while retention removes all 200 events from Redis.
    // The stream had read them before (they are in its read buffer): it still delivers them, and their
    // cursors — now before the oldest kept event — commit as they would have without the removal.
    await expireThrough(name, 200);
    await publish(name, 10);
    expect(await commit(id, stream.streamId, delivered)).toBe(204);
    const batches = await consume(id, stream, 205);
    const offsets = batches.filter((b) => (b.events?.length ?? 0) > 0).map(offsetOf);
    expect(offsets).toEqual(Array.from({ length: 41 }, (_, i) => 9 + 5 * i));
    expect(batches.filter((b) => expiredIn(b) > 0)).toEqual([]);
    stream.client.close();
    await until('everything consumed in the stats', async () => ((await stats(id)).get('0')?.unconsumed_events === 0 ? true : undefined));
    expect((await call(broker.url, 'GET', `/subscriptions/${id}/cursors`)).json).toMatchObject({ items: [{ offset: offset(209) }] });
  });
});

describe('a stream kind that takes a cursor in the removed range as an expired cursor', () => {
  it('answers 412 for a low-level stream, as JSON lines or server-sent events, and never for a subscription stream', async () => {
    const name = 'removed.low-level';
    await createEventType(name);
    await publish(name, 20);
    await expireThrough(name, 20);
    const cursors = JSON.stringify([{ partition: '0', offset: offset(4) }]);
    for (const accept of ['application/x-json-stream', 'text/event-stream']) {
      const answer = await fetch(`${broker.url}/event-types/${name}/events?stream_timeout=1&batch_flush_timeout=1`, { headers: { 'X-Broker-Cursors': cursors, Accept: accept } });
      expect(answer.status, accept).toBe(412);
      expect(answer.headers.get('content-type')).toBe('application/problem+json');
      expect(((await answer.json()) as { detail: string }).detail).toContain('expired');
    }
    // An EventSource reconnecting with the id of an event retention has removed since.
    const reconnect = await fetch(`${broker.url}/event-types/${name}/events?stream_timeout=1&batch_flush_timeout=1`, { headers: { 'Last-Event-ID': cursors, Accept: 'text/event-stream' } });
    expect(reconnect.status).toBe(412);
    await reconnect.body?.cancel();
    // The oldest kept offset minus one is still a valid cursor.
    const fromOldest = await fetch(`${broker.url}/event-types/${name}/events?stream_timeout=1&batch_flush_timeout=1`, { headers: { 'X-Broker-Cursors': JSON.stringify([{ partition: '0', offset: offset(19) }]) } });
    expect(fromOldest.status).toBe(200);
    await fromOldest.body?.cancel();
  });
});

describe('a subscription of a compacted event type', () => {
  /** A compacted event type: 10 versions of each of 5 keys, key by key, so only offsets 9, 19, 29, 39, 49 stay. */
  async function compacted(name: string): Promise<void> {
    const body = businessEventType(name, { cleanup_policy: 'compact', partition_strategy: 'hash', partition_key_fields: ['order_number'] });
    expect((await call(broker.url, 'POST', '/event-types', body)).status).toBe(201);
    const events = [];
    for (let k = 0; k < 5; k++) {
      for (let v = 0; v < 10; v++) events.push(orderEvent(`key-${k}`, { amount: v, metadata: { eid: randomUUID(), occurred_at: new Date().toISOString(), partition_compaction_key: `key-${k}` } }));
    }
    const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, events);
    expect(answer.status, answer.text).toBe(200);
    await until(`compaction of ${name}`, async () => {
      const low = await StreamClient.open(`${broker.url}/event-types/${name}/events?batch_limit=100&batch_flush_timeout=1&stream_keep_alive_limit=1`, { headers: { 'X-Broker-Cursors': JSON.stringify([{ partition: '0', offset: 'BEGIN' }]) } });
      const seen = (await low.untilEnd(10_000)).reduce((n, b) => n + (b.events?.length ?? 0), 0);
      return seen === 5 ? true : undefined;
    });
  }

  it('delivers the latest version of every key with removed versions ahead of and between them beyond max_uncommitted_events', async () => {
    const name = 'removed.compacted-tight';
    await compacted(name);
    const id = await createSubscription(name);
    // 9 removed versions ahead of each kept one, more than max_uncommitted_events.
    const stream = await openStream(id, 'batch_limit=5&max_uncommitted_events=5&batch_flush_timeout=1');
    const batches = await consume(id, stream, 5);
    stream.client.close();
    const events = batches.flatMap((b) => b.events ?? []);
    expect(events.map((e) => [e.order_number, e.amount])).toEqual([0, 1, 2, 3, 4].map((k) => [`key-${k}`, 9]));
    // Compacted-away versions are not news: no batch reports expired events.
    expect(batches.filter((b) => expiredIn(b) > 0)).toEqual([]);
    expect((await stats(id)).get('0')).toMatchObject({ unconsumed_events: 0 });
    expect((await stats(id)).get('0')?.expired_events).toBeUndefined();
  });

  it('counts delivered events, not removed offsets, against stream_limit (removed versions fewer than max_uncommitted_events)', async () => {
    const name = 'removed.compacted-limit';
    await compacted(name);
    const id = await createSubscription(name);
    const stream = await openStream(id, 'batch_limit=5&max_uncommitted_events=100&stream_limit=10&batch_flush_timeout=1');
    await consume(id, stream, 5);
    // 5 of 10 events committed: the stream goes on and delivers the next version of a key.
    const next = orderEvent('key-0', { amount: 10, metadata: { eid: randomUUID(), occurred_at: new Date().toISOString(), partition_compaction_key: 'key-0' } });
    expect((await call(broker.url, 'POST', `/event-types/${name}/events`, [next])).status).toBe(200);
    const batches = await consume(id, stream, 1);
    const events = batches.flatMap((b) => b.events ?? []);
    expect(events.map((e) => e.amount)).toEqual([10]);
    expect(batches.some((b) => b.info?.debug?.startsWith('Stream limit'))).toBe(false);
    stream.client.close();
  });
});
