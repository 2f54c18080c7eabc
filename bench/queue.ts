/**
 * Scenario `queue`: queue-mode consumption (annotation `broker.io/consumption-mode: queue`, docs/consuming.md
 * "Queue mode") against stream mode. One event type with 4 partitions, 3,000,000 small events published
 * beforehand (quick mode 500,000); three points, each a fresh subscription read from `begin` with
 * `batch_limit` 100 and `max_uncommitted_events` 200, every stream committing every batch it receives at
 * once, in its own request (in queue mode a commit acknowledges exactly that batch): (1) stream mode, 4
 * streams (one partition each); (2) queue mode, 16 streams; (3) queue mode, 64 streams, all reading the
 * same 4 partitions. Per point the streams open at once, a warm-up (2 s, quick 1 s), then the measured
 * period (10 s, quick 3 s).
 *
 * Figures per point: acknowledged events/s (events whose commit was answered 204 or 200 within the
 * measured period, over its length), events received/s, acknowledged batches/s, per-stream lowest and
 * highest, refused commits, the Redis commands per acknowledged batch (every `calls` of `INFO
 * commandstats`, commands run by scripts included, `INFO` itself left out, over the period, divided by the
 * batches acknowledged in it) and CPU of the broker, redis-server and the bench process.
 *
 * Targets (same run): queue mode with 16 streams ≥ 0.5× stream mode with 4 streams (acknowledged
 * events/s: one request per 100 events, spread over more streams, costs at most half); queue mode with 64
 * streams ≥ 0.9× queue mode with 16 streams, i.e. "no worse than with 16": more streams on the same
 * partitions must not cost throughput, the 10 % allowing for run-to-run spread on a shared 2-core machine.
 *
 * The bench `Committer` does not say which of its commits were answered, so each stream commits through the
 * shared `CursorCommitter` (without coalescing) with a sender that counts the events of the acknowledged
 * batches.
 */
import { Redis } from 'ioredis';
import { CursorCommitter } from '../src/client/cursor-committer.js';
import { STREAM_ID_HEADER } from '../src/client/stream-client.js';
import { SMALL_BUSINESS_SCHEMA, businessEventType, prng, smallBusinessEvent } from './events.js';
import { createEventType, loadRequest, publishAll, recordCpu, round, sleep, stackMeter, startStack, type Recorder, type Scenario, type Stack } from './harness.js';
import { createSubscription, openStream, quickMode, request, type OpenStream, type StreamCursor } from './stream-client.js';

const QUICK = quickMode();
const EVENT_TYPE = 'bench.queue';
const PARTITIONS = 4;
/**
 * Events published beforehand: more than a point consumes (each reads from `begin`, queue mode on a busy
 * 2-core machine already ~50,000 events/s over warm-up and measured period), or the figures stop at the end.
 */
export const EVENTS = QUICK ? 500_000 : 3_000_000;
const PUBLISH_BATCH = 1000;
const PUBLISH_IN_FLIGHT = 4;
const DISTINCT_BODIES = 16;
export const WARMUP_SECONDS = QUICK ? 1 : 2;
export const DURATION_SECONDS = QUICK ? 3 : 10;
const BATCH_LIMIT = 100;
const MAX_UNCOMMITTED = 200;
/** After the consumers stop committing: time for the batches on their way to arrive before the last commits. */
const SETTLE_MS = 300;
const CONSUMPTION_MODE_ANNOTATION = 'broker.io/consumption-mode';
/** Target: queue mode with 16 streams ÷ stream mode with 4 streams (acknowledged events/s). */
const QUEUE_TO_STREAM_TARGET = 0.5;
/** Target: queue mode with 64 streams ÷ with 16 (acknowledged events/s): no worse, allowing run-to-run spread. */
const MORE_STREAMS_TARGET = 0.9;

type Mode = 'stream' | 'queue';

