/**
 * Scenario `publish-batches`: publish throughput of `POST /event-types/bench.order.b<batch>/events` with
 * ~500-byte business events (10-field schema, 4 partitions) in batches of 1, 100 and 1000, measured
 * with autocannon (each batch size on an event type of its own, deleted once measured, so every point
 * writes to an equally empty Redis); and, in the same run on the same machine, the baselines:
 * (a) a hyper-express server that only `JSON.parse`s the same bodies (bench/baseline-parse-server.ts);
 * (b) Redis alone, one `XADD key * d <event>` per event, pipelined (ioredis);
 * (c) Redis alone, one `XADD` per 1000-event batch holding the joined event texts (the packed entry
 *     the broker writes, docs/decisions/0001-one-stream-entry-per-partition-per-batch.md, against (b)).
 */
import { availableParallelism } from 'node:os';
import { Redis } from 'ioredis';
import { startRedis } from '../scripts/local-processes.js';
import { startScriptServer } from './script-server.js';
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { requestRetrying } from './stream-client.js';
import {
  CpuMeter,
  MB,
  createEventType,
  loadRequest,
  pidOf,
  recordCpu,
  reportFailures,
  round,
  runBounded,
  runLoad,
  startStack,
  type CpuUse,
  type LoadRequest,
  type LoadResult,
  type Recorder,
  type Scenario,
  stackMeter,
} from './harness.js';

const EVENT_TYPE = 'bench.order';
const PARTITIONS = 4;
const PATH = `/event-types/${EVENT_TYPE}/events`;
/** Seconds of load per measured point, after {@link WARMUP_SECONDS} of unmeasured load. */
export const DURATION_SECONDS = 10;
export const WARMUP_SECONDS = 2;
/** Events written to Redis by each Redis-alone baseline. */
export const REDIS_BASELINE_EVENTS = 200_000;
/** Commands per pipeline of baseline (b), and pipelines (or batch XADDs) in flight. */
const REDIS_PIPELINE = 1000;
const REDIS_IN_FLIGHT = 4;

/** The measured points: batch size, autocannon connections, distinct bodies rotated. */
export const POINTS = [
  { batch: 1, connections: 16, bodies: 64 },
  { batch: 100, connections: 8, bodies: 16 },
  { batch: 1000, connections: 4, bodies: 4 },
] as const;

/** Target: events/s with 1000-event batches. */
const TARGET_EVENTS_PER_SECOND = 100_000;
/** Ratio targets: broker events/s ÷ the same run's parse-only baseline, per batch size. */
const RATIO_TARGETS: ReadonlyMap<number, number> = new Map([
  [1000, 0.5],
  [100, 0.35],
]);

/** The processes whose CPU a published event costs on this machine: the node, Redis and the load generator. */
const PUBLISH_CPU_LABELS = ['broker main thread', 'broker other threads', 'redis-server', 'load generator (bench process)'] as const;

/**
 * What the machine allows at the CPU per event a point measured (so a missed target is explained by
 * the machine's limit, measured in the same run): the CPU of the node, Redis and the load generator per event (µs of
 * one core), and the events/s all the machine's cores would carry at that cost. The load generator
 * counts: it shares the cores with the broker as it does with the parse-only baseline.
 * @param use the CPU of the measured window (`stackMeter`), in % of one core
 * @param eventsPerSecond the events/s of the same window
 * @returns undefined when nothing was measured
 */
export function publishCeiling(use: CpuUse, eventsPerSecond: number, cores: number): { cpuPerEventUs: number; eventsPerSecond: number } | undefined {
  const percent = PUBLISH_CPU_LABELS.reduce((sum, label) => sum + (use.byLabel[label] ?? 0), 0);
  if (percent <= 0 || eventsPerSecond <= 0) return undefined;
  const cpuPerEventUs = ((percent / 100) * 1e6) / eventsPerSecond;
  return { cpuPerEventUs, eventsPerSecond: (cores * 1e6) / cpuPerEventUs };
}

function bodiesFor(batch: number, count: number, random: () => number): LoadRequest[] {
  return Array.from({ length: count }, () => loadRequest(PATH, Array.from({ length: batch }, () => orderEvent(random))));
}

async function measure(recorder: Recorder, label: string, url: string, requests: LoadRequest[], connections: number, meter: CpuMeter): Promise<{ result: LoadResult; cpu: ReturnType<CpuMeter['stop']> }> {
  await runLoad({ url, requests, connections, durationSeconds: WARMUP_SECONDS });
  meter.start();
  const result = await runLoad({ url, requests, connections, durationSeconds: DURATION_SECONDS });
  const cpu = meter.stop();
  reportFailures(recorder, label, result);
  recorder.log(
    `${label}: ${Math.round(result.eventsPerSecond)} events/s, ${result.bodyMBps.toFixed(1)} MB/s, p50 ${result.latencyMs.p50.toFixed(2)} ms, p99 ${result.latencyMs.p99.toFixed(2)} ms, non-2xx ${result.non2xx}`,
  );
  return { result, cpu };
}

