/**
 * Scenario `compaction`: what log compaction costs and does.
 *
 * - Publish throughput of 1000-event batches (~500-byte order events, 4 partitions, 4 connections, the
 *   `publish-batches` warm-up and period) to a compacted event type (`cleanup_policy` `compact`, hash
 *   partitioning, so the compaction key decides the partition; 4,000 distinct keys), against the same
 *   bodies to an ordinary (`delete`) event type in the same run. A compacted event type stores one stream
 *   entry per event (with its key) and updates the key index in the same script, where an ordinary one
 *   stores one entry per partition per batch.
 * - Compaction: once publishing stopped, how long the background rounds (`compaction.intervalMs` 1000,
 *   lag 0) take until each partition holds only the latest event per key, and the events removed per
 *   second over that time. Compaction also runs during the compacted publish period (its CPU is part of
 *   that figure).
 */
import { Redis } from 'ioredis';
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { createEventType, keysMatching, loadRequest, recordCpu, reportFailures, round, runLoad, sleep, stackMeter, startStack, type Recorder, type Scenario } from './harness.js';
import { DURATION_SECONDS, WARMUP_SECONDS } from './publish-batches.js';

const PLAIN = 'bench.order';
const COMPACTED = 'bench.order-compacted';
const PARTITIONS = 4;
const BATCH = 1000;
const BODIES = 8;
const CONNECTIONS = 4;
/** Distinct compaction keys: each appears twice in the 8,000 events of the bodies. */
const KEYS = 4_000;
/** Longest wait for compaction to finish after publishing stopped. */
const COMPACTION_TIMEOUT_MS = 120_000;

async function run(recorder: Recorder): Promise<void> {
  const random = prng(11);
  let key = 0;
  const bodies = Array.from({ length: BODIES }, () =>
    Array.from({ length: BATCH }, () => {
      const event = orderEvent(random) as { metadata: Record<string, unknown> };
      event.metadata.partition_compaction_key = `customer-${key++ % KEYS}`;
      return event;
    }),
  );
  const plainRequests = bodies.map((events) => loadRequest(`/event-types/${PLAIN}/events`, events.map(({ metadata, ...rest }) => ({ ...rest, metadata: { eid: metadata.eid, occurred_at: metadata.occurred_at } }))));
  const compactedRequests = bodies.map((events) => loadRequest(`/event-types/${COMPACTED}/events`, events));
  const stack = await startStack({ BROKER_COMPACTION_INTERVAL_MS: '1000', BROKER_COMPACTION_LAG_MS: '0' });
  const redis = new Redis(stack.redis.url);
  try {
    await createEventType(stack.broker.url, businessEventType(PLAIN, ORDER_SCHEMA, PARTITIONS));
    await createEventType(stack.broker.url, { ...businessEventType(COMPACTED, ORDER_SCHEMA, PARTITIONS), cleanup_policy: 'compact', partition_strategy: 'hash', partition_key_fields: ['order_number'] });

    const rates: Record<string, number> = {};
    for (const [label, requests] of [['delete (baseline)', plainRequests], ['compact', compactedRequests]] as const) {
      await runLoad({ url: stack.broker.url, requests, connections: CONNECTIONS, durationSeconds: WARMUP_SECONDS });
      const meter = stackMeter(stack);
      meter.start();
      const result = await runLoad({ url: stack.broker.url, requests, connections: CONNECTIONS, durationSeconds: DURATION_SECONDS });
      const cpu = meter.stop();
      reportFailures(recorder, label, result);
      recorder.log(`${label}: ${Math.round(result.eventsPerSecond)} events/s, p50 ${result.latencyMs.p50.toFixed(1)} ms, p99 ${result.latencyMs.p99.toFixed(1)} ms`);
      recorder.add(`${label}: events/s`, Math.round(result.eventsPerSecond), 'events/s');
      recorder.add(`${label}: latency p99`, round(result.latencyMs.p99, 2), 'ms');
      recorder.add(`${label}: non-2xx answers`, result.non2xx + result.errors, 'answers', { op: '<=', value: 0 });
      recordCpu(recorder, `${label}: `, cpu);
      rates[label] = result.eventsPerSecond;
    }
    const baseline = rates['delete (baseline)'] ?? Number.NaN;
    recorder.add('compact / delete (events/s)', round((rates.compact ?? Number.NaN) / baseline, 2), '×');

    // Compaction after the load: until every partition holds one event per key at most.
    const logs = await keysMatching(redis, `*{et:${COMPACTED}:*}:t1:log`);
    const stored = async (): Promise<number> => (await Promise.all(logs.map((k) => redis.xlen(k)))).reduce((sum, n) => sum + n, 0);
    const before = await stored();
    const started = Date.now();
    let now = before;
    while (now > KEYS && Date.now() - started < COMPACTION_TIMEOUT_MS) {
      await sleep(100);
      now = await stored();
    }
    const seconds = (Date.now() - started) / 1000;
    recorder.log(`compaction: ${before} stored events → ${now} (${KEYS} keys) in ${seconds.toFixed(1)} s after publishing stopped`);
    recorder.add('compaction: events stored when publishing stopped', before, 'events');
    recorder.add('compaction: events left (one per key)', now, 'events', { op: '<=', value: KEYS });
    recorder.add('compaction: seconds until one event per key', round(seconds, 1), 's');
    recorder.add('compaction: events removed per second', Math.round((before - now) / Math.max(seconds, 0.001)), 'events/s');
  } finally {
    redis.disconnect();
    await stack.stop(recorder);
  }
}

export const compaction: Scenario = {
  name: 'compaction',
  title: `publish throughput of ${BATCH}-event batches to a compacted event type vs an ordinary one, and compaction speed`,
  run,
};
