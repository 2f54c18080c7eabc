import { randomBytes, randomUUID } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, startRedisCluster, type RedisClusterProcesses, type RedisProcess } from '../../scripts/local-processes.js';
import { keySlot } from '../../src/storage/redis/key-slot.js';
import { createKeys } from '../../src/storage/keys.js';
import { call, clusterRun, eventsInPartition, startTestBroker, uniquePrefix, type Answer, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { parseExposition, valueOf, type Exposition } from '../support/prometheus-text.js';
import { StreamClient } from '../support/stream-client.js';
import { eventually } from '../support/eventually.js';

/**
 * A Redis memory budget that holds (docs/operations.md "Memory and retention"), on a Redis of the test's
 * own (a standalone server, or in the `cluster` project a 3-master cluster) whose `maxmemory` the test
 * sets small, so filling it takes a few megabytes and never touches the harness Redis:
 * - a Redis without maxmemory is warned about at start and judged against the machine's memory;
 * - publishing until refused: 507 `storage-full` with `Retry-After`, the master's state named, nothing written;
 *   on a cluster, a batch spanning a full and another master is a 207 whose full master's items failed;
 * - between the mark and maxmemory a commit, a rebalance, a subscription and an event type creation,
 *   and an event type deletion all succeed; `/health` stays 200 while `/health/storage` says 503;
 * - the deletion frees memory and publishes are accepted again within seconds, without a restart;
 * - a Redis that refuses for memory on its own (a node whose mark is above 100 %) gives the same problem,
 *   never Redis's or a script's text, nothing written; a control-plane write it refuses is a 507 as well;
 * - the memory metrics, the per event type bytes and the capacity warning of event type creation.
 */

const cluster = clusterRun();
let standalone: RedisProcess | undefined;
let redisCluster: RedisClusterProcesses | undefined;
/** A client of the test's own Redis (cluster client on the cluster). */
let client: Redis | Cluster;
/** Node A refuses at its mark (50 %); node C never refuses first (mark 1000 %), so Redis does. */
let a: TestBroker;
let c: TestBroker;
const prefix = uniquePrefix();
const keys = createKeys(prefix);

/** The master the test fills (`host:port`), its own connection, and the master of the other partition on a cluster. */
let target: { address: string; redis: Redis };
let other: string | undefined;

/** Event type names whose partitions 0 (and 1, on a cluster) lie where the test needs them. */
let filled: string;
let spare: string;

const MIB = 1024 * 1024;

/** Each event carries 6 KB of random base64 (about 8 KB as JSON): it fills Redis whether or not events are stored compressed. */
function bigEvents(count: number, partition: string): Record<string, unknown>[] {
  return Array.from({ length: count }, (_, i) => orderEvent(`big-${i}`, { blob: randomBytes(6000).toString('base64'), metadata: { eid: randomUUID(), occurred_at: new Date().toISOString(), partition } }));
}

/** The master (`host:port`) of the slot of a partition's keys. */
async function masterOf(name: string, partition: string): Promise<string> {
  const slot = keySlot(keys.partitionLog(name, 1, partition));
  if (!(client instanceof Cluster)) return `127.0.0.1:${(standalone as RedisProcess).port}`;
  return masterOfSlot(slot);
}

/** The master (`host:port`) serving a slot of the test's cluster. */
async function masterOfSlot(slot: number): Promise<string> {
  for (const [from, to, owner] of await (client as Cluster).cluster('SLOTS')) if (slot >= from && slot <= to && owner !== undefined) return `${owner[0]}:${owner[1]}`;
  throw new Error(`no master serves slot ${slot}`);
}

/** A fresh event type name whose partition 0 lies on `master` (and, with `otherThan`, whose partition 1 does not). */
async function nameOn(master: string, tag: string, otherThan?: string): Promise<string> {
  for (let i = 0; i < 10_000; i++) {
    const name = `full.${tag}.${i}`;
    if ((await masterOf(name, '0')) !== master) continue;
    if (otherThan !== undefined && (await masterOf(name, '1')) === otherThan) continue;
    return name;
  }
  throw new Error(`no name found on ${master}`);
}

async function usedMemory(redis: Redis): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1]);
}

async function scrape(node: TestBroker): Promise<Exposition> {
  const answer = await call(node.url, 'GET', '/metrics');
  expect(answer.status).toBe(200);
  return parseExposition(answer.text);
}


async function createEventType(node: TestBroker, name: string, partitions: number): Promise<Answer> {
  const answer = await call(node.url, 'POST', '/event-types', businessEventType(name, { partition_strategy: 'user_defined', default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: partitions, write_parallelism: partitions } }));
  expect(answer.status, answer.text).toBe(201);
  return answer;
}

