import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisClient } from '../../src/storage/redis/redis-connection.js';
import { call, harnessRedis, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { parseExposition, valueOf, type Exposition } from '../support/prometheus-text.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';
import { decodeEntry } from '../../src/domain/batch/entry-codec.js';

/**
 * `GET /metrics` (docs/metrics.md "Metric reference", "Consumer lag"): counters move by what was published, streamed and
 * committed, and the consumer lag gauges read at scrape time equal the real lag and what
 * `GET /subscriptions/{id}/stats` says, before and after a commit.
 */

let broker: TestBroker;
let redis: RedisClient;

beforeAll(async () => {
  broker = await startTestBroker({ BROKER_CONSUMPTION_POLL_INTERVAL_MS: '200' });
  redis = harnessRedis();
});
afterAll(async () => {
  await broker.stop();
  redis.disconnect();
});

const NAME = 'metrics.order';
const twoPartitions = { default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: 2, write_parallelism: 2 }, partition_strategy: 'user_defined' };

async function scrape(): Promise<Exposition> {
  const answer = await call(broker.url, 'GET', '/metrics');
  expect(answer.status).toBe(200);
  expect(answer.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseExposition(answer.text);
}

/** `count` events per partition, each about 1 KB (so the batch goes through the worker pool). */
function events(count: number, partitions: readonly string[]): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (let i = 0; i < count; i++) {
    for (const partition of partitions) {
      out.push(orderEvent(`m-${partition}-${i}`, { note: 'x'.repeat(1000), metadata: { eid: crypto.randomUUID(), occurred_at: new Date().toISOString(), partition } }));
    }
  }
  return out;
}

/** UTF-8 bytes of the events stored in a partition, as the publisher counts them (JSON texts, no separators). */
async function storedBytes(partition: string): Promise<number> {
  const entries = await redis.xrangeBuffer(broker.keys.partitionLog(NAME, 1, partition), '-', '+');
  let bytes = 0;
  for (const [, fields] of entries) for (const text of decodeEntry(fields[2] ?? 'd', fields[3] ?? Buffer.alloc(0)).toString().split('\n')) bytes += Buffer.byteLength(text);
  return bytes;
}

interface PartitionStats {
  partition: string;
  unconsumed_events?: number;
  consumer_lag_seconds?: number;
}

async function stats(id: string): Promise<Map<string, PartitionStats>> {
  const answer = await call(broker.url, 'GET', `/subscriptions/${id}/stats?show_time_lag=true`);
  expect(answer.status).toBe(200);
  const items = (answer.json as { items: { event_type: string; partitions: PartitionStats[] }[] }).items;
  return new Map(items.flatMap((i) => i.partitions.map((p) => [p.partition, p] as const)));
}

/** Seconds since the oldest event of `batch` was received (by its metadata.received_at). */
/** Seconds from the batch's first event's `received_at` to `at` (ms since the epoch, default now). */
function ageOf(batch: StreamBatch | undefined, at = Date.now()): number {
  const receivedAt = (batch?.events?.[0]?.metadata as { received_at: string } | undefined)?.received_at ?? '';
  return (at - Date.parse(receivedAt)) / 1000;
}

