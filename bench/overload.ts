/**
 * Scenario `overload`: one node under a publishing storm (docs/load-testing.md; docs/publishing.md
 * "Refusals and deadlines"; docs/decisions/0025-publish-admission-by-bytes-in-flight.md). A load
 * generator that follows the protocol (bench/polite-load.ts: `Retry-After` with jitter, the RateLimit
 * headers) posts 1000-event batches of ~520-byte events (4 partitions) with 8, 64, 256 and 1,024
 * connections in one run, on the node's default configuration, from the first request on the fresh
 * event type; that pass is judged. Each of its points opens its connections together and runs 2 s before
 * its measured seconds on the same connections (the opening's refusals and their p99 recorded apart, not
 * judged: every connection's first body leaves in the same millisecond, a herd no steady population of
 * producers sends); at 8 connections the opening's refusals count with the point's, so "no refusal" holds
 * from the first request on. Then the same points with autocannon, which sends again at once, refused body and all:
 * recorded (figures prefixed `autocannon:`), not judged. Measured per point: accepted events/s, p99 of the
 * accepted publishes, refusals (503) and their p99, `/health` p99 (probed from a process of its own, so
 * the load generator's event loop does not add to it), the node's peak RSS (sampled every 100 ms) and
 * the CPU of the node's main thread, its other threads, Redis and the load generator (autocannon's
 * latencies include its own event-loop delay when it is short of CPU); at the end, that every
 * acknowledged event is stored. A stream is measured too: from a process of its own, 1,000 events/s
 * (10 every 10 ms) are published to another event type and read back on a low-level stream (`batch_limit`
 * 1: a partial batch would wait for `batch_flush_timeout`); the p99 of
 * publish-to-delivery at each point is held to twice its value measured on the quiet node first, and
 * split into the publish's round trip and the time from its answer to the delivery. A probe preloaded
 * into the node (broker-probe.ts) reports its main thread's event-loop delay and GC pauses per point.
 * Then the autocannon points again on the same node with autocannon in a process at niceness 19 (the node with first
 * call on the cores), and, once the node is stopped, the same load against the reference server
 * (bench/null-node.ts): what the load generator alone allows on these cores (docs/load-testing.md "What
 * the load generator leaves").
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { BrokerProbe, type ProbeMark } from './broker-probe.js';
import { ORDER_SCHEMA, businessEventType, orderEvent, prng, undefinedEventType } from './events.js';
import { CpuMeter, createEventType, loadRequest, pidOf, recordCpu, round, stackMeter, startStack, type LoadRequest, type Recorder, type Scenario } from './harness.js';
import { runLoadElsewhere } from './load-child.js';
import { runMeasuredLoad, type MeasuredLoad } from './load-generator.js';
import { runPoliteLoad, type LoadOpening } from './polite-load.js';
import { startScriptServer } from './script-server.js';

const EVENT_TYPE = 'bench.overload';
const PARTITIONS = 4;
const PATH = `/event-types/${EVENT_TYPE}/events`;
const BATCH = 1000;
/** Connections of the measured points, in order, in one run on one node. */
export const CONNECTIONS = [8, 64, 256, 1024] as const;
/** Seconds of load measured per point (`BENCH_QUICK=1`: 3). */
const DURATION_SECONDS = process.env.BENCH_QUICK === '1' ? 3 : 8;
/** Seconds each point of the judged pass runs on its connections before they are measured. */
const OPENING_SECONDS = 2;

/** The targets (docs/load-testing.md "Figures to expect"). */
const MIN_RATIO_AT_1024 = 0.9;
const MAX_ACCEPTED_P99_MS = 1000;
const MAX_REFUSAL_P99_MS = 50;
const MAX_HEALTH_P99_MS = 50;
const MAX_RSS_MB = 512;
/** The stream probe's event type (one partition) and its publish-to-delivery p99 bound, × the quiet value. */
const DELIVERY_EVENT_TYPE = 'bench.overload.delivery';
const MAX_DELIVERY_P99_FACTOR = 2;

/**
 * What the stream probe measured: p99 of publish-to-delivery (ms) over the events delivered, and where it
 * goes — p99 of the publish round trip (request sent to answer read, ms, over the publishes) and of the
 * time from the publish's answer to the event's delivery (ms, over the events delivered) — and its counts.
 */