/** Baselines (b) and (c) on a fresh Redis: the same event texts, one XADD each vs one XADD per batch. */
async function redisBaselines(recorder: Recorder, batches: readonly LoadRequest[]): Promise<{ perEvent: number; perBatch: number }> {
  const texts: string[][] = batches.map((b) => (JSON.parse(b.body.toString('utf8')) as unknown[]).map((e) => JSON.stringify(e)));
  const allTexts = texts.flat();
  const redis = await startRedis();
  const client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  try {
    const meter = new CpuMeter([{ label: 'redis-server', pid: pidOf(redis.process) }]);

    // (b) one XADD per event, pipelines of REDIS_PIPELINE commands, REDIS_IN_FLIGHT pipelines in flight.
    let bytes = 0;
    const pipelines = REDIS_BASELINE_EVENTS / REDIS_PIPELINE;
    meter.start();
    let started = performance.now();
    await runBounded(pipelines, REDIS_IN_FLIGHT, async (p) => {
      const pipeline = client.pipeline();
      for (let i = 0; i < REDIS_PIPELINE; i++) {
        const index = p * REDIS_PIPELINE + i;
        const text = allTexts[index % allTexts.length] ?? '';
        bytes += Buffer.byteLength(text);
        pipeline.xadd(`bench:per-event:${index % PARTITIONS}`, '*', 'd', text);
      }
      const replies = await pipeline.exec();
      const failed = (replies ?? []).find(([err]) => err !== null);
      if (failed) throw failed[0] ?? new Error('pipeline failed');
    });
    let seconds = (performance.now() - started) / 1000;
    let cpu = meter.stop();
    const perEvent = REDIS_BASELINE_EVENTS / seconds;
    recorder.add('redis alone, XADD per event (pipelined): events/s', Math.round(perEvent), 'events/s');
    recorder.add('redis alone, XADD per event (pipelined): MB/s', round(bytes / MB / seconds, 1), 'MB/s');
    recordCpu(recorder, 'redis alone, XADD per event: ', cpu);
    recorder.log(`redis alone, XADD per event: ${Math.round(perEvent)} events/s, ${(bytes / MB / seconds).toFixed(1)} MB/s`);

    // (c) one XADD per 1000-event batch: one field holding the texts joined by "\n".
    const joined = texts.map((list) => list.join('\n'));
    const batchSize = texts[0]?.length ?? 1;
    const xadds = Math.floor(REDIS_BASELINE_EVENTS / batchSize);
    bytes = 0;
    meter.start();
    started = performance.now();
    await runBounded(xadds, REDIS_IN_FLIGHT, async (i) => {
      const data = joined[i % joined.length] ?? '';
      bytes += Buffer.byteLength(data);
      await client.xadd(`bench:per-batch:${i % PARTITIONS}`, '*', 'n', String(batchSize), 'd', data);
    });
    seconds = (performance.now() - started) / 1000;
    cpu = meter.stop();
    const perBatch = (xadds * batchSize) / seconds;
    recorder.add(`redis alone, one XADD per ${batchSize}-event batch: events/s`, Math.round(perBatch), 'events/s');
    recorder.add(`redis alone, one XADD per ${batchSize}-event batch: MB/s`, round(bytes / MB / seconds, 1), 'MB/s');
    recordCpu(recorder, `redis alone, XADD per batch: `, cpu);
    recorder.log(`redis alone, one XADD per ${batchSize}-event batch: ${Math.round(perBatch)} events/s, ${(bytes / MB / seconds).toFixed(1)} MB/s`);
    return { perEvent, perBatch };
  } finally {
    client.disconnect();
    await redis.stop();
  }
}

