/**
 * Scenario `tracing`: what traces cost publishing (docs/tracing.md). 1000-event batches of ~500-byte
 * business events (4 partitions, random partitioning, 4 connections) to two nodes on one Redis (one key
 * prefix), alike but for `tracing.enabled`: the traced node samples new traces at `tracing.sampleRatio`
 * 0.01 and exports its spans over OTLP/HTTP to a sink in this process that answers every export 200 and
 * counts the spans. Modes, measured in rounds with the order reversed every other round, each point on
 * an event type of its own deleted once measured (every point writes to an equally empty Redis):
 *
 * - `off`: the node without tracing; no `traceparent`;
 * - `on 1 %, new traces`: the traced node, no `traceparent`: the node starts a trace per batch and records 1 %;
 * - `on 1 %, producers' traces`: the traced node, every request with a `traceparent` of its own, 1 in 100
 *   flagged sampled (parent-based: the producers' 1 % is recorded, and those batches' events carry `span_ctx`);
 * - `on 100 %`: every request with a sampled `traceparent`: what recording every batch costs, and the spans'
 *   times (the `validate` span measured in the worker thread, the wait for a thread before it, the hand-back
 *   after it) that docs/decisions/0029-validation-spans-timed-in-the-worker.md reports.
 *
 * Ratios are medians of the same round's ratios against `off`, so drift of the shared 2-core machine
 * within the run cancels out. The load average at start and end tells how busy the machine was. Both
 * nodes run without the queue-delay admission bound (`http.publishMaxQueueDelayMs` 0): the figure is
 * throughput, and on a busy machine that bound refuses batches of either node now and then.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { loadavg } from 'node:os';
import { startBroker, type BrokerProcess } from '../scripts/local-processes.js';
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { quickMode, requestRetrying } from './stream-client.js';
import { brokerWarnings, createEventType, loadRequest, median, recordCpu, reportFailures, round, runLoad, sleep, stackMeter, startStack, type LoadRequest, type Recorder, type Scenario } from './harness.js';

const PARTITIONS = 4;
const BATCH = 1000;
const CONNECTIONS = 4;
const BODIES = 4;
/** `BENCH_QUICK=1`: one short round, to prove the scenario works (figures meaningless). */
const QUICK = quickMode();
const ROUNDS = QUICK ? 1 : 7;
const ROUND_SECONDS = QUICK ? 1 : 5;
const WARMUP_SECONDS = QUICK ? 1 : 2;
/** Target: events/s with tracing on at 1 % ÷ off, same run. */
const TARGET_RATIO = 0.97;
const SAMPLE_RATIO = 0.01;
/** Requests a producer-traced load rotates through: one of them sampled is 1 %. */
const TRACED_REQUESTS = 100;

/** An OTLP/JSON span, the fields read here. */
interface OtlpSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  readonly startTimeUnixNano: string | number;
  readonly endTimeUnixNano: string | number;
  readonly attributes?: readonly { readonly key: string; readonly value: { readonly intValue?: string | number; readonly doubleValue?: number; readonly stringValue?: string } }[];
}

/** The body of an OTLP/HTTP JSON trace export. */
interface OtlpExport {
  readonly resourceSpans?: readonly { readonly scopeSpans?: readonly { readonly spans?: readonly OtlpSpan[] }[] }[];
}

/** A stand-in for an OpenTelemetry collector: takes OTLP/HTTP JSON exports and keeps their spans. */
class OtlpSink {
  readonly spans: OtlpSpan[] = [];

  constructor(private readonly server: Server) {}

  get url(): string {
    const address = this.server.address();
    if (address === null || typeof address === 'string') throw new Error('the OTLP sink does not listen');
    return `http://127.0.0.1:${address.port}/v1/traces`;
  }

