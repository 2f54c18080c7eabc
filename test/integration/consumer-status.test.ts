import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { parseExposition } from '../support/prometheus-text.js';
import { promtoolAvailable, promtoolCheckMetrics } from '../support/promtool.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';

// A short status window so the verdicts come within seconds: sampled every 100 ms over 1 s.
const WINDOW_MS = 1000;
const PARTITIONS = 8;
let node: TestBroker;

beforeAll(async () => {
  node = await startTestBroker({ BROKER_CONSUMER_STATUS_WINDOW_MS: String(WINDOW_MS), BROKER_CONSUMER_STATUS_INTERVAL_MS: '100', BROKER_CONSUMPTION_POLL_INTERVAL_MS: '100' });
});
afterAll(async () => {
  await node.stop();
});

interface PartitionStats {
  partition: string;
  unconsumed_events?: number;
  consumer_status?: string;
  drain_seconds?: number;
}

async function stats(id: string): Promise<PartitionStats[]> {
  const answer = await call(node.url, 'GET', `/subscriptions/${id}/stats`);
  expect(answer.status).toBe(200);
  return (answer.json as { items: { partitions: PartitionStats[] }[] }).items.flatMap((i) => i.partitions);
}

/** Reads until `check` holds of the value (every 50 ms); @returns that value */
async function eventually<T>(read: () => Promise<T>, check: (value: T) => boolean, timeoutMs: number, what: string): Promise<T> {
  const started = Date.now();
  let value = await read();
  while (!check(value)) {
    if (Date.now() - started > timeoutMs) throw new Error(`not within ${timeoutMs} ms: ${what}; last: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    value = await read();
  }
  return value;
}

/** Publishes one event to every partition every `everyMs` until stopped. */
function steadyPublisher(name: string, everyMs: number): { stop(): Promise<void> } {
  let running = true;
  let n = 0;
  const loop = (async () => {
    while (running) {
      const events = Array.from({ length: PARTITIONS }, (_, p) => orderEvent(`o-${p}-${n}`, { metadata: { eid: crypto.randomUUID(), occurred_at: new Date().toISOString(), partition: String(p) } }));
      n++;
      const answer = await call(node.url, 'POST', `/event-types/${name}/events`, events);
      expect(answer.status).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

/**
 * Reads a subscription stream and commits each batch after `delayMs`, except batches of the partitions
 * in `skip` (which it reads and never commits) — until closed.
 */
function consumer(id: string, stream: StreamClient, delayMs: number, skip: Set<string>): { close(): Promise<void> } {
  let running = true;
  const sid = stream.headers.get('x-broker-streamid') ?? '';
  const loop = (async () => {
    while (running && !stream.done) {
      let batch: StreamBatch | undefined;
      try {
        batch = await stream.next(500);
      } catch {
        continue;
      }
      if (batch === undefined) break;
      if (batch.events === undefined || skip.has(batch.cursor.partition)) continue;
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      if (!running) break;
      const answer = await call(node.url, 'POST', `/subscriptions/${id}/cursors`, { items: [batch.cursor] }, { 'X-Broker-StreamId': sid });
      expect([200, 204]).toContain(answer.status);
    }
  })();
  return {
    close: async () => {
      running = false;
      stream.close();
      await loop;
    },
  };
}

describe('consumer status of subscription partitions', () => {
  it('steady consumer: all ok; a partition it stops committing: stalled, the others ok; its stream closed: stopped; the series go with the subscription', async () => {
    const name = `status-${crypto.randomUUID().slice(0, 8)}`;
    expect((await call(node.url, 'POST', '/event-types', businessEventType(name, { partition_strategy: 'user_defined', default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: PARTITIONS, write_parallelism: PARTITIONS } }))).status).toBe(201);
    const created = await call(node.url, 'POST', '/subscriptions', { owning_application: 'status-test', event_types: [name], read_from: 'end' });
    expect(created.status).toBe(201);
    const id = (created.json as { id: string }).id;
    const publisher = steadyPublisher(name, 100);
    const skip = new Set<string>();
    const stream = await StreamClient.open(`${node.url}/subscriptions/${id}/events?batch_limit=2&batch_flush_timeout=1&max_uncommitted_events=100000`);
    expect(stream.status).toBe(200);
    const reader = consumer(id, stream, 0, skip);
    try {
      // Every partition judged, and ok, once a window of samples is there.
      await eventually(() => stats(id), (ps) => ps.length === PARTITIONS && ps.every((p) => p.consumer_status === 'ok'), 10 * WINDOW_MS, 'every partition ok');

      // The consumer stops committing partition 3: stalled within two windows; the others stay ok.
      skip.add('3');
      const stopped = Date.now();
      await eventually(() => stats(id), (ps) => ps.find((p) => p.partition === '3')?.consumer_status === 'stalled', 4 * WINDOW_MS, 'partition 3 stalled');
      expect(Date.now() - stopped).toBeLessThanOrEqual(2 * WINDOW_MS + 500);
      const others = (await stats(id)).filter((p) => p.partition !== '3');
      expect(others.map((p) => p.consumer_status)).toEqual(Array(PARTITIONS - 1).fill('ok'));

      // /metrics: one series per status value, 1 for the partition's own; the scaling endpoint counts it.
      const text = (await call(node.url, 'GET', '/metrics')).text;
      if (promtoolAvailable()) {
        const check = promtoolCheckMetrics(text);
        expect(check.status, check.output).toBe(0);
      }
      const exposition = parseExposition(text);
      const status = exposition.samples.filter((s) => s.name === 'broker_subscription_consumer_status' && s.labels.subscription_id === id);
      expect(status).toHaveLength(PARTITIONS * 4);
      expect(status.filter((s) => s.value === 1).map((s) => `${s.labels.partition}:${s.labels.status}`).sort()).toContain('3:stalled');
      const scaling = await call(node.url, 'GET', `/subscriptions/${id}/scaling`);
      expect(scaling.status).toBe(200);
      expect(scaling.json).toMatchObject({ subscription_id: id, consumption_mode: 'stream', partitions: PARTITIONS, max_consumers: PARTITIONS, streams: 1 });
      expect((scaling.json as { not_ok_partitions: number }).not_ok_partitions).toBeGreaterThanOrEqual(1);

      // The stream closes: with events waiting and no stream, stopped.
      await reader.close();
      await eventually(() => stats(id), (ps) => ps.find((p) => p.partition === '3')?.consumer_status === 'stopped', 4 * WINDOW_MS, 'partition 3 stopped');
    } finally {
      await reader.close();
      await publisher.stop();
    }

    // Deleting the subscription removes its series at once.
    expect((await call(node.url, 'DELETE', `/subscriptions/${id}`)).status).toBe(204);
    const after = parseExposition((await call(node.url, 'GET', '/metrics')).text);
    expect(after.samples.filter((s) => s.name.startsWith('broker_subscription_') && ['consumer_status', 'drain_seconds'].some((f) => s.name.endsWith(f)) && s.labels.subscription_id === id)).toEqual([]);
  });

  it('a consumer slower than the producers: lagging, with a growing drain time', async () => {
    const name = `slow-${crypto.randomUUID().slice(0, 8)}`;
    expect((await call(node.url, 'POST', '/event-types', businessEventType(name, { partition_strategy: 'user_defined', default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: PARTITIONS, write_parallelism: PARTITIONS } }))).status).toBe(201);
    const created = await call(node.url, 'POST', '/subscriptions', { owning_application: 'status-test', event_types: [name], read_from: 'end' });
    const id = (created.json as { id: string }).id;
    const publisher = steadyPublisher(name, 40);
    // One event per commit, 100 ms per commit, over 8 partitions: about 10 events/s against 200 published.
    const stream = await StreamClient.open(`${node.url}/subscriptions/${id}/events?batch_limit=1&batch_flush_timeout=1&max_uncommitted_events=100000`);
    const reader = consumer(id, stream, 100, new Set());
    try {
      const first = await eventually(() => stats(id), (ps) => ps.length === PARTITIONS && ps.some((p) => p.consumer_status === 'lagging' && p.drain_seconds !== undefined), 6 * WINDOW_MS, 'a partition lagging with a drain time');
      const partition = first.find((p) => p.consumer_status === 'lagging' && p.drain_seconds !== undefined) as PartitionStats;
      const drain = partition.drain_seconds as number;
      await eventually(
        () => stats(id),
        (ps) => {
          const p = ps.find((x) => x.partition === partition.partition);
          return p?.consumer_status === 'lagging' && (p.drain_seconds ?? 0) > drain;
        },
        6 * WINDOW_MS,
        `partition ${partition.partition} still lagging with a drain time above ${drain} s`,
      );
    } finally {
      await reader.close();
      await publisher.stop();
    }
  });

  it('the scaling figures of a queue-mode subscription: no bound on its consumers', async () => {
    const name = `queue-${crypto.randomUUID().slice(0, 8)}`;
    expect((await call(node.url, 'POST', '/event-types', businessEventType(name))).status).toBe(201);
    const created = await call(node.url, 'POST', '/subscriptions', { owning_application: 'status-test', event_types: [name], read_from: 'begin', annotations: { 'broker.io/consumption-mode': 'queue' } });
    expect(created.status, created.text).toBe(201);
    const id = (created.json as { id: string }).id;
    const scaling = await call(node.url, 'GET', `/subscriptions/${id}/scaling`);
    expect(scaling.status).toBe(200);
    expect(scaling.json).toMatchObject({ subscription_id: id, consumption_mode: 'queue', streams: 0, unconsumed_events: 0, drain_seconds: 0 });
    expect(scaling.json).not.toHaveProperty('max_consumers');
  });
});
