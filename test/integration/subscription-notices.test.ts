import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisProcess } from '../../scripts/local-processes.js';
import { call, harnessRedis, shardChannels, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient } from '../support/stream-client.js';
import type { RedisClient } from '../../src/storage/redis/redis-connection.js';

// Change notices of a subscription go on its own sharded channel
// (docs/decisions/0004-sharded-notice-channels.md), which a node subscribes only while it streams the
// subscription. Two nodes on one key prefix. The lease is long (heartbeat
// every 20 s), so what happens within seconds here came through a notice, not a heartbeat's state read.
const LEASE_MS = 60_000;
let a: TestBroker;
let b: TestBroker;
let redis: RedisClient;

beforeAll(async () => {
  const env = { BROKER_SUBSCRIPTIONS_LEASE_TTL_MS: String(LEASE_MS) };
  a = await startTestBroker(env);
  b = await startTestBroker({ ...env, BROKER_REDIS_KEY_PREFIX: a.prefix });
  redis = harnessRedis();
});
afterAll(async () => {
  redis.disconnect();
  await Promise.all([a.stop(), b.stop()]);
});

async function eventType(name: string, partitions: number): Promise<void> {
  const statistic = { default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: partitions, write_parallelism: partitions } };
  expect((await call(a.url, 'POST', '/event-types', businessEventType(name, { ...statistic, partition_strategy: 'user_defined' }))).status).toBe(201);
}

async function subscription(name: string): Promise<string> {
  const answer = await call(a.url, 'POST', '/subscriptions', { owning_application: `app-${crypto.randomUUID()}`, event_types: [name], read_from: 'begin' });
  expect(answer.status).toBe(201);
  return (answer.json as { id: string }).id;
}

async function open(node: TestBroker, id: string, query = 'batch_flush_timeout=30'): Promise<StreamClient> {
  const stream = await StreamClient.open(`${node.url}/subscriptions/${id}/events?${query}`);
  expect(stream.status, JSON.stringify(stream.problem)).toBe(200);
  return stream;
}

/** Subscribers of the notice channels of this file's subscriptions, by subscription id. */
async function listeners(): Promise<Map<string, number>> {
  const channels = await shardChannels(redis, `${a.prefix}{sub:*}:notices`);
  return new Map([...channels].map(([channel, count]) => [/\{sub:([^}]+)\}/.exec(channel)?.[1] ?? channel, count]));
}