interface Delivery {
  readonly p99: number;
  readonly publishP99: number;
  readonly afterAnswerP99: number;
  readonly published: number;
  readonly delivered: number;
  readonly refused: number;
}

/** The node's resident set, in MB (decimal), from `/proc/<pid>/status`; 0 once the process is gone (the stack's stop reports how it ended). */
function rssMb(pid: number): number {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return 0;
  }
  const line = status.split('\n').find((l) => l.startsWith('VmRSS:'));
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? 0) / 1000;
}

/** Runs a probe's `code` in a node process of its own (so the load generator's event loop does not delay it). @returns the JSON it printed */
function runProbe<T>(code: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    // 'close', not 'exit': a process may exit before its stdout has been read to the end (seen under the
    // storm: the probe's JSON not yet read when 'exit' came).
    child.on('close', (code, signal) => {
      try {
        resolve(JSON.parse(out) as T);
      } catch (err) {
        reject(new Error(`probe ended (code ${String(code)}, signal ${String(signal)}) without its JSON: ${err instanceof Error ? err.message : String(err)}; printed ${JSON.stringify(out.slice(0, 200))}`));
      }
    });
  });
}

/** Probes `GET /health` back to back from a child process for `seconds`; resolves with the p99 latency (ms) and the count. */
function probeHealth(url: string, seconds: number): Promise<{ p99: number; count: number }> {
  const code = `
    const until = Date.now() + ${seconds * 1000};
    const times = [];
    (async () => {
      while (Date.now() < until) {
        const t = performance.now();
        try { const r = await fetch(${JSON.stringify(url + '/health')}); await r.arrayBuffer(); } catch {}
        times.push(performance.now() - t);
        await new Promise((r) => setTimeout(r, 20));
      }
      times.sort((a, b) => a - b);
      process.stdout.write(JSON.stringify({ p99: times[Math.max(0, Math.ceil(times.length * 0.99) - 1)] ?? NaN, count: times.length }));
    })();`;
  return runProbe<{ p99: number; count: number }>(code);
}

/**
 * The stream probe, from a child process for `seconds`: opens a low-level stream on
 * {@link DELIVERY_EVENT_TYPE} from its newest offset, publishes 10 events every 10 ms (each carrying its
 * send time), and measures each event's time from before its publish to its delivery.
 */
function probeDelivery(url: string, seconds: number): Promise<Delivery> {
  const code = `
    const base = ${JSON.stringify(url)};
    const name = ${JSON.stringify(DELIVERY_EVENT_TYPE)};
    const until = Date.now() + ${seconds * 1000};
    const latencies = [], roundTrips = [], afterAnswer = [];
    const answeredAt = new Map();
    let published = 0, refused = 0, n = 0, batch = 0;
    const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
    (async () => {
      const controller = new AbortController();
      const res = await fetch(base + '/event-types/' + name + '/events?batch_limit=1&batch_flush_timeout=1', { signal: controller.signal });
      const reading = (async () => {
        const decoder = new TextDecoder();
        let rest = '';
        try {
          for await (const chunk of res.body) {
            rest += decoder.decode(chunk, { stream: true });
            for (let i = rest.indexOf('\\n'); i >= 0; i = rest.indexOf('\\n')) {
              const line = rest.slice(0, i);
              rest = rest.slice(i + 1);
              if (line !== '') for (const e of JSON.parse(line).events ?? []) {
                const now = performance.now();
                latencies.push(now - e.sent_at);
                // An event can arrive before its publish's answer is read: 0 then.
                afterAnswer.push(Math.max(0, now - (answeredAt.get(e.batch) ?? now)));
              }
            }
          }
        } catch {}
      })();
      while (Date.now() < until) {
        const started = performance.now();
        batch++;
        const events = Array.from({ length: 10 }, () => ({ n: n++, batch, sent_at: performance.now() }));
        try {
          const r = await fetch(base + '/event-types/' + name + '/events', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(events) });
          await r.arrayBuffer();
          answeredAt.set(batch, performance.now());
          roundTrips.push(performance.now() - started);
          if (r.status === 200) published += 10; else refused += 10;
        } catch { refused += 10; }
        const wait = 10 - (performance.now() - started);
        if (wait > 0) await sleep(wait);
      }
      const deadline = Date.now() + 5000;
      while (latencies.length < published && Date.now() < deadline) await sleep(20);
      controller.abort();
      await reading;
      const p99 = (values) => values.sort((a, b) => a - b)[Math.max(0, Math.ceil(values.length * 0.99) - 1)] ?? NaN;
      process.stdout.write(JSON.stringify({ p99: p99(latencies), publishP99: p99(roundTrips), afterAnswerP99: p99(afterAnswer), published, delivered: latencies.length, refused }));
    })();`;
  return runProbe<Delivery>(code);
}

