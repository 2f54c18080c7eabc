/**
 * Scenario `idle-streams`: what open streams with nothing to send cost a node, in
 * memory (RSS) and CPU, from 10 to 2,000 streams, for both kinds:
 *
 * - subscription streams (what production consumers use): N subscriptions of one event type with one
 *   partition (`read_from: end`), one stream each. Each stream renews its session every
 *   `subscriptions.leaseTtlMs / 3` (default 10 s / 3: a `heartbeat` script and a state read), keeps the
 *   subscription's notice channel subscribed, and polls its partition every `consumption.pollIntervalMs`
 *   (default 1 s: the safety net; publishes wake readers at once);
 * - low-level streams: N `GET /event-types/{name}/events` streams of the same event type (from its
 *   newest offset); no session, only the poll of each partition.
 *
 * Each kind on its own fresh stack. Per point (cumulative: the streams of a point stay open for the next)
 * the streams are opened (16 requests in flight), then after {@link SETTLE_SECONDS} s the node's and
 * redis-server's CPU is measured over {@link IDLE_SECONDS} s with nothing published, and the node's RSS
 * (`/proc/<pid>/status` VmRSS) sampled every second of it (median). The point with 0 streams is the
 * node's own idle baseline.
 *
 * Targets: RSS per stream ≤ 100 KB, as the slope between the last two points (1000 → 2000 streams): what
 * each more stream costs once the costs that do not scale are paid (the RSS right after start holds
 * start-up garbage the next collections return; the young generation's pages become resident as the
 * allocation rate grows, up to its fixed size); the average over the first point with streams is
 * recorded too. Idle CPU "flat":
 * the CPU per stream per second (node CPU over that at 10 streams ÷ the streams added since) at the last
 * point within 1.5× of that at 500 streams, i.e. the idle cost grows linearly with the streams (each
 * stream's timers are real work) and no faster. The µs per stream per second are recorded for every point
 * from 100 on (at 100 too few ticks to mean much: {@link IDLE_SECONDS}).
 */
import { readFileSync } from 'node:fs';
import { businessEventType, SMALL_BUSINESS_SCHEMA } from './events.js';
import { CpuMeter, median, pidOf, round, runBounded, sleep, startStack, type Recorder, type Scenario, type Stack } from './harness.js';
import { openStream, quickMode, requestRetrying, type OpenStream } from './stream-client.js';

const QUICK = quickMode();
/** Open streams at each point (0: the node's own baseline). */
export const POINTS: readonly number[] = QUICK ? [0, 10, 50] : [0, 10, 100, 500, 1000, 2000];
const EVENT_TYPE = 'bench.idle';
const OPEN_IN_FLIGHT = 16;
const SETTLE_SECONDS = QUICK ? 1 : 3;
/**
 * Seconds each point's idle CPU is measured over. The meter counts 10 ms ticks: at 100 streams a stream's
 * ~20–50 µs per second is 2–5 ticks over 10 s in all, below what the meter can resolve; 20 s at 500 streams
 * and more gives 200+ ticks above the baseline.
 */
const IDLE_SECONDS = QUICK ? 3 : 20;
const RSS_TARGET_KB = 100;
const CPU_RATIO_TARGET = 1.5;
/**
 * The point the last one's CPU per stream is compared with: the first with enough ticks above the
 * baseline to measure ({@link IDLE_SECONDS}; at 100 streams the three runs recorded gave 80, 20 and 80 µs, multiples of one tick, so
 * 2000 ÷ 100 measured the meter, not the broker).
 */
const CPU_REFERENCE_POINT = QUICK ? 10 : 500;
/** The point whose CPU is the baseline: the first with streams (the 0-stream point right after start still holds start-up work, e.g. collections of start-up garbage). */
const CPU_BASELINE_POINT = 10;

/** VmRSS of a process in KB. */
function rssKb(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) : Number.NaN;
}

type Kind = 'subscription' | 'low-level';

/** Opens one stream of `kind`; its lines are dropped. */
async function openIdle(kind: Kind, url: string, index: number): Promise<OpenStream> {
  if (kind === 'low-level') return openStream(`${url}/event-types/${EVENT_TYPE}/events?batch_limit=1&stream_timeout=0`, {}, () => undefined);
  const created = await requestRetrying('POST', `${url}/subscriptions`, JSON.stringify({ owning_application: `bench-idle-${index}`, event_types: [EVENT_TYPE], read_from: 'end' }), [200, 201]);
  const id = (JSON.parse(created.text) as { id: string }).id;
  return openStream(`${url}/subscriptions/${id}/events?batch_limit=1&stream_timeout=0&commit_timeout=60`, {}, () => undefined);
}