async function run(recorder: Recorder): Promise<void> {
  const random = prng(1);
  const bodies = POINTS.map((point) => bodiesFor(point.batch, point.bodies, random));
  const first = bodies[0]?.[0];
  if (first) recorder.add('event size (JSON as sent)', Math.round(first.eventBytes / first.events), 'bytes');

  // The broker.
  const brokerEventsPerSecond: number[] = [];
  const ceilings: (number | undefined)[] = [];
  const cores = availableParallelism();
  const stack = await startStack();
  try {
    const meter = stackMeter(stack);
    for (const [i, point] of POINTS.entries()) {
      // Each point on an event type of its own, deleted once the point is measured: every point writes to
      // an equally empty Redis. Writing beside an earlier point's gigabytes costs Redis more on this VM,
      // whose memory gets slower to populate the more of it was touched (docs/benchmarks.md "The machine, and how figures are compared").
      const eventType = `${EVENT_TYPE}.b${point.batch}`;
      await createEventType(stack.broker.url, businessEventType(eventType, ORDER_SCHEMA, PARTITIONS));
      const requests = (bodies[i] ?? []).map((r) => ({ ...r, path: `/event-types/${eventType}/events` }));
      const label = `batch ${point.batch}`;
      const { result, cpu } = await measure(recorder, `broker, ${label}, ${point.connections} connections`, stack.broker.url, requests, point.connections, meter);
      await requestRetrying('DELETE', `${stack.broker.url}/event-types/${eventType}`, undefined, [200, 204]);
      brokerEventsPerSecond.push(result.eventsPerSecond);
      recorder.add(`${label}: events/s`, Math.round(result.eventsPerSecond), 'events/s', point.batch === 1000 ? { op: '>=', value: TARGET_EVENTS_PER_SECOND } : undefined);
      recorder.add(`${label}: requests/s`, Math.round(result.requestsPerSecond), 'requests/s');
      recorder.add(`${label}: MB/s (request bodies)`, round(result.bodyMBps, 1), 'MB/s');
      recorder.add(`${label}: latency p50`, round(result.latencyMs.p50, 2), 'ms');
      recorder.add(`${label}: latency p99`, round(result.latencyMs.p99, 2), 'ms');
      recorder.add(`${label}: non-2xx answers`, result.non2xx + result.errors, 'answers', { op: '<=', value: 0 });
      recordCpu(recorder, `${label}: `, cpu);
      const ceiling = publishCeiling(cpu, result.eventsPerSecond, cores);
      ceilings.push(ceiling?.eventsPerSecond);
      if (ceiling !== undefined) {
        recorder.add(`${label}: CPU per event (broker, Redis, load generator)`, round(ceiling.cpuPerEventUs, 2), 'µs');
        recorder.add(`${label}: events/s ${cores} cores carry at that CPU per event`, Math.round(ceiling.eventsPerSecond), 'events/s');
      }
    }
  } finally {
    await stack.stop(recorder);
  }

  // Baseline (a): parse-only hyper-express server, same bodies and settings.
  const server = await startScriptServer('baseline-parse-server.js');
  try {
    const meter = new CpuMeter([{ label: 'parse-only server', pid: pidOf(server.child), split: true }]);
    for (const [i, point] of POINTS.entries()) {
      const requests = bodies[i] ?? [];
      const label = `batch ${point.batch}`;
      const { result, cpu } = await measure(recorder, `parse-only baseline, ${label}, ${point.connections} connections`, server.url, requests, point.connections, meter);
      recorder.add(`parse-only baseline, ${label}: events/s`, Math.round(result.eventsPerSecond), 'events/s');
      recorder.add(`parse-only baseline, ${label}: MB/s (request bodies)`, round(result.bodyMBps, 1), 'MB/s');
      recorder.add(`parse-only baseline, ${label}: latency p50`, round(result.latencyMs.p50, 2), 'ms');
      recorder.add(`parse-only baseline, ${label}: latency p99`, round(result.latencyMs.p99, 2), 'ms');
      const broker = brokerEventsPerSecond[i];
      if (broker !== undefined && result.eventsPerSecond > 0) {
        const target = RATIO_TARGETS.get(point.batch);
        recorder.add(`${label}: broker / parse-only baseline (events/s)`, round(broker / result.eventsPerSecond, 2), '×', target === undefined ? undefined : { op: '>=', value: target });
        // The most that ratio can be on this machine at the broker's CPU per event.
        const ceiling = ceilings[i];
        if (ceiling !== undefined) recorder.add(`${label}: machine's ceiling at that CPU per event / parse-only baseline`, round(ceiling / result.eventsPerSecond, 2), '×');
      }
      recordCpu(recorder, `parse-only baseline, ${label}: `, cpu);
    }
  } finally {
    await server.stop();
  }

  // Baselines (b) and (c): Redis alone, the events of the 1000-event bodies.
  const { perEvent, perBatch } = await redisBaselines(recorder, bodies[bodies.length - 1] ?? []);
  recorder.add('redis alone: one XADD per batch / one XADD per event (events/s)', round(perBatch / perEvent, 1), '×');
  const broker1000 = brokerEventsPerSecond[brokerEventsPerSecond.length - 1];
  if (broker1000 !== undefined) recorder.add('batch 1000: broker / redis alone XADD per event (events/s)', round(broker1000 / perEvent, 2), '×');
}

export const publishBatches: Scenario = {
  name: 'publish-batches',
  title: 'publish throughput, batches of 1/100/1000 ~500 B business events, with parse-only and Redis-alone baselines',
  run,
};