/** Events stored over the event type's partitions (newest position + 1 each; positions are dense from 0 on the first timeline). */
async function storedEvents(url: string): Promise<number> {
  const res = await fetch(`${url}${PATH.replace('/events', '/partitions')}`);
  const partitions = (await res.json()) as { newest_available_offset: string }[];
  // `001-0001-000000000000000005` is the sixth event of the first timeline (docs/concepts.md "Offsets and cursors").
  return partitions.reduce((sum, p) => sum + Number(/^\d{3}-[0-9a-f]{4}-(-?\d+)$/.exec(p.newest_available_offset)?.[1] ?? Number.NaN) + 1, 0);
}

export const overload: Scenario = {
  name: 'overload',
  title: 'one node under a publishing storm: 1000-event batches at 8, 64, 256 and 1,024 connections (admission bound, refusals, /health, RSS)',
  async run(recorder: Recorder) {
    const probe = new BrokerProbe();
    let baseline: number | undefined;
    let requests: LoadRequest[] = [];
    const stack = await startStack(probe.env());
    try {
      const url = stack.broker.url;
      const pid = pidOf(stack.broker.process);
      await createEventType(url, businessEventType(EVENT_TYPE, ORDER_SCHEMA, PARTITIONS), {});
      await createEventType(url, undefinedEventType(DELIVERY_EVENT_TYPE, { type: 'object', properties: { n: { type: 'integer' }, batch: { type: 'integer' }, sent_at: { type: 'number' } }, required: ['n', 'sent_at'] }, 1), {});
      const quiet = await probeDelivery(url, DURATION_SECONDS);
      recorder.log(
        `stream probe on the quiet node: publish-to-delivery p99 ${round(quiet.p99, 1)} ms (publish round trip ${round(quiet.publishP99, 1)} ms, ` +
          `answer-to-delivery ${round(quiet.afterAnswerP99, 1)} ms; ${quiet.delivered} of ${quiet.published} delivered)`,
      );
      recorder.add('publish-to-delivery p99 of a 1,000 events/s stream, quiet', round(quiet.p99, 1), 'ms');
      const random = prng(25);
      requests = Array.from({ length: 4 }, () => loadRequest(PATH, Array.from({ length: BATCH }, () => orderEvent(random))));
      const eventBytes = Math.round((requests[0]?.eventBytes ?? 0) / BATCH);
      recorder.log(`batches of ${BATCH} events of ~${eventBytes} bytes (${round((requests[0]?.body.byteLength ?? 0) / 1000, 0)} KB bodies), ${DURATION_SECONDS} s per point`);
      const meter = stackMeter(stack);
      const storedBefore = await storedEvents(url);
      // The judged pass: a generator that follows the protocol, from the first request on the fresh event type.
      const polite = await measurePass(recorder, { url, pid, probe, meter, quiet, judged: true, label: '' }, (connections, onMeasuring) =>
        runPoliteLoad({ url, requests, connections, durationSeconds: DURATION_SECONDS, openingSeconds: OPENING_SECONDS, onMeasuring }),
      );
      let acknowledged = polite.acknowledged;
      baseline = polite.at8;
      // autocannon as before: recorded and explained, not judged (docs/load-testing.md "What the load generator leaves").
      const plain = await measurePass(recorder, { url, pid, probe, meter, quiet, judged: false, label: 'autocannon: ' }, (connections, onMeasuring) => {
        onMeasuring();
        return runMeasuredLoad({ url, requests, connections, durationSeconds: DURATION_SECONDS });
      });
      acknowledged += plain.acknowledged;
      acknowledged += await measureWithIdleGenerator(recorder, url, requests, meter);
      // autocannon ends a point with requests in flight: they may be stored without being acknowledged,
      // so stored ≥ acknowledged; fewer would be acknowledged events lost.
      const stored = (await storedEvents(url)) - storedBefore;
      recorder.log(`${acknowledged} events acknowledged, ${stored} stored`);
      recorder.add('acknowledged events not stored', Math.max(0, acknowledged - stored), 'events', { op: '<=', value: 0 });
    } finally {
      await stack.stop(recorder);
      probe.remove();
    }
    if (baseline !== undefined) await measureReference(recorder, requests, baseline);
  },
};

