/**
 * Scenario `consume`: streaming throughput of ONE consumer, `batch_limit` 1000, small
 * business events, published beforehand (not timed) in 1000-event batches:
 * (a) the low-level stream from BEGIN with `stream_limit` = every event;
 * (b) a subscription stream (`read_from: begin`, `max_uncommitted_events` 100000) whose consumer
 *     commits as a real client does, without waiting for its commits (stream-client.ts `Committer`);
 * (c) subscription streams gated by commits (`max_uncommitted_events` 10 × `batch_limit`), as production consumers read,
 *     read once by a consumer that `JSON.parse`s every line and once by one that does the baseline's
 *     work (decodes and frames each line, parses the cursor, leaves the events as text);
 * and, in the same run on the same data, the baseline: Redis alone, `XRANGE` of the partition logs
 * with ioredis, entries split into events as `PartitionStore.read` does.
 * Except in (c)'s second read, the consumer splits the body on "\n" and `JSON.parse`s every line, so
 * its figures include that client cost, on the same 2 cores as the broker and Redis.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { decodeEntry } from '../src/domain/batch/entry-codec.js';
import { businessEventType, prng } from './events.js';
import { MB, createEventType, keysMatching, loadRequest, publishAll, recordCpu, round, startStack, stackMeter, type CpuUse, type LoadRequest, type Recorder, type Scenario, type Stack } from './harness.js';
import { Committer, connectionRetries, createSubscription, openStream, quickMode, type StreamLine } from './stream-client.js';

const QUICK = quickMode();
const EVENT_TYPE = 'bench.consume';
/** Partitions; every published batch goes to one partition (`user_defined`), round-robin. */
const PARTITIONS = 4;
/** Events per published batch, and `batch_limit` of the streams. */
const BATCH = 1000;
/** Events published beforehand: a multiple of BATCH × PARTITIONS, so every partition holds whole batches (quick: more than one read of `consumption.readEntries` 64 entries per partition). */
export const EVENTS = QUICK ? 280_000 : 1_000_000;
const PUBLISH_IN_FLIGHT = 4;
/** Distinct bodies rotated while publishing (a multiple of PARTITIONS). */
const DISTINCT_BODIES = 16;
/** `max_uncommitted_events` of the subscription stream: large enough that commits never gate it. */
const MAX_UNCOMMITTED = 100_000;
/** `max_uncommitted_events` of the gated points: 10 × `batch_limit`, so commits gate the stream as in production. */
const GATED_MAX_UNCOMMITTED = 10 * BATCH;
/** Target ratio of the gated points: stream MB/s ÷ the baseline's MB/s of event JSON. */
const GATED_TARGET_RATIO = 0.5;
/** Entries per XRANGE of the baseline: the broker's `consumption.readEntries` default. */
const XRANGE_COUNT = 64;
/** Target: events/s of one consumer. */
const TARGET_EVENTS_PER_SECOND = 300_000;
/** The broker's default `redis.keyPrefix`. */
const KEY_PREFIX = 'broker:';
/** How long the subscription stream may take to close after the last commit. */
const STREAM_END_TIMEOUT_MS = 15_000;
/** How long reading every event may take before the stream counts as stalled (closed, figures kept). */
const READ_TIMEOUT_MS = 180_000;

/** Waits for `promise` at most `ms`. @returns whether it settled in time */
async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The business fields of the event (the broker defines `metadata`). */
export const SCHEMA = {
  type: 'object',
  properties: { kind: { type: 'string' }, user: { type: 'string' }, n: { type: 'integer' } },
  required: ['kind', 'n'],
} as const;

/** About 150 bytes as sent: business metadata (eid, occurred_at, partition) and three fields. */
export function compactEvent(random: () => number, partition: number): object {
  return {
    metadata: { eid: randomUUID(), occurred_at: new Date().toISOString(), partition: String(partition) },
    kind: 'page_view',
    user: `u-${Math.floor(random() * 1e6)}`,
    n: Math.floor(random() * 1000),
  };
}

