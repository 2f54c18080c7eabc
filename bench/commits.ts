/**
 * Scenario `commits`: commit throughput. One subscription over an event type with 8
 * partitions, 4 concurrent streams (automatic assignment: 2 partitions each), events published
 * beforehand. Every stream commits every batch it receives at once, in its own request, and
 * `max_uncommitted_events` is small, so the commits gate the streams' progress. Per point a fresh
 * subscription from `begin`: 2 s warm-up (the streams join one after the other and the partitions
 * are rebalanced), then the measured period. No target: the figures are recorded.
 */
import { SMALL_BUSINESS_SCHEMA, businessEventType, prng, smallBusinessEvent } from './events.js';
import { createEventType, loadRequest, publishAll, recordCpu, sleep, startStack, stackMeter, type Recorder, type Scenario, type Stack } from './harness.js';
import { Committer, connectionRetries, createSubscription, openStream, quickMode, request, type OpenStream } from './stream-client.js';

const QUICK = quickMode();
const EVENT_TYPE = 'bench.commits';
const PARTITIONS = 8;
const STREAMS = 4;
/** Events published beforehand (more than the points consume: each reads from `begin`). */
export const EVENTS = QUICK ? 100_000 : 1_000_000;
const PUBLISH_BATCH = 1000;
const PUBLISH_IN_FLIGHT = 4;
const DISTINCT_BODIES = 16;
export const WARMUP_SECONDS = QUICK ? 1 : 2;
export const DURATION_SECONDS = QUICK ? 3 : 10;
/** How long to wait for the assignment to settle at 2 partitions per stream. */
const BALANCE_TIMEOUT_MS = 10_000;
/** After the consumers stop committing: time for the batches on their way to arrive before the last commit. */
const SETTLE_MS = 300;

/** The measured points: stream parameters. */
export const POINTS = [
  { batchLimit: 1, maxUncommitted: 1 },
  { batchLimit: 10, maxUncommitted: 20 },
] as const;

/** One consuming stream: events received and its committer. */
interface Consumer {
  readonly stream: OpenStream;
  readonly committer: Committer;
  events: number;
}

async function publish(recorder: Recorder, stack: Stack): Promise<void> {
  const random = prng(6);
  const path = `/event-types/${EVENT_TYPE}/events`;
  const bodies = Array.from({ length: DISTINCT_BODIES }, () => loadRequest(path, Array.from({ length: PUBLISH_BATCH }, () => smallBusinessEvent(random))));
  await publishAll(recorder, stack.broker.url, bodies, EVENTS / PUBLISH_BATCH, PUBLISH_IN_FLIGHT);
}

async function openConsumer(url: string, commitUrl: string): Promise<Consumer> {
  let committer: Committer | undefined;
  const consumer = { events: 0 };
  const onOpen = (streamId: string | undefined): void => {
    if (streamId !== undefined) committer = new Committer(commitUrl, streamId, false);
  };
  const stream = await openStream(url, { onOpen }, (line) => {
    const count = line.events?.length ?? 0;
    if (count === 0) return;
    consumer.events += count;
    committer?.add(line.cursor);
  });
  if (committer === undefined) throw new Error('the subscription stream has no X-Broker-StreamId header');
  return Object.assign(consumer, { stream, committer });
}

/** Partitions per stream id in state `assigned` (GET /subscriptions/{id}/stats). */
async function assignment(brokerUrl: string, id: string): Promise<Map<string, number>> {
  const { status, text } = await request('GET', `${brokerUrl}/subscriptions/${id}/stats`);
  if (status !== 200) throw new Error(`GET /subscriptions/${id}/stats answered ${status}: ${text.slice(0, 300)}`);
  const stats = JSON.parse(text) as { items: { partitions: { state: string; stream_id: string }[] }[] };
  const counts = new Map<string, number>();
  for (const item of stats.items) for (const p of item.partitions) if (p.state === 'assigned') counts.set(p.stream_id, (counts.get(p.stream_id) ?? 0) + 1);
  return counts;
}

function balanced(counts: ReadonlyMap<string, number>, consumers: readonly Consumer[]): boolean {
  return consumers.every((c) => c.stream.streamId !== undefined && counts.get(c.stream.streamId) === PARTITIONS / STREAMS);
}

const sum = (consumers: readonly Consumer[], of: (c: Consumer) => number): number => consumers.reduce((s, c) => s + of(c), 0);