/** What {@link measurePass} needs besides the load: the node, its probes, and how to label and judge the figures. */
interface PassContext {
  readonly url: string;
  readonly pid: number;
  readonly probe: BrokerProbe;
  readonly meter: CpuMeter;
  readonly quiet: Delivery;
  /** Whether the figures carry the scenario's targets. */
  readonly judged: boolean;
  /** Prefix of every figure's name ('' for the judged pass). */
  readonly label: string;
}

/**
 * One point's load at `connections`: calls `onMeasuring` when its measured seconds begin (after an
 * opening, or at once) and resolves with what they measured, and the opening's figures where it had one.
 */
type PointLoad = (connections: number, onMeasuring: () => void) => Promise<MeasuredLoad & { readonly opening?: LoadOpening }>;

/**
 * One pass over {@link CONNECTIONS} on the node with `load` as the load generator, the `/health` and stream
 * probes beside it, the node's RSS sampled every 100 ms and its main thread read from the probe.
 * @returns the events acknowledged and the accepted events/s at the first point
 */
async function measurePass(recorder: Recorder, ctx: PassContext, load: PointLoad): Promise<{ acknowledged: number; at8: number }> {
  const { url, pid, probe, meter, quiet, judged, label } = ctx;
  const target = <T>(value: T): T | undefined => (judged ? value : undefined);
  let acknowledged = 0;
  let at8: number | undefined;
  for (const connections of CONNECTIONS) {
    let onMeasuring = (): void => {};
    const measuring = new Promise<void>((resolve) => (onMeasuring = resolve));
    const running = load(connections, onMeasuring);
    // The probes and meters cover the measured seconds only (a rejected load ends the race too).
    await Promise.race([measuring, running]);
    let peak = rssMb(pid);
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 100);
    await probe.mark();
    meter.start();
    const [{ result, loopP99, opening }, health, delivery] = await Promise.all([running, probeHealth(url, DURATION_SECONDS), probeDelivery(url, DURATION_SECONDS)]);
    const cpu = meter.stop();
    const node = await probe.mark();
    clearInterval(sampler);
    peak = Math.max(peak, rssMb(pid));
    acknowledged += result.events + (opening?.events ?? 0);
    at8 ??= result.eventsPerSecond;
    const other = result.non2xx - result.refusals.count;
    const refused = result.refusals.count + (connections === CONNECTIONS[0] ? (opening?.refusals.count ?? 0) : 0);
    if (opening !== undefined) {
      recorder.log(`${label}${connections} connections, opening (${opening.seconds} s, not measured): ${opening.events} events accepted, ${opening.refusals.count} refusals, p99 ${round(opening.refusals.p99, 1)} ms`);
      if (opening.refusals.count > 0) recorder.add(`${label}p99 of refusals in the opening ${opening.seconds} s at ${connections} connections (all connections' first bodies at once)`, round(opening.refusals.p99, 1), 'ms');
    }
    recorder.log(
      `${label}${connections} connections: ${round(result.eventsPerSecond, 0)} events/s accepted, p99 ${round(result.latencyMs.p99, 1)} ms; ` +
        `${result.refusals.count} refusals, p99 ${round(result.refusals.p99, 1)} ms; other non-2xx ${other}, errors ${result.errors}; ` +
        `/health p99 ${round(health.p99, 1)} ms (${health.count} probes); RSS peak ${round(peak, 0)} MB`,
    );
    if (other > 0 || result.errors > 0) recorder.alarm(`${label}${connections} connections: ${other} non-2xx answers other than 503, ${result.errors} errors; first: ${result.firstFailure ?? ''}`);
    const at = `at ${connections} connections`;
    recorder.add(`${label}accepted events/s ${at}`, round(result.eventsPerSecond, 0), 'events/s');
    recorder.add(`${label}p99 of accepted publishes ${at}`, round(result.latencyMs.p99, 1), 'ms', target({ op: '<=', value: MAX_ACCEPTED_P99_MS }));
    recorder.add(`${label}refusals ${at}${connections === CONNECTIONS[0] && judged ? ' (from the first request, warm-up included)' : ''}`, refused, 'requests', connections === CONNECTIONS[0] ? target({ op: '<=', value: 0 }) : undefined);
    if (result.refusals.count > 0) recorder.add(`${label}p99 of refusals ${at}`, round(result.refusals.p99, 1), 'ms', target({ op: '<=', value: MAX_REFUSAL_P99_MS }));
    recorder.add(`${label}/health p99 ${at}`, round(health.p99, 1), 'ms', target({ op: '<=', value: MAX_HEALTH_P99_MS }));
    recorder.add(`${label}node RSS peak ${at}`, round(peak, 0), 'MB', target({ op: '<=', value: MAX_RSS_MB }));
    recorder.log(`${label}${connections} connections: stream probe p99 ${round(delivery.p99, 1)} ms, ${delivery.delivered} of ${delivery.published} published events delivered, ${delivery.refused} refused`);
    recorder.add(`${label}publish-to-delivery p99 of a 1,000 events/s stream ${at}`, round(delivery.p99, 1), 'ms', target({ op: '<=', value: round(quiet.p99 * MAX_DELIVERY_P99_FACTOR, 1) }));
    recorder.add(`${label}stream probe events published ${at}`, delivery.published, 'events');
    recorder.add(`${label}stream probe publish round trip p99 ${at}`, round(delivery.publishP99, 1), 'ms');
    recorder.add(`${label}stream probe answer-to-delivery p99 ${at}`, round(delivery.afterAnswerP99, 1), 'ms');
    recordMainThread(recorder, `${label}${at}`, node);
    recordCpu(recorder, `${label}${at}: `, cpu);
    recorder.add(`${label}load generator event-loop delay p99 ${at}`, round(loopP99, 1), 'ms');
    if (connections === 1024 && at8 > 0) recorder.add(`${label}accepted events/s at 1,024 connections ÷ at 8`, round(result.eventsPerSecond / at8, 2), 'x', target({ op: '>=', value: MIN_RATIO_AT_1024 }));
  }
  return { acknowledged, at8: at8 ?? 0 };
}

