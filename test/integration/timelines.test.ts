import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisProcess } from '../../scripts/local-processes.js';
import { masterNodes, type RedisClient } from '../../src/storage/redis/redis-connection.js';
import { createKeys } from '../../src/storage/keys.js';
import { call, harnessRedis, orderNumbers, publishOrders, scanKeys, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';

/**
 * Timelines, `GET/POST /event-types/{name}/timelines` (docs/concepts.md "Timelines and storages";
 * docs/operations.md "Storages and timelines"). Two nodes `a`
 * and `b` on one key prefix; storages: `ns` (another key namespace of the harness Redis) and `far` (a
 * second redis-server this file starts). A third node `guarded` where the development subject is no
 * administrator. Offsets on the wire name their timeline and count from its start; they compare as
 * strings within a partition, so "nothing duplicated, nothing out of order" is checked on the strings.
 */

const NOT_US = '[{"data_type":"user","value":"someone-else"}]';

let a: TestBroker;
let b: TestBroker;
let guarded: TestBroker;
let redis: RedisClient;
let far: RedisProcess;
let farRedis: RedisClient;
const nsPrefix = `tl-ns-${randomUUID().slice(0, 8)}:`;
const farPrefix = `tl-far-${randomUUID().slice(0, 8)}:`;

beforeAll(async () => {
  const env = {
    BROKER_SUBSCRIPTIONS_LEASE_TTL_MS: '2000',
    BROKER_CONSUMPTION_POLL_INTERVAL_MS: '1000',
    BROKER_EVENT_TYPES_MIN_RETENTION_TIME_MS: '1000',
    BROKER_RETENTION_CHECK_INTERVAL_MS: '300',
    BROKER_PUBLISH_TIMELINE_SWITCH_WAIT_MS: '600',
    BROKER_COMPACTION_INTERVAL_MS: '200',
    BROKER_COMPACTION_LAG_MS: '0',
  };
  [a, far] = await Promise.all([startTestBroker(env), startRedis()]);
  [b, guarded] = await Promise.all([startTestBroker({ ...env, BROKER_REDIS_KEY_PREFIX: a.prefix }), startTestBroker({ ...env, BROKER_AUTH_INITIAL_ADMINS: NOT_US })]);
  redis = harnessRedis();
  const { Redis } = await import('ioredis');
  farRedis = new Redis(far.url);
  for (const storage of [
    { id: 'ns', storage_type: 'redis', redis_configuration: { key_prefix: nsPrefix } },
    { id: 'far', storage_type: 'redis', redis_configuration: { url: far.url, key_prefix: farPrefix } },
  ]) {
    const created = await call(a.url, 'POST', '/storages', storage);
    expect(created.status, created.text).toBe(201);
  }
});
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop(), guarded?.stop()]);
  redis?.disconnect();
  farRedis?.disconnect();
  await far?.stop();
});

// ---- helpers ----

interface Timeline {
  id: string;
  event_type: string;
  order: number;
  storage_id: string;
  topic: string;
  created_at: string;
  switched_at: string;
  cleaned_up_at?: string;
  latest_position?: { offsets: number[] };
}

interface PartitionRecord {
  partition: string;
  oldest_available_offset: string;
  newest_available_offset: string;
  unconsumed_events?: number;
}

const statistic = (n: number) => ({ default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: n, write_parallelism: n } });

async function eventType(node: TestBroker, name: string, partitions: number, extra: Record<string, unknown> = {}): Promise<void> {
  const created = await call(node.url, 'POST', '/event-types', businessEventType(name, { partition_strategy: 'hash', partition_key_fields: ['order_number'], ...statistic(partitions), ...extra }));
  expect(created.status, created.text).toBe(201);
}

const publish = (node: TestBroker, name: string, numbers: readonly string[]): Promise<string[]> => publishOrders(node.url, name, numbers);
const keys = orderNumbers;

