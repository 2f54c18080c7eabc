import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisClient } from '../../src/storage/redis/redis-connection.js';
import { call, harnessRedis, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { SseClient } from '../support/sse-client.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';

// Every stream the broker ends says why in its last batch: `info.stream_close_reason` (a code) beside
// `info.debug` (docs/consuming.md "Why a stream ended"): subscription streams (JSON lines and server-sent
// events) and low-level server-sent event streams; low-level JSON lines keep the reference wire (no
// closing line). Real broker processes on the harness Redis; each reason is caused for real.

/** Short leases: a session removed behind the node's back is noticed within a heartbeat (a third of it). */
const LEASE_MS = 1500;
let node: TestBroker;
let redis: RedisClient;

beforeAll(async () => {
  node = await startTestBroker({ BROKER_SUBSCRIPTIONS_LEASE_TTL_MS: String(LEASE_MS) });
  redis = harnessRedis();
});
afterAll(async () => {
  await node.stop();
  redis.disconnect();
});

const statistic = (n: number) => ({ default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: n, write_parallelism: n } });

async function createEventType(name: string, partitions = 1, overrides: Record<string, unknown> = {}): Promise<void> {
  const created = await call(node.url, 'POST', '/event-types', businessEventType(name, { ...statistic(partitions), partition_strategy: 'user_defined', ...overrides }));
  expect(created.status, created.text).toBe(201);
}

async function publish(name: string, count: number, partition = '0', base: string = node.url): Promise<void> {
  const events = Array.from({ length: count }, (_, i) => {
    const event = orderEvent(`${name}-${i}`);
    (event.metadata as Record<string, unknown>).partition = partition;
    return event;
  });
  const answer = await call(base, 'POST', `/event-types/${name}/events`, events);
  expect(answer.status, answer.text).toBe(200);
}

async function createSubscription(name: string, extra: Record<string, unknown> = {}, base: string = node.url): Promise<string> {
  const answer = await call(base, 'POST', '/subscriptions', { owning_application: `app-${crypto.randomUUID()}`, event_types: [name], read_from: 'begin', ...extra });
  expect(answer.status, answer.text).toBe(201);
  return (answer.json as { id: string }).id;
}

async function openSubscription(id: string, query: string, base: string = node.url): Promise<StreamClient> {
  const stream = await StreamClient.open(`${base}/subscriptions/${id}/events?${query}`);
  expect(stream.status, JSON.stringify(stream.problem)).toBe(200);
  return stream;
}

const lowLevelPath = (name: string, query: string): string => `/event-types/${name}/events?${query}&cursors=${encodeURIComponent(JSON.stringify([{ partition: '0', offset: 'BEGIN' }]))}`;

/** A low-level stream as JSON lines (the reference wire). */
async function openLowLevel(name: string, query: string, base: string = node.url): Promise<StreamClient> {
  const stream = await StreamClient.open(`${base}${lowLevelPath(name, query)}`);
  expect(stream.status, JSON.stringify(stream.problem)).toBe(200);
  return stream;
}

/** A low-level stream as server-sent events. */
async function openLowLevelSse(name: string, query: string, base: string = node.url): Promise<SseClient> {
  const stream = await SseClient.open(`${base}${lowLevelPath(name, query)}`);
  expect(stream.status, JSON.stringify(stream.problem)).toBe(200);
  return stream;
}

/** Reads a server-sent event stream to its end; expects its last event, a batch without events, to say why. @returns that batch */
async function expectSseClosed(stream: SseClient, reason: string, debug: string | RegExp, timeoutMs = 10_000): Promise<StreamBatch> {
  const batches = (await stream.untilEnd(timeoutMs)).flatMap((f) => (f.data === undefined ? [] : [JSON.parse(f.data) as StreamBatch]));
  const last = batches.at(-1);
  expect(last?.events).toBeUndefined();
  expect(last?.info?.stream_close_reason).toBe(reason);
  if (typeof debug === 'string') expect(last?.info?.debug).toBe(debug);
  else expect(last?.info?.debug).toMatch(debug);
  for (const batch of batches.slice(0, -1)) expect(batch.info?.stream_close_reason).toBeUndefined();
  return last as StreamBatch;
}

