/**
 * Consumption scenario 2 (issue 3 §4): latency from publish to delivery on a subscription stream at
 * 1,000 events/s. One producer publishes single-event batches on a timer, each event carrying its
 * send time (`performance.now()` of this process) in `sent_at`; one subscription stream
 * (`batch_limit` 1: a partial batch waits for `batch_flush_timeout`, at least 1 s) receives them in
 * this same process, which takes `performance.now()` on receipt. The consumer commits as a real client
 * does, without waiting (stream-client.ts `Committer`). Events sent during the warm-up are not counted.
 */
import { randomUUID } from 'node:crypto';
import { businessEventType } from './events.js';
import { createEventType, recordCpu, round, sleep, startStack, stackMeter, type Recorder, type Scenario } from './harness.js';
import { Committer, connectionRetries, createSubscription, openStream, percentile, quickMode, request } from './stream-client.js';

const QUICK = quickMode();
const EVENT_TYPE = 'bench.e2e';
const PARTITIONS = 4;
/** Events per second the producer publishes, one event per request. */
export const RATE = 1000;
export const WARMUP_SECONDS = QUICK ? 1 : 3;
export const DURATION_SECONDS = QUICK ? 3 : 12;
/** How long to wait for the last events after the producer stopped. */
const DRAIN_TIMEOUT_MS = 5000;
/** `max_uncommitted_events`: far above what the committing consumer leaves uncommitted. */
const MAX_UNCOMMITTED = 1000;
/** Target of issue 3 §4: p99 publish-to-delivery latency. */
const TARGET_P99_MS = 20;

const SCHEMA = {
  type: 'object',
  properties: { n: { type: 'integer' }, sent_at: { type: 'number' } },
  required: ['n', 'sent_at'],
} as const;

/** `n` and `sent_at` of a delivered event, or undefined when it has not both. */
function stampOf(event: unknown): { n: number; sentAt: number } | undefined {
  if (typeof event !== 'object' || event === null) return undefined;
  const { n, sent_at: sentAt } = event as { n?: unknown; sent_at?: unknown };
  return typeof n === 'number' && typeof sentAt === 'number' ? { n, sentAt } : undefined;
}

