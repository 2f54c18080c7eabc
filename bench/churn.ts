/**
 * Scenario churn: a node that runs for months sees event types and subscriptions come
 * and go all day. Rounds of ROUND_SIZE iterations of create event type → create subscription →
 * publish one event → stream it → commit → delete subscription → delete event type (IN_FLIGHT at a
 * time), then per round: the node's RSS and heap used (from its own `/metrics`, after the round), the
 * `/metrics` answer's size and the round's time. Targets, after the first (warm-up) round: RSS within
 * +50 MB of round 1, `/metrics` bytes within 1.5× of round 1, round time within ±20 % of the median.
 * Per round it also records the main thread's old-space used and heap capacity: a leak shows as a rising
 * floor of old-space used, V8 sizing its heap as a rising capacity over a flat floor; and the CPU the
 * node (main thread, other threads) and this process spent on the round, to tell whose work a round's
 * time is.
 * `BENCH_CHURN_ROUNDS` (default 10) runs more rounds to see where RSS levels off; the targets still
 * compare the last round with round 1.
 */
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { CpuMeter, pidOf, post, round, runBounded, startStack, type Recorder, type Scenario } from './harness.js';
import { createSubscription, openStream, quickMode, request, type StreamLine } from './stream-client.js';

export const ROUNDS = Number(process.env.BENCH_CHURN_ROUNDS ?? 10);
export const ROUND_SIZE = 200;
const IN_FLIGHT = 4;
const RSS_GROWTH_LIMIT_MB = 50;
const METRICS_GROWTH_LIMIT = 1.5;
const ROUND_TIME_SPREAD = 0.2;