/** Reads a low-level JSON-lines stream to its end: the broker ended it, and no line says why (the reference wire). */
async function expectEndedPlain(stream: StreamClient, timeoutMs = 10_000): Promise<void> {
  const lines = await stream.untilEnd(timeoutMs);
  expect(stream.done).toBe(true);
  for (const line of lines) expect(line.info).toBeUndefined();
}

/** Reads `stream` to its end; expects the broker ended it and its last batch, empty, to say why. @returns the last batch */
async function expectClosed(stream: StreamClient, reason: string, debug: string | RegExp, timeoutMs = 10_000): Promise<StreamBatch> {
  const lines = await stream.untilEnd(timeoutMs);
  expect(stream.done).toBe(true);
  const last = lines.at(-1);
  expect(last?.events).toBeUndefined();
  expect(last?.info?.stream_close_reason).toBe(reason);
  if (typeof debug === 'string') expect(last?.info?.debug).toBe(debug);
  else expect(last?.info?.debug).toMatch(debug);
  // Only the last batch carries a reason.
  for (const line of lines.slice(0, -1)) expect(line.info?.stream_close_reason).toBeUndefined();
  return last as StreamBatch;
}

const streamIdOf = (stream: StreamClient): string => stream.headers.get('x-broker-streamid') ?? '';