async function timelines(node: TestBroker, name: string): Promise<Timeline[]> {
  const answer = await call(node.url, 'GET', `/event-types/${name}/timelines`);
  expect(answer.status, answer.text).toBe(200);
  return answer.json as Timeline[];
}

async function switchTo(node: TestBroker, name: string, storage: string): Promise<Timeline> {
  const answer = await call(node.url, 'POST', `/event-types/${name}/timelines`, { storage_id: storage });
  expect(answer.status, answer.text).toBe(201);
  return answer.json as Timeline;
}

/**
 * Watches the harness Redis (MONITOR on every master, through `redis-cli`: ioredis's monitor mode
 * failed a CI run with "Command queue state error" when traffic raced its MONITOR reply) for a command
 * naming all of `keys`. Resolves once every monitor is on (its `OK`).
 * @returns `seen`, resolved at the first such command (at most 5 s), and `stop`, which ends the watch
 */
async function watchCommand(keys: readonly string[]): Promise<{ seen: Promise<void>; stop: () => void }> {
  await redis.ping();
  const monitors = masterNodes(redis).map((node) => spawn('redis-cli', ['-h', String(node.options.host ?? '127.0.0.1'), '-p', String(node.options.port ?? 6379), 'monitor'], { stdio: ['ignore', 'pipe', 'inherit'] }));
  let timer: NodeJS.Timeout | undefined;
  const stop = () => {
    clearTimeout(timer);
    monitors.forEach((monitor) => monitor.kill());
  };
  let markSeen: () => void = () => undefined;
  const seen = new Promise<void>((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no command on ${keys.join(' ')} within 5 s`)), 5_000);
    markSeen = () => {
      clearTimeout(timer);
      resolve();
    };
  });
  const ready = monitors.map(
    (monitor) =>
      new Promise<void>((resolve, reject) => {
        monitor.once('error', reject);
        createInterface({ input: monitor.stdout }).on('line', (line) => {
          if (line === 'OK') resolve();
          else if (keys.every((key) => line.includes(`"${key}"`))) markSeen();
        });
      }),
  );
  try {
    await Promise.all(ready);
  } catch (err) {
    stop();
    throw err;
  }
  return { seen, stop };
}

async function partitions(node: TestBroker, name: string): Promise<PartitionRecord[]> {
  const answer = await call(node.url, 'GET', `/event-types/${name}/partitions`);
  expect(answer.status, answer.text).toBe(200);
  return answer.json as PartitionRecord[];
}

/** Every event of `ids` from BEGIN with a low-level stream: per partition, [offset of the batch, eid] in order. */
async function readAll(node: TestBroker, name: string, ids: readonly string[], total: number): Promise<{ partition: string; offset: string; eid: string }[]> {
  const cursors = JSON.stringify(ids.map((partition) => ({ partition, offset: 'BEGIN' })));
  const stream = await StreamClient.open(`${node.url}/event-types/${name}/events?batch_limit=1&stream_limit=${total}&batch_flush_timeout=1&stream_timeout=10`, { headers: { 'X-Broker-Cursors': cursors } });
  expect(stream.status, JSON.stringify(stream.problem)).toBe(200);
  const out: { partition: string; offset: string; eid: string }[] = [];
  for (const batch of await stream.untilEnd(15_000)) {
    for (const event of batch.events ?? []) out.push({ partition: batch.cursor.partition, offset: batch.cursor.offset, eid: (event.metadata as { eid: string }).eid });
  }
  return out;
}

/** Offsets of one partition must strictly increase (they compare as strings, timelines included). */
function increasing(offsets: readonly string[]): string[] {
  const problems: string[] = [];
  for (let i = 1; i < offsets.length; i++) if (!((offsets[i - 1] as string) < (offsets[i] as string))) problems.push(`${offsets[i - 1]} then ${offsets[i]}`);
  return problems;
}

// ---- tests ----

describe('GET/POST /event-types/{name}/timelines: refusals', () => {
  it('lists the first timeline of a new event type on the default storage; 404 unknown event type, 400 non-object body, 422 missing or unknown storage, 403 for a non-administrator', async () => {
    await eventType(a, 'tl.rules', 1);
    const [first, ...rest] = await timelines(a, 'tl.rules');
    expect(rest).toEqual([]);
    expect(first).toMatchObject({ event_type: 'tl.rules', order: 1, storage_id: 'default' });
    expect(first?.latest_position).toBeUndefined();
    expect(first?.cleaned_up_at).toBeUndefined();
    expect(Date.parse(first?.created_at ?? '')).not.toBeNaN();

    expect((await call(a.url, 'GET', '/event-types/tl.missing/timelines')).status).toBe(404);
    const missing = await call(a.url, 'POST', '/event-types/tl.missing/timelines', { storage_id: 'ns' });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toBe('application/problem+json');
    expect((await call(a.url, 'POST', '/event-types/tl.rules/timelines', [1])).status).toBe(400);
    for (const body of [{}, { storage_id: 7 }, { storage_id: '' }, { storage_id: 'no-such-storage' }]) {
      const answer = await call(a.url, 'POST', '/event-types/tl.rules/timelines', body);
      expect(answer.status, JSON.stringify(body)).toBe(422);
    }
    expect((await timelines(b, 'tl.rules')).length).toBe(1);

    await eventType(guarded, 'tl.guarded', 1);
    const denied = await call(guarded.url, 'POST', '/event-types/tl.guarded/timelines', { storage_id: 'default' });
    expect(denied.status).toBe(403);
    expect((await call(guarded.url, 'GET', '/event-types/tl.guarded/timelines')).status).toBe(403);
  });
});

describe('switching timelines', () => {
  it('moves publishing to the new storage without moving data; records latest_position; partitions, cursors and low-level streams span both timelines', async () => {
    await eventType(a, 'tl.switch', 2);
    const before = await publish(a, 'tl.switch', keys('s', 10));
    const old = await partitions(a, 'tl.switch');
    const created = await switchTo(a, 'tl.switch', 'ns');
    expect(created).toMatchObject({ event_type: 'tl.switch', order: 2, storage_id: 'ns' });
    expect(created.topic).toBe(`${nsPrefix}{et:tl.switch:*}:t2`);

    const listed = await timelines(b, 'tl.switch');
    expect(listed.map((t) => [t.order, t.storage_id])).toEqual([[1, 'default'], [2, 'ns']]);
    // The old timeline's last offset per partition, counted in its own storage (-1 = unused).
    const lastLocal = old.map((p) => (p.newest_available_offset.endsWith('--1') ? -1 : Number(p.newest_available_offset.slice(-18))));
    expect(listed[0]?.latest_position).toEqual({ offsets: lastLocal });
    expect(listed[1]?.latest_position).toBeUndefined();

    const after = await publish(b, 'tl.switch', keys('t', 6));
    // The new events are in the ns storage's keys; the old timeline's log did not grow.
    expect((await scanKeys(redis, `${nsPrefix}{et:tl.switch:*}:t2:log`)).length).toBeGreaterThan(0);
    const records = await partitions(a, 'tl.switch');
    records.forEach((r, i) => {
      expect(r.oldest_available_offset).toBe(old[i]?.oldest_available_offset);
      if (r.newest_available_offset !== old[i]?.newest_available_offset) expect(r.newest_available_offset.startsWith('001-0002-')).toBe(true);
    });

    const read = await readAll(b, 'tl.switch', ['0', '1'], 16);
    expect(new Set(read.map((e) => e.eid))).toEqual(new Set([...before, ...after]));
    expect(read.length).toBe(16);
    for (const p of ['0', '1']) {
      const offsets = read.filter((e) => e.partition === p).map((e) => e.offset);
      expect(increasing(offsets)).toEqual([]);
      const onNew = offsets.filter((o) => o.startsWith('001-0002-'));
      if (onNew.length > 0) expect(onNew[0]).toBe('001-0002-000000000000000000');
    }
    // The old events keep their offsets on timeline 1.
    expect(read.filter((e) => before.includes(e.eid)).every((e) => e.offset.startsWith('001-0001-'))).toBe(true);

    // Cursor arithmetic across the switch: from before the first event of timeline 1 to the newest.
    const distances = await call(a.url, 'POST', '/event-types/tl.switch/cursor-distances', records.map((r) => ({ initial_cursor: { partition: r.partition, offset: '001-0001--1' }, final_cursor: { partition: r.partition, offset: r.newest_available_offset } })));
    expect(distances.status, distances.text).toBe(200);
    const total = (distances.json as { distance: number }[]).reduce((sum, d) => sum + d.distance, 0);
    expect(total).toBe(16);
    // The position before timeline 2's first event is the same as timeline 1's last event.
    const lag = await call(a.url, 'POST', '/event-types/tl.switch/cursors-lag', records.map((r, i) => ({ partition: r.partition, offset: i === 0 ? '001-0002--1' : old[i]?.newest_available_offset })));
    expect(lag.status, lag.text).toBe(200);
    const unconsumed = (lag.json as PartitionRecord[]).reduce((sum, p) => sum + (p.unconsumed_events ?? 0), 0);
    expect(unconsumed).toBe(after.length);
    // Offsets past a closed timeline's end or on a timeline that does not exist are invalid.
    const beyond = await call(a.url, 'POST', '/event-types/tl.switch/cursors-lag', [{ partition: '0', offset: '001-0001-000000000000000999' }]);
    expect(beyond.status).toBe(422);
    expect((await call(a.url, 'POST', '/event-types/tl.switch/cursors-lag', [{ partition: '0', offset: '001-0003-000000000000000000' }])).status).toBe(422);

    // A storage with a timeline on it cannot be deleted.
    const inUse = await call(a.url, 'DELETE', '/storages/ns');
    expect(inUse.status).toBe(409);
    expect((inUse.json as { detail: string }).detail).toContain('tl.switch');
  });

  it('blocks publishing on every node while a switch is under way: a batch waits, then gets 503 with nothing written; completing the switch unblocks it', async () => {
    await eventType(a, 'tl.block', 1);
    await publish(a, 'tl.block', keys('x', 3));
    // A switch that stopped after closing the active timeline's partitions (step 1).
    await redis.hset(a.keys.partitionMeta('tl.block', 1, '0'), 'closed', '1');
    const started = Date.now();
    const refused = await call(b.url, 'POST', '/event-types/tl.block/events', [orderEvent('y-0')]);
    const waited = Date.now() - started;
    expect(refused.status, refused.text).toBe(503);
    expect(refused.headers.get('content-type')).toBe('application/problem+json');
    expect((refused.json as { detail: string }).detail).toContain('switching timelines');
    expect(waited).toBeGreaterThanOrEqual(550);
    expect((await partitions(a, 'tl.block'))[0]?.newest_available_offset).toBe('001-0001-000000000000000002');

    // A publish that arrives during the switch waits for it and lands on the new timeline. The switch
    // completes once the publish's append (the script naming the partition's meta and notice channel)
    // reached the closed partition, which refuses it.
    const watch = await watchCommand([a.keys.partitionMeta('tl.block', 1, '0'), a.keys.partitionNotices('tl.block', 1, '0')]);
    const blocked = call(a.url, 'POST', '/event-types/tl.block/events', [orderEvent('z-0')]);
    try {
      await watch.seen;
    } finally {
      watch.stop();
    }
    await switchTo(b, 'tl.block', 'ns');
    expect((await blocked).status).toBe(200);
    const [record] = await partitions(a, 'tl.block');
    expect(record?.newest_available_offset).toBe('001-0002-000000000000000000');
    expect((await timelines(a, 'tl.block'))[0]?.latest_position).toEqual({ offsets: [2] });
  });

  it('streams a subscription across two switches (one before it connects, one to another Redis deployment while it streams) under concurrent publishing: nothing lost, nothing duplicated, offsets in order', async () => {
    await eventType(a, 'tl.sub', 3);
    const subscription = await call(a.url, 'POST', '/subscriptions', { owning_application: `app-${randomUUID()}`, event_types: ['tl.sub'], read_from: 'begin' });
    expect(subscription.status, subscription.text).toBe(201);
    const id = (subscription.json as { id: string }).id;

    const acknowledged = new Set<string>();
    const statuses = new Map<number, number>();
    let publishing = true;
    const producer = async (node: TestBroker, tag: string): Promise<void> => {
      for (let i = 0; publishing; i++) {
        const events = keys(`${tag}-${i}`, 5).map((o) => orderEvent(o));
        const answer = await call(node.url, 'POST', '/event-types/tl.sub/events', events);
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        if (answer.status === 200) for (const e of events) acknowledged.add((e.metadata as { eid: string }).eid);
        else expect(answer.status, answer.text).toBe(503);
      }
    };
    const producers = [producer(a, 'pa'), producer(b, 'pb')];
    // The first switch happens before the consumer connects: it starts on timeline 1 while 2 is active.
    // Time that must pass: publishing load on timeline 1, then on timeline 2 before the consumer connects.
    await new Promise((resolve) => setTimeout(resolve, 700));
    await switchTo(a, 'tl.sub', 'ns');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const stream = await StreamClient.open(`${b.url}/subscriptions/${id}/events?batch_limit=20&max_uncommitted_events=2000&batch_flush_timeout=1&stream_timeout=60`);
    expect(stream.status, JSON.stringify(stream.problem)).toBe(200);
    const streamId = stream.headers.get('x-broker-streamid') ?? '';

    const delivered: StreamBatch[] = [];
    const seen = new Set<string>();
    let consuming = true;
    const consumer = (async () => {
      while (consuming || [...acknowledged].some((eid) => !seen.has(eid))) {
        const [batch] = await stream.events(1, 5000);
        if (!batch) break;
        if (!batch.events?.length) continue;
        delivered.push(batch);
        for (const e of batch.events) seen.add((e.metadata as { eid: string }).eid);
        const committed = await call(b.url, 'POST', `/subscriptions/${id}/cursors`, { items: [batch.cursor] }, { 'X-Broker-StreamId': streamId });
        expect(committed.status, committed.text).toBe(204);
      }
    })();

    // The second one while it streams (time that must pass: load and streaming before and after it).
    await new Promise((resolve) => setTimeout(resolve, 700));
    await switchTo(b, 'tl.sub', 'far');
    await new Promise((resolve) => setTimeout(resolve, 700));
    publishing = false;
    await Promise.all(producers);
    consuming = false;
    await consumer;
    stream.close();

    const eids = delivered.flatMap((batch) => (batch.events ?? []).map((e) => (e.metadata as { eid: string }).eid));
    const missing = [...acknowledged].filter((eid) => !seen.has(eid));
    console.log(`timeline switches under load: ${JSON.stringify({ acknowledged: acknowledged.size, delivered: eids.length, statuses: Object.fromEntries(statuses) })}`);
    expect(missing).toEqual([]);
    expect(eids.length).toBe(new Set(eids).size);
    for (const p of ['0', '1', '2']) expect(increasing(delivered.filter((batch) => batch.cursor.partition === p).map((batch) => batch.cursor.offset))).toEqual([]);
    // Events of all three timelines were delivered, and the last ones came from the far deployment.
    const orders = new Set(delivered.map((batch) => batch.cursor.offset.slice(4, 8)));
    expect(orders).toEqual(new Set(['0001', '0002', '0003']));
    expect((await scanKeys(farRedis, `${farPrefix}{et:tl.sub:*}:t3:log`)).length).toBeGreaterThan(0);

    // Stats and committed cursors name timeline 3 now; nothing is left unconsumed.
    const stats = await call(a.url, 'GET', `/subscriptions/${id}/stats`);
    expect(stats.status).toBe(200);
    const items = (stats.json as { items: { partitions: { unconsumed_events?: number }[] }[] }).items;
    expect(items[0]?.partitions.every((p) => p.unconsumed_events === 0)).toBe(true);
    const cursors = await call(a.url, 'GET', `/subscriptions/${id}/cursors`);
    expect((cursors.json as { items: { offset: string }[] }).items.every((c) => c.offset.startsWith('001-0003-'))).toBe(true);
  });
});

describe('compaction across timelines', () => {
  it('removes events of a closed timeline whose key has a newer event or a tombstone on a later timeline; the latest per key survives', async () => {
    const name = 'tl.compact';
    const created = await call(a.url, 'POST', '/event-types', businessEventType(name, { cleanup_policy: 'compact', partition_strategy: 'hash', partition_key_fields: ['order_number'] }));
    expect(created.status, created.text).toBe(201);
    const keyed = (key: string, amount: number) => ({ metadata: { eid: randomUUID(), occurred_at: new Date().toISOString(), partition_compaction_key: key }, order_number: key, amount });
    const send = async (events: object[]) => expect((await call(a.url, 'POST', `/event-types/${name}/events`, events)).status).toBe(200);
    await send([keyed('updated', 1), keyed('deleted', 1), keyed('kept', 1)]);
    await switchTo(a, name, 'ns');
    await send([keyed('updated', 2), keyed('fresh', 2)]);
    const tombstone = await call(a.url, 'POST', `/event-types/${name}/deleted-events`, [{ metadata: { partition_compaction_key: 'deleted' }, order_number: 'deleted' }]);
    expect(tombstone.status, tombstone.text).toBe(200);

    const latest = async (): Promise<string[]> => {
      const stream = await StreamClient.open(`${a.url}/event-types/${name}/events?batch_limit=10&batch_flush_timeout=1&stream_timeout=1`, { headers: { 'X-Broker-Cursors': JSON.stringify([{ partition: '0', offset: 'BEGIN' }]) } });
      expect(stream.status).toBe(200);
      const batches = await stream.untilEnd(5000);
      return batches.flatMap((batch) => (batch.events ?? []).map((e) => `${String(e.order_number)}=${String(e.amount)}`));
    };
    const started = Date.now();
    let seen = await latest();
    while (seen.length > 3 && Date.now() - started < 8000) seen = await latest();
    // Offsets of the survivors did not change: 'kept' stays on timeline 1, the rest on timeline 2.
    expect(seen).toEqual(['kept=1', 'updated=2', 'fresh=2']);
  });
});

describe('clean-up and deletion', () => {
  it('cleans up a closed timeline once its retention passed (data deleted, cleaned_up_at set); readers continue on the next one', async () => {
    // Retention 4 s: timeline 1 is due 4 s after the switch; the events of timeline 2, published 2 s
    // after it, are kept until 6 s after it.
    await eventType(a, 'tl.clean', 1, { options: { retention_time: 4000 } });
    await publish(a, 'tl.clean', keys('c', 4));
    await switchTo(a, 'tl.clean', 'ns');
    await new Promise((resolve) => setTimeout(resolve, 2000)); // time that must pass (see above)
    const after = await publish(a, 'tl.clean', keys('d', 2));
    const oldKeys = (k: string) => scanKeys(redis, `${a.prefix}{et:tl.clean:*}:t1:${k}`);
    expect((await oldKeys('log')).length).toBe(1);
    const started = Date.now();
    let listed = await timelines(a, 'tl.clean');
    while (listed[0]?.cleaned_up_at === undefined && Date.now() - started < 8000) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      listed = await timelines(a, 'tl.clean');
    }
    expect(listed[0]?.cleaned_up_at, 'timeline 1 cleaned up within 8 s').toBeDefined();
    expect(await oldKeys('*')).toEqual([]);
    // The events of timeline 2 are still there (their retention started later).
    const read = await readAll(a, 'tl.clean', ['0'], 2);
    expect(read.map((e) => e.eid)).toEqual(after);
    expect(read.every((e) => e.offset.startsWith('001-0002-'))).toBe(true);
  });

  it('deleting an event type removes the data of every timeline, in every storage', async () => {
    await eventType(a, 'tl.gone', 2);
    await publish(a, 'tl.gone', keys('g', 6));
    await switchTo(a, 'tl.gone', 'far');
    await publish(a, 'tl.gone', keys('h', 6));
    expect((await scanKeys(farRedis, `${farPrefix}{et:tl.gone:*}*`)).length).toBeGreaterThan(0);
    expect((await call(a.url, 'DELETE', '/event-types/tl.gone')).status).toBe(200);
    expect(await scanKeys(farRedis, `${farPrefix}{et:tl.gone:*}*`)).toEqual([]);
    expect(await scanKeys(redis, `${a.prefix}{et:tl.gone:*}*`)).toEqual([]);
    const farKeys = createKeys(farPrefix);
    expect(await farRedis.exists(farKeys.partitionMeta('tl.gone', 2, '0'))).toBe(0);
  });
});

describe('audit', () => {
  it('records storage creations, timeline switches and repartitioning while audit_log_collection is on', async () => {
    expect((await call(a.url, 'POST', '/settings/features', { feature: 'audit_log_collection', enabled: true })).status).toBe(204);
    await eventType(a, 'tl.audit', 1);
    const storage = await call(a.url, 'POST', '/storages', { id: 'aud', storage_type: 'redis', redis_configuration: { key_prefix: `${nsPrefix}aud:` } });
    expect(storage.status, storage.text).toBe(201);
    await switchTo(a, 'tl.audit', 'aud');
    expect((await call(a.url, 'POST', '/settings/features', { feature: 'repartitioning', enabled: true })).status).toBe(204);
    const grown = await call(a.url, 'POST', '/event-types/tl.audit/partition-count', { partition_count: 2 });
    expect(grown.status, grown.text).toBe(204);
    type Audit = { data_type: string; data_op: string; data: { resource_id: string; previous_object: unknown; new_object: { storage_id?: string; order?: number; partition_count?: number } | null } };
    const found = async (): Promise<Audit[]> => {
      const stream = await StreamClient.open(`${a.url}/event-types/broker.audit-log/events?batch_limit=100&batch_flush_timeout=1&stream_timeout=2`, { headers: { 'X-Broker-Cursors': JSON.stringify([{ partition: '0', offset: 'BEGIN' }]) } });
      expect(stream.status).toBe(200);
      const batches = await stream.untilEnd(5000);
      return batches.flatMap((batch) => batch.events ?? []) as unknown as Audit[];
    };
    const events = await found();
    expect(events.find((e) => e.data_type === 'storage' && e.data.resource_id === 'aud')).toMatchObject({ data_op: 'C' });
    expect(events.find((e) => e.data_type === 'timeline' && e.data.resource_id === 'tl.audit:2')).toMatchObject({ data_op: 'C', data: { new_object: { storage_id: 'aud', order: 2 } } });
    // Repartitioning is audited as an update of the event type.
    expect(events.find((e) => e.data_type === 'event_type' && e.data.resource_id === 'tl.audit' && e.data_op === 'U')).toMatchObject({ data: { previous_object: { partition_count: 1 }, new_object: { partition_count: 2 } } });
  });
});