  take(body: string): void {
    const parsed = JSON.parse(body) as OtlpExport;
    for (const resource of parsed.resourceSpans ?? []) {
      for (const scope of resource.scopeSpans ?? []) {
        this.spans.push(...(scope.spans ?? []));
      }
    }
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

async function startOtlpSink(): Promise<OtlpSink> {
  const server = createServer();
  const sink = new OtlpSink(server);
  server.on('request', (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      try {
        sink.take(Buffer.concat(chunks).toString('utf8'));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      } catch (err) {
        res.writeHead(400).end(String(err));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return sink;
}

/** A W3C `traceparent` of a new trace. */
function traceparent(sampled: boolean): string {
  return `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-${sampled ? '01' : '00'}`;
}

interface Mode {
  readonly label: string;
  /** The traced node (else the one without tracing). */
  readonly traced: boolean;
  /** The requests of a load on `path`. */
  requests(templates: readonly LoadRequest[], path: string): LoadRequest[];
}

const plain = (templates: readonly LoadRequest[], path: string): LoadRequest[] => templates.map((t) => ({ ...t, path }));
/** {@link TRACED_REQUESTS} requests over the templates, each with a `traceparent` of its own, `sampled(i)` deciding its flag. */
const withTraceparents = (sampled: (i: number) => boolean) => (templates: readonly LoadRequest[], path: string): LoadRequest[] =>
  Array.from({ length: TRACED_REQUESTS }, (_, i) => ({ ...(templates[i % templates.length] as LoadRequest), path, headers: { traceparent: traceparent(sampled(i)) } }));

const MODES: readonly Mode[] = [
  { label: 'off', traced: false, requests: plain },
  { label: 'on 1 %, new traces', traced: true, requests: plain },
  { label: 'on 1 %, producers\' traces', traced: true, requests: withTraceparents((i) => i === 0) },
  { label: 'on 100 %', traced: true, requests: withTraceparents(() => true) },
];

/** An attribute's number, or undefined. */
function numberAttribute(span: OtlpSpan, key: string): number | undefined {
  const value = span.attributes?.find((a) => a.key === key)?.value;
  if (value === undefined) return undefined;
  const n = Number(value.intValue ?? value.doubleValue ?? Number.NaN);
  return Number.isFinite(n) ? n : undefined;
}

const millis = (nanos: string | number): number => Number(BigInt(nanos)) / 1e6;

/** One measured load on a traced node: its event type and when it ran (epoch ms). */
interface MeasuredWindow {
  readonly mode: string;
  readonly eventType: string;
  readonly fromMs: number;
  readonly toMs: number;
  readonly answered: number;
}

/** Whether `span` is the `receive` span of a batch of the window's load (not of its warm-up). */
function inWindow(span: OtlpSpan, window: MeasuredWindow): boolean {
  if (span.name !== `receive ${window.eventType}`) return false;
  const start = millis(span.startTimeUnixNano);
  return start >= window.fromMs && start <= window.toMs;
}

/**
 * The timings of the recorded batches (docs/decisions/0029-validation-spans-timed-in-the-worker.md):
 * medians of the `validate` span (the worker's own clock), the wait for a thread before it (from the
 * main thread's hand-over), the time from its end to the `append` span's start (hand-back and the main
 * thread's turn), and the whole `receive` span.
 */
function recordSpanTimings(recorder: Recorder, spans: readonly OtlpSpan[], window: MeasuredWindow): void {
  const byParent = new Map<string, OtlpSpan[]>();
  for (const span of spans) if (span.parentSpanId) byParent.set(span.parentSpanId, [...(byParent.get(span.parentSpanId) ?? []), span]);
  const validate: number[] = [];
  const queued: number[] = [];
  const handBack: number[] = [];
  const receive: number[] = [];
  for (const span of spans) {
    if (!inWindow(span, window)) continue;
    const children = byParent.get(span.spanId) ?? [];
    const v = children.find((c) => c.name.startsWith('validate'));
    const a = children.find((c) => c.name.startsWith('append'));
    if (v === undefined || a === undefined) continue;
    receive.push(millis(span.endTimeUnixNano) - millis(span.startTimeUnixNano));
    validate.push(millis(v.endTimeUnixNano) - millis(v.startTimeUnixNano));
    queued.push(numberAttribute(v, 'broker.validation.queued_ms') ?? Number.NaN);
    handBack.push(millis(a.startTimeUnixNano) - millis(v.endTimeUnixNano));
  }
  recorder.add('on 100 %: recorded batches with receive, validate and append spans', receive.length, 'batches');
  if (receive.length === 0) return;
  recorder.add('on 100 %: validate span (worker thread\'s clock), median', round(median(validate), 2), 'ms');
  const waits = queued.filter(Number.isFinite);
  if (waits.length > 0) recorder.add('on 100 %: wait for a worker thread before it, median', round(median(waits), 2), 'ms');
  recorder.add('on 100 %: from its end to the append span (hand-back, main thread), median', round(median(handBack), 2), 'ms');
  recorder.add('on 100 %: receive span (whole request after admission), median', round(median(receive), 2), 'ms');
}

async function run(recorder: Recorder): Promise<void> {
  recorder.add('load average (1 min) at start', round(loadavg()[0] ?? 0, 2), 'runnable tasks');
  const random = prng(29);
  const templates: LoadRequest[] = Array.from({ length: BODIES }, () => loadRequest('/', Array.from({ length: BATCH }, () => orderEvent(random))));
  const sink = await startOtlpSink();
  // Both nodes without the queue-delay admission bound: on a busy machine it refuses batches of either
  // node now and then, and the ratio is of throughput, not of refusals (`overload` measures those).
  const admission = { BROKER_HTTP_PUBLISH_MAX_QUEUE_DELAY_MS: '0' };
  const stack = await startStack(admission);
  let traced: BrokerProcess | undefined;
  try {
    // The second node of the same Redis and key prefix: it sees the event types the scenario creates.
    traced = await startBroker({
      ...admission,
      BROKER_REDIS_URL: stack.redis.url,
      BROKER_LOG_LEVEL: 'warn',
      BROKER_TRACING_ENABLED: 'true',
      BROKER_TRACING_SAMPLE_RATIO: String(SAMPLE_RATIO),
      BROKER_TRACING_OTLP_ENDPOINT: sink.url,
    });
    const nodes = { plain: stack.broker, traced };
    const meter = stackMeter(stack);
    const tracedMeter = stackMeter({ ...stack, broker: traced });
    const perMode = new Map<string, number[]>(MODES.map((m) => [m.label, []]));
    const ratios = new Map<string, number[]>(MODES.filter((m) => m.traced).map((m) => [m.label, []]));
    const windows: MeasuredWindow[] = [];
    /** The node's CPU (main thread and the others) per event, µs, per mode and round: less moved by other processes on the cores than throughput. */
    const cpuPerEvent = new Map<string, number[]>(MODES.map((m) => [m.label, []]));
    const cpuRatios = new Map<string, number[]>(MODES.filter((m) => m.traced).map((m) => [m.label, []]));
    for (let roundIndex = 0; roundIndex < ROUNDS; roundIndex++) {
      const order = roundIndex % 2 === 0 ? MODES : [...MODES].reverse();
      const figures = new Map<string, number>();
      for (const mode of order) {
        const node = mode.traced ? nodes.traced : nodes.plain;
        const name = `bench.tracing.r${roundIndex}.${MODES.indexOf(mode)}`;
        await createEventType(node.url, businessEventType(name, ORDER_SCHEMA, PARTITIONS));
        const requests = mode.requests(templates, `/event-types/${name}/events`);
        await runLoad({ url: node.url, requests, connections: CONNECTIONS, durationSeconds: WARMUP_SECONDS });
        const cpuMeter = mode.traced ? tracedMeter : meter;
        const fromMs = Date.now();
        cpuMeter.start();
        const result = await runLoad({ url: node.url, requests, connections: CONNECTIONS, durationSeconds: ROUND_SECONDS });
        const cpu = cpuMeter.stop();
        if (mode.traced) windows.push({ mode: mode.label, eventType: name, fromMs, toMs: Date.now(), answered: result.okRequests });
        await requestRetrying('DELETE', `${node.url}/event-types/${name}`, undefined, [200, 204]);
        const label = `tracing ${mode.label}, round ${roundIndex + 1}`;
        reportFailures(recorder, label, result);
        recorder.log(`${label}: ${Math.round(result.eventsPerSecond)} events/s, p50 ${result.latencyMs.p50.toFixed(1)} ms, p99 ${result.latencyMs.p99.toFixed(1)} ms, non-2xx ${result.non2xx}`);
        if (roundIndex === ROUNDS - 1) recordCpu(recorder, `tracing ${mode.label} (last round): `, cpu);
        if (result.non2xx + result.errors > 0) recorder.add(`tracing ${mode.label}: non-2xx answers`, result.non2xx + result.errors, 'answers', { op: '<=', value: 0 });
        figures.set(mode.label, result.eventsPerSecond);
        const nodeCpu = (cpu.byLabel['broker main thread'] ?? 0) + (cpu.byLabel['broker other threads'] ?? 0);
        if (result.eventsPerSecond > 0) cpuPerEvent.get(mode.label)?.push(((nodeCpu / 100) * 1e6) / result.eventsPerSecond);
        perMode.get(mode.label)?.push(result.eventsPerSecond);
      }
      const off = figures.get('off') ?? 0;
      for (const [label, list] of ratios) if (off > 0) list.push((figures.get(label) ?? 0) / off);
      const offCpu = cpuPerEvent.get('off')?.[roundIndex];
      for (const [label, list] of cpuRatios) {
        const onCpu = cpuPerEvent.get(label)?.[roundIndex];
        if (offCpu !== undefined && onCpu !== undefined && offCpu > 0) list.push(onCpu / offCpu);
      }
    }
    for (const [label, values] of perMode) recorder.add(`batch ${BATCH}, tracing ${label}: events/s (median of ${ROUNDS} rounds)`, Math.round(median(values)), 'events/s');
    for (const [label, values] of ratios) {
      const target = label.startsWith('on 1 %') ? { op: '>=' as const, value: TARGET_RATIO } : undefined;
      // A round whose `off` point answered nothing has no ratio: the figure is left out (and the run says so).
      if (values.length === 0) recorder.alarm(`no round measured tracing ${label} against off`);
      else recorder.add(`batch ${BATCH}: tracing ${label} / off (events/s, median of same-round ratios)`, round(median(values), 3), '×', target);
    }
    for (const [label, values] of cpuPerEvent) if (values.length > 0) recorder.add(`batch ${BATCH}, tracing ${label}: node CPU per event (median of rounds)`, round(median(values), 3), 'µs');
    for (const [label, values] of cpuRatios) if (values.length > 0) recorder.add(`batch ${BATCH}: tracing ${label} / off (node CPU per event, median of same-round ratios)`, round(median(values), 3), '×');
    // Stopping the traced node exports the spans its batch processor still holds (it exports every 5 s);
    // first the work the last point left (the validators it prepared for the deleted event type) settles.
    await sleep(1000);
    const code = await traced.stop('SIGTERM');
    if (code !== 0) recorder.alarm(`the traced node exited with code ${String(code)} on SIGTERM`);
    const warnings = brokerWarnings(traced.output());
    for (const line of warnings.slice(0, 5)) recorder.alarm(`traced node: ${line.slice(0, 400)}`);
    recorder.add('traced node: log lines at warn or above', warnings.length, 'lines');
    for (const mode of MODES.filter((m) => m.traced)) {
      const shares = windows.filter((w) => w.mode === mode.label && w.answered > 0).map((w) => sink.spans.filter((span) => inWindow(span, w)).length / w.answered);
      // Batches begun in the window and answered after it are recorded but not counted as answered: a few too many at 100 %.
      if (shares.length > 0) recorder.add(`tracing ${mode.label}: batches recorded / answered (median of rounds)`, round(median(shares) * 100, 2), '%');
    }
    recorder.add('spans the OTLP sink took', sink.spans.length, 'spans');
    const last = windows.filter((w) => w.mode === 'on 100 %').at(-1);
    if (last !== undefined) recordSpanTimings(recorder, sink.spans, last);
  } finally {
    await traced?.stop('SIGTERM');
    await stack.stop(recorder);
    await sink.close();
    recorder.add('load average (1 min) at end', round(loadavg()[0] ?? 0, 2), 'runnable tasks');
  }
}

export const tracing: Scenario = {
  name: 'tracing',
  title: 'traces: 1000-event publishing with tracing off, on at 1 % (new traces, producers\' traces) and at 100 %, alternating rounds',
  run,
};