/** What one read of every event measured. */
interface Reading {
  readonly events: number;
  readonly bytes: number;
  readonly seconds: number;
  readonly cpu: CpuUse;
}

/** Publishes EVENTS events in BATCH-event batches, batch i to partition i mod PARTITIONS. */
async function publish(recorder: Recorder, stack: Stack): Promise<void> {
  const random = prng(5);
  const path = `/event-types/${EVENT_TYPE}/events`;
  const bodies: LoadRequest[] = Array.from({ length: DISTINCT_BODIES }, (_, b) => loadRequest(path, Array.from({ length: BATCH }, () => compactEvent(random, b % PARTITIONS))));
  recorder.add('event size (JSON as sent)', Math.round(bodies.reduce((s, b) => s + b.eventBytes, 0) / bodies.reduce((s, b) => s + b.events, 0)), 'bytes');
  const started = performance.now();
  await publishAll(recorder, stack.broker.url, bodies, EVENTS / BATCH, PUBLISH_IN_FLIGHT);
  const seconds = (performance.now() - started) / 1000;
  recorder.log(`published ${EVENTS} events in ${seconds.toFixed(1)} s (${Math.round(EVENTS / seconds)} events/s, not measured)`);
}

/** Checks what Redis holds, and reads the stored event size. @returns the partition log keys */
async function inspect(recorder: Recorder, client: Redis): Promise<string[]> {
  const metas = await keysMatching(client, `${KEY_PREFIX}{et:${EVENT_TYPE}:*}*:meta`);
  let stored = 0;
  for (const key of metas) stored += Number((await client.hget(key, 'next')) ?? 0);
  if (stored !== EVENTS) throw new Error(`Redis holds ${stored} events, expected ${EVENTS}`);
  const logs = await keysMatching(client, `${KEY_PREFIX}{et:${EVENT_TYPE}:*}*:log`);
  if (logs.length !== PARTITIONS) throw new Error(`expected ${PARTITIONS} partition logs, found ${logs.length}`);
  const first = logs[0] ?? '';
  const [entry] = await client.xrangeBuffer(first, '-', '+', 'COUNT', 1);
  const data = decodeEntry(entry?.[1][2] ?? 'd', entry?.[1][3] ?? Buffer.alloc(0));
  const count = Number(entry?.[1][1]?.toString() ?? 0);
  if (count === 0) throw new Error('unexpected stream entry layout');
  recorder.add('event size (JSON as stored and delivered, enriched)', Math.round((Buffer.byteLength(data) - (count - 1)) / count), 'bytes');
  return logs;
}

/**
 * Baseline: every partition log read with XRANGE, XRANGE_COUNT entries per call, the partitions
 * concurrently on one connection (as the broker reads), each entry split into events like
 * `PartitionStore.read` (compressed entries decompressed as it does). Bytes are the events' JSON texts.
 */
async function xrangeBaseline(client: Redis, logs: readonly string[], stack: Stack): Promise<Reading> {
  const readAll = async (key: string, maxCalls: number): Promise<{ events: number; bytes: number }> => {
    let events = 0;
    let bytes = 0;
    let start = '-';
    for (let call = 0; call < maxCalls; call++) {
      const entries = await client.xrangeBuffer(key, start, '+', 'COUNT', XRANGE_COUNT);
      if (entries.length === 0) break;
      const slice: string[] = [];
      for (const [id, fields] of entries) {
        for (const text of decodeEntry(fields[2] ?? 'd', fields[3] ?? Buffer.alloc(0)).toString().split('\n')) {
          bytes += text.length;
          slice.push(text);
        }
        start = `(${id.toString()}`;
      }
      events += slice.length;
    }
    return { events, bytes };
  };
  await Promise.all(logs.map((key) => readAll(key, 2))); // warm-up: JIT and connection
  const meter = stackMeter(stack);
  meter.start();
  const started = performance.now();
  const results = await Promise.all(logs.map((key) => readAll(key, Number.POSITIVE_INFINITY)));
  const seconds = (performance.now() - started) / 1000;
  const cpu = meter.stop();
  return { events: results.reduce((s, r) => s + r.events, 0), bytes: results.reduce((s, r) => s + r.bytes, 0), seconds, cpu };
}