/** The measured points. */
export const POINTS: readonly { readonly mode: Mode; readonly streams: number }[] = [
  { mode: 'stream', streams: 4 },
  { mode: 'queue', streams: 16 },
  { mode: 'queue', streams: 64 },
];

/** What one consuming stream received and had acknowledged. */
interface Counts {
  /** Events received. */
  received: number;
  /** Events of batches whose commit was answered 204 or 200. */
  acked: number;
  /** Batches whose commit was answered 204 or 200. */
  ackedBatches: number;
  /** Set while leaving: batches are no longer committed as they arrive, their cursors kept in `late`. */
  leaving: boolean;
  readonly late: StreamCursor[];
}

/** One consuming stream with its committer. */
interface Consumer extends Counts {
  readonly stream: OpenStream;
  readonly committer: CursorCommitter;
}

async function publish(recorder: Recorder, stack: Stack): Promise<void> {
  const random = prng(11);
  const path = `/event-types/${EVENT_TYPE}/events`;
  const bodies = Array.from({ length: DISTINCT_BODIES }, () => loadRequest(path, Array.from({ length: PUBLISH_BATCH }, () => smallBusinessEvent(random))));
  await publishAll(recorder, stack.broker.url, bodies, EVENTS / PUBLISH_BATCH, PUBLISH_IN_FLIGHT);
}

/** A fresh subscription from `begin` in `mode` (queue mode: with the annotation). @returns its id */
async function subscribe(brokerUrl: string, application: string, mode: Mode): Promise<string> {
  if (mode === 'stream') return createSubscription(brokerUrl, application, EVENT_TYPE, 'begin');
  const body = { owning_application: application, event_types: [EVENT_TYPE], read_from: 'begin', annotations: { [CONSUMPTION_MODE_ANNOTATION]: 'queue' } };
  const { status, text } = await request('POST', `${brokerUrl}/subscriptions`, JSON.stringify(body));
  if (status !== 201) throw new Error(`POST /subscriptions (queue mode) answered ${status}: ${text.slice(0, 500)}`);
  return (JSON.parse(text) as { id: string }).id;
}

/** Opens a stream whose every batch is committed at once in its own request; counts what was acknowledged. */
async function openConsumer(url: string, commitUrl: string): Promise<Consumer> {
  const counts: Counts = { received: 0, acked: 0, ackedBatches: 0, leaving: false, late: [] };
  /** Events per batch, by the cursor object the committer is given. */
  const sizes = new WeakMap<StreamCursor, number>();
  let committer: CursorCommitter | undefined;
  const onOpen = (streamId: string | undefined): void => {
    if (streamId === undefined) return;
    const send = async (items: readonly StreamCursor[]): Promise<{ status: number; text: string }> => {
      const answer = await request('POST', commitUrl, JSON.stringify({ items }), { [STREAM_ID_HEADER]: streamId }, 'commits');
      if (answer.status === 204 || answer.status === 200) {
        counts.ackedBatches += items.length;
        for (const cursor of items) counts.acked += sizes.get(cursor) ?? 0;
      }
      return answer;
    };
    committer = new CursorCommitter(send, { coalesce: false });
  };
  const stream = await openStream(url, { onOpen }, (line) => {
    const count = line.events?.length ?? 0;
    if (count === 0) return;
    counts.received += count;
    sizes.set(line.cursor, count);
    if (counts.leaving) counts.late.push(line.cursor);
    else committer?.add(line.cursor);
  });
  if (committer === undefined) {
    stream.close();
    throw new Error('the subscription stream has no X-Broker-StreamId header');
  }
  return Object.assign(counts, { stream, committer });
}

/** Redis's `INFO commandstats` as command → calls, without `info` (the counting's own). */
async function commandCalls(client: Redis): Promise<Map<string, number>> {
  const calls = new Map<string, number>();
  for (const line of (await client.info('commandstats')).split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (match && match[1] !== 'info') calls.set(match[1] as string, Number(match[2]));
  }
  return calls;
}