async function run(recorder: Recorder): Promise<void> {
  const total = RATE * (WARMUP_SECONDS + DURATION_SECONDS);
  // Per event n: delivery latency (NaN until delivered) and whether its publish was answered 200.
  const latency = new Float64Array(total).fill(Number.NaN);
  const published = new Uint8Array(total);
  const publishMs: number[] = [];
  let duplicates = 0;
  let unexpected = 0;
  let publishFailures = 0;
  let firstPublishFailure: string | undefined;
  const retriesBefore = connectionRetries.count;

  const stack = await startStack();
  try {
    await createEventType(stack.broker.url, businessEventType(EVENT_TYPE, SCHEMA, PARTITIONS));
    const id = await createSubscription(stack.broker.url, 'bench-e2e', EVENT_TYPE, 'begin');
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
          delivered += 1;
        }
      }
      committer?.add(line.cursor);
      if (delivered >= expected) allDelivered?.();
    });
    if (committer === undefined) throw new Error('the subscription stream has no X-Broker-StreamId header');

    // The producer: every ms, the events due by now at RATE, each in its own request (not awaited).
    const inFlight = new Set<Promise<void>>();
    const publish = (n: number): void => {
      const sentAt = performance.now();
      const body = JSON.stringify([{ metadata: { eid: randomUUID(), occurred_at: new Date().toISOString() }, n, sent_at: sentAt }]);
      const sending = request('POST', `${stack.broker.url}/event-types/${EVENT_TYPE}/events`, body).then(
        ({ status, text }) => {
          publishMs.push(performance.now() - sentAt);
          if (status === 200) published[n] = 1;
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
    const warmupEvents = RATE * WARMUP_SECONDS;
    const meter = stackMeter(stack);
    const started = performance.now();
    let next = 0;
    let measuring = false;
    while (next < total) {
      const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * RATE));
      while (next < due) {
        if (next === warmupEvents && !measuring) {
          measuring = true;
          meter.start();
          publishMs.length = 0;
        }
        publish(next++);
      }
      await sleep(1);
    }
    await Promise.all(inFlight);
    const cpu = meter.stop();
    const publishSeconds = (performance.now() - started) / 1000;

    // Wait for the events still on their way.
    let accepted = 0;
    for (const flag of published) accepted += flag;
    expected = accepted;
    if (delivered < expected) {
      const arrived = new Promise<void>((resolve) => (allDelivered = resolve));
      await Promise.race([arrived, sleep(DRAIN_TIMEOUT_MS), stream.ended]);
    }
    await committer.flush();
    stream.close();

    // Figures over the events published after the warm-up.
    const measured: number[] = [];
    let missing = 0;
    for (let n = warmupEvents; n < total; n++) {
      if (published[n] !== 1) continue;
      const value = latency[n] ?? Number.NaN;
      if (Number.isNaN(value)) missing += 1;
      else measured.push(value);
    }
    const sorted = Float64Array.from(measured).sort();
    const publishSorted = Float64Array.from(publishMs).sort();
    const p = (q: number) => round(percentile(sorted, q), 2);
    recorder.log(
      `${RATE} events/s for ${WARMUP_SECONDS} + ${DURATION_SECONDS} s (${publishSeconds.toFixed(1)} s): ${measured.length} events measured, p50 ${p(50)} ms, p99 ${p(99)} ms, max ${p(100)} ms; ${missing} not delivered, ${duplicates} duplicates, ${publishFailures} publish failures`,
    );
    if (publishFailures > 0) recorder.alarm(`${publishFailures} publishes failed; first: ${String(firstPublishFailure)}`);
    if (missing > 0) recorder.alarm(`${missing} published events were not delivered within ${DRAIN_TIMEOUT_MS / 1000} s after the producer stopped`);
    if (duplicates > 0 || unexpected > 0) recorder.alarm(`${duplicates} events delivered twice, ${unexpected} events not from this run`);
    if (committer.failures > 0) recorder.alarm(`${committer.failures} commits refused; first: ${String(committer.firstFailure)}`);

    recorder.add('events measured (after warm-up)', measured.length, 'events');
    recorder.add('publish-to-delivery latency p50', p(50), 'ms');
    recorder.add('publish-to-delivery latency p90', p(90), 'ms');
    recorder.add('publish-to-delivery latency p99', p(99), 'ms', { op: '<', value: TARGET_P99_MS });
    recorder.add('publish-to-delivery latency p99.9', p(99.9), 'ms');
    recorder.add('publish-to-delivery latency max', p(100), 'ms');
    recorder.add('publish request latency p50', round(percentile(publishSorted, 50), 2), 'ms');
    recorder.add('publish request latency p99', round(percentile(publishSorted, 99), 2), 'ms');
    recorder.add('publish failures', publishFailures, 'requests', { op: '<=', value: 0 });
    recorder.add('events not delivered', missing, 'events', { op: '<=', value: 0 });
    recorder.add('events delivered twice', duplicates, 'events', { op: '<=', value: 0 });
    recorder.add('commit requests', committer.commits, 'requests');
    recorder.add('commits refused', committer.failures, 'requests', { op: '<=', value: 0 });
    recorder.add('requests sent again (broker closed the kept-alive connection after a 204)', connectionRetries.count - retriesBefore, 'requests');
    recordCpu(recorder, '', cpu);
  } finally {
    await stack.stop(recorder);
  }
}

export const endToEnd: Scenario = {
  name: 'end-to-end',
  title: `publish-to-delivery latency on a subscription stream at ${RATE} events/s (single-event publishes): p50/p99`,
  run,
};
