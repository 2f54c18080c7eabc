/**
 * Scenario `filter`: a subscription stream with a server-side filter (docs/consuming.md "Filters") that
 * matches 10 % of the stored events, against the same stream without a filter, on the same data in the
 * same run, alternated (unfiltered, filtered, unfiltered, filtered). Events are published beforehand
 * (not timed): small business events whose field `n` is uniform in 0..999 and the filter
 * `{"properties":{"n":{"maximum":99}}}`. Each point is a new subscription from `begin` read to the end
 * (`batch_limit` 1000, `max_uncommitted_events` 100,000, committing as a real client does, without
 * waiting); its figure is the stored events it moved through per second (every event of the partitions,
 * matching or not), until its last event arrived. Target: filtered ≥ 0.5 × unfiltered (median of the rounds' ratios).
 */
import { businessEventType, prng } from './events.js';
import { compactEvent, SCHEMA } from './consume.js';
import { createEventType, loadRequest, median, publishAll, recordCpu, round, startStack, stackMeter, type CpuUse, type LoadRequest, type Recorder, type Scenario, type Stack } from './harness.js';
import { Committer, openStream, quickMode, request } from './stream-client.js';

const QUICK = quickMode();
const EVENT_TYPE = 'bench.filter';
const PARTITIONS = 4;
/** Events per published batch, and `batch_limit` of the streams. */
const BATCH = 1000;
/** Events stored beforehand: a multiple of BATCH × PARTITIONS. */
const EVENTS = QUICK ? 200_000 : 1_000_000;
const PUBLISH_IN_FLIGHT = 4;
/** Distinct bodies rotated while publishing (a multiple of PARTITIONS). */
const DISTINCT_BODIES = 16;
/** The filter: about 10 % of the events have `n` ≤ 99. */
const FILTER = { properties: { n: { maximum: 99 } } };
/** Unfiltered and filtered points, alternated. */
const ROUNDS = 2;
const TARGET_RATIO = 0.5;
const READ_TIMEOUT_MS = 180_000;

/** What one point measured. */
interface Reading {
  readonly received: number;
  readonly seconds: number;
  readonly cpu: CpuUse;
}

/** Publishes EVENTS events; @returns how many of them the filter matches */
async function publish(recorder: Recorder, stack: Stack): Promise<number> {
  const random = prng(11);
  const path = `/event-types/${EVENT_TYPE}/events`;
  const batches: object[][] = Array.from({ length: DISTINCT_BODIES }, (_, b) => Array.from({ length: BATCH }, () => compactEvent(random, b % PARTITIONS)));
  const matchesPerBody = batches.map((events) => events.filter((e) => (e as { n: number }).n <= FILTER.properties.n.maximum).length);
  const bodies: LoadRequest[] = batches.map((events) => loadRequest(path, events));
  let matching = 0;
  for (let i = 0; i < EVENTS / BATCH; i++) matching += matchesPerBody[i % DISTINCT_BODIES] ?? 0;
  await publishAll(recorder, stack.broker.url, bodies, EVENTS / BATCH, PUBLISH_IN_FLIGHT);
  recorder.log(`published ${EVENTS} events, ${matching} of them matching the filter`);
  return matching;
}

/** One point: a new subscription (with `filter` or not) read from `begin` until `expected` events arrived. */
async function point(recorder: Recorder, stack: Stack, label: string, filter: object | undefined, expected: number): Promise<Reading> {
  const body = { owning_application: `bench-filter-${label}`, event_types: [EVENT_TYPE], read_from: 'begin', ...(filter === undefined ? {} : { filter }) };
  const created = await request('POST', `${stack.broker.url}/subscriptions`, JSON.stringify(body));
  if (created.status !== 201) throw new Error(`POST /subscriptions answered ${created.status}: ${created.text.slice(0, 500)}`);
  const id = (JSON.parse(created.text) as { id: string }).id;
  const url = `${stack.broker.url}/subscriptions/${id}/events?batch_limit=${BATCH}&max_uncommitted_events=100000&batch_flush_timeout=1`;
  let received = 0;
  let lastAt = 0;
  let committer: Committer | undefined;
  let done: () => void = () => undefined;
  const all = new Promise<void>((resolve) => (done = resolve));
  const meter = stackMeter(stack);
  meter.start();
  const started = performance.now();
  const stream = await openStream(url, { onOpen: (streamId) => (committer = streamId === undefined ? undefined : new Committer(`${stack.broker.url}/subscriptions/${id}/cursors`, streamId)) }, (line) => {
    const count = line.events?.length ?? 0;
    if (count === 0) return;
    received += count;
    lastAt = performance.now();
    committer?.add(line.cursor);
    if (received >= expected) done();
  });
  let timer: NodeJS.Timeout | undefined;
  const inTime = await Promise.race([all.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), READ_TIMEOUT_MS)))]);
  clearTimeout(timer);
  const cpu = meter.stop();
  if (!inTime) recorder.alarm(`${label}: ${received} of ${expected} events within ${READ_TIMEOUT_MS / 1000} s`);
  await committer?.flush();
  stream.close();
  if (received !== expected) recorder.alarm(`${label}: received ${received} events, expected ${expected}`);
  return { received, seconds: (lastAt - started) / 1000, cpu };
}

async function run(recorder: Recorder): Promise<void> {
  const stack = await startStack();
  try {
    await createEventType(stack.broker.url, { ...businessEventType(EVENT_TYPE, SCHEMA, PARTITIONS), partition_strategy: 'user_defined' });
    const matching = await publish(recorder, stack);
    recorder.add('events stored beforehand', EVENTS, 'events');
    recorder.add('events the filter matches', matching, 'events');
    const ratios: number[] = [];
    for (let r = 1; r <= ROUNDS; r++) {
      const plain = await point(recorder, stack, `unfiltered-${r}`, undefined, EVENTS);
      const filtered = await point(recorder, stack, `filtered-${r}`, FILTER, matching);
      const plainRate = EVENTS / Math.max(plain.seconds, 1e-6);
      const filteredRate = EVENTS / Math.max(filtered.seconds, 1e-6);
      recorder.log(`round ${r}: unfiltered ${Math.round(plainRate)} stored events/s, filtered ${Math.round(filteredRate)} stored events/s (${filtered.received} sent)`);
      recorder.add(`round ${r}: subscription stream without a filter: stored events/s`, Math.round(plainRate), 'events/s');
      recorder.add(`round ${r}: subscription stream with a 10 % filter: stored events/s`, Math.round(filteredRate), 'events/s');
      recordCpu(recorder, `round ${r}: without a filter: `, plain.cpu);
      recordCpu(recorder, `round ${r}: with the filter: `, filtered.cpu);
      ratios.push(filteredRate / plainRate);
    }
    recorder.add('with a 10 % filter / without (stored events/s, median of the rounds)', round(median(ratios), 2), '×', { op: '>=', value: TARGET_RATIO });
  } finally {
    await stack.stop(recorder);
  }
}

export const filter: Scenario = {
  name: 'filter',
  title: `a subscription stream over ${EVENTS.toLocaleString('en')} stored events with a filter matching 10 %, against the same stream without a filter`,
  run,
};