/** Niceness of the load generator in the second pass: the lowest priority. */
const IDLE_GENERATOR_NICE = 19;

/**
 * A second pass over the same node: the same load from a process at the lowest priority (niceness 19,
 * bench/load-child.ts), so that the node and Redis have first call on the cores and the load generator
 * the rest — close to what the node does with the cores to itself. The probes run as in the first pass.
 * @returns the events acknowledged in this pass
 */
async function measureWithIdleGenerator(recorder: Recorder, url: string, requests: readonly LoadRequest[], meter: CpuMeter): Promise<number> {
  let acknowledged = 0;
  let at8: number | undefined;
  for (const connections of CONNECTIONS) {
    meter.start();
    const [{ result, loopP99, cpuPercent }, health, delivery] = await Promise.all([
      runLoadElsewhere(url, requests, connections, DURATION_SECONDS, IDLE_GENERATOR_NICE),
      probeHealth(url, DURATION_SECONDS),
      probeDelivery(url, DURATION_SECONDS),
    ]);
    const cpu = meter.stop();
    acknowledged += result.events;
    at8 ??= result.eventsPerSecond;
    const at = `at ${connections} connections`;
    const prefix = `load generator at niceness ${IDLE_GENERATOR_NICE}:`;
    const other = result.non2xx - result.refusals.count;
    if (other > 0 || result.errors > 0) recorder.alarm(`${prefix} ${connections} connections: ${other} non-2xx answers other than 503, ${result.errors} errors; first: ${result.firstFailure ?? ''}`);
    recorder.log(
      `${prefix} ${connections} connections: ${round(result.eventsPerSecond, 0)} events/s accepted, p99 ${round(result.latencyMs.p99, 1)} ms; ` +
        `${result.refusals.count} refusals, p99 ${round(result.refusals.p99, 1)} ms; errors ${result.errors}; /health p99 ${round(health.p99, 1)} ms; ` +
        `stream probe p99 ${round(delivery.p99, 1)} ms; load generator ${round(cpuPercent, 0)} % of a core, event-loop delay p99 ${round(loopP99, 1)} ms`,
    );
    recorder.add(`${prefix} accepted events/s ${at}`, round(result.eventsPerSecond, 0), 'events/s');
    recorder.add(`${prefix} p99 of accepted publishes ${at}`, round(result.latencyMs.p99, 1), 'ms');
    if (result.refusals.count > 0) recorder.add(`${prefix} p99 of refusals ${at}`, round(result.refusals.p99, 1), 'ms');
    recorder.add(`${prefix} /health p99 ${at}`, round(health.p99, 1), 'ms');
    recorder.add(`${prefix} publish-to-delivery p99 of a 1,000 events/s stream ${at}`, round(delivery.p99, 1), 'ms');
    recorder.add(`${prefix} CPU load generator ${at}`, round(cpuPercent, 0), '% of a core');
    recordCpu(recorder, `${prefix} ${at}: `, cpu);
    if (connections === 1024 && at8 > 0) recorder.add(`${prefix} accepted events/s at 1,024 connections ÷ at 8`, round(result.eventsPerSecond / at8, 2), 'x');
  }
  return acknowledged;
}

