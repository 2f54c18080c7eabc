import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBroker, startRedis, type BrokerProcess, type RedisProcess } from '../../scripts/local-processes.js';
import { call } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';

/**
 * `publish.minReplicas` (docs/operations.md "Durability"): a harness-started master with one replica; a batch
 * is acknowledged only after `WAIT` confirms the replica, and its items are failed (207) while the
 * replica is paused.
 */

let master: RedisProcess;
let replica: RedisProcess;
let broker: BrokerProcess;
let strict: BrokerProcess;

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
});
afterAll(async () => {
  replica?.process.kill('SIGCONT');
  await Promise.all([broker?.stop(), strict?.stop()]);
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