/** One kind's curve on its own stack. */
async function curve(recorder: Recorder, kind: Kind): Promise<void> {
  const stack: Stack = await startStack();
  const streams: OpenStream[] = [];
  try {
    const url = stack.broker.url;
    await requestRetrying('POST', `${url}/event-types`, JSON.stringify(businessEventType(EVENT_TYPE, SMALL_BUSINESS_SCHEMA, 1)), [201]);
    const brokerPid = pidOf(stack.broker.process);
    const meter = new CpuMeter([
      { label: 'broker', pid: brokerPid },
      { label: 'redis-server', pid: pidOf(stack.redis.process) },
    ]);
    let baseline: { rssKb: number; cpu: number } | undefined;
    // RSS per stream is the slope from the first point with streams: the node's RSS right after start
    // (the 0 point) still holds start-up garbage that the next collections return (tens of MB).
    let rssFrom: { rssKb: number; streams: number } | undefined;
    let previous: { rssKb: number; streams: number } | undefined;
    const perStreamUs = new Map<number, number>();
    for (const count of POINTS) {
      const from = streams.length;
      const started = performance.now();
      await runBounded(count - from, OPEN_IN_FLIGHT, async (k) => {
        streams.push(await openIdle(kind, url, from + k));
      });
      const openSeconds = (performance.now() - started) / 1000;
      await sleep(SETTLE_SECONDS * 1000);
      const samples: number[] = [];
      meter.start();
      for (let s = 0; s < IDLE_SECONDS; s++) {
        await sleep(1000);
        samples.push(rssKb(brokerPid));
      }
      const use = meter.stop();
      const rss = median(samples);
      const cpu = use.byLabel['broker'] ?? 0;
      const redisCpu = use.byLabel['redis-server'] ?? 0;
      if (count === CPU_BASELINE_POINT) baseline = { rssKb: rss, cpu };
      const label = `${kind} streams: ${count}`;
      const ended = streams.filter((s) => s.lastDebug !== undefined && s.lastDebug !== 'Stream started');
      if (ended.length > 0) recorder.alarm(`${label}: ${ended.length} streams ended: ${[...new Set(ended.map((s) => s.lastDebug))].join('; ')}`);
      // % of a core → core-µs per second, per stream.
      const usPerStream = baseline === undefined || count <= CPU_BASELINE_POINT ? Number.NaN : (((cpu - baseline.cpu) / 100) * 1e6) / (count - CPU_BASELINE_POINT);
      const redisUsPerStream = count === 0 ? Number.NaN : ((redisCpu / 100) * 1e6) / count;
      const marginalKb = previous === undefined || previous.streams === 0 ? Number.NaN : (rss - previous.rssKb) / (count - previous.streams);
      previous = { rssKb: rss, streams: count };
      if (count > 0) rssFrom ??= { rssKb: rss, streams: count };
      const kbPerStream = rssFrom === undefined || count === rssFrom.streams ? Number.NaN : (rss - rssFrom.rssKb) / (count - rssFrom.streams);
      perStreamUs.set(count, usPerStream);
      recorder.log(
        `${label}: opened in ${openSeconds.toFixed(1)} s; RSS ${(rss / 1024).toFixed(1)} MB (${kbPerStream.toFixed(1)} KB per stream over the first point, ${marginalKb.toFixed(1)} KB per added stream), idle CPU node ${cpu.toFixed(1)}% (${usPerStream.toFixed(1)} µs per stream per s over ${CPU_BASELINE_POINT} streams), ` +
          `redis ${redisCpu.toFixed(1)}%, other processes ${(use.byLabel['other processes'] ?? 0).toFixed(0)}%`,
      );
      recorder.add(`${label}: RSS`, round(rss / 1024, 1), 'MB');
      recorder.add(`${label}: idle CPU, node`, round(cpu, 2), '% of a core');
      recorder.add(`${label}: idle CPU, redis-server`, round(redisCpu, 2), '% of a core');
      recorder.add(`${label}: CPU of other processes (noise)`, round(use.byLabel['other processes'] ?? 0, 0), '% of a core');
      if (count > 0) {
        recorder.add(`${label}: seconds to open ${count - from} streams`, round(openSeconds, 1), 's');
        if (!Number.isNaN(usPerStream)) recorder.add(`${label}: node CPU per stream per second (over ${CPU_BASELINE_POINT} streams)`, round(usPerStream, 1), 'core-µs');
        recorder.add(`${label}: redis-server CPU per stream per second`, round(redisUsPerStream, 1), 'core-µs');
        const last = count === POINTS[POINTS.length - 1];
        if (!Number.isNaN(kbPerStream)) recorder.add(`${label}: RSS per stream (over ${rssFrom?.streams ?? 0} streams)`, round(kbPerStream, 1), 'KB');
        if (!Number.isNaN(marginalKb)) recorder.add(`${label}: RSS per added stream (over the point before)`, round(marginalKb, 1), 'KB', last ? { op: '<=', value: RSS_TARGET_KB } : undefined);
      }
    }
    const last = POINTS[POINTS.length - 1] as number;
    const reference = perStreamUs.get(CPU_REFERENCE_POINT);
    const high = perStreamUs.get(last);
    if (reference !== undefined && high !== undefined) {
      recorder.add(`${kind} streams: node CPU per stream per second, ${last} ÷ ${CPU_REFERENCE_POINT} streams`, round(high / reference, 2), '×', { op: '<=', value: CPU_RATIO_TARGET });
    }
  } finally {
    for (const s of streams) s.close();
    await sleep(1000);
    await stack.stop(recorder);
  }
}

async function run(recorder: Recorder): Promise<void> {
  await curve(recorder, 'subscription');
  await curve(recorder, 'low-level');
}

export const idleStreams: Scenario = {
  name: 'idle-streams',
  title: `node RSS and idle CPU with ${POINTS.filter((p) => p > 0).join('/')} open idle streams, subscription and low-level`,
  run,
};