/** The number of a wire offset `001-<timeline>-<18 digits>` (`-1` stands for before the first event). */
function offsetNumber(offset: string): number {
  return offset === '-1' ? -1 : Number(offset.slice(offset.lastIndexOf('-') + 1));
}

/** Per-partition bookkeeping of a stream: events and the last offset seen (must reach the end). */
class Tally {
  events = 0;
  lastEventAt = 0;
  outOfOrder = 0;
  private readonly lastOffset = new Map<string, string>();

  take(line: StreamLine): number {
    const previous = this.lastOffset.get(line.cursor.partition);
    // Offsets are dense and every stream here starts at BEGIN (offset 0): a batch whose events were left
    // as text holds its cursor's offset minus the partition's previous one.
    const count = line.events?.length ?? (line.eventsText !== undefined ? offsetNumber(line.cursor.offset) - offsetNumber(previous ?? '-1') : 0);
    if (count === 0) return 0;
    if (previous !== undefined && line.cursor.offset <= previous) this.outOfOrder += 1;
    this.lastOffset.set(line.cursor.partition, line.cursor.offset);
    this.events += count;
    this.lastEventAt = performance.now();
    return count;
  }

  /** Partitions whose last offset is not the partition's last event. */
  incomplete(): string[] {
    const last = EVENTS / PARTITIONS - 1;
    const out: string[] = [];
    for (let p = 0; p < PARTITIONS; p++) {
      const offset = this.lastOffset.get(String(p)) ?? '';
      if (Number(offset.slice(offset.lastIndexOf('-') + 1)) !== last || offset.endsWith('--1')) out.push(`${p}: ${offset || 'nothing'}`);
    }
    return out;
  }
}

function checkTally(recorder: Recorder, label: string, tally: Tally): void {
  if (tally.events !== EVENTS) recorder.alarm(`${label}: received ${tally.events} events, expected ${EVENTS}`);
  if (tally.outOfOrder > 0) recorder.alarm(`${label}: ${tally.outOfOrder} batches did not advance their partition's offset`);
  const incomplete = tally.incomplete();
  if (incomplete.length > 0) recorder.alarm(`${label}: partitions not read to their end: ${incomplete.join('; ')}`);
  recorder.add(`${label}: events received`, tally.events, 'events', { op: '>=', value: EVENTS });
}

/** (a) The low-level stream from BEGIN on every partition, `stream_limit` = every event. */
async function lowLevel(recorder: Recorder, stack: Stack): Promise<Reading> {
  const cursors = JSON.stringify(Array.from({ length: PARTITIONS }, (_, p) => ({ partition: String(p), offset: 'BEGIN' })));
  const url = `${stack.broker.url}/event-types/${EVENT_TYPE}/events?batch_limit=${BATCH}&stream_limit=${EVENTS}&batch_flush_timeout=1`;
  const tally = new Tally();
  const meter = stackMeter(stack);
  meter.start();
  const started = performance.now();
  const stream = await openStream(url, { headers: { 'X-Broker-Cursors': cursors } }, (line) => void tally.take(line));
  if (!(await within(stream.ended, READ_TIMEOUT_MS))) {
    recorder.alarm(`low-level stream: not ended ${READ_TIMEOUT_MS / 1000} s after it started (stream_limit ${EVENTS}); ${tally.events} events received; closing it`);
    stream.close();
  }
  const cpu = meter.stop();
  const seconds = (tally.lastEventAt - started) / 1000;
  checkTally(recorder, 'low-level stream', tally);
  return { events: tally.events, bytes: stream.bytes, seconds, cpu };
}

