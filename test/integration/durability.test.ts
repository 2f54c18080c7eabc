import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBroker, startRedis, type BrokerProcess, type RedisProcess } from '../../scripts/local-processes.js';
import { call, eventsInPartition, startTestBroker, uniquePrefix, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';

/**
 * `publish.minReplicas` (docs/operations.md "Durability"): a harness-started master with one replica; a batch
 * is acknowledged only after `WAIT` confirms the replica, and its items are failed (207) while the
 * replica is paused. Readers wait for the replicas too (`consumption.waitForReplicas`, the high watermark):
 * an event whose `WAIT` fell short is read, counted and sought by time only once the replicas hold it —
 * a later acknowledged write, a confirmation of the stalled watermark, or a timeline switch confirms it —
 * while a node with `consumption.waitForReplicas` false reads it at once.
 */

let master: RedisProcess;
let replica: RedisProcess;
let broker: BrokerProcess;
let strict: BrokerProcess;
/** In-process nodes on one key prefix: readers wait for replicas (`guarded`) or not (`eager`). */
let guarded: TestBroker;
let eager: TestBroker;

async function replicaInSync(): Promise<void> {
  const client = new Redis(replica.url, { maxRetriesPerRequest: 1 });
  try {
    const deadline = Date.now() + 10_000;
    while (!(await client.info('replication')).includes('master_link_status:up')) {
      if (Date.now() > deadline) throw new Error('the replica did not sync');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  } finally {
    client.disconnect();
  }
}

beforeAll(async () => {
  master = await startRedis();
  replica = await startRedis({ extraArgs: ['--replicaof', '127.0.0.1', String(master.port)] });
  await replicaInSync();
  const env = { BROKER_REDIS_URL: master.url, BROKER_LOG_LEVEL: 'warn', BROKER_PUBLISH_WORKER_THREADS: '1', BROKER_PUBLISH_REPLICA_TIMEOUT_MS: '300' };
  broker = await startBroker({ ...env, BROKER_PUBLISH_MIN_REPLICAS: '1' });
  // Asks for two replicas where there is one: never confirmed.
  strict = await startBroker({ ...env, BROKER_PUBLISH_MIN_REPLICAS: '2' });
  expect((await call(broker.url, 'POST', '/event-types', businessEventType('durable.orders'))).status).toBe(201);
  // A short safety-net poll, so a stream reads a stalled partition (and the watermark is confirmed) soon.
  const shared = { BROKER_REDIS_URL: master.url, BROKER_REDIS_KEY_PREFIX: uniquePrefix(), BROKER_PUBLISH_MIN_REPLICAS: '1', BROKER_PUBLISH_REPLICA_TIMEOUT_MS: '300', BROKER_CONSUMPTION_POLL_INTERVAL_MS: '100' };
  guarded = await startTestBroker(shared);
  eager = await startTestBroker({ ...shared, BROKER_CONSUMPTION_WAIT_FOR_REPLICAS: 'false' });
});
afterAll(async () => {
  replica?.process.kill('SIGCONT');
  await Promise.all([broker?.stop(), strict?.stop(), guarded?.stop(), eager?.stop()]);
  await Promise.all([replica?.stop(), master?.stop()]);
});

interface Item {
  eid: string;
  publishing_status: string;
  step: string;
  detail: string;
}

describe('publish.minReplicas', () => {
  it('acknowledges a batch (200) once the replica confirmed it, and the replica holds it', async () => {
    expect((await call(broker.url, 'POST', '/event-types/durable.orders/events', [orderEvent('D1'), orderEvent('D2')])).status).toBe(200);
    const client = new Redis(replica.url);
    try {
      const keys = await client.keys('*{et:durable.orders:0}*:meta');
      expect(keys).toHaveLength(1);
      expect(await client.hget(keys[0] as string, 'next')).toBe('2');
    } finally {
      client.disconnect();
    }
  });

  it('fails every item (207, step publishing) while the replica is paused, and acknowledges again once it is back', async () => {
    replica.process.kill('SIGSTOP');
    try {
      const started = Date.now();
      const answer = await call(broker.url, 'POST', '/event-types/durable.orders/events', [orderEvent('P1'), orderEvent('P2')]);
      expect(answer.status).toBe(207);
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
      const items = answer.json as Item[];
      expect(items).toHaveLength(2);
      for (const item of items) {
        expect(item).toMatchObject({ publishing_status: 'failed', step: 'publishing', detail: 'acknowledged by 0 of 1 replicas within 300 ms' });
      }
    } finally {
      replica.process.kill('SIGCONT');
    }
    await replicaInSync();
    expect((await call(broker.url, 'POST', '/event-types/durable.orders/events', [orderEvent('B1')])).status).toBe(200);
  });

  it('waits for replicas on a timeline in another key namespace of the deployment too', async () => {
    expect((await call(broker.url, 'POST', '/event-types', businessEventType('durable.moved'))).status).toBe(201);
    expect((await call(broker.url, 'POST', '/storages', { id: 'durable-ns', storage_type: 'redis', redis_configuration: { key_prefix: 'durable-ns:' } })).status).toBe(201);
    expect((await call(broker.url, 'POST', '/event-types/durable.moved/timelines', { storage_id: 'durable-ns' })).status).toBe(201);
    replica.process.kill('SIGSTOP');
    try {
      const answer = await call(broker.url, 'POST', '/event-types/durable.moved/events', [orderEvent('M1')]);
      expect(answer.status).toBe(207);
      expect((answer.json as Item[])[0]).toMatchObject({ publishing_status: 'failed', detail: 'acknowledged by 0 of 1 replicas within 300 ms' });
    } finally {
      replica.process.kill('SIGCONT');
    }
    await replicaInSync();
    expect((await call(broker.url, 'POST', '/event-types/durable.moved/events', [orderEvent('M2')])).status).toBe(200);
    const client = new Redis(replica.url);
    try {
      const keys = await client.keys('durable-ns:{et:durable.moved:0}:t2:meta');
      expect(keys).toHaveLength(1);
      expect(Number(await client.hget(keys[0] as string, 'next'))).toBe(2);
    } finally {
      client.disconnect();
    }
  });

  it('never acknowledges when more replicas are required than exist', async () => {
    const answer = await call(strict.url, 'POST', '/event-types/durable.orders/events', [orderEvent('S1')]);
    expect(answer.status).toBe(207);
    expect((answer.json as Item[])[0]).toMatchObject({ publishing_status: 'failed', detail: 'acknowledged by 1 of 2 replicas within 300 ms' });
  });
});

/** The `order_number`s of the events of `batches`, in order. */
const orders = (batches: readonly StreamBatch[]): unknown[] => batches.flatMap((b) => (b.events ?? []).map((e) => e.order_number));

/** A low-level stream of partition 0 of `name` from BEGIN, on `node`. */
function streamOf(node: TestBroker, name: string): Promise<StreamClient> {
  return StreamClient.open(`${node.url}/event-types/${name}/events?batch_flush_timeout=1&batch_limit=1`, { headers: { 'X-Broker-Cursors': JSON.stringify([{ partition: '0', offset: 'BEGIN' }]) } });
}

/** Pauses the replica (SIGSTOP) while `during` runs; resumes it and waits until it is in sync again. @returns `during`'s value and when the replica was resumed (`performance.now()`) */
async function withReplicaPaused<T>(during: () => Promise<T>): Promise<{ value: T; resumedAt: number }> {
  replica.process.kill('SIGSTOP');
  let value: T;
  try {
    value = await during();
  } finally {
    replica.process.kill('SIGCONT');
  }
  const resumedAt = performance.now();
  await replicaInSync();
  return { value, resumedAt };
}

describe('reads with replica acknowledgements (consumption.waitForReplicas)', () => {
  it('a reader is given an event only once the replicas hold it: not while its WAIT fell short (stats and cursors at a time neither), then once a later acknowledged write covers it', async () => {
    const name = 'durable.reads';
    expect((await call(guarded.url, 'POST', '/event-types', businessEventType(name))).status).toBe(201);
    expect((await call(guarded.url, 'POST', `/event-types/${name}/events`, [orderEvent('A')])).status).toBe(200);
    const [reader, control] = await Promise.all([streamOf(guarded, name), streamOf(eager, name)]);
    try {
      expect(orders(await reader.events(1))).toEqual(['A']);
      expect(orders(await control.events(1))).toEqual(['A']);
      const { resumedAt } = await withReplicaPaused(async () => {
        const answer = await call(guarded.url, 'POST', `/event-types/${name}/events`, [orderEvent('P')]);
        expect(answer.status, answer.text).toBe(207);
        // On the master, and read there at once by a node whose readers do not wait for replicas ...
        expect(orders(await control.events(1))).toEqual(['P']);
        expect(eventsInPartition(await call(eager.url, 'GET', `/event-types/${name}/partitions/0`))).toBe(2);
        // ... but not counted, nor sought by time, where readers wait (the stream's check is its arrival time, below).
        expect(eventsInPartition(await call(guarded.url, 'GET', `/event-types/${name}/partitions/0`))).toBe(1);
        const time = encodeURIComponent(new Date(Date.now() + 1000).toISOString());
        const atGuarded = await call(guarded.url, 'GET', `/event-types/${name}/cursors-at-time?time=${time}`);
        const atEager = await call(eager.url, 'GET', `/event-types/${name}/cursors-at-time?time=${time}`);
        expect(atGuarded.json).toEqual([{ partition: '0', offset: '001-0001-000000000000000000' }]);
        expect(atEager.json).toEqual([{ partition: '0', offset: '001-0001-000000000000000001' }]);
      });
      expect((await call(guarded.url, 'POST', `/event-types/${name}/events`, [orderEvent('B')])).status).toBe(200);
      const batches = await reader.events(2);
      expect(orders(batches)).toEqual(['P', 'B']);
      expect(reader.arrivedAt(batches[0] as StreamBatch), 'P was delivered only after the replica came back').toBeGreaterThan(resumedAt);
      expect(eventsInPartition(await call(guarded.url, 'GET', `/event-types/${name}/partitions/0`))).toBe(3);
    } finally {
      reader.close();
      control.close();
    }
  });

  it('a watermark left behind is confirmed without another publish once the replicas hold the events (the stream’s poll finds it)', async () => {
    const name = 'durable.stalled';
    expect((await call(guarded.url, 'POST', '/event-types', businessEventType(name))).status).toBe(201);
    const reader = await streamOf(guarded, name);
    try {
      const { resumedAt } = await withReplicaPaused(async () => {
        expect((await call(guarded.url, 'POST', `/event-types/${name}/events`, [orderEvent('Q')])).status).toBe(207);
      });
      const [batch] = await reader.events(1, 5_000);
      expect(orders([batch as StreamBatch])).toEqual(['Q']);
      // Not before the replica held it; then within a poll (1 s while notices arrive) + publish.replicaTimeoutMs + 250 ms + a round trip, on a loaded machine.
      expect(reader.arrivedAt(batch as StreamBatch)).toBeGreaterThan(resumedAt);
      expect(reader.arrivedAt(batch as StreamBatch) - resumedAt).toBeLessThan(4_000);
    } finally {
      reader.close();
    }
  });

  it('a timeline switch confirms the closed timeline’s last events first: refused (503) while the replica lags, then readers go on from them to the new timeline', async () => {
    const name = 'durable.switch';
    expect((await call(guarded.url, 'POST', '/event-types', businessEventType(name))).status).toBe(201);
    expect((await call(guarded.url, 'POST', '/storages', { id: 'durable-switch', storage_type: 'redis', redis_configuration: { key_prefix: `${guarded.prefix}switch:` } })).status).toBe(201);
    await withReplicaPaused(async () => {
      expect((await call(guarded.url, 'POST', `/event-types/${name}/events`, [orderEvent('T1')])).status).toBe(207);
      const refused = await call(guarded.url, 'POST', `/event-types/${name}/timelines`, { storage_id: 'durable-switch' });
      expect(refused.status, refused.text).toBe(503);
      expect(refused.text).toMatch(/the replicas did not confirm the last events of partitions 0 of timeline 1/);
    });
    const switched = await call(guarded.url, 'POST', `/event-types/${name}/timelines`, { storage_id: 'durable-switch' });
    expect(switched.status, switched.text).toBe(201);
    expect((await call(guarded.url, 'POST', `/event-types/${name}/events`, [orderEvent('T2')])).status).toBe(200);
    const reader = await streamOf(guarded, name);
    try {
      expect(orders(await reader.events(2))).toEqual(['T1', 'T2']);
    } finally {
      reader.close();
    }
  });
});
