/**
 * Compression both ways, on one fresh Redis and broker node:
 * (a) ONE subscription stream of small business events (the `consume` scenario's ~150-byte events,
 *     published beforehand, not timed) read from `begin` three times, each time by a new subscription:
 *     without compression, with `Accept-Encoding: gzip` and with `Accept-Encoding: zstd`. The consumer
 *     decodes the body as it arrives, splits it into lines, `JSON.parse`s each and commits as a real
 *     client does (stream-client.ts). Per coding: events/s, bytes on the wire per event (everything
 *     read from the stream's socket: head, chunk framing, body), body bytes per event, and broker CPU
 *     per event (µs: CPU time of every thread of the broker process over the read, from /proc, divided
 *     by the events; commits the consumer sends are included, the same for every coding).
 * (b) Publishing 1000-event `bench.order` batches with autocannon (4 connections, 2 s warm-up, 10 s
 *     measured) with identity, gzip (zlib level 6) and zstd (level 3) bodies, compressed beforehand:
 *     events/s, body bytes per event, broker CPU per event (µs), latency p50/p99.
 */
import zlib from 'node:zlib';
import { compress as zstdCompress } from 'zstd-napi';
import { compactEvent, SCHEMA } from './consume.js';
import { businessEventType, ORDER_SCHEMA, orderEvent, prng } from './events.js';
import { createEventType, loadRequest, post, recordCpu, reportFailures, round, runBounded, runLoad, stackMeter, startStack, type CpuUse, type LoadRequest, type Recorder, type Scenario, type Stack } from './harness.js';
import { Committer, createSubscription, openStream, quickMode } from './stream-client.js';

const QUICK = quickMode();
const STREAM_EVENT_TYPE = 'bench.compress.stream';
const PUBLISH_EVENT_TYPE = 'bench.compress.publish';
const PARTITIONS = 4;
/** Events per published batch. */
const BATCH = 1000;
/** Events read by each stream (published beforehand): a multiple of BATCH × PARTITIONS. */
const EVENTS = QUICK ? 40_000 : 400_000;
/** `batch_limit` of the streams. */
const STREAM_BATCH_LIMIT = 100;
const MAX_UNCOMMITTED = 100_000;
const DISTINCT_BODIES = 16;
const PUBLISH_CONNECTIONS = 4;
const WARMUP_SECONDS = QUICK ? 1 : 2;
const DURATION_SECONDS = QUICK ? 3 : 10;
const READ_TIMEOUT_MS = 180_000;

type Coding = 'identity' | 'gzip' | 'zstd';
const CODINGS: readonly Coding[] = ['identity', 'gzip', 'zstd'];

/** Broker CPU time (all threads) per event in µs. */
function brokerMicrosPerEvent(cpu: CpuUse, events: number): number {
  const percent = (cpu.byLabel['broker main thread'] ?? 0) + (cpu.byLabel['broker other threads'] ?? 0);
  return ((percent / 100) * cpu.seconds * 1e6) / Math.max(1, events);
}

async function publishStreamEvents(recorder: Recorder, stack: Stack): Promise<void> {
  const random = prng(7);
  const path = `/event-types/${STREAM_EVENT_TYPE}/events`;
  const bodies = Array.from({ length: DISTINCT_BODIES }, (_, b) => loadRequest(path, Array.from({ length: BATCH }, () => compactEvent(random, b % PARTITIONS))));
  recorder.add('stream: event size (JSON as sent)', Math.round(bodies.reduce((s, b) => s + b.eventBytes, 0) / bodies.reduce((s, b) => s + b.events, 0)), 'bytes');
  await runBounded(EVENTS / BATCH, 4, async (i) => {
    const body = bodies[i % bodies.length];
    if (!body) return;
    const { status, text } = await post(stack.broker.url + path, body.body);
    if (status !== 200) throw new Error(`publish answered ${status}: ${text.slice(0, 600)}`);
  });
  recorder.add('stream: events published beforehand', EVENTS, 'events');
}

/** Reads every event with one subscription stream asking for `coding`. */
async function readStream(recorder: Recorder, stack: Stack, coding: Coding): Promise<{ events: number; wireBytes: number; bodyBytes: number }> {
  const id = await createSubscription(stack.broker.url, `bench-compress-${coding}`, STREAM_EVENT_TYPE, 'begin');
  const url = `${stack.broker.url}/subscriptions/${id}/events?batch_limit=${STREAM_BATCH_LIMIT}&max_uncommitted_events=${MAX_UNCOMMITTED}&batch_flush_timeout=1`;
  let events = 0;
  let lastEventAt = 0;
  let committer: Committer | undefined;
  let allReceived: () => void = () => undefined;
  const received = new Promise<void>((resolve) => (allReceived = resolve));
  const meter = stackMeter(stack);
  meter.start();
  const started = performance.now();
  const headers: Record<string, string> = coding === 'identity' ? {} : { 'Accept-Encoding': coding };
  const stream = await openStream(
    url,
    { headers, onOpen: (streamId) => (committer = streamId === undefined ? undefined : new Committer(`${stack.broker.url}/subscriptions/${id}/cursors`, streamId)) },
    (line) => {
      const count = line.events?.length ?? 0;
      if (count === 0) return;
      events += count;
      lastEventAt = performance.now();
      committer?.add(line.cursor);
      if (events >= EVENTS) allReceived();
    },
  );
  const label = `subscription stream, ${coding}`;
  if ((stream.contentEncoding ?? 'identity') !== coding) recorder.alarm(`${label}: answered with Content-Encoding ${String(stream.contentEncoding)}`);
  let timer: NodeJS.Timeout | undefined;
  const inTime = await Promise.race([received.then(() => true), stream.ended.then(() => false), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), READ_TIMEOUT_MS)))]);
  clearTimeout(timer);
  const cpu = meter.stop();
  const wireBytes = stream.wireBytes;
  const bodyBytes = stream.bytes;
  stream.close();
  await committer?.flush();
  if (!inTime) recorder.alarm(`${label}: received ${events} of ${EVENTS} events`);
  if ((committer?.failures ?? 0) > 0) recorder.alarm(`${label}: ${committer?.failures} commits refused; first: ${String(committer?.firstFailure)}`);
  const seconds = Math.max(1e-6, (lastEventAt - started) / 1000);
  recorder.log(`${label}: ${events} events in ${seconds.toFixed(2)} s, ${(wireBytes / events).toFixed(1)} wire bytes/event, ${brokerMicrosPerEvent(cpu, events).toFixed(2)} µs broker CPU/event`);
  recorder.add(`${label}: events received`, events, 'events', { op: '>=', value: EVENTS });
  recorder.add(`${label}: events/s`, Math.round(events / seconds), 'events/s');
  recorder.add(`${label}: bytes on the wire per event`, round(wireBytes / events, 1), 'bytes');
  recorder.add(`${label}: body bytes per event`, round(bodyBytes / events, 1), 'bytes');
  recorder.add(`${label}: broker CPU per event`, round(brokerMicrosPerEvent(cpu, events), 2), 'µs');
  recordCpu(recorder, `${label}: `, cpu);
  return { events, wireBytes, bodyBytes };
}