const sum = <T>(items: readonly T[], of: (item: T) => number): number => items.reduce((s, item) => s + of(item), 0);

/** Measures one point. @returns its acknowledged events/s */
async function measurePoint(recorder: Recorder, stack: Stack, redis: Redis, index: number, point: (typeof POINTS)[number]): Promise<number> {
  const label = `${point.mode} mode, ${point.streams} streams`;
  const id = await subscribe(stack.broker.url, `bench-queue-${index}`, point.mode);
  const url = `${stack.broker.url}/subscriptions/${id}/events?batch_limit=${BATCH_LIMIT}&max_uncommitted_events=${MAX_UNCOMMITTED}&batch_flush_timeout=1`;
  const commitUrl = `${stack.broker.url}/subscriptions/${id}/cursors`;
  const consumers: Consumer[] = [];
  try {
    // All at once: one after the other, 64 streams take seconds to open while the first ones consume.
    const opened = await Promise.allSettled(Array.from({ length: point.streams }, () => openConsumer(url, commitUrl)));
    for (const result of opened) if (result.status === 'fulfilled') consumers.push(result.value);
    const failed = opened.find((result) => result.status === 'rejected');
    if (failed !== undefined) throw failed.reason instanceof Error ? failed.reason : new Error(String(failed.reason));
    await sleep(WARMUP_SECONDS * 1000);
    const warmupRefused = sum(consumers, (c) => c.committer.failures);

    const meter = stackMeter(stack);
    const callsBefore = await commandCalls(redis);
    const before = { received: sum(consumers, (c) => c.received), acked: sum(consumers, (c) => c.acked), batches: sum(consumers, (c) => c.ackedBatches) };
    const perStreamBefore = consumers.map((c) => c.acked);
    const outdatedBefore = sum(consumers, (c) => c.committer.outdated);
    meter.start();
    const started = performance.now();
    await sleep(DURATION_SECONDS * 1000);
    const seconds = (performance.now() - started) / 1000;
    const acked = sum(consumers, (c) => c.acked) - before.acked;
    const batches = sum(consumers, (c) => c.ackedBatches) - before.batches;
    const received = sum(consumers, (c) => c.received) - before.received;
    const refused = sum(consumers, (c) => c.committer.failures) - warmupRefused;
    const outdated = sum(consumers, (c) => c.committer.outdated) - outdatedBefore;
    const perStream = consumers.map((c, i) => (c.acked - (perStreamBefore[i] ?? 0)) / seconds);
    const cpu = meter.stop();
    const callsAfter = await commandCalls(redis);
    const byCommand = [...callsAfter].map(([name, calls]) => [name, calls - (callsBefore.get(name) ?? 0)] as const).filter(([, delta]) => delta > 0);
    const commands = sum(byCommand, ([, delta]) => delta);
    const perBatch = batches === 0 ? Number.NaN : commands / batches;
    const ended = consumers.filter((c) => c.stream.lastDebug !== undefined && c.stream.lastDebug !== 'Stream started');
    const idle = perStream.filter((r) => r === 0).length;

    recorder.log(
      `${label}: ${Math.round(acked / seconds)} acknowledged events/s (${Math.round(batches / seconds)} batches/s), ${Math.round(received / seconds)} received events/s; ` +
        `per stream ${Math.round(Math.min(...perStream))}–${Math.round(Math.max(...perStream))} events/s; refused ${refused} (warm-up ${warmupRefused}), outdated ${outdated}; ` +
        `${perBatch.toFixed(1)} Redis commands per batch (${byCommand.sort((a, b) => b[1] - a[1]).slice(0, 6).map(([name, delta]) => `${name} ${(delta / Math.max(batches, 1)).toFixed(2)}`).join(', ')})`,
    );
    const firstFailure = consumers.map((c) => c.committer.firstFailure).find((f) => f !== undefined);
    if (refused + warmupRefused > 0) recorder.alarm(`${label}: ${refused} commits refused in the measured period, ${warmupRefused} in the warm-up; first refusal: ${firstFailure ?? ''}`);
    if (ended.length > 0) recorder.alarm(`${label}: ${ended.length} streams ended early: ${ended.map((c) => c.stream.lastDebug).join('; ')}`);
    if (idle > 0) recorder.alarm(`${label}: ${idle} of ${point.streams} streams had no batch acknowledged in the measured period`);
    const consumed = sum(consumers, (c) => c.received);
    if (consumed >= EVENTS * 0.9) recorder.alarm(`${label}: the streams received ${consumed} of ${EVENTS} published events: they may have run out (publish more)`);
    if (acked === 0) recorder.alarm(`${label}: no batch acknowledged in the measured period (streams stalled?)`);

    recorder.add(`${label}: acknowledged events/s`, Math.round(acked / seconds), 'events/s');
    recorder.add(`${label}: received events/s`, Math.round(received / seconds), 'events/s');
    recorder.add(`${label}: acknowledged batches/s`, Math.round(batches / seconds), 'batches/s');
    recorder.add(`${label}: acknowledged events/s per stream, lowest`, Math.round(Math.min(...perStream)), 'events/s');
    recorder.add(`${label}: acknowledged events/s per stream, highest`, Math.round(Math.max(...perStream)), 'events/s');
    recorder.add(`${label}: commits refused (measured period)`, refused, 'requests', { op: '<=', value: 0 });
    recorder.add(`${label}: commits answered "outdated"`, outdated, 'requests');
    if (batches > 0) recorder.add(`${label}: Redis commands per acknowledged batch`, round(perBatch, 1), 'commands');
    recordCpu(recorder, `${label}: `, cpu);
    return acked / seconds;
  } finally {
    // Stop committing as batches arrive, let the batches on their way arrive, acknowledge each (in queue
    // mode a commit covers its own batch only), then leave: nothing stays held for its commit timeout.
    for (const c of consumers) c.leaving = true;
    await sleep(SETTLE_MS);
    await Promise.all(
      consumers.map(async (c) => {
        for (const cursor of c.late.splice(0)) c.committer.add(cursor);
        await c.committer.flush();
      }),
    );
    for (const c of consumers) c.stream.close();
  }
}