describe('subscription streams say why they ended', () => {
  it('stream_limit_reached once stream_limit events were committed', async () => {
    const name = 'close.sub-limit';
    await createEventType(name);
    await publish(name, 3);
    const id = await createSubscription(name);
    const stream = await openSubscription(id, 'batch_limit=2&stream_limit=2&batch_flush_timeout=1');
    const [batch] = await stream.events(2);
    const committed = await call(node.url, 'POST', `/subscriptions/${id}/cursors`, { items: [batch?.cursor] }, { 'X-Broker-StreamId': streamIdOf(stream) });
    expect(committed.status, committed.text).toBe(204);
    await expectClosed(stream, 'stream_limit_reached', 'Stream limit in events reached: 2');
  });

  it('stream_timeout_reached and keep_alive_limit_reached', async () => {
    const name = 'close.sub-time';
    await createEventType(name);
    const timedOut = await openSubscription(await createSubscription(name), 'batch_flush_timeout=1&stream_timeout=1');
    const keptAlive = await openSubscription(await createSubscription(name), 'batch_flush_timeout=1&stream_keep_alive_limit=1');
    await expectClosed(timedOut, 'stream_timeout_reached', 'Stream timeout reached');
    await expectClosed(keptAlive, 'keep_alive_limit_reached', 'Stream keep-alive limit reached');
  });

  it('commit_timeout_reached when a sent event stays uncommitted for commit_timeout', async () => {
    const name = 'close.sub-commit';
    await createEventType(name);
    await publish(name, 1);
    const stream = await openSubscription(await createSubscription(name), 'batch_flush_timeout=1&commit_timeout=1');
    await stream.events(1);
    await expectClosed(stream, 'commit_timeout_reached', 'Commit timeout reached');
  });

  it('a stream whose last partition a direct request took is not ended: it takes the partition again when the direct stream ends', async () => {
    const name = 'close.sub-direct';
    await createEventType(name);
    const id = await createSubscription(name);
    const automatic = await openSubscription(id, 'batch_flush_timeout=1');
    const first = await automatic.next();
    expect(first?.info?.debug).toBe('Stream started');
    const body = JSON.stringify({ partitions: [{ event_type: name, partition: '0' }], batch_flush_timeout: 1 });
    const direct = await StreamClient.open(`${node.url}/subscriptions/${id}/events`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    expect(direct.status, JSON.stringify(direct.problem)).toBe(200);
    // Once the direct stream holds the partition (the hand-over is asynchronous), the first event goes to
    // it; it commits and leaves.
    const deadline = Date.now() + 10_000;
    for (;;) {
      const stats = (await call(node.url, 'GET', `/subscriptions/${id}/stats`)).json as { items: { partitions: { stream_id: string; state: string }[] }[] };
      const partition = stats.items[0]?.partitions[0];
      if (partition?.stream_id === streamIdOf(direct) && partition.state === 'assigned') break;
      if (Date.now() > deadline) throw new Error(`the direct stream never got the partition: ${JSON.stringify(stats)}`);
    }
    await publish(name, 1);
    const [taken] = await direct.events(1);
    const committed = await call(node.url, 'POST', `/subscriptions/${id}/cursors`, { items: [taken?.cursor] }, { 'X-Broker-StreamId': streamIdOf(direct) });
    expect(committed.status, committed.text).toBe(204);
    direct.close();
    // The automatic stream, still open, takes the partition again and gets the next event, not the first.
    await publish(name, 1);
    const [got] = await automatic.events(1);
    expect(got?.cursor.offset).toBe('001-0001-000000000000000001');
    expect(automatic.done).toBe(false);
    automatic.close();
  });

  it('cursors_reset, subscription_deleted, authorization_changed', async () => {
    const name = 'close.sub-admin';
    await createEventType(name);
    await publish(name, 1);
    const reset = await createSubscription(name);
    const deleted = await createSubscription(name);
    const readers = [{ data_type: 'user', value: 'unauthenticated' }];
    const authz = await createSubscription(name, { authorization: { admins: readers, readers } });
    const streams = await Promise.all([reset, deleted, authz].map((id) => openSubscription(id, 'batch_flush_timeout=1')));
    const [resetStream, deletedStream, authzStream] = streams as [StreamClient, StreamClient, StreamClient];
    const [batch] = await resetStream.events(1);

    const patched = await call(node.url, 'PATCH', `/subscriptions/${reset}/cursors`, { items: [{ event_type: name, partition: '0', offset: batch?.cursor.offset }] });
    expect(patched.status, patched.text).toBe(204);
    await expectClosed(resetStream, 'cursors_reset', 'Resetting subscription cursors');

    expect((await call(node.url, 'DELETE', `/subscriptions/${deleted}`)).status).toBe(204);
    await expectClosed(deletedStream, 'subscription_deleted', 'Subscription was deleted');

    const record = (await call(node.url, 'GET', `/subscriptions/${authz}`)).json as Record<string, unknown>;
    const changed = await call(node.url, 'PUT', `/subscriptions/${authz}`, { ...record, authorization: { admins: readers, readers: [...readers, { data_type: 'user', value: 'another' }] } });
    expect(changed.status, changed.text).toBe(204);
    await expectClosed(authzStream, 'authorization_changed', 'Subscription authorization changed; reconnect');
  });

  it('session_lost when its session disappears from Redis while the subscription stays', async () => {
    const name = 'close.sub-session';
    await createEventType(name);
    const id = await createSubscription(name);
    const stream = await openSubscription(id, 'batch_flush_timeout=1');
    await stream.next();
    expect(await redis.zrem(node.keys.subscriptionSessions(id), streamIdOf(stream))).toBe(1);
    await expectClosed(stream, 'session_lost', /^Stream session ended/);
  });
});

describe('subscription and low-level streams', () => {
  it('consumption_blocked when the event type is put on the blacklist', async () => {
    const name = 'close.blocked';
    await createEventType(name);
    const sub = await openSubscription(await createSubscription(name), 'batch_flush_timeout=1');
    const low = await openLowLevelSse(name, 'batch_flush_timeout=1');
    const lowJson = await openLowLevel(name, 'batch_flush_timeout=1');
    await Promise.all([sub.next(), low.next(), lowJson.next()]);
    expect((await call(node.url, 'PUT', `/settings/blacklist/CONSUMER_ET/${name}`)).status).toBe(204);
    try {
      await expectClosed(sub, 'consumption_blocked', 'Consumption is blocked');
      await expectSseClosed(low, 'consumption_blocked', 'Consumption is blocked');
      await expectEndedPlain(lowJson);
    } finally {
      expect((await call(node.url, 'DELETE', `/settings/blacklist/CONSUMER_ET/${name}`)).status).toBe(204);
    }
  });

  it('event_type_repartitioned when an event type of the stream gets more partitions', async () => {
    const name = 'close.repartitioned';
    await createEventType(name);
    const stream = await openSubscription(await createSubscription(name), 'batch_flush_timeout=1');
    await stream.next();
    expect((await call(node.url, 'POST', '/settings/features', { feature: 'repartitioning', enabled: true })).status).toBe(204);
    const repartitioned = await call(node.url, 'POST', `/event-types/${name}/partition-count`, { partition_count: 2 });
    expect(repartitioned.status, repartitioned.text).toBeLessThan(300);
    await expectClosed(stream, 'event_type_repartitioned', /repartitioning/);
  });
});

describe('low-level streams say why they ended', () => {
  it('stream_limit_reached, stream_timeout_reached', async () => {
    const name = 'close.low-limits';
    await createEventType(name);
    await publish(name, 3);
    const limited = await openLowLevelSse(name, 'batch_limit=2&stream_limit=2&batch_flush_timeout=1');
    const timedOut = await openLowLevelSse(name, 'batch_limit=5&batch_flush_timeout=1&stream_timeout=1');
    const limitedJson = await openLowLevel(name, 'batch_limit=2&stream_limit=2&batch_flush_timeout=1');
    const last = await expectSseClosed(limited, 'stream_limit_reached', 'Stream limit in events reached: 2');
    expect(last.cursor).toEqual({ partition: '0', offset: '001-0001-000000000000000001' });
    await expectSseClosed(timedOut, 'stream_timeout_reached', 'Stream timeout reached');
    // JSON lines: the events and nothing after them.
    await expectEndedPlain(limitedJson);
  });

  it('authorization_changed when the readers of the event type change; event_type_deleted when it is deleted', async () => {
    const name = 'close.low-admin';
    const readers = [{ data_type: 'user', value: 'unauthenticated' }];
    const authorization = { admins: readers, readers, writers: readers };
    await createEventType(name, 1, { authorization });
    const changing = await openLowLevelSse(name, 'batch_flush_timeout=1');
    await changing.next();
    const record = (await call(node.url, 'GET', `/event-types/${name}`)).json as Record<string, unknown>;
    const changed = await call(node.url, 'PUT', `/event-types/${name}`, { ...record, authorization: { ...authorization, readers: [...readers, { data_type: 'user', value: 'another' }] } });
    expect(changed.status, changed.text).toBe(200);
    await expectSseClosed(changing, 'authorization_changed', 'The readers of an event type of this stream changed; reconnect');

    const deleting = await openLowLevelSse(name, 'batch_flush_timeout=1');
    await deleting.next();
    expect((await call(node.url, 'DELETE', `/event-types/${name}`)).status).toBe(200);
    await expectSseClosed(deleting, 'event_type_deleted', `EventType "${name}" was deleted`);
  });
});

describe('node shutdown', () => {
  it('node_shutting_down on every kind of stream the stopping node serves that carries a closing batch', async () => {
    const stopping = await startTestBroker({ BROKER_REDIS_KEY_PREFIX: node.prefix, BROKER_SUBSCRIPTIONS_LEASE_TTL_MS: String(LEASE_MS) });
    try {
      const name = 'close.shutdown';
      await createEventType(name);
      await publish(name, 1);
      const sub = await openSubscription(await createSubscription(name), 'batch_flush_timeout=1', stopping.url);
      const low = await openLowLevelSse(name, 'batch_flush_timeout=1', stopping.url);
      const sse = await SseClient.open(`${stopping.url}/subscriptions/${await createSubscription(name)}/events?batch_flush_timeout=1`);
      expect(sse.status).toBe(200);
      await Promise.all([sub.events(1), low.next(), sse.next()]);
      expect(await stopping.stop('SIGTERM')).toBe(0);
      await expectClosed(sub, 'node_shutting_down', 'Node is shutting down');
      await expectSseClosed(low, 'node_shutting_down', 'Node is shutting down');
      const frames = (await sse.untilEnd()).filter((f) => f.data !== undefined);
      const last = JSON.parse(frames.at(-1)?.data ?? '{}') as StreamBatch;
      expect(last.info).toEqual({ debug: 'Node is shutting down', stream_close_reason: 'node_shutting_down' });
    } finally {
      await stopping.stop();
    }
  });
});

