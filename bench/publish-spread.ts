/**
 * Scenario `publish-spread`: publish throughput as a batch's events spread over more
 * partitions of one event type (1, 4, 16, 64) and as producers spread their batches over more event
 * types (1, 10, 100, 1000), against a model of what the added Redis round trips cost.
 *
 * What the broker does per batch (src/services/publishing/publisher.ts, src/storage/partition-store.ts): the
 * event type from the node's cache (in memory after the first request), the body to a validation
 * worker (parse, validate, enrich, partition: O(events), whatever the partitions), then ONE
 * `publishBatch` Lua script per partition the batch touched, all sent together (one socket write), and
 * the answer once every script answered. So a 1000-event batch over P partitions costs what it costs
 * over one partition plus P − 1 more script calls (each an EVALSHA with its own HEXISTS, HINCRBY, XADD,
 * TIME, ZREVRANGE, SPUBLISH, and a reply), and a batch to one of N single-partition event types costs
 * one script whatever N is.
 *
 * The model ("no worse than linear decline per added round trip"): the added scripts are measured in
 * the same run on Redis alone — the real `publishBatch-4.lua`, the same event texts split into P
 * entries, P calls per batch sent together, 4 batches in flight — as CPU per batch (redis-server plus
 * the client process): Δ(P) = cpu(P) − cpu(1). The broker may add that much CPU per batch and no more:
 * model CPU per batch B(1) + Δ(P), where B is the broker's (all threads) plus redis-server's CPU per
 * batch; the machine being saturated, model throughput T(1) × B(1) ÷ (B(1) + Δ(P)). Each point records
 * its CPU per batch ÷ model (target ≤ 1.1: the model, within the measuring noise) and its events/s ÷
 * model events/s (the same on a quiet machine; on a shared one the neighbours' load moves throughput
 * far more than CPU per batch, so the target is on the latter).
 * Each point's event types (partition points: one; event-type points: their own N) are deleted once it
 * is measured, so every point writes to an equally empty Redis. The points used to write beside the
 * earlier ones' gigabytes, and on this VM new memory costs more the more the guest has touched
 * (16 partitions right after the 1-partition point cost Redis 3.74 µs per event, 1.92 on a fresh Redis,
 * 2.00 with the point before deleted; docs/benchmarks.md "The machine, and how figures are compared").
 * For event types Δ = 0 (one script per batch at every N): the model is flat, B(N) ≤ 1.1 × B(1).
 * Every event type has its own schema text (a distinct `description`), as real event types do, so
 * each has its own validator (caches.workerValidatorEntries per worker thread, default 256).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { repoRoot, startRedis } from '../scripts/local-processes.js';
import { resolveIncludes } from '../src/storage/scripts.js';
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { CpuMeter, loadRequest, median, pidOf, post, reportFailures, round, runBounded, runLoad, startStack, type CpuUse, type LoadRequest, type Recorder, type Scenario, type Stack } from './harness.js';
import { quickMode, requestRetrying } from './stream-client.js';

const QUICK = quickMode();
/** Partitions of the one event type, per point. */
export const PARTITION_POINTS: readonly number[] = QUICK ? [1, 4] : [1, 4, 16, 64];
/** Single-partition event types published to, per point. */
export const EVENT_TYPE_POINTS: readonly number[] = QUICK ? [1, 10] : [1, 10, 100, 1000];
/** Events per batch of the partition curve (64 partitions still get ~16 each). */
const PARTITION_BATCH = 1000;
/** Events per batch of the event type curve (more batches per second: every event type gets several per point). */
const TYPES_BATCH = 100;
const PARTITION_CONNECTIONS = 4;
const TYPES_CONNECTIONS = 8;
const BODIES = 4;
const WARMUP_SECONDS = QUICK ? 1 : 2;
const DURATION_SECONDS = QUICK ? 2 : 6;
/** Batches per point of the Redis-alone reference (each ~0.5 MB; the keys are flushed after each point). */
const REFERENCE_BATCHES = QUICK ? 100 : 400;
const REFERENCE_IN_FLIGHT = 4;
/** The target: CPU per batch ÷ model. */
const TARGET_RATIO = 1.1;
const CREATE_IN_FLIGHT = 8;