async function run(recorder: Recorder): Promise<void> {
  const stack = await startStack();
  const redis = new Redis(stack.redis.url, { maxRetriesPerRequest: 1 });
  try {
    await createEventType(stack.broker.url, businessEventType(EVENT_TYPE, SMALL_BUSINESS_SCHEMA, PARTITIONS));
    const started = performance.now();
    await publish(recorder, stack);
    recorder.log(`published ${EVENTS} events in ${((performance.now() - started) / 1000).toFixed(1)} s (not measured)`);
    const rates: number[] = [];
    for (const [i, point] of POINTS.entries()) rates.push(await measurePoint(recorder, stack, redis, i, point));
    const [stream4 = 0, queue16 = 0, queue64 = 0] = rates;
    // A ratio over a point that acknowledged nothing is not a number: recorded as 0 (MISSED), never NaN.
    const ratio = (of: number, to: number): number => (to > 0 ? round(of / to, 2) : 0);
    recorder.add('queue mode 16 streams / stream mode 4 streams (acknowledged events/s)', ratio(queue16, stream4), '×', { op: '>=', value: QUEUE_TO_STREAM_TARGET });
    recorder.add('queue mode 64 streams / queue mode 16 streams (acknowledged events/s)', ratio(queue64, queue16), '×', { op: '>=', value: MORE_STREAMS_TARGET });
  } finally {
    redis.disconnect();
    await stack.stop(recorder);
  }
}

export const queue: Scenario = {
  name: 'queue',
  title: `queue mode: ${PARTITIONS} partitions read by 16 and 64 queue-mode streams against 4 stream-mode streams, every batch (${BATCH_LIMIT} events) committed`,
  run,
};