async function measurePoint(recorder: Recorder, stack: Stack, index: number, point: (typeof POINTS)[number]): Promise<void> {
  const label = `batch_limit ${point.batchLimit}, max_uncommitted ${point.maxUncommitted}`;
  const id = await createSubscription(stack.broker.url, `bench-commits-${index}`, EVENT_TYPE, 'begin');
  const url = `${stack.broker.url}/subscriptions/${id}/events?batch_limit=${point.batchLimit}&max_uncommitted_events=${point.maxUncommitted}&batch_flush_timeout=1`;
  const commitUrl = `${stack.broker.url}/subscriptions/${id}/cursors`;
  const consumers: Consumer[] = [];
  try {
    for (let i = 0; i < STREAMS; i++) consumers.push(await openConsumer(url, commitUrl));
    await sleep(WARMUP_SECONDS * 1000);
    const balanceDeadline = performance.now() + BALANCE_TIMEOUT_MS;
    let counts = await assignment(stack.broker.url, id);
    while (!balanced(counts, consumers) && performance.now() < balanceDeadline) {
      await sleep(200);
      counts = await assignment(stack.broker.url, id);
    }
    if (!balanced(counts, consumers)) {
      recorder.alarm(`${label}: the assignment did not settle at ${PARTITIONS / STREAMS} partitions per stream within ${BALANCE_TIMEOUT_MS / 1000} s: ${JSON.stringify([...counts])}`);
    }
    const warmupRefused = sum(consumers, (c) => c.committer.failures);

    const meter = stackMeter(stack);
    const before = { commits: sum(consumers, (c) => c.committer.commits), events: sum(consumers, (c) => c.events), failures: warmupRefused, outdated: sum(consumers, (c) => c.committer.outdated) };
    const perStreamBefore = consumers.map((c) => c.committer.commits);
    const retriesBefore = connectionRetries.count;
    meter.start();
    const started = performance.now();
    await sleep(DURATION_SECONDS * 1000);
    const seconds = (performance.now() - started) / 1000;
    const commits = sum(consumers, (c) => c.committer.commits) - before.commits;
    const events = sum(consumers, (c) => c.events) - before.events;
    const refused = sum(consumers, (c) => c.committer.failures) - before.failures;
    const outdated = sum(consumers, (c) => c.committer.outdated) - before.outdated;
    const retried = connectionRetries.count - retriesBefore;
    const perStream = consumers.map((c, i) => (c.committer.commits - (perStreamBefore[i] ?? 0)) / seconds);
    const cpu = meter.stop();
    const ended = consumers.filter((c) => c.stream.lastDebug !== undefined && c.stream.lastDebug !== 'Stream started');

    recorder.log(
      `${label}: ${Math.round(commits / seconds)} commits/s, ${Math.round(events / seconds)} events/s over ${STREAMS} streams (per stream ${perStream.map((r) => Math.round(r)).join(', ')} commits/s); refused ${refused} (warm-up ${warmupRefused}), outdated ${outdated}`,
    );
    if (refused > 0) recorder.alarm(`${label}: ${refused} commits refused in the measured period; first refusal of the run: ${consumers.map((c) => c.committer.firstFailure).find((f) => f !== undefined) ?? ''}`);
    if (ended.length > 0) recorder.alarm(`${label}: ${ended.length} streams ended early: ${ended.map((c) => c.stream.lastDebug).join('; ')}`);
    const consumed = sum(consumers, (c) => c.events);
    if (consumed >= EVENTS * 0.9) recorder.alarm(`${label}: the streams consumed ${consumed} of ${EVENTS} published events: they may have run out (publish more)`);
    if (events === 0) recorder.alarm(`${label}: no event received in the measured period (streams stalled?)`);

    recorder.add(`${label}: commits/s`, Math.round(commits / seconds), 'commits/s');
    recorder.add(`${label}: events/s`, Math.round(events / seconds), 'events/s');
    recorder.add(`${label}: commits/s per stream, lowest`, Math.round(Math.min(...perStream)), 'commits/s');
    recorder.add(`${label}: commits/s per stream, highest`, Math.round(Math.max(...perStream)), 'commits/s');
    recorder.add(`${label}: commits refused (measured period)`, refused, 'requests', { op: '<=', value: 0 });
    recorder.add(`${label}: commits refused while the streams joined (warm-up)`, warmupRefused, 'requests');
    recorder.add(`${label}: commits answered "outdated"`, outdated, 'requests');
    recorder.add(`${label}: commits sent again (broker closed the kept-alive connection after a 204)`, retried, 'requests');
    recordCpu(recorder, `${label}: `, cpu);
  } finally {
    // Stop committing, let the batches on their way arrive, commit the last cursors, then leave: no
    // session stays open for its commit timeout.
    for (const c of consumers) c.committer.auto = false;
    await sleep(SETTLE_MS);
    await Promise.all(consumers.map((c) => c.committer.flush()));
    for (const c of consumers) c.stream.close();
  }
}

async function run(recorder: Recorder): Promise<void> {
  const stack = await startStack();
  try {
    await createEventType(stack.broker.url, businessEventType(EVENT_TYPE, SMALL_BUSINESS_SCHEMA, PARTITIONS));
    const started = performance.now();
    await publish(recorder, stack);
    recorder.log(`published ${EVENTS} events in ${((performance.now() - started) / 1000).toFixed(1)} s (not measured)`);
    for (const [i, point] of POINTS.entries()) await measurePoint(recorder, stack, i, point);
  } finally {
    await stack.stop(recorder);
  }
}

export const commits: Scenario = {
  name: 'commits',
  title: `commit throughput: ${STREAMS} streams over ${PARTITIONS} partitions of one subscription, every batch committed`,
  run,
};