/** CPU in core-µs per batch of the processes `labels` of a {@link CpuUse}, over `batches`. */
function cpuPerBatchUs(use: CpuUse, labels: readonly string[], batches: number): number {
  const percent = labels.reduce((sum, label) => sum + (use.byLabel[label] ?? 0), 0);
  return batches === 0 ? Number.NaN : ((percent / 100) * use.seconds * 1e6) / batches;
}

/** Rounds of the Redis-alone reference: every point is measured once per round, points in turn; the median is kept. */
const REFERENCE_ROUNDS = QUICK ? 1 : 3;

/**
 * The Redis-alone reference: CPU per batch (redis-server + this process) of P `publishBatch` calls per
 * batch. One unmeasured pass first, then {@link REFERENCE_ROUNDS} rounds over the points in turn, keys
 * flushed after each; each point's median is kept. Measured once per point in a row, the figures were
 * not monotonic on a machine with costly fresh pages (5,779 / 6,742 / 4,119 / 5,093 core-µs for 1 / 4 /
 * 16 / 64 scripts): the first point wrote into memory Redis had never used, and
 * the 200 MB each point stores dominated what the scripts add.
 */
async function scriptReference(recorder: Recorder, texts: readonly string[]): Promise<Map<number, number>> {
  const redis = await startRedis();
  const client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  const samples = new Map<number, number[]>();
  try {
    // As the broker loads it: its `--#include` lines resolved.
    const luaDir = path.join(repoRoot, 'src', 'storage', 'lua');
    const lua = resolveIncludes(readFileSync(path.join(luaDir, 'publishBatch-4.lua'), 'utf8'), path.join(luaDir, 'includes'), 'publishBatch-4.lua');
    const sha = String(await client.script('LOAD', lua));
    const meter = new CpuMeter([{ label: 'redis-server', pid: pidOf(redis.process) }]);
    const pass = async (partitions: number): Promise<CpuUse> => {
      const groups = Array.from({ length: partitions }, (_, p) => texts.filter((_t, i) => i % partitions === p));
      const datas = groups.map((g) => g.join('\n'));
      const call = async (p: number): Promise<void> => {
        const first = await client.evalsha(sha, 4, `ref:${p}:meta`, `ref:${p}:log`, `ref:${p}:time`, `ref:${p}:notices`, groups[p]?.length ?? 0, datas[p] ?? '');
        if (typeof first !== 'number' || first < 0) throw new Error(`publishBatch answered ${String(first)}, not a first offset`);
      };
      // Opened as the registry opens an event type's partitions (an append to one never opened is refused).
      await Promise.all(groups.map((_, p) => client.hset(`ref:${p}:meta`, 'next', 0, 'oldest', 0)));
      meter.start();
      await runBounded(REFERENCE_BATCHES, REFERENCE_IN_FLIGHT, async () => {
        await Promise.all(Array.from({ length: partitions }, (_, p) => call(p)));
      });
      const use = meter.stop();
      await client.flushall();
      return use;
    };
    await pass(PARTITION_POINTS[0] ?? 1);
    for (let r = 0; r < REFERENCE_ROUNDS; r++) {
      for (const partitions of PARTITION_POINTS) {
        const use = await pass(partitions);
        // The client's share is what the broker's main thread spends on the same calls (ioredis).
        const us = cpuPerBatchUs(use, ['redis-server', 'load generator (bench process)'], REFERENCE_BATCHES);
        samples.set(partitions, [...(samples.get(partitions) ?? []), us]);
        recorder.log(`redis alone, round ${r + 1}, ${PARTITION_BATCH} events as ${partitions} publishBatch scripts per batch: ${us.toFixed(0)} core-µs per batch (redis ${(use.byLabel['redis-server'] ?? 0).toFixed(0)}%, client ${(use.byLabel['load generator (bench process)'] ?? 0).toFixed(0)}%)`);
      }
    }
  } finally {
    client.disconnect();
    await redis.stop();
  }
  const perBatch = new Map<number, number>();
  for (const [partitions, values] of samples) {
    const us = median(values);
    perBatch.set(partitions, us);
    recorder.add(`redis alone, ${partitions} publishBatch scripts per ${PARTITION_BATCH}-event batch: CPU per batch`, round(us, 0), 'core-µs');
  }
  return perBatch;
}