/** One sample of a Prometheus text answer: the first series of `name`, or the series `name{label="value"}` written as it appears. */
function sampleOf(text: string, name: string): number {
  const escaped = name.replace(/[{}()[\]\\^$.|?*+]/g, '\\$&');
  const match = new RegExp(`^${escaped}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
  if (!match?.[1]) throw new Error(`/metrics has no ${name}`);
  return Number(match[1]);
}

/** One iteration: everything it creates is gone again when it returns. @throws Error on any unexpected answer */
async function iterate(url: string, name: string, random: () => number): Promise<void> {
  const created = await post(`${url}/event-types`, JSON.stringify(businessEventType(name, ORDER_SCHEMA, 1)));
  if (created.status !== 201) throw new Error(`POST /event-types answered ${created.status}: ${created.text.slice(0, 300)}`);
  const id = await createSubscription(url, `churn-${name}`, name);
  const published = await post(`${url}/event-types/${name}/events`, JSON.stringify([orderEvent(random)]));
  if (published.status !== 200) throw new Error(`publish answered ${published.status}: ${published.text.slice(0, 300)}`);
  let cursor: StreamLine['cursor'] | undefined;
  let streamId: string | undefined;
  let gotEvent: () => void = () => undefined;
  const got = new Promise<void>((resolve) => (gotEvent = resolve));
  const stream = await openStream(`${url}/subscriptions/${id}/events?batch_limit=1&stream_limit=1&batch_flush_timeout=1`, { onOpen: (s) => (streamId = s) }, (line) => {
    if (line.events && line.events.length > 0) {
      cursor = line.cursor;
      gotEvent();
    }
  });
  await Promise.race([got, stream.ended]);
  if (cursor === undefined) throw new Error(`the stream of ${name} ended without the event`);
  const commit = await request('POST', `${url}/subscriptions/${id}/cursors`, JSON.stringify({ items: [cursor] }), { 'X-Broker-StreamId': streamId ?? '' }, 'commits');
  if (commit.status !== 204 && commit.status !== 200) throw new Error(`commit answered ${commit.status}: ${commit.text.slice(0, 300)}`);
  stream.close();
  await stream.ended;
  const deletedSubscription = await request('DELETE', `${url}/subscriptions/${id}`);
  if (deletedSubscription.status !== 204) throw new Error(`DELETE subscription answered ${deletedSubscription.status}`);
  const deletedEventType = await request('DELETE', `${url}/event-types/${name}`);
  if (deletedEventType.status !== 200 && deletedEventType.status !== 204) throw new Error(`DELETE event type answered ${deletedEventType.status}: ${deletedEventType.text.slice(0, 300)}`);
}

async function run(recorder: Recorder): Promise<void> {
  const rounds = quickMode() ? 3 : ROUNDS;
  const size = quickMode() ? 20 : ROUND_SIZE;
  const stack = await startStack();
  try {
    const url = stack.broker.url;
    const random = prng(15);
    const rows: { rssMb: number; heapMb: number; oldSpaceMb: number; heapTotalMb: number; metricsBytes: number; seconds: number; nodeCoreSeconds: number; benchCoreSeconds: number }[] = [];
    // Whose work a round's time is: the node's (every thread) and this process's, in core-seconds.
    const meter = new CpuMeter([{ label: 'broker', pid: pidOf(stack.broker.process), split: true }]);
    for (let r = 0; r < rounds; r++) {
      const started = performance.now();
      meter.start();
      await runBounded(size, IN_FLIGHT, (i) => iterate(url, `churn.r${r}.n${i}`, random));
      const use = meter.stop();
      const seconds = (performance.now() - started) / 1000;
      const coreSeconds = (label: string): number => ((use.byLabel[label] ?? 0) / 100) * use.seconds;
      const nodeMain = coreSeconds('broker main thread');
      const nodeOther = coreSeconds('broker other threads');
      const bench = coreSeconds('load generator (bench process)');
      const metrics = await request('GET', `${url}/metrics`);
      const row = {
        rssMb: sampleOf(metrics.text, 'broker_process_resident_memory_bytes') / 1e6,
        heapMb: sampleOf(metrics.text, 'broker_nodejs_heap_size_used_bytes') / 1e6,
        oldSpaceMb: sampleOf(metrics.text, 'broker_nodejs_heap_space_size_used_bytes{space="old"}') / 1e6,
        heapTotalMb: sampleOf(metrics.text, 'broker_nodejs_heap_size_total_bytes') / 1e6,
        metricsBytes: Buffer.byteLength(metrics.text),
        seconds,
        nodeCoreSeconds: nodeMain + nodeOther,
        benchCoreSeconds: bench,
      };
      rows.push(row);
      recorder.log(`round ${r + 1}/${rounds} (${size} iterations): ${seconds.toFixed(2)} s, RSS ${row.rssMb.toFixed(1)} MB, heap used ${row.heapMb.toFixed(1)} MB (old space ${row.oldSpaceMb.toFixed(1)}, capacity ${row.heapTotalMb.toFixed(1)}), /metrics ${row.metricsBytes} bytes, CPU node main ${nodeMain.toFixed(2)} + other threads ${nodeOther.toFixed(2)} core-s, bench ${bench.toFixed(2)} core-s`);
      recorder.add(`round ${r + 1}: seconds`, round(seconds, 2), 's');
      recorder.add(`round ${r + 1}: RSS`, round(row.rssMb, 1), 'MB');
      recorder.add(`round ${r + 1}: heap used`, round(row.heapMb, 1), 'MB');
      recorder.add(`round ${r + 1}: old space used`, round(row.oldSpaceMb, 1), 'MB');
      recorder.add(`round ${r + 1}: heap capacity`, round(row.heapTotalMb, 1), 'MB');
      recorder.add(`round ${r + 1}: /metrics`, row.metricsBytes, 'bytes');
      recorder.add(`round ${r + 1}: node CPU, main thread`, round(nodeMain, 2), 'core-s');
      recorder.add(`round ${r + 1}: node CPU, other threads (validation workers, GC helpers)`, round(nodeOther, 2), 'core-s');
      recorder.add(`round ${r + 1}: bench process CPU`, round(bench, 2), 'core-s');
    }
    const first = rows[0];
    const last = rows[rows.length - 1];
    if (!first || !last) return;
    const later = rows.slice(1);
    /** max |x − median| ÷ median over the rounds after the warm-up round. */
    const spreadOf = (pick: (row: (typeof rows)[number]) => number): number => {
      const sorted = later.map(pick).sort((a, b) => a - b);
      const median = sorted[Math.floor(sorted.length / 2)] ?? pick(first);
      return Math.max(...later.map((row) => Math.abs(pick(row) - median) / median));
    };
    const spread = spreadOf((row) => row.seconds);
    recorder.add('RSS growth after the warm-up round (last - round 1)', round(last.rssMb - first.rssMb, 1), 'MB', { op: '<=', value: RSS_GROWTH_LIMIT_MB });
    recorder.add('/metrics bytes, last round ÷ round 1', round(last.metricsBytes / first.metricsBytes, 3), '×', { op: '<=', value: METRICS_GROWTH_LIMIT });
    recorder.add('round time spread after the warm-up round (max |t - median| ÷ median)', round(spread, 3), '×', { op: '<=', value: ROUND_TIME_SPREAD });
    // The round time is the node's and this process's work on 2 shared cores: whose work moves it.
    recorder.add('node CPU per round, spread after the warm-up round', round(spreadOf((row) => row.nodeCoreSeconds), 3), '×');
    recorder.add('bench process CPU per round, spread after the warm-up round', round(spreadOf((row) => row.benchCoreSeconds), 3), '×');
    recorder.add('bench process CPU, last round ÷ round 2', round(last.benchCoreSeconds / (later[0]?.benchCoreSeconds ?? Number.NaN), 2), '×');
    recorder.add('node CPU, last round ÷ round 2', round(last.nodeCoreSeconds / (later[0]?.nodeCoreSeconds ?? Number.NaN), 2), '×');
    const half = rows.slice(0, Math.ceil(rows.length / 2));
    const secondHalf = rows.slice(Math.ceil(rows.length / 2));
    if (secondHalf.length > 0) {
      const floor = (part: typeof rows): number => Math.min(...part.map((r) => r.oldSpaceMb));
      recorder.add('old space used, lowest sample: second half of the rounds - first half', round(floor(secondHalf) - floor(half), 1), 'MB');
    }
    recorder.add('iterations', rounds * size, 'iterations');
  } finally {
    await stack.stop(recorder);
  }
}

export const churn: Scenario = {
  name: 'churn',
  title: `${ROUNDS} rounds of ${ROUND_SIZE} × (create event type and subscription, publish, stream, commit, delete both): RSS, heap, /metrics size, round time`,
  run,
};