/** One subscription stream point: its label, `max_uncommitted_events`, and how the consumer reads the events. */
interface SubscriptionPoint {
  readonly label: string;
  readonly maxUncommitted: number;
  /** `parse`: every line `JSON.parse`d, as a client that uses each event; `text`: the events left as text, as the XRANGE baseline reads Redis. */
  readonly events: 'parse' | 'text';
}

/** (b) A subscription stream from `begin`; the consumer commits without waiting (one commit in flight, the latest cursors). */
async function subscription(recorder: Recorder, stack: Stack, point: SubscriptionPoint): Promise<Reading> {
  const label = point.label;
  const id = await createSubscription(stack.broker.url, `bench-consume-${point.maxUncommitted}-${point.events}`, EVENT_TYPE, 'begin');
  const url = `${stack.broker.url}/subscriptions/${id}/events?batch_limit=${BATCH}&max_uncommitted_events=${point.maxUncommitted}&stream_limit=${EVENTS}&batch_flush_timeout=1`;
  const tally = new Tally();
  const retriesBefore = connectionRetries.count;
  let committer: Committer | undefined;
  let allReceived: () => void = () => undefined;
  const received = new Promise<void>((resolve) => (allReceived = resolve));
  const meter = stackMeter(stack);
  meter.start();
  const started = performance.now();
  const commitUrl = `${stack.broker.url}/subscriptions/${id}/cursors`;
  const onOpen = (streamId: string | undefined): void => {
    if (streamId !== undefined) committer = new Committer(commitUrl, streamId);
  };
  const stream = await openStream(url, { onOpen, events: point.events }, (line) => {
    if (tally.take(line) === 0) return;
    committer?.add(line.cursor);
    if (tally.events >= EVENTS) allReceived();
  });
  if (committer === undefined) throw new Error('the subscription stream has no X-Broker-StreamId header');
  if (!(await within(Promise.race([received, stream.ended]), READ_TIMEOUT_MS))) {
    recorder.alarm(`${label}: not every event received ${READ_TIMEOUT_MS / 1000} s after it started; ${tally.events} events received`);
  }
  const cpu = meter.stop();
  const seconds = (tally.lastEventAt - started) / 1000;
  await committer.flush();

  // With stream_limit = every event, the broker ends the stream once everything is committed.
  const ended = await within(stream.ended, STREAM_END_TIMEOUT_MS);
  const expected = `Stream limit in events reached: ${EVENTS}`;
  if (!ended) {
    recorder.alarm(`${label}: not closed ${STREAM_END_TIMEOUT_MS / 1000} s after every event was received and committed (stream_limit ${EVENTS}); last info.debug: ${String(stream.lastDebug)}`);
    stream.close();
  } else if (stream.lastDebug !== expected) {
    recorder.alarm(`${label} ended with info.debug ${JSON.stringify(stream.lastDebug)}, expected ${JSON.stringify(expected)}`);
  }
  checkTally(recorder, label, tally);
  recorder.add(`${label}: commit requests`, committer.commits, 'requests');
  recorder.add(`${label}: commits refused`, committer.failures, 'requests', { op: '<=', value: 0 });
  recorder.add(`${label}: commits sent again (broker closed the kept-alive connection after a 204)`, connectionRetries.count - retriesBefore, 'requests');
  if (committer.failures > 0) recorder.alarm(`${label}: ${committer.failures} commits refused; first: ${String(committer.firstFailure)}`);
  if (committer.outdated > 0) recorder.alarm(`${label}: ${committer.outdated} commits answered "outdated" (one commit in flight at a time: should not happen)`);
  recorder.add(`${label}: closed after the last commit (stream_limit)`, ended && stream.lastDebug === expected ? 1 : 0, 'yes = 1', { op: '>=', value: 1 });
  return { events: tally.events, bytes: stream.bytes, seconds, cpu };
}