/**
 * The same load against the reference server (bench/null-node.ts: the engine and the admission bound,
 * nothing behind them), once the node is stopped: what the load generator alone allows on these cores.
 * A target the reference server misses too is out of any node's reach with the generator beside it.
 * @param nodeAt8 the node's accepted events/s at 8 connections, which the 1,024-connection target is a share of
 */
async function measureReference(recorder: Recorder, requests: readonly LoadRequest[], nodeAt8: number): Promise<void> {
  const server = await startScriptServer('null-node.js');
  try {
    const meter = new CpuMeter([{ label: 'reference server', pid: pidOf(server.child), split: true }]);
    for (const connections of CONNECTIONS) {
      meter.start();
      const [{ result, loopP99 }, health] = await Promise.all([runMeasuredLoad({ url: server.url, requests, connections, durationSeconds: DURATION_SECONDS }), probeHealth(server.url, DURATION_SECONDS)]);
      const cpu = meter.stop();
      const at = `at ${connections} connections`;
      recorder.log(
        `reference server, ${connections} connections: ${round(result.eventsPerSecond, 0)} events/s accepted, p99 ${round(result.latencyMs.p99, 1)} ms; ` +
          `${result.refusals.count} refusals, p99 ${round(result.refusals.p99, 1)} ms; errors ${result.errors}; /health p99 ${round(health.p99, 1)} ms`,
      );
      recorder.add(`reference server: accepted events/s ${at}`, round(result.eventsPerSecond, 0), 'events/s');
      recorder.add(`reference server: p99 of accepted publishes ${at}`, round(result.latencyMs.p99, 1), 'ms');
      recorder.add(`reference server: refusals ${at}`, result.refusals.count, 'requests');
      if (result.refusals.count > 0) recorder.add(`reference server: p99 of refusals ${at}`, round(result.refusals.p99, 1), 'ms');
      recorder.add(`reference server: /health p99 ${at}`, round(health.p99, 1), 'ms');
      recordCpu(recorder, `reference server ${at}: `, cpu);
      recorder.add(`reference server: load generator event-loop delay p99 ${at}`, round(loopP99, 1), 'ms');
      if (connections === 1024) recorder.add(`reference server: accepted events/s at 1,024 connections ÷ the node's at 8`, round(result.eventsPerSecond / nodeAt8, 2), 'x');
    }
  } finally {
    await server.stop();
  }
}

/** The node's main thread over one point (from the probe preloaded into it): event-loop delay and GC pauses, which every answer and delivery of the node waits behind. */
function recordMainThread(recorder: Recorder, at: string, mark: ProbeMark): void {
  const majors = mark.gc.filter((pause) => pause.kind === 'mark-compact');
  const longest = mark.gc.reduce((max, pause) => Math.max(max, pause.ms), 0);
  const total = mark.gc.reduce((sum, pause) => sum + pause.ms, 0);
  recorder.log(
    `${at}: main thread event-loop delay p99 ${round(mark.loop.p99, 1)} ms, max ${round(mark.loop.max, 1)} ms; ` +
      `${mark.gc.length} GC pauses (${majors.length} mark-compact), ${round(total, 0)} ms in all, longest ${round(longest, 1)} ms`,
  );
  recorder.add(`node main thread event-loop delay p99 ${at}`, round(mark.loop.p99, 1), 'ms');
  recorder.add(`node main thread mark-compact collections ${at}`, majors.length, 'collections');
  recorder.add(`node main thread longest GC pause ${at}`, round(longest, 1), 'ms');
}