async function eventsIn(node: TestBroker, name: string, partition: string): Promise<number> {
  return eventsInPartition(await call(node.url, 'GET', `/event-types/${name}/partitions/${partition}`));
}

/** Checks a 507 `storage-full` problem and returns its detail. */
function expectStorageFull(answer: Answer): string {
  expect(answer.status, answer.text).toBe(507);
  expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(answer.headers.get('retry-after')).toBe('5');
  const problem = answer.json as { type: string; title: string; detail: string };
  expect(problem.type).toBe('/problems/storage-full');
  expect(problem.title).toBe('Insufficient Storage');
  expect(problem.detail).not.toMatch(/OOM|script|@user_script|command not allowed/);
  return problem.detail;
}

const nodeEnv = (percent: number): Record<string, string> => ({
  ...(cluster ? { BROKER_REDIS_CLUSTER_NODES: JSON.stringify((redisCluster as RedisClusterProcesses).nodes), BROKER_REDIS_URL: '' } : { BROKER_REDIS_URL: (standalone as RedisProcess).url }),
  BROKER_REDIS_KEY_PREFIX: prefix,
  BROKER_REDIS_MEMORY_HIGH_WATER_PERCENT: String(percent),
  BROKER_REDIS_MEMORY_CHECK_INTERVAL_MS: '100',
  BROKER_REDIS_MEMORY_USAGE_INTERVAL_MS: '1000',
  BROKER_CONSUMPTION_POLL_INTERVAL_MS: '200',
});

beforeAll(async () => {
  if (cluster) {
    redisCluster = await startRedisCluster({ masters: 3 });
    client = new Cluster(redisCluster.nodes.map((n) => ({ host: n.split(':')[0] as string, port: Number(n.split(':')[1]) })), { redisOptions: { maxRetriesPerRequest: 1 } });
  } else {
    standalone = await startRedis();
    client = new Redis(standalone.url, { maxRetriesPerRequest: 1 });
  }
  [a, c] = await Promise.all([startTestBroker(nodeEnv(50)), startTestBroker(nodeEnv(1000))]);
  const first = await masterOf('full.probe', '0');
  const [host, port] = first.split(':');
  target = { address: first, redis: new Redis(Number(port), host as string, { maxRetriesPerRequest: 1 }) };
  filled = await nameOn(first, `a${randomUUID().slice(0, 6)}`, cluster ? first : undefined);
  spare = await nameOn(first, `b${randomUUID().slice(0, 6)}`);
  other = cluster ? await masterOf(filled, '1') : undefined;
});

afterAll(async () => {
  // Room again, so the nodes release their sessions as they stop.
  await target.redis.config('SET', 'maxmemory', '0').catch(() => undefined);
  await Promise.all([a.stop(), c.stop()]);
  target.redis.disconnect();
  client.disconnect();
  await standalone?.stop();
  await redisCluster?.stop();
});

