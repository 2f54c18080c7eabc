/**
 * Scenario `end-to-end`: latency from publish to delivery on a subscription
 * stream, at two points. 1,000 events/s: one producer publishes single-event batches on a 1 ms timer.
 * 20,000 events/s: the same producer publishes 20-event batches at 1,000 requests/s (single-event
 * requests that fast are beyond what one node takes on the 2-core bench machine, about 8,500 requests/s).
 * Each event carries its send time (`performance.now()` of this process) in `sent_at`; one subscription
 * stream (`batch_limit` 1: a partial batch waits for `batch_flush_timeout`, at least 1 s) receives them
 * in this same process, which takes `performance.now()` on receipt. The consumer commits as a real
 * client does, without waiting (stream-client.ts `Committer`). Events sent during the warm-up are not
 * counted.
 *
 * Where the tail goes: a probe preloaded into the broker (broker-probe.ts) reports its
 * GC pauses and event loop delay over the measured period; this process watches its own; and the
 * slowest 1 % of events are split at the broker's `received_at` (ms resolution) into the time before
 * the broker took the request and the time from there to delivery, and matched with the GC pauses and
 * the stalls of this process's loop that overlap them.
 */
import { randomUUID } from 'node:crypto';
import { constants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { BrokerProbe, type GcPause, type ProbeMark } from './broker-probe.js';
import { businessEventType } from './events.js';
import { createEventType, recordCpu, round, sleep, startStack, stackMeter, type Recorder, type Scenario, type Stack } from './harness.js';
import { Committer, connectionRetries, createSubscription, openStream, percentile, quickMode, request } from './stream-client.js';

const QUICK = quickMode();
const PARTITIONS = 4;
/** Events per second of the first point, one event per request. */
export const RATE = 1000;
export const WARMUP_SECONDS = QUICK ? 1 : 3;
export const DURATION_SECONDS = QUICK ? 3 : 12;
/** How long to wait for the last events after the producer stopped. */
const DRAIN_TIMEOUT_MS = 5000;
/**
 * `max_uncommitted_events`, both points: far above what the committing consumer leaves uncommitted at
 * 1,000 events/s; at 20,000 events/s it gates the stream once a commit takes 50 ms to come back to it.
 */
const MAX_UNCOMMITTED = 1000;
/**
 * A gap between two producer ticks (1 ms timer), or a GC pause of this process, this long or longer
 * counts as a stall of its loop (with 2 ms every tail event met one: a 1 ms timer often fires 1–2 ms late).
 */
const STALL_MS = 5;

const SCHEMA = {
  type: 'object',
  properties: { n: { type: 'integer' }, sent_at: { type: 'number' } },
  required: ['n', 'sent_at'],
} as const;

/** One measured point: a rate, how many events each publish carries, and the target of its p99. */
interface Point {
  /** Prefix of the point's metric names ('' for the first point: its names predate the second). */
  readonly prefix: string;
  readonly eventType: string;
  readonly owningApplication: string;
  readonly eventsPerSecond: number;
  readonly eventsPerRequest: number;
  /** Target of the p99 publish-to-delivery latency (ms). */
  readonly targetP99Ms: number;
}

const POINTS: readonly Point[] = [
  { prefix: '', eventType: 'bench.e2e', owningApplication: 'bench-e2e', eventsPerSecond: RATE, eventsPerRequest: 1, targetP99Ms: 5 },
  { prefix: '20,000 events/s (20 per request): ', eventType: 'bench.e2e-20k', owningApplication: 'bench-e2e-20k', eventsPerSecond: 20_000, eventsPerRequest: 20, targetP99Ms: 20 },
];

/** `n`, `sent_at` and `metadata.received_at` (ms since the epoch, NaN without) of a delivered event, or undefined when it has not `n` and `sent_at`. */
function stampOf(event: unknown): { n: number; sentAt: number; receivedAt: number } | undefined {
  if (typeof event !== 'object' || event === null) return undefined;
  const { n, sent_at: sentAt, metadata } = event as { n?: unknown; sent_at?: unknown; metadata?: { received_at?: unknown } };
  if (typeof n !== 'number' || typeof sentAt !== 'number') return undefined;
  const received = metadata?.received_at;
  return { n, sentAt, receivedAt: typeof received === 'string' ? Date.parse(received) : Number.NaN };
}

/** An interval of this process's clock (`performance.now()` ms). */
interface Span {
  readonly from: number;
  readonly to: number;
}

/** Sum of the parts of `spans` (sorted by `from`) that fall within [from, to]. */
function overlap(spans: readonly Span[], from: number, to: number): number {
  let total = 0;
  for (const s of spans) {
    if (s.from > to) break;
    total += Math.max(0, Math.min(to, s.to) - Math.max(from, s.from));
  }
  return total;
}

/** The `p`th percentile of unsorted values, rounded to 2 decimals. */
function percentileOf(values: readonly number[], p: number): number {
  return round(percentile(Float64Array.from(values).sort(), p), 2);
}

async function run(recorder: Recorder): Promise<void> {
  const probe = new BrokerProbe();
  const stack = await startStack(probe.env());
  try {
    for (const point of POINTS) await measure(recorder, stack, probe, point);
  } finally {
    await stack.stop(recorder);
    probe.remove();
  }
}

async function measure(recorder: Recorder, stack: Stack, probe: BrokerProbe, point: Point): Promise<void> {
  const { prefix, eventType, eventsPerSecond, eventsPerRequest } = point;
  const requestsPerSecond = eventsPerSecond / eventsPerRequest;
  const totalRequests = requestsPerSecond * (WARMUP_SECONDS + DURATION_SECONDS);
  const total = totalRequests * eventsPerRequest;
  // Per event n: delivery latency (NaN until delivered), when it was delivered and when the broker received it.
  const latency = new Float64Array(total).fill(Number.NaN);
  const deliveredAt = new Float64Array(total).fill(Number.NaN);
  const receivedAt = new Float64Array(total).fill(Number.NaN);
  // Per request r (events r·eventsPerRequest …): send time and publish answer time, and whether it was answered 200.
  const sentAt = new Float64Array(totalRequests).fill(Number.NaN);
  const answeredAt = new Float64Array(totalRequests).fill(Number.NaN);
  const published = new Uint8Array(totalRequests);
  const publishMs: number[] = [];
  let duplicates = 0;
  let unexpected = 0;
  let publishFailures = 0;
  let firstPublishFailure: string | undefined;
  const retriesBefore = connectionRetries.count;
  // This process: its loop delay and GC pauses over the measured period, and the producer's stalls.
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  const benchGc: Span[] = [];
  const gcObserver = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) benchGc.push({ from: entry.startTime, to: entry.startTime + entry.duration });
  });
  const stalls: Span[] = [];

  await createEventType(stack.broker.url, businessEventType(eventType, SCHEMA, PARTITIONS));
  const id = await createSubscription(stack.broker.url, point.owningApplication, eventType, 'begin');
  const url = `${stack.broker.url}/subscriptions/${id}/events?batch_limit=1&max_uncommitted_events=${MAX_UNCOMMITTED}&batch_flush_timeout=1`;
  let committer: Committer | undefined;
  let delivered = 0;
  let allDelivered: (() => void) | undefined;
  let expected = Number.POSITIVE_INFINITY;
  const onOpen = (streamId: string | undefined): void => {
    if (streamId !== undefined) committer = new Committer(`${stack.broker.url}/subscriptions/${id}/cursors`, streamId);
  };
  const stream = await openStream(url, { onOpen }, (line) => {
    if (!line.events || line.events.length === 0) return;
    const at = performance.now();
    for (const event of line.events) {
      const stamp = stampOf(event);
      if (!stamp || stamp.n < 0 || stamp.n >= total) {
        unexpected += 1;
        continue;
      }
      if (!Number.isNaN(latency[stamp.n] ?? 0)) duplicates += 1;
      else {
        latency[stamp.n] = at - stamp.sentAt;
        deliveredAt[stamp.n] = at;
        receivedAt[stamp.n] = stamp.receivedAt;
        delivered += 1;
      }
    }
    committer?.add(line.cursor);
    if (delivered >= expected) allDelivered?.();
  });
  if (committer === undefined) throw new Error('the subscription stream has no X-Broker-StreamId header');

  // The producer: every ms, the requests due by now at requestsPerSecond (not awaited), each with eventsPerRequest events.
  const inFlight = new Set<Promise<void>>();
  const publish = (r: number): void => {
    const sent = performance.now();
    sentAt[r] = sent;
    const occurredAt = new Date().toISOString();
    const events = Array.from({ length: eventsPerRequest }, (_, i) => ({ metadata: { eid: randomUUID(), occurred_at: occurredAt }, n: r * eventsPerRequest + i, sent_at: sent }));
    const sending = request('POST', `${stack.broker.url}/event-types/${eventType}/events`, JSON.stringify(events)).then(
      ({ status, text }) => {
        const at = performance.now();
        answeredAt[r] = at;
        publishMs.push(at - sent);
        if (status === 200) published[r] = 1;
        else {
          publishFailures += 1;
          firstPublishFailure ??= `${status} ${text.slice(0, 500)}`;
        }
      },
      (err: unknown) => {
        publishFailures += 1;
        firstPublishFailure ??= err instanceof Error ? err.message : String(err);
      },
    );
    const tracked = sending.finally(() => inFlight.delete(tracked));
    inFlight.add(tracked);
  };
  const warmupRequests = requestsPerSecond * WARMUP_SECONDS;
  const meter = stackMeter(stack);
  const started = performance.now();
  let next = 0;
  let measuring = false;
  let measuredFrom = Number.NaN;
  let lastTick = started;
  let startMark: Promise<ProbeMark> | undefined;
  while (next < totalRequests) {
    const tick = performance.now();
    if (measuring && tick - lastTick >= STALL_MS) stalls.push({ from: lastTick, to: tick });
    lastTick = tick;
    const due = Math.min(totalRequests, Math.floor(((tick - started) / 1000) * requestsPerSecond));
    while (next < due) {
      if (next === warmupRequests && !measuring) {
        measuring = true;
        measuredFrom = performance.now();
        meter.start();
        // The request goes at once; its answer is awaited after the producer stopped.
        startMark = probe.mark();
        loopDelay.enable();
        gcObserver.observe({ entryTypes: ['gc'] });
        publishMs.length = 0;
      }
      publish(next++);
    }
    await sleep(1);
  }
  await Promise.all(inFlight);
  const cpu = meter.stop();
  await startMark;
  const brokerMark = await probe.mark();
  loopDelay.disable();
  gcObserver.disconnect();
  const publishSeconds = (performance.now() - started) / 1000;

  // Wait for the events still on their way.
  let accepted = 0;
  for (const flag of published) accepted += flag;
  expected = accepted * eventsPerRequest;
  if (delivered < expected) {
    const arrived = new Promise<void>((resolve) => (allDelivered = resolve));
    await Promise.race([arrived, sleep(DRAIN_TIMEOUT_MS), stream.ended]);
  }
  await committer.flush();
  stream.close();

  // Figures over the events published after the warm-up.
  const measured: number[] = [];
  const measuredEvents: number[] = [];
  let missing = 0;
  for (let n = warmupRequests * eventsPerRequest; n < total; n++) {
    if (published[Math.floor(n / eventsPerRequest)] !== 1) continue;
    const value = latency[n] ?? Number.NaN;
    if (Number.isNaN(value)) missing += 1;
    else {
      measured.push(value);
      measuredEvents.push(n);
    }
  }
  const sorted = Float64Array.from(measured).sort();
  const publishSorted = Float64Array.from(publishMs).sort();
  const p = (q: number) => round(percentile(sorted, q), 2);
  const rateText = eventsPerRequest === 1 ? `${eventsPerSecond} events/s` : `${eventsPerSecond} events/s (${eventsPerRequest} per request)`;
  recorder.log(
    `${rateText} for ${WARMUP_SECONDS} + ${DURATION_SECONDS} s (${publishSeconds.toFixed(1)} s): ${measured.length} events measured, p50 ${p(50)} ms, p99 ${p(99)} ms, max ${p(100)} ms; ${missing} not delivered, ${duplicates} duplicates, ${publishFailures} publish failures`,
  );
  if (publishFailures > 0) recorder.alarm(`${prefix}${publishFailures} publishes failed; first: ${String(firstPublishFailure)}`);
  if (missing > 0) recorder.alarm(`${prefix}${missing} published events were not delivered within ${DRAIN_TIMEOUT_MS / 1000} s after the producer stopped`);
  if (duplicates > 0 || unexpected > 0) recorder.alarm(`${prefix}${duplicates} events delivered twice, ${unexpected} events not from this run`);
  if (committer.failures > 0) recorder.alarm(`${prefix}${committer.failures} commits refused; first: ${String(committer.firstFailure)}`);

  recorder.add(`${prefix}events measured (after warm-up)`, measured.length, 'events');
  recorder.add(`${prefix}publish-to-delivery latency p50`, p(50), 'ms');
  recorder.add(`${prefix}publish-to-delivery latency p90`, p(90), 'ms');
  recorder.add(`${prefix}publish-to-delivery latency p99`, p(99), 'ms', { op: '<', value: point.targetP99Ms });
  recorder.add(`${prefix}publish-to-delivery latency p99.9`, p(99.9), 'ms');
  recorder.add(`${prefix}publish-to-delivery latency max`, p(100), 'ms');
  recorder.add(`${prefix}publish request latency p50`, round(percentile(publishSorted, 50), 2), 'ms');
  recorder.add(`${prefix}publish request latency p99`, round(percentile(publishSorted, 99), 2), 'ms');
  recorder.add(`${prefix}publish failures`, publishFailures, 'requests', { op: '<=', value: 0 });
  recorder.add(`${prefix}events not delivered`, missing, 'events', { op: '<=', value: 0 });
  recorder.add(`${prefix}events delivered twice`, duplicates, 'events', { op: '<=', value: 0 });
  recorder.add(`${prefix}commit requests`, committer.commits, 'requests');
  recorder.add(`${prefix}commits refused`, committer.failures, 'requests', { op: '<=', value: 0 });
  recorder.add(`${prefix}requests sent again (broker closed the kept-alive connection after a 204)`, connectionRetries.count - retriesBefore, 'requests');
  recordCpu(recorder, prefix, cpu);
  attribute(recorder, point, {
    brokerMark,
    measuredFrom,
    threshold: p(99),
    events: measuredEvents,
    latency,
    deliveredAt,
    receivedAt,
    sentAt,
    answeredAt,
    benchGc,
    stalls,
    benchLoop: loopDelay,
  });
}