/** One measured load point: events/s, batches, CPU per batch (broker + redis-server). */
async function measurePoint(recorder: Recorder, label: string, stack: Stack, requests: readonly LoadRequest[], connections: number): Promise<{ eventsPerSecond: number; cpuUs: number }> {
  const meter = new CpuMeter([
    { label: 'broker', pid: pidOf(stack.broker.process) },
    { label: 'redis-server', pid: pidOf(stack.redis.process) },
  ]);
  await runLoad({ url: stack.broker.url, requests, connections, durationSeconds: WARMUP_SECONDS });
  meter.start();
  const result = await runLoad({ url: stack.broker.url, requests, connections, durationSeconds: DURATION_SECONDS });
  const use = meter.stop();
  reportFailures(recorder, label, result);
  const cpuUs = cpuPerBatchUs(use, ['broker', 'redis-server'], result.okRequests);
  recorder.log(
    `${label}: ${Math.round(result.eventsPerSecond)} events/s, ${Math.round(result.requestsPerSecond)} batches/s, p99 ${result.latencyMs.p99.toFixed(1)} ms, ` +
      `${cpuUs.toFixed(0)} core-µs per batch (broker ${(use.byLabel['broker'] ?? 0).toFixed(0)}%, redis ${(use.byLabel['redis-server'] ?? 0).toFixed(0)}%, bench ${(use.byLabel['load generator (bench process)'] ?? 0).toFixed(0)}%, other processes ${(use.byLabel['other processes'] ?? 0).toFixed(0)}%)`,
  );
  recorder.add(`${label}: events/s`, Math.round(result.eventsPerSecond), 'events/s');
  recorder.add(`${label}: latency p99`, round(result.latencyMs.p99, 1), 'ms');
  recorder.add(`${label}: CPU per batch (broker + redis-server)`, round(cpuUs, 0), 'core-µs');
  recorder.add(`${label}: CPU of other processes (noise)`, round(use.byLabel['other processes'] ?? 0, 0), '% of a core');
  recorder.add(`${label}: non-2xx answers`, result.non2xx + result.errors, 'answers', { op: '<=', value: 0 });
  return { eventsPerSecond: result.eventsPerSecond, cpuUs };
}

/** Requests to `paths` in turn (at least one per body), sharing `bodies` (the buffers are reused, not copied). */
function requestsOver(paths: readonly string[], bodies: readonly LoadRequest[]): LoadRequest[] {
  return Array.from({ length: Math.max(paths.length, bodies.length) }, (_, i) => ({ ...(bodies[i % bodies.length] as LoadRequest), path: paths[i % paths.length] as string }));
}