function encodeBody(coding: Coding, request: LoadRequest): LoadRequest {
  if (coding === 'identity') return request;
  const body = coding === 'gzip' ? zlib.gzipSync(request.body) : zstdCompress(request.body);
  return { ...request, body };
}

/** Publishes 1000-event batches with bodies in `coding`. */
async function publishLoad(recorder: Recorder, stack: Stack, coding: Coding, plain: readonly LoadRequest[]): Promise<void> {
  const requests = plain.map((r) => encodeBody(coding, r));
  const headers: Record<string, string> = coding === 'identity' ? {} : { 'Content-Encoding': coding };
  const url = stack.broker.url;
  await runLoad({ url, requests, connections: PUBLISH_CONNECTIONS, durationSeconds: WARMUP_SECONDS, headers });
  const meter = stackMeter(stack);
  meter.start();
  const result = await runLoad({ url, requests, connections: PUBLISH_CONNECTIONS, durationSeconds: DURATION_SECONDS, headers });
  const cpu = meter.stop();
  const label = `publish 1000-event batches, ${coding}`;
  reportFailures(recorder, label, result);
  const sentPerEvent = requests.reduce((s, r) => s + r.body.byteLength, 0) / requests.reduce((s, r) => s + r.events, 0);
  recorder.log(`${label}: ${Math.round(result.eventsPerSecond)} events/s, ${sentPerEvent.toFixed(1)} body bytes/event, ${brokerMicrosPerEvent(cpu, result.events).toFixed(2)} µs broker CPU/event, p50 ${result.latencyMs.p50.toFixed(1)} ms`);
  recorder.add(`${label}: events/s`, Math.round(result.eventsPerSecond), 'events/s');
  recorder.add(`${label}: body bytes per event (as sent)`, round(sentPerEvent, 1), 'bytes');
  recorder.add(`${label}: broker CPU per event`, round(brokerMicrosPerEvent(cpu, result.events), 2), 'µs');
  recorder.add(`${label}: latency p50`, round(result.latencyMs.p50, 2), 'ms');
  recorder.add(`${label}: latency p99`, round(result.latencyMs.p99, 2), 'ms');
  recorder.add(`${label}: non-2xx answers`, result.non2xx, 'answers', { op: '<=', value: 0 });
  recordCpu(recorder, `${label}: `, cpu);
}

async function run(recorder: Recorder): Promise<void> {
  if (EVENTS % (BATCH * PARTITIONS) !== 0) throw new Error('EVENTS must be a multiple of BATCH × PARTITIONS');
  const stack = await startStack();
  try {
    await createEventType(stack.broker.url, { ...businessEventType(STREAM_EVENT_TYPE, SCHEMA, PARTITIONS), partition_strategy: 'user_defined' });
    await createEventType(stack.broker.url, businessEventType(PUBLISH_EVENT_TYPE, ORDER_SCHEMA, PARTITIONS));
    await publishStreamEvents(recorder, stack);
    const readings = new Map<Coding, { events: number; wireBytes: number; bodyBytes: number }>();
    for (const coding of CODINGS) readings.set(coding, await readStream(recorder, stack, coding));
    const identity = readings.get('identity');
    for (const coding of ['gzip', 'zstd'] as const) {
      const reading = readings.get(coding);
      if (identity && reading) recorder.add(`subscription stream, ${coding}: wire bytes / identity wire bytes`, round(reading.wireBytes / reading.events / (identity.wireBytes / identity.events), 3), '×');
    }

    const random = prng(11);
    const plain = Array.from({ length: DISTINCT_BODIES }, () => loadRequest(`/event-types/${PUBLISH_EVENT_TYPE}/events`, Array.from({ length: BATCH }, () => orderEvent(random))));
    recorder.add('publish: event size (JSON as sent)', Math.round(plain.reduce((s, b) => s + b.eventBytes, 0) / plain.reduce((s, b) => s + b.events, 0)), 'bytes');
    for (const coding of CODINGS) await publishLoad(recorder, stack, coding, plain);
  } finally {
    await stack.stop(recorder);
  }
}

export const compression: Scenario = {
  name: 'compression',
  title: `compression: one subscription stream over ${EVENTS.toLocaleString('en')} small events with identity, gzip and zstd; publishing 1000-event batches with identity, gzip and zstd bodies`,
  run,
};
