/**
 * Scenario `cold-publish`: the first batch to a newly created event type. 100 event types
 * with distinct schemas (the order schema with a distinct `description` each, as real event types
 * differ) are created one after the other; then one batch is published to each of them at once — the
 * first batch each event type ever gets — and, as the same-run baseline, a second batch to each at once.
 * Target: the first batches answer within 50 ms p99. Before the event types are created the node is
 * warmed up with {@link WARM_UP_BURSTS} bursts of the same batches to an event type of its own: on a
 * fresh node the first bursts also paid the node's own first publishing traffic (JIT, threads), about
 * 70 ms of the 100-event cohort's first burst on the bench machine, which no event type created on a
 * serving node meets.
 *
 * Two cohorts, one per publish path: 100-event batches (~50 KB: validated in a worker) and single-event
 * batches (~500 bytes: validated on the main thread once it holds the validator). Before validators were
 * compiled at creation, a first batch found no validator: a worker asked for the schema text and compiled it (worker path), or
 * the batch went to a worker which compiled it and the main thread compiled it again on a later batch
 * (small path); now the validators are compiled in the workers while the event type is created
 * (`Publisher.prepare`), so creating an event type takes that time instead — recorded too.
 */
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { post, round, startStack, type Recorder, type Scenario } from './harness.js';
import { percentile, quickMode } from './stream-client.js';

const QUICK = quickMode();
/** Event types per cohort. */
const EVENT_TYPES = QUICK ? 20 : 100;
const TARGET_P99_MS = 50;
/** Warm-up bursts to an event type created first, per cohort, before the cold event types are created. */
const WARM_UP_BURSTS = 20;

interface Cohort {
  readonly label: string;
  readonly eventsPerBatch: number;
}

const COHORTS: readonly Cohort[] = [
  { label: '100-event batches (worker path)', eventsPerBatch: 100 },
  { label: 'single-event batches (main-thread path)', eventsPerBatch: 1 },
];

/** Latencies in ms of one POST per path, all sent at once. @throws Error on a non-200 answer */
async function publishAtOnce(url: string, paths: readonly string[], bodies: readonly string[]): Promise<Float64Array> {
  const latencies = await Promise.all(
    paths.map(async (p, i) => {
      const started = performance.now();
      const answer = await post(`${url}${p}`, bodies[i % bodies.length] as string);
      const ms = performance.now() - started;
      if (answer.status !== 200) throw new Error(`POST ${p} answered ${answer.status}: ${answer.text.slice(0, 300)}`);
      return ms;
    }),
  );
  return Float64Array.from(latencies).sort();
}

/** Records p50 and p99 of sorted latencies (p99 against `target` when given). @returns the p99 */
function recordLatencies(recorder: Recorder, label: string, sorted: Float64Array, target?: number): number {
  const p50 = percentile(sorted, 50);
  const p99 = percentile(sorted, 99);
  const max = sorted[sorted.length - 1] ?? Number.NaN;
  recorder.log(`${label}: p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${max.toFixed(1)} ms`);
  recorder.add(`${label}: latency p50`, round(p50, 1), 'ms');
  recorder.add(`${label}: latency p99`, round(p99, 1), 'ms', target === undefined ? undefined : { op: '<=', value: target });
  return p99;
}

async function run(recorder: Recorder): Promise<void> {
  const stack = await startStack();
  try {
    const url = stack.broker.url;
    const random = prng(17);
    for (const [c, cohort] of COHORTS.entries()) {
      const bodies = Array.from({ length: 8 }, () => JSON.stringify(Array.from({ length: cohort.eventsPerBatch }, () => orderEvent(random))));
      // The node's own warm-up first (its JIT, its threads, the client's connections): bursts of the
      // same batches to one event type created for it, so the bursts below measure what is new about
      // each event type, not the first publishing traffic this node ever served.
      const warmName = `bench.cold${c}.warm`;
      const warmCreated = await post(`${url}/event-types`, JSON.stringify(businessEventType(warmName, { ...ORDER_SCHEMA, description: `cold-publish warm-up ${c}` }, 1)));
      if (warmCreated.status !== 201) throw new Error(`POST /event-types answered ${warmCreated.status}: ${warmCreated.text.slice(0, 300)}`);
      const warmPaths = Array.from({ length: EVENT_TYPES }, () => `/event-types/${warmName}/events`);
      const warmStarted = performance.now();
      for (let burst = 0; burst < WARM_UP_BURSTS; burst++) await publishAtOnce(url, warmPaths, bodies);
      recorder.log(`${cohort.label}: node warm-up, ${WARM_UP_BURSTS} bursts of ${EVENT_TYPES} batches to one event type, in ${((performance.now() - warmStarted) / 1000).toFixed(1)} s`);
      const names = Array.from({ length: EVENT_TYPES }, (_, i) => `bench.cold${c}.t${i}`);
      const creates: number[] = [];
      for (const [i, name] of names.entries()) {
        const schema = { ...ORDER_SCHEMA, description: `cold-publish event type ${c}.${i}` };
        const started = performance.now();
        const answer = await post(`${url}/event-types`, JSON.stringify(businessEventType(name, schema, 1)));
        creates.push(performance.now() - started);
        if (answer.status !== 201) throw new Error(`POST /event-types answered ${answer.status}: ${answer.text.slice(0, 300)}`);
      }
      recordLatencies(recorder, `${cohort.label}: create event type`, Float64Array.from(creates).sort());
      const paths = names.map((n) => `/event-types/${n}/events`);
      // The client's connections are opened first (as a producer's are): the rounds measure publishing, not TCP set-up.
      await Promise.all(paths.map(async () => (await fetch(`${url}/health`)).arrayBuffer()));
      const first = recordLatencies(recorder, `${cohort.label}: first batch to each of ${EVENT_TYPES} new event types at once`, await publishAtOnce(url, paths, bodies), TARGET_P99_MS);
      const second = recordLatencies(recorder, `${cohort.label}: second batch to each at once (baseline)`, await publishAtOnce(url, paths, bodies));
      // What is left of the cold path: the first burst over the same burst to warm event types.
      recorder.add(`${cohort.label}: first ÷ second batch p99`, round(first / second, 2), '×');
    }
  } finally {
    await stack.stop(recorder);
  }
}

export const coldPublish: Scenario = {
  name: 'cold-publish',
  title: 'first batch to 100 newly created event types at once',
  run,
};