/** What {@link attribute} looks at, on this process's clock unless said otherwise. */
interface TailInputs {
  readonly brokerMark: ProbeMark;
  readonly measuredFrom: number;
  /** The point's p99 latency: events at or above it are the tail. */
  readonly threshold: number;
  /** The measured events (delivered, published after the warm-up). */
  readonly events: readonly number[];
  readonly latency: Float64Array;
  readonly deliveredAt: Float64Array;
  /** The broker's `received_at` per event, ms since the epoch. */
  readonly receivedAt: Float64Array;
  readonly sentAt: Float64Array;
  readonly answeredAt: Float64Array;
  readonly benchGc: readonly Span[];
  readonly stalls: readonly Span[];
  readonly benchLoop: { percentile(p: number): number; readonly max: number };
}

/**
 * Records where the measured period's time went (no targets: these explain the latency figures):
 * the broker's GC pauses and event loop delay (broker-probe.ts), this process's, and for the tail (the
 * events at or above p99) the median split at the broker's `received_at` and the share of tail events
 * that a broker GC pause or a stall of this process's loop overlaps, against the share of all events.
 */
function attribute(recorder: Recorder, point: Point, inputs: TailInputs): void {
  const { prefix, eventsPerRequest } = point;
  const { brokerMark } = inputs;
  const origin = performance.timeOrigin;
  const gcSpans: Span[] = brokerMark.gc.map((g: GcPause) => ({ from: g.at - origin, to: g.at - origin + g.ms })).sort((a, b) => a.from - b.from);
  const pauses = brokerMark.gc.map((g) => g.ms);
  const scavenges = brokerMark.gc.filter((g) => g.kind === 'scavenge').length;
  const gcTotal = pauses.reduce((a, b) => a + b, 0);
  recorder.add(`${prefix}broker GC pauses (measured period)`, pauses.length, 'pauses');
  recorder.add(`${prefix}broker GC pauses that were not scavenges`, pauses.length - scavenges, 'pauses');
  recorder.add(`${prefix}broker GC pause total`, round(gcTotal, 1), 'ms');
  recorder.add(`${prefix}broker GC pause p99`, percentileOf(pauses, 99), 'ms');
  recorder.add(`${prefix}broker GC pause max`, percentileOf(pauses, 100), 'ms');
  recorder.add(`${prefix}broker event loop delay p99 (beyond a 1 ms timer)`, round(brokerMark.loop.p99, 2), 'ms');
  recorder.add(`${prefix}broker event loop delay max`, round(brokerMark.loop.max, 2), 'ms');
  const benchMs = (ns: number): number => round(Math.max(0, ns / 1e6 - 1), 2);
  recorder.add(`${prefix}bench process event loop delay p99 (beyond a 1 ms timer)`, benchMs(inputs.benchLoop.percentile(99)), 'ms');
  recorder.add(`${prefix}bench process event loop delay max`, benchMs(inputs.benchLoop.max), 'ms');
  recorder.add(`${prefix}bench process GC pause max`, percentileOf(inputs.benchGc.map((s) => s.to - s.from), 100), 'ms');

  // The tail, event by event.
  const tail = inputs.events.filter((n) => (inputs.latency[n] ?? 0) >= inputs.threshold);
  const before: number[] = [];
  const after: number[] = [];
  const answered: number[] = [];
  let tailGc = 0;
  let tailStall = 0;
  let allGc = 0;
  let allStall = 0;
  const stallSpans = [...inputs.stalls].sort((a, b) => a.from - b.from);
  const benchGcSpans = inputs.benchGc.filter((s) => s.to - s.from >= STALL_MS).sort((a, b) => a.from - b.from);
  const examples: string[] = [];
  const exampleFrom = percentileOf(tail.map((t) => inputs.latency[t] ?? 0), 90);
  for (const n of inputs.events) {
    const r = Math.floor(n / eventsPerRequest);
    const sent = inputs.sentAt[r] ?? Number.NaN;
    const got = inputs.deliveredAt[n] ?? Number.NaN;
    const gcMs = overlap(gcSpans, sent, got);
    const stallMs = overlap(stallSpans, sent, got) + overlap(benchGcSpans, sent, got);
    if (gcMs > 0) allGc += 1;
    if (stallMs > 0) allStall += 1;
    if ((inputs.latency[n] ?? 0) < inputs.threshold) continue;
    if (gcMs > 0) tailGc += 1;
    if (stallMs > 0) tailStall += 1;
    const received = (inputs.receivedAt[n] ?? Number.NaN) - origin;
    before.push(received - sent);
    after.push(got - received);
    answered.push((inputs.answeredAt[r] ?? Number.NaN) - sent);
    if (examples.length < 8 && (inputs.latency[n] ?? 0) >= exampleFrom)
      examples.push(
        `+${((sent - inputs.measuredFrom) / 1000).toFixed(3)} s: ${(inputs.latency[n] ?? 0).toFixed(1)} ms = ${(received - sent).toFixed(1)} to received_at + ${(got - received).toFixed(1)} after; publish answered ${((inputs.answeredAt[r] ?? Number.NaN) - sent).toFixed(1)}; broker GC ${gcMs.toFixed(1)}, bench stalls ${stallMs.toFixed(1)}`,
      );
  }
  const share = (k: number, of: number): number => (of === 0 ? 0 : round((100 * k) / of, 1));
  recorder.log(
    `${prefix}tail (≥ p99 ${inputs.threshold} ms, ${tail.length} events): median ${percentileOf(before, 50)} ms before the broker's received_at, ${percentileOf(after, 50)} ms after; broker GC overlaps ${share(tailGc, tail.length)} % (all events ${share(allGc, inputs.events.length)} %), bench stalls (tick gaps or GC ≥ ${STALL_MS} ms) ${share(tailStall, tail.length)} % (all ${share(allStall, inputs.events.length)} %); broker GC ${pauses.length} pauses, max ${percentileOf(pauses, 100)} ms; broker loop delay p99 ${round(brokerMark.loop.p99, 2)} max ${round(brokerMark.loop.max, 2)} ms`,
  );
  const byKind = new Map<string, number[]>();
  for (const g of brokerMark.gc) byKind.set(g.kind, [...(byKind.get(g.kind) ?? []), g.ms]);
  const external = brokerMark.gc.filter((g) => (g.flags & constants.NODE_PERFORMANCE_GC_FLAGS_ALL_EXTERNAL_MEMORY) !== 0).length;
  recorder.log(
    `${prefix}broker GC by kind: ${[...byKind].map(([kind, ms]) => `${kind} ${ms.length} (max ${percentileOf(ms, 100)} ms)`).join(', ')}; ${external} for external memory; memory at the end ${JSON.stringify(brokerMark.memoryMB)} MB`,
  );
  for (const line of examples) recorder.log(`${prefix}  ${line}`);
  recorder.add(`${prefix}tail events (≥ p99): median ms before the broker's received_at (ms resolution)`, percentileOf(before, 50), 'ms');
  recorder.add(`${prefix}tail events (≥ p99): median ms from received_at to delivery`, percentileOf(after, 50), 'ms');
  recorder.add(`${prefix}tail events (≥ p99): median publish request latency`, percentileOf(answered, 50), 'ms');
  recorder.add(`${prefix}tail events (≥ p99) overlapped by a broker GC pause`, share(tailGc, tail.length), '%');
  recorder.add(`${prefix}all measured events overlapped by a broker GC pause`, share(allGc, inputs.events.length), '%');
  recorder.add(`${prefix}tail events (≥ p99) overlapped by a bench process stall (tick gap or GC ≥ ${STALL_MS} ms)`, share(tailStall, tail.length), '%');
  recorder.add(`${prefix}all measured events overlapped by a bench process stall`, share(allStall, inputs.events.length), '%');
}

export const endToEnd: Scenario = {
  name: 'end-to-end',
  title: `publish-to-delivery latency on a subscription stream at ${RATE} events/s (single-event publishes) and 20,000 events/s (20 per request): p50/p99 and where the tail goes`,
  run,
};