describe('GET /metrics', () => {
  it('serves the process defaults, worker pool and HTTP latency by route pattern', async () => {
    const m = await scrape();
    expect(valueOf(m, 'broker_process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(valueOf(m, 'broker_nodejs_heap_size_total_bytes')).toBeGreaterThan(0);
    expect(valueOf(m, 'broker_worker_pool_threads')).toBe(1);
    expect(valueOf(m, 'broker_worker_pool_queue_depth')).toBe(0);
    expect(m.types.get('broker_http_request_duration_seconds')).toBe('histogram');
    expect(m.types.get('broker_subscription_lag_events')).toBe('gauge');
    // The first scrape itself is counted by the next one.
    const again = await scrape();
    expect(valueOf(again, 'broker_http_request_duration_seconds_count', { method: 'GET', route: '/metrics', status: '200' })).toBeGreaterThanOrEqual(1);
  });

  it('counts publishing by result, events, bytes, latency and batch size; unknown event types make no series', async () => {
    expect((await call(broker.url, 'POST', '/event-types', businessEventType(NAME, twoPartitions))).status).toBe(201);
    const before = await scrape();
    const completedBefore = valueOf(before, 'broker_worker_pool_tasks_completed_total') ?? 0;

    expect((await call(broker.url, 'POST', `/event-types/${NAME}/events`, events(3, ['0', '1']))).status).toBe(200);
    const invalid = [orderEvent('ok', { metadata: { eid: crypto.randomUUID(), occurred_at: new Date().toISOString(), partition: '0' } }), { metadata: { eid: crypto.randomUUID(), occurred_at: 'x', partition: '0' } }];
    expect((await call(broker.url, 'POST', `/event-types/${NAME}/events`, invalid)).status).toBe(422);
    expect((await call(broker.url, 'POST', '/event-types/metrics.made-up-name/events', events(1, ['0']))).status).toBe(404);

    const m = await scrape();
    const of = (name: string, labels: Record<string, string> = {}): number => valueOf(m, name, { event_type: NAME, ...labels }) ?? 0;
    expect(of('broker_publish_batches_total', { result: 'submitted' })).toBe(1);
    expect(of('broker_publish_batches_total', { result: 'rejected' })).toBe(1);
    expect(of('broker_publish_events_total', { result: 'submitted' })).toBe(6);
    expect(of('broker_publish_events_total', { result: 'invalid' })).toBe(1);
    expect(of('broker_publish_events_total', { result: 'aborted' })).toBe(1);
    expect(of('broker_publish_events_total', { result: 'failed' })).toBe(0);
    expect(of('broker_publish_bytes_total')).toBe((await storedBytes('0')) + (await storedBytes('1')));
    expect(of('broker_publish_batch_size_events_count')).toBe(2);
    expect(of('broker_publish_batch_size_events_sum')).toBe(8);
    expect(of('broker_publish_batch_size_events_bucket', { le: '5' })).toBe(1);
    expect(of('broker_publish_duration_seconds_count')).toBe(2);
    expect(of('broker_publish_duration_seconds_sum')).toBeGreaterThan(0);
    // The 404 is counted without an event type; the made-up name is no label value anywhere.
    expect(valueOf(m, 'broker_publish_batches_total', { event_type: '', result: 'refused' })).toBe(1);
    expect(m.samples.some((s) => Object.values(s.labels).some((v) => v.includes('made-up')))).toBe(false);
    // HTTP latency is labelled by route pattern and status, never by the raw path.
    const route = { method: 'POST', route: '/event-types/:name/events' };
    expect(valueOf(m, 'broker_http_request_duration_seconds_count', { ...route, status: '200' })).toBe(1);
    expect(valueOf(m, 'broker_http_request_duration_seconds_count', { ...route, status: '422' })).toBe(1);
    expect(valueOf(m, 'broker_http_request_duration_seconds_count', { ...route, status: '404' })).toBe(1);
    expect(m.samples.some((s) => s.labels.route?.includes(NAME))).toBe(false);
    // The 6 KB batch went through the worker pool.
    expect(valueOf(m, 'broker_worker_pool_tasks_completed_total')).toBeGreaterThan(completedBefore);
    const utilization = valueOf(m, 'broker_worker_pool_utilization_ratio') ?? -1;
    expect(utilization).toBeGreaterThanOrEqual(0);
    expect(utilization).toBeLessThanOrEqual(1);
    expect(valueOf(m, 'broker_partition_newest_offset', { event_type: NAME, partition: '0' })).toBe(2);
    expect(valueOf(m, 'broker_partition_newest_offset', { event_type: NAME, partition: '1' })).toBe(2);
  });

  it('counts low-level streams: events and the bytes the client received', async () => {
    const before = await scrape();
    const read = await call(broker.url, 'GET', `/event-types/${NAME}/events?stream_limit=2&batch_limit=1&batch_flush_timeout=1&stream_timeout=5`, undefined, {
      'X-Broker-Cursors': '[{"partition":"0","offset":"BEGIN"}]',
    });
    expect(read.status).toBe(200);
    const m = await scrape();
    const delta = (name: string): number => (valueOf(m, name, { kind: 'low_level' }) ?? 0) - (valueOf(before, name, { kind: 'low_level' }) ?? 0);
    expect(delta('broker_streamed_events_total')).toBe(2);
    expect(delta('broker_streamed_bytes_total')).toBe(Buffer.byteLength(read.text));
    expect(valueOf(m, 'broker_active_streams', { kind: 'low_level' })).toBe(0);
  });

  it('serves consumer lag gauges equal to the real lag and to the stats, before and after a commit; counts streams and commits', async () => {
    const created = await call(broker.url, 'POST', '/subscriptions', { owning_application: 'metrics-app', event_types: [NAME], consumer_group: 'billing', read_from: 'begin' });
    expect(created.status).toBe(201);
    const id = (created.json as { id: string }).id;
    // Never streamed: no committed offsets yet, so no lag series (the stats show none either).
    expect(valueOf(await scrape(), 'broker_subscription_lag_events', { subscription_id: id, partition: '0' })).toBeUndefined();

    const before = await scrape();
    const stream = await StreamClient.open(`${broker.url}/subscriptions/${id}/events?batch_limit=3&batch_flush_timeout=1`);
    expect(stream.status).toBe(200);
    const streamId = stream.headers.get('x-broker-streamid') ?? '';
    const batches = await stream.events(6);
    const byPartition = new Map(batches.map((b) => [b.cursor.partition, b]));
    await new Promise((resolve) => setTimeout(resolve, 1100)); // a lag of at least a second

    const labels = (partition: string) => ({ subscription_id: id, consumer_group: 'billing', event_type: NAME, partition });
    // The gauges were computed during the scrape (`from`..`to`, ms): the ages compared allow for that
    // window and for the time the stats request took after it (a loaded machine stretches both).
    const expectLagAsStats = async (m: Exposition, unconsumed: Record<string, number>, from: number, to: number): Promise<void> => {
      const s = await stats(id);
      const statsDone = Date.now();
      for (const [partition, events] of Object.entries(unconsumed)) {
        expect(valueOf(m, 'broker_subscription_lag_events', labels(partition))).toBe(events);
        expect(s.get(partition)?.unconsumed_events).toBe(events);
        const seconds = valueOf(m, 'broker_subscription_lag_seconds', labels(partition)) ?? -1;
        const fromStats = s.get(partition)?.consumer_lag_seconds ?? -100;
        if (events === 0) expect(seconds).toBe(0);
        else {
          expect(seconds).toBeGreaterThanOrEqual(ageOf(byPartition.get(partition), from) - 1);
          expect(seconds).toBeLessThanOrEqual(ageOf(byPartition.get(partition), to) + 1);
        }
        expect(Math.abs(seconds - fromStats)).toBeLessThanOrEqual(1 + (statsDone - from) / 1000);
      }
      const sum = Object.values(unconsumed).reduce((a, b) => a + b, 0);
      expect(valueOf(m, 'broker_subscription_event_type_lag_events', { subscription_id: id, consumer_group: 'billing', event_type: NAME })).toBe(sum);
    };

    const openFrom = Date.now();
    const open = await scrape();
    const openTo = Date.now();
    expect(valueOf(open, 'broker_active_streams', { kind: 'subscription' })).toBe(1);
    const streamed = (m: Exposition) => valueOf(m, 'broker_streamed_events_total', { kind: 'subscription' }) ?? 0;
    expect(streamed(open) - streamed(before)).toBe(6);
    expect(valueOf(open, 'broker_subscription_rebalances_total')).toBeGreaterThan(valueOf(before, 'broker_subscription_rebalances_total') ?? 0);
    expect(valueOf(open, 'broker_subscription_committed_offset', labels('0'))).toBe(-1);
    expect(valueOf(open, 'broker_subscription_lag_seconds', labels('0'))).toBeGreaterThanOrEqual(1);
    await expectLagAsStats(open, { '0': 3, '1': 3 }, openFrom, openTo);

    // Commit partition 0: committed; again: outdated; with an unknown stream id: refused.
    const commit = (sid: string) => call(broker.url, 'POST', `/subscriptions/${id}/cursors`, { items: [byPartition.get('0')?.cursor] }, { 'X-Broker-StreamId': sid });
    expect((await commit(streamId)).status).toBe(204);
    expect((await commit(streamId)).status).toBe(200);
    expect((await commit(crypto.randomUUID())).status).toBe(422);

    const committedFrom = Date.now();
    const committed = await scrape();
    const committedTo = Date.now();
    const commits = (m: Exposition, result: string) => valueOf(m, 'broker_subscription_commits_total', { result }) ?? 0;
    for (const result of ['committed', 'outdated', 'refused']) expect(commits(committed, result) - commits(open, result)).toBe(1);
    expect(valueOf(committed, 'broker_subscription_committed_offset', labels('0'))).toBe(2);
    expect(valueOf(committed, 'broker_subscription_committed_offset', labels('1'))).toBe(-1);
    await expectLagAsStats(committed, { '0': 0, '1': 3 }, committedFrom, committedTo);

    // Two more events on partition 0: its lag and newest offset follow.
    expect((await call(broker.url, 'POST', `/event-types/${NAME}/events`, events(2, ['0']))).status).toBe(200);
    const published = await scrape();
    expect(valueOf(published, 'broker_partition_newest_offset', { event_type: NAME, partition: '0' })).toBe(4);
    expect(valueOf(published, 'broker_subscription_lag_events', labels('0'))).toBe(2);

    stream.close();
    const deadline = Date.now() + 10_000;
    while (valueOf(await scrape(), 'broker_active_streams', { kind: 'subscription' }) !== 0) {
      if (Date.now() > deadline) throw new Error('the stream is still counted as active 10 s after it closed');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    // A deleted subscription leaves the lag gauges at the next scrape.
    expect((await call(broker.url, 'DELETE', `/subscriptions/${id}`)).status).toBe(204);
    expect(valueOf(await scrape(), 'broker_subscription_lag_events', labels('1'))).toBeUndefined();
  });
});