async function eventually(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Stream ids holding a session of the subscription (GET stats). */
async function sessions(id: string): Promise<Set<string>> {
  const answer = await call(a.url, 'GET', `/subscriptions/${id}/stats`);
  const stats = answer.json as { items: { partitions: { stream_id: string }[] }[] };
  return new Set(stats.items.flatMap((i) => i.partitions.map((p) => p.stream_id)).filter((s) => s !== ''));
}

describe('subscription notices', () => {
  it('a node subscribes to the notices of the subscriptions it streams only, once per subscription, and unsubscribes when its last stream of one ends', async () => {
    await eventType('notices.channels', 3);
    const streamed = await subscription('notices.channels');
    const idle = await subscription('notices.channels');
    expect(await listeners()).toEqual(new Map());

    // The node subscribes before the stream joins, so it is in place when the stream answers.
    const x1 = await open(a, streamed);
    expect(await listeners()).toEqual(new Map([[streamed, 1]]));
    // A second stream of it on the same node: still one subscription of that node.
    const x2 = await open(a, streamed);
    expect(await listeners()).toEqual(new Map([[streamed, 1]]));
    // A stream on the other node: that node subscribes too.
    const y1 = await open(b, streamed);
    expect(await listeners()).toEqual(new Map([[streamed, 2]]));
    expect((await listeners()).has(idle)).toBe(false);

    // The other node's only stream ends: it unsubscribes.
    y1.close();
    await eventually(async () => (await listeners()).get(streamed) === 1, 10_000, 'node b unsubscribed');
    // One of two streams of node a ends (its session is gone): node a stays subscribed.
    const x1Id = x1.headers.get('x-broker-streamid') ?? '';
    x1.close();
    await eventually(async () => !(await sessions(streamed)).has(x1Id), 10_000, 'the first stream left');
    expect(await listeners()).toEqual(new Map([[streamed, 1]]));
    // Its last stream ends: no node listens any more.
    x2.close();
    await eventually(async () => (await listeners()).size === 0, 10_000, 'node a unsubscribed');
  });

  it('a commit through another node reaches the stream at once; a cursor reset and a deletion through another node end it', async () => {
    await eventType('notices.commits', 1);
    const published = await call(b.url, 'POST', '/event-types/notices.commits/events', ['n-1', 'n-2', 'n-3'].map((n) => orderEvent(n, { metadata: { eid: crypto.randomUUID(), occurred_at: new Date().toISOString(), partition: '0' } })));
    expect(published.status).toBe(200);
    const id = await subscription('notices.commits');

    // One event at a time: the stream on node a sends the next one only when it learns of the commit.
    const stream = await open(a, id, 'batch_limit=1&max_uncommitted_events=1&batch_flush_timeout=30');
    const streamId = stream.headers.get('x-broker-streamid') ?? '';
    for (const expected of ['n-1', 'n-2', 'n-3']) {
      const [batch] = await stream.events(1, 5_000);
      expect(batch?.events?.[0]?.order_number).toBe(expected);
      const committed = await call(b.url, 'POST', `/subscriptions/${id}/cursors`, { items: [batch?.cursor] }, { 'X-Broker-StreamId': streamId });
      expect(committed.status).toBe(204);
    }

    // A cursor reset through node b ends the stream on node a.
    const reset = call(b.url, 'PATCH', `/subscriptions/${id}/cursors`, { items: [{ event_type: 'notices.commits', partition: '0', offset: 'BEGIN' }] });
    const ended = await stream.untilEnd(10_000);
    expect(ended.at(-1)?.info?.debug).toBe('Resetting subscription cursors');
    expect((await reset).status).toBe(204);

    // Deleting the subscription through node b ends a new stream of it on node a.
    const again = await open(a, id);
    expect((await call(b.url, 'DELETE', `/subscriptions/${id}`)).status).toBe(204);
    const gone = await again.untilEnd(10_000);
    expect(gone.at(-1)?.info).toEqual({ debug: 'Subscription was deleted', stream_close_reason: 'subscription_deleted' });
    await eventually(async () => !(await listeners()).has(id), 10_000, 'node a unsubscribed from the deleted subscription');
  });
});

// On a Redis of its own: cutting every pub/sub connection of the harness Redis would disturb the other
// test files' nodes.
describe('subscription notices after a reconnect', () => {
  let privateRedis: RedisProcess;
  let c: TestBroker;
  let d: TestBroker;
  let client: Redis;

  beforeAll(async () => {
    privateRedis = await startRedis();
    const env = { BROKER_SUBSCRIPTIONS_LEASE_TTL_MS: String(LEASE_MS), BROKER_REDIS_URL: privateRedis.url };
    c = await startTestBroker(env);
    d = await startTestBroker({ ...env, BROKER_REDIS_KEY_PREFIX: c.prefix });
    client = new Redis(privateRedis.url);
  });
  afterAll(async () => {
    client.disconnect();
    await Promise.all([c.stop(), d.stop()]);
    await privateRedis.stop();
  });

  async function noticeListeners(id: string): Promise<number> {
    const channels = await shardChannels(client, `${c.prefix}{sub:${id}}:notices`);
    return [...channels.values()][0] ?? 0;
  }

  it('after Redis drops the pub/sub connections, a node subscribes again and a commit through another node still reaches the stream at once', async () => {
    const statistic = { default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: 1, write_parallelism: 1 } };
    expect((await call(c.url, 'POST', '/event-types', businessEventType('notices.reconnect', { ...statistic, partition_strategy: 'user_defined' }))).status).toBe(201);
    const events = ['r-1', 'r-2'].map((n) => orderEvent(n, { metadata: { eid: crypto.randomUUID(), occurred_at: new Date().toISOString(), partition: '0' } }));
    expect((await call(d.url, 'POST', '/event-types/notices.reconnect/events', events)).status).toBe(200);
    const created = await call(c.url, 'POST', '/subscriptions', { owning_application: 'app-reconnect', event_types: ['notices.reconnect'], read_from: 'begin' });
    expect(created.status).toBe(201);
    const id = (created.json as { id: string }).id;
    const stream = await open(c, id, 'batch_limit=1&max_uncommitted_events=1&batch_flush_timeout=30');
    const streamId = stream.headers.get('x-broker-streamid') ?? '';
    const [first] = await stream.events(1, 5_000);
    expect(first?.events?.[0]?.order_number).toBe('r-1');
    await eventually(async () => (await noticeListeners(id)) === 1, 10_000, 'node c subscribed to the notices');

    // Every subscribed connection of both nodes is cut (as a Redis restart or a network blip would):
    // ioredis reconnects them, with no ready check (which a connection in subscriber mode refuses).
    expect(Number(await client.call('CLIENT', 'KILL', 'TYPE', 'pubsub'))).toBeGreaterThan(0);
    await eventually(async () => (await noticeListeners(id)) === 1, 10_000, 'node c subscribed to the notices again');

    // The lease is 60 s (a heartbeat every 20 s): the next event within 5 s came through the notice.
    const committed = await call(d.url, 'POST', `/subscriptions/${id}/cursors`, { items: [first?.cursor] }, { 'X-Broker-StreamId': streamId });
    expect(committed.status).toBe(204);
    const [second] = await stream.events(1, 5_000);
    expect(second?.events?.[0]?.order_number).toBe('r-2');
    stream.close();
    expect(c.output()).not.toContain('Unhandled error event');
  });
});