function report(recorder: Recorder, label: string, reading: Reading, bytesLabel: string, target: boolean, baseline?: Reading): void {
  const seconds = Math.max(reading.seconds, 1e-6);
  const perSecond = reading.events / seconds;
  const mbps = reading.bytes / MB / seconds;
  recorder.log(`${label}: ${reading.events} events in ${reading.seconds.toFixed(2)} s: ${Math.round(perSecond)} events/s, ${mbps.toFixed(1)} MB/s`);
  recorder.add(`${label}: events/s`, Math.round(perSecond), 'events/s', target ? { op: '>=', value: TARGET_EVENTS_PER_SECOND } : undefined);
  recorder.add(`${label}: MB/s (${bytesLabel})`, round(mbps, 1), 'MB/s');
  if (baseline) recorder.add(`${label} / redis alone XRANGE (events/s)`, round(perSecond / (baseline.events / baseline.seconds), 2), '×');
  recordCpu(recorder, `${label}: `, reading.cpu);
}

async function run(recorder: Recorder): Promise<void> {
  if (EVENTS % (BATCH * PARTITIONS) !== 0) throw new Error('EVENTS must be a multiple of BATCH × PARTITIONS');
  const stack = await startStack();
  const client = new Redis(stack.redis.url, { maxRetriesPerRequest: 1 });
  try {
    await createEventType(stack.broker.url, { ...businessEventType(EVENT_TYPE, SCHEMA, PARTITIONS), partition_strategy: 'user_defined' });
    await publish(recorder, stack);
    const logs = await inspect(recorder, client);
    recorder.add('events published beforehand', EVENTS, 'events');

    const baseline = await xrangeBaseline(client, logs, stack);
    if (baseline.events !== EVENTS) recorder.alarm(`redis alone XRANGE read ${baseline.events} events, expected ${EVENTS}`);
    report(recorder, 'redis alone XRANGE', baseline, 'event JSON', false);

    const low = await lowLevel(recorder, stack);
    report(recorder, 'low-level stream', low, 'stream body', true, baseline);

    const sub = await subscription(recorder, stack, { label: 'subscription stream', maxUncommitted: MAX_UNCOMMITTED, events: 'parse' });
    report(recorder, 'subscription stream', sub, 'stream body', true, baseline);

    // Commits gate the stream as in production (max_uncommitted_events 10 × batch_limit).
    // Target: >= 1,000,000 events/s or >= 0.5 x the baseline's MB/s, with a consumer that does the
    // baseline's work (decode, frame, leave the events as text); the parsing consumer shows what a client
    // that JSON.parses every event adds.
    for (const events of ['parse', 'text'] as const) {
      const label = `subscription stream, max_uncommitted_events ${GATED_MAX_UNCOMMITTED}, events ${events === 'parse' ? 'parsed' : 'left as text'}`;
      const gated = await subscription(recorder, stack, { label, maxUncommitted: GATED_MAX_UNCOMMITTED, events });
      report(recorder, label, gated, 'stream body', false, baseline);
      const ratio = gated.bytes / Math.max(gated.seconds, 1e-6) / (baseline.bytes / Math.max(baseline.seconds, 1e-6));
      recorder.add(`${label} / redis alone XRANGE (MB/s)`, round(ratio, 2), '×', events === 'text' ? { op: '>=', value: GATED_TARGET_RATIO } : undefined);
    }
  } finally {
    client.disconnect();
    await stack.stop(recorder);
  }
}

export const consume: Scenario = {
  name: 'consume',
  title: `one consumer, batch_limit ${BATCH}: low-level and subscription stream over ${EVENTS.toLocaleString('en')} small events, with a Redis XRANGE baseline`,
  run,
};
