import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, type Redis } from 'ioredis';
import { masterNodes, type RedisClient } from '../../src/storage/redis/redis-connection.js';
import { call, clusterRun, harnessRedis, shardChannels, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient } from '../support/stream-client.js';

/**
 * Where the broker's keys land on a Redis Cluster (docs/architecture.md "Redis key layout"; keys.ts hash-tag rule), against the
 * harness's 3-master cluster (project `cluster` only): partitions spread over the masters while each
 * partition's keys share one slot; one batch writes every partition in one request (grouped per node);
 * a subscription's state shares one slot; publish notices (sharded pub/sub) wake readers on every master.
 */

const PARTITIONS = 8;
let broker: TestBroker;
let redis: RedisClient;

beforeAll(async () => {
  if (!clusterRun()) throw new Error('cluster-*.test.ts runs in the vitest project `cluster` only');
  broker = await startTestBroker({ BROKER_CONSUMPTION_POLL_INTERVAL_MS: '60000' });
  redis = harnessRedis();
  await redis.ping();
});
afterAll(async () => {
  await broker.stop();
  redis.disconnect();
});

async function createEventType(name: string): Promise<void> {
  const body = businessEventType(name, {
    partition_strategy: 'user_defined',
    default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: PARTITIONS, write_parallelism: PARTITIONS },
  });
  const created = await call(broker.url, 'POST', '/event-types', body);
  expect(created.status, created.text).toBe(201);
}

function eventIn(partition: number, seq: number): Record<string, unknown> {
  const event = orderEvent(`O${seq}`, { seq });
  (event.metadata as Record<string, unknown>).partition = String(partition);
  return event;
}

const slotOf = async (key: string): Promise<number> => Number(await redis.cluster('KEYSLOT', key));

/** The master serving `key`'s slot, by the client's slot map. */
async function masterOf(key: string): Promise<Redis | undefined> {
  if (!(redis instanceof Cluster)) return undefined;
  const owner = redis.slots[await slotOf(key)]?.[0];
  return masterNodes(redis).find((node) => `${String(node.options.host)}:${String(node.options.port)}` === owner);
}
const partitions = Array.from({ length: PARTITIONS }, (_, p) => p);

describe('on a 3-master Redis Cluster', () => {
  it('spreads the partitions of an event type over the masters; one batch for all of them is written in one request', async () => {
    const name = 'cl.spread';
    await createEventType(name);
    const batch = partitions.flatMap((p) => [eventIn(p, 2 * p), eventIn(p, 2 * p + 1)]);
    const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, batch);
    expect(answer.status, answer.text).toBe(200);

    const k = broker.keys;
    const masters = new Set<string>();
    for (const p of partitions.map(String)) {
      const log = k.partitionLog(name, 1, p);
      const node = await masterOf(log);
      expect(node, `partition ${p} log`).toBeDefined();
      masters.add(`${String(node?.options.host)}:${String(node?.options.port)}`);
      // A partition's keys and its notice channel share one slot (one node, one atomic script).
      const slots = await Promise.all([log, k.partitionMeta(name, 1, p), k.partitionTimeIndex(name, 1, p), k.partitionNotices(name, 1, p)].map(slotOf));
      expect(new Set(slots).size, `partition ${p} slots`).toBe(1);
      expect(await node?.xlen(log)).toBe(1);
    }
    expect(masters.size).toBe(3);

    const ranges = await call(broker.url, 'GET', `/event-types/${name}/partitions`);
    expect((ranges.json as { newest_available_offset: string }[]).map((r) => r.newest_available_offset)).toEqual(partitions.map(() => '001-0001-000000000000000001'));
  });

  it('keeps the registry in one slot and each subscription state in its own slot', async () => {
    const name = 'cl.subscribed';
    await createEventType(name);
    const created = await call(broker.url, 'POST', '/subscriptions', { owning_application: 'cl-app', event_types: [name], read_from: 'begin' });
    expect(created.status, created.text).toBe(201);
    const id = (created.json as { id: string }).id;
    const k = broker.keys;
    const registry = await Promise.all([k.eventTypeNames, k.eventType(name), k.eventTypeSchemas(name), k.subscription(id), k.subscriptionIds, k.subscriptionsByKey, k.eventTypeSubscriptions(name)].map(slotOf));
    expect(new Set(registry).size).toBe(1);
    const state = await Promise.all([k.subscriptionOffsets(id), k.subscriptionSessions(id), k.subscriptionSessionInfo(id), k.subscriptionTopology(id), k.subscriptionReset(id)].map(slotOf));
    expect(new Set(state).size).toBe(1);

    // Stream, commit, delete: the fenced scripts and the deletion of both slots work across nodes.
    await call(broker.url, 'POST', `/event-types/${name}/events`, [eventIn(0, 1)]);
    const stream = await StreamClient.open(`${broker.url}/subscriptions/${id}/events?batch_flush_timeout=1`);
    try {
      expect(stream.status).toBe(200);
      const [batch] = await stream.events(1);
      const commit = await call(broker.url, 'POST', `/subscriptions/${id}/cursors`, { items: [batch?.cursor] }, { 'X-Broker-StreamId': stream.headers.get('x-broker-streamid') ?? '' });
      expect(commit.status, commit.text).toBe(204);
    } finally {
      stream.close();
    }
    expect((await call(broker.url, 'DELETE', `/subscriptions/${id}`)).status).toBe(204);
    expect(await redis.exists(k.subscription(id))).toBe(0);
    expect(await redis.exists(k.subscriptionOffsets(id), k.subscriptionSessions(id))).toBe(0);
    // The topology stays only as an expiring tombstone, so the stream's session, leaving after the
    // deletion, cannot write the assignment back.
    expect(await redis.hgetall(k.subscriptionTopology(id))).toEqual({ deleted: '1' });
    expect(await redis.pttl(k.subscriptionTopology(id))).toBeGreaterThan(0);
  });

  it('wakes low-level readers of partitions on every master at once (sharded pub/sub), not by polling', async () => {
    const name = 'cl.wakeups';
    await createEventType(name);
    // No cursors: every partition from its newest offset.
    const stream = await StreamClient.open(`${broker.url}/event-types/${name}/events?batch_flush_timeout=1`);
    try {
      expect(stream.status).toBe(200);
      // The node subscribes the notice channels when the stream starts: wait until every partition's is.
      const channels = partitions.map((p) => broker.keys.partitionNotices(name, 1, String(p)));
      const subscribed = async (): Promise<number> => {
        const counts = await shardChannels(redis, `${broker.prefix}*:notices`);
        return channels.filter((channel) => (counts.get(channel) ?? 0) > 0).length;
      };
      await expect.poll(subscribed, { timeout: 5_000, interval: 20 }).toBe(PARTITIONS);
      const started = performance.now();
      const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, partitions.map((p) => eventIn(p, p)));
      expect(answer.status, answer.text).toBe(200);
      const batches = await stream.events(PARTITIONS, 5_000);
      // The safety-net poll runs every 60 s here: anything faster was a notice.
      expect(performance.now() - started).toBeLessThan(5_000);
      expect(new Set(batches.map((b) => b.cursor.partition)).size).toBe(PARTITIONS);
    } finally {
      stream.close();
    }
  });
});