describe('a Redis memory budget', () => {
  it('warns at start about a Redis without maxmemory and takes the machine\'s memory as its limit', async () => {
    expect(a.output()).toMatch(new RegExp(`the Redis at ${target.address.replace(/\./g, '\\.')} has no maxmemory`));
    expect(a.output()).toMatch(/CONFIG SET maxmemory/);
    const system = Number(/total_system_memory:(\d+)/.exec(await target.redis.info('memory'))?.[1]);
    const metrics = await scrape(a);
    expect(valueOf(metrics, 'broker_redis_memory_limit_bytes', { storage: 'default', master: target.address })).toBe(system);
    expect(valueOf(metrics, 'broker_redis_memory_high_water_mark_bytes', { storage: 'default', master: target.address })).toBe(Math.floor(system / 2));
    expect((await call(a.url, 'GET', '/health/storage')).status).toBe(200);
  });

  it('refuses publishes at the mark with 507 storage-full, nothing written; on a cluster only the full master\'s items', async () => {
    await createEventType(a, filled, cluster ? 8 : 2);
    // 16 MiB of room: the mark (50 %) lies about 8 MiB above what is used now, maxmemory as far again.
    const maxmemory = (await usedMemory(target.redis)) + 16 * MIB;
    await target.redis.config('SET', 'maxmemory', String(maxmemory));
    await eventually(async () => valueOf(await scrape(a), 'broker_redis_memory_limit_bytes', { storage: 'default', master: target.address }) === maxmemory, 5000, 'the node reads the new maxmemory');

    let refused: Answer | undefined;
    let accepted = 0;
    for (let i = 0; i < 100 && refused === undefined; i++) {
      const before = await eventsIn(a, filled, '0');
      const answer = await call(a.url, 'POST', `/event-types/${filled}/events`, bigEvents(40, '0'));
      if (answer.status === 200) {
        accepted++;
        continue;
      }
      refused = answer;
      expect(await eventsIn(a, filled, '0'), 'nothing of a refused batch is written').toBe(before);
    }
    expect(accepted, 'some batches fit below the mark').toBeGreaterThan(3);
    const detail = expectStorageFull(refused as Answer);
    expect(detail).toContain(`Redis master ${target.address}`);
    expect(detail).toMatch(/at or above its high-water mark of .* \(50 % of maxmemory/);
    // The mark held: Redis never reached its own limit.
    expect(await usedMemory(target.redis)).toBeLessThan(maxmemory);

    // used_memory hovers at the mark (the node refuses on its own appends since its last read; Redis frees
    // query buffers after the writes): a lower maxmemory puts the master well above its mark, and well
    // below its limit, for what follows.
    const used = await usedMemory(target.redis);
    const lowered = Math.floor(used * 1.6);
    await target.redis.config('SET', 'maxmemory', String(lowered));
    const master = { storage: 'default', master: target.address };
    await eventually(async () => valueOf(await scrape(a), 'broker_redis_memory_limit_bytes', master) === lowered, 5000, 'the node reads the lowered maxmemory');
    const metrics = await scrape(a);
    expect(valueOf(metrics, 'broker_redis_memory_high_water_mark_bytes', master)).toBe(Math.floor(lowered / 2));
    expect(valueOf(metrics, 'broker_redis_memory_used_bytes', master)).toBeGreaterThanOrEqual(Math.floor(lowered / 2));
    expect(valueOf(metrics, 'broker_redis_memory_seconds_to_mark', master)).toBe(0);

    // Every master of a standalone Redis is full: the batch is refused before its events are looked at.
    if (!cluster) expectStorageFull(await call(a.url, 'POST', `/event-types/${filled}/events`, [{ not: 'valid' }]));
    if (cluster) {
      // Partition 1 lies on another master, which has room: its events are written, partition 0's are failed.
      const before = [await eventsIn(a, filled, '0'), await eventsIn(a, filled, '1')];
      const answer = await call(a.url, 'POST', `/event-types/${filled}/events`, [...bigEvents(2, '0'), ...bigEvents(3, '1')]);
      expect(answer.status, answer.text).toBe(207);
      const items = answer.json as { publishing_status: string; detail: string }[];
      expect(items.map((item) => item.publishing_status)).toEqual(['failed', 'failed', 'submitted', 'submitted', 'submitted']);
      expect(items[0]?.detail).toMatch(new RegExp(`^Storage is full: Redis master ${target.address.replace(/\./g, '\\.')} uses`));
      expect(other).not.toBe(target.address);
      expect([await eventsIn(a, filled, '0'), await eventsIn(a, filled, '1')]).toEqual([before[0], (before[1] as number) + 3]);
    }
    expect(valueOf(await scrape(a), 'broker_publish_storage_full_total', { reason: 'high_water_mark' })).toBeGreaterThanOrEqual(2);
  });

  it('keeps commits, a rebalance, subscription and event type changes and a deletion working between the mark and maxmemory; /health stays 200', async () => {
    expect((await call(a.url, 'GET', '/health')).status).toBe(200);
    const readiness = await call(a.url, 'GET', '/health/storage');
    expect(readiness.status).toBe(503);
    expect(readiness.headers.get('retry-after')).toBe('5');
    expect(readiness.text).toMatch(/^FULL: 1 of \d Redis master\(s\) at or above their high-water mark/);

    const created = await call(a.url, 'POST', '/subscriptions', { owning_application: `app-${randomUUID()}`, event_types: [filled], read_from: 'begin' });
    expect(created.status, created.text).toBe(201);
    const id = (created.json as { id: string }).id;
    const first = await StreamClient.open(`${a.url}/subscriptions/${id}/events?batch_limit=5&batch_flush_timeout=1`);
    expect(first.status).toBe(200);
    const batch = await first.next(10_000);
    expect(batch).toBeDefined();
    const streamId = first.headers.get('x-broker-streamid') ?? '';
    const committed = await call(a.url, 'POST', `/subscriptions/${id}/cursors`, { items: [batch?.cursor] }, { 'X-Broker-StreamId': streamId });
    expect(committed.status, committed.text).toBe(204);
    // A second stream joins: the partitions are assigned again between the two sessions.
    const second = await StreamClient.open(`${c.url}/subscriptions/${id}/events?batch_flush_timeout=1`);
    expect(second.status, JSON.stringify(second.problem)).toBe(200);
    await eventually(async () => {
      const stats = await call(a.url, 'GET', `/subscriptions/${id}/stats`);
      const streams = new Set((stats.json as { items: { partitions: { stream_id?: string }[] }[] }).items.flatMap((i) => i.partitions.map((p) => p.stream_id)));
      return streams.size === 2;
    }, 10_000, 'both streams hold partitions');
    first.close();
    second.close();

    await createEventType(a, spare, 1);
    const deleted = await call(a.url, 'DELETE', `/subscriptions/${id}`);
    expect(deleted.status).toBe(204);
    expect((await call(a.url, 'DELETE', `/event-types/${filled}`)).status).toBe(200);
  });

  it('accepts publishes again within seconds once the deletion freed memory, without a restart', async () => {
    const waited = await eventually(async () => (await call(a.url, 'POST', `/event-types/${spare}/events`, bigEvents(1, '0'))).status === 200, 5000, 'a publish is accepted again');
    expect(waited).toBeLessThan(5000);
    expect((await call(a.url, 'GET', '/health/storage')).status).toBe(200);
    // The deleted event type's series end.
    await eventually(async () => valueOf(await scrape(a), 'broker_event_type_stored_bytes', { event_type: filled }) === undefined, 5000, 'the series of the deleted event type ends');
  });

  it('answers a Redis that refuses writes for memory on its own with the same problem, never Redis\'s text', async () => {
    // Node C's mark is 1000 %: it never refuses first. Redis is set to refuse now.
    await target.redis.config('SET', 'maxmemory', String((await usedMemory(target.redis)) + 2 * MIB));
    let refused: Answer | undefined;
    for (let i = 0; i < 100 && refused === undefined; i++) {
      const before = await eventsIn(c, spare, '0');
      const answer = await call(c.url, 'POST', `/event-types/${spare}/events`, bigEvents(40, '0'));
      if (answer.status === 200) continue;
      refused = answer;
      expect(await eventsIn(c, spare, '0'), 'nothing of a batch Redis refused is written').toBe(before);
    }
    const detail = expectStorageFull(refused as Answer);
    expect(detail).toContain(`Redis master ${target.address} refused the write for lack of memory`);
    expect(valueOf(await scrape(c), 'broker_publish_storage_full_total', { reason: 'out_of_memory' })).toBeGreaterThanOrEqual(1);

    // A control-plane write Redis refuses is the same problem, not a 500 (where the registry lives on that master).
    if (!cluster || (await masterOfSlot(keySlot(keys.eventTypeNames))) === target.address) {
      await target.redis.config('SET', 'maxmemory', '1');
      const subscription = await call(c.url, 'POST', '/subscriptions', { owning_application: `app-${randomUUID()}`, event_types: [spare] });
      expectStorageFull(subscription);
    }
    await target.redis.config('SET', 'maxmemory', '0');
  });

  it('measures the Redis bytes per event type and warns when a declared rate and retention cannot fit', async () => {
    await eventually(async () => (valueOf(await scrape(a), 'broker_event_type_stored_bytes', { event_type: spare }) ?? 0) > MIB, 10_000, 'the event type\'s bytes are measured');
    const metrics = await scrape(a);
    expect(valueOf(metrics, 'broker_event_type_stored_growth_bytes_per_second', { event_type: spare })).toBeDefined();
    // A limit again, so the room below the mark is known and small.
    const limit = (await usedMemory(target.redis)) + 64 * MIB;
    await target.redis.config('SET', 'maxmemory', String(limit));
    await eventually(async () => valueOf(await scrape(a), 'broker_redis_memory_limit_bytes', { storage: 'default', master: target.address }) === limit, 5000, 'the node reads the limit');
    const large = await call(a.url, 'POST', '/event-types', businessEventType(`full.large.${randomUUID().slice(0, 6)}`, { default_statistic: { messages_per_minute: 100_000, message_size: 10_000, read_parallelism: 1, write_parallelism: 1 }, options: { retention_time: 10_800_000 } }));
    expect(large.status, large.text).toBe(201);
    expect(large.headers.get('warning')).toMatch(/^299 - "event type \\?"full\.large\..*needs about .* of Redis memory .* but storage \\?"default\\?" has .* of room below its high-water mark/);
    const small = await call(a.url, 'POST', '/event-types', businessEventType(`full.small.${randomUUID().slice(0, 6)}`, { default_statistic: { messages_per_minute: 1, message_size: 100, read_parallelism: 1, write_parallelism: 1 }, options: { retention_time: 10_800_000 } }));
    expect(small.status).toBe(201);
    expect(small.headers.get('warning')).toBeNull();
    const headroom = await call(a.url, 'GET', '/ui/api/storage-headroom');
    expect(headroom.status).toBe(200);
    const view = headroom.json as { masters: { master: string; limit_source: string }[]; event_types: { name: string }[] };
    expect(view.masters.find((m) => m.master === target.address)?.limit_source).toBe('maxmemory');
    expect(view.event_types.map((e) => e.name)).toContain(spare);
    await target.redis.config('SET', 'maxmemory', '0');
  });
});