async function run(recorder: Recorder): Promise<void> {
  const random = prng(417);
  const bigBodies = Array.from({ length: BODIES }, () => loadRequest('/', Array.from({ length: PARTITION_BATCH }, () => orderEvent(random))));
  const smallBodies = Array.from({ length: BODIES }, () => loadRequest('/', Array.from({ length: TYPES_BATCH }, () => orderEvent(random))));
  const referenceTexts = (JSON.parse((bigBodies[0] as LoadRequest).body.toString('utf8')) as unknown[]).map((e) => JSON.stringify(e));
  const reference = await scriptReference(recorder, referenceTexts);

  const maxPartitions = Math.max(...PARTITION_POINTS);
  const stack = await startStack({ BROKER_EVENT_TYPES_MAX_PARTITION_COUNT: String(maxPartitions) });
  try {
    // Partitions of one event type.
    let first: { eventsPerSecond: number; cpuUs: number } | undefined;
    for (const partitions of PARTITION_POINTS) {
      const name = `bench.spread.p${partitions}`;
      await requestRetrying('POST', `${stack.broker.url}/event-types`, JSON.stringify(businessEventType(name, ORDER_SCHEMA, partitions)), [201]);
      const label = `${partitions} partitions, ${PARTITION_BATCH}-event batches`;
      const point = await measurePoint(recorder, label, stack, requestsOver([`/event-types/${name}/events`], bigBodies), PARTITION_CONNECTIONS);
      first ??= point;
      const added = (reference.get(partitions) ?? Number.NaN) - (reference.get(PARTITION_POINTS[0] as number) ?? Number.NaN);
      const modelCpu = first.cpuUs + added;
      const modelEvents = (first.eventsPerSecond * first.cpuUs) / modelCpu;
      recorder.log(`${label}: model ${Math.round(modelEvents)} events/s (${first.cpuUs.toFixed(0)} + ${added.toFixed(0)} core-µs per batch); achieved ÷ model ${(point.eventsPerSecond / modelEvents).toFixed(2)}`);
      recorder.add(`${label}: model events/s (point 1 + the added scripts' CPU)`, Math.round(modelEvents), 'events/s');
      recorder.add(`${label}: CPU per batch ÷ model`, round(point.cpuUs / modelCpu, 2), '×', { op: '<=', value: TARGET_RATIO });
      recorder.add(`${label}: events/s ÷ model`, round(point.eventsPerSecond / modelEvents, 2), '×');
      // Its events go with it (the broker drops the partitions' keys): the next point starts on an empty Redis.
      await requestRetrying('DELETE', `${stack.broker.url}/event-types/${name}`, undefined, [200, 204]);
    }

    // Event types, one partition each, each with its own schema text; each point with event types of its
    // own, deleted once it is measured (an equally empty Redis for every point, as above).
    let single: { eventsPerSecond: number; cpuUs: number } | undefined;
    for (const count of EVENT_TYPE_POINTS) {
      const names = Array.from({ length: count }, (_, i) => `bench.spread.n${count}.t${String(i).padStart(4, '0')}`);
      const started = performance.now();
      await runBounded(count, CREATE_IN_FLIGHT, async (i) => {
        const schema = { ...ORDER_SCHEMA, description: `order events of shop ${count}.${i}` };
        await requestRetrying('POST', `${stack.broker.url}/event-types`, JSON.stringify(businessEventType(names[i] as string, schema, 1)), [201]);
      });
      const createSeconds = (performance.now() - started) / 1000;
      recorder.log(`${count} event types created in ${createSeconds.toFixed(1)} s`);
      recorder.add(`${count} event types created (${CREATE_IN_FLIGHT} in flight): seconds`, round(createSeconds, 1), 's');
      const paths = names.map((n) => `/event-types/${n}/events`);
      // Every event type's first batch (its validator is compiled then) before the load.
      await runBounded(count, CREATE_IN_FLIGHT, async (i) => {
        const answer = await post(`${stack.broker.url}${paths[i] as string}`, (smallBodies[i % BODIES] as LoadRequest).body);
        if (answer.status !== 200) throw new Error(`first publish to ${paths[i] as string} answered ${answer.status}: ${answer.text.slice(0, 300)}`);
      });
      const label = `${count} event types, ${TYPES_BATCH}-event batches`;
      const point = await measurePoint(recorder, label, stack, requestsOver(paths, smallBodies), TYPES_CONNECTIONS);
      single ??= point;
      recorder.add(`${label}: CPU per batch ÷ 1 event type (model: flat)`, round(point.cpuUs / single.cpuUs, 2), '×', { op: '<=', value: TARGET_RATIO });
      recorder.add(`${label}: events/s ÷ 1 event type`, round(point.eventsPerSecond / single.eventsPerSecond, 2), '×');
      await runBounded(count, CREATE_IN_FLIGHT, async (i) => {
        await requestRetrying('DELETE', `${stack.broker.url}/event-types/${names[i] as string}`, undefined, [200, 204]);
      });
    }
  } finally {
    await stack.stop(recorder);
  }
}

export const publishSpread: Scenario = {
  name: 'publish-spread',
  title: `publish throughput vs partitions of one event type (${PARTITION_POINTS.join('/')}) and vs event types published to (${EVENT_TYPE_POINTS.join('/')}), against the added scripts' cost`,
  run,
};
