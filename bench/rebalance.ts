/**
 * Scenario `rebalance`: how long a subscription takes to settle a new consumer as the
 * number of streams grows, on one subscription of 200 partitions (one event type; both
 * `eventTypes.maxPartitionCount` and `subscriptions.maxPartitions` raised to 200 for it).
 *
 * Streams join one after the other (automatic assignment, nothing published: there is nothing to
 * commit, so a partition leaving a stream is handed over as soon as that stream's node sees the change).
 * For each join, the time from sending the new stream's request until `GET /subscriptions/{id}/stats`
 * shows the new assignment settled: every partition `assigned` (none `reassigning`), each to an open
 * stream, and every open stream holding ⌊200/n⌋ or ⌈200/n⌉ partitions. The stats are polled every
 * {@link POLL_MS} ms, so a figure is late by up to that plus one stats answer. The next stream joins
 * once the last one settled.
 *
 * What a join costs the broker: the join writes the new assignment (one compare-and-set script), and
 * every partition that moves is first `reassigning`; its old stream's node completes the hand-over with
 * one more compare-and-set per partition (`completeReassignment`), so a join moves about 200/n
 * partitions and costs about 200/n + 1 assignment writes, each of which every stream re-reads.
 * Target: no worse than linear in the streams: the time at 100 streams ≤ 50 × the time at 2.
 * Recorded per point: the settle time, the partitions moved, and the node's rebalance counter.
 */
import { businessEventType, SMALL_BUSINESS_SCHEMA } from './events.js';
import { round, sleep, startStack, type Recorder, type Scenario } from './harness.js';
import { openStream, quickMode, request, requestRetrying, type OpenStream } from './stream-client.js';

const QUICK = quickMode();
const PARTITIONS = 200;
const EVENT_TYPE = 'bench.rebalance';
/** Stream counts recorded (every join up to the last is measured). */
export const POINTS: readonly number[] = QUICK ? [2, 5, 10] : [2, 5, 10, 25, 50, 100];
const POLL_MS = 10;
/** A join not settled by then is reported and the scenario stops. */
const SETTLE_TIMEOUT_MS = 60_000;

/** One partition of `GET /subscriptions/{id}/stats`. */
interface PartitionStat {
  readonly partition: string;
  readonly state: string;
  readonly stream_id?: string;
}

async function stats(url: string, subscription: string): Promise<PartitionStat[]> {
  const answer = await request('GET', `${url}/subscriptions/${subscription}/stats`);
  if (answer.status !== 200) throw new Error(`GET stats answered ${answer.status}: ${answer.text.slice(0, 300)}`);
  const parsed = JSON.parse(answer.text) as { items?: { partitions?: PartitionStat[] }[] };
  return (parsed.items ?? []).flatMap((i) => i.partitions ?? []);
}

/** Whether the stats show `open` streams sharing every partition evenly, nothing reassigning. */
function settled(partitions: readonly PartitionStat[], open: ReadonlySet<string>): boolean {
  if (partitions.length !== PARTITIONS) return false;
  const held = new Map<string, number>();
  for (const p of partitions) {
    if (p.state !== 'assigned' || p.stream_id === undefined || !open.has(p.stream_id)) return false;
    held.set(p.stream_id, (held.get(p.stream_id) ?? 0) + 1);
  }
  const low = Math.floor(PARTITIONS / open.size);
  const high = Math.ceil(PARTITIONS / open.size);
  return held.size === open.size && [...held.values()].every((n) => n >= low && n <= high);
}

/** `broker_subscription_rebalances_total` of the node's `/metrics`. */
async function rebalances(url: string): Promise<number> {
  const answer = await request('GET', `${url}/metrics`);
  const match = /^broker_subscription_rebalances_total (\d+)/m.exec(answer.text);
  return match ? Number(match[1]) : Number.NaN;
}

async function run(recorder: Recorder): Promise<void> {
  const stack = await startStack({ BROKER_EVENT_TYPES_MAX_PARTITION_COUNT: String(PARTITIONS), BROKER_SUBSCRIPTIONS_MAX_PARTITIONS: String(PARTITIONS) });
  const streams: OpenStream[] = [];
  try {
    const url = stack.broker.url;
    await requestRetrying('POST', `${url}/event-types`, JSON.stringify(businessEventType(EVENT_TYPE, SMALL_BUSINESS_SCHEMA, PARTITIONS)), [201]);
    const created = await requestRetrying('POST', `${url}/subscriptions`, JSON.stringify({ owning_application: 'bench-rebalance', event_types: [EVENT_TYPE], read_from: 'end' }), [200, 201]);
    const subscription = (JSON.parse(created.text) as { id: string }).id;
    const open = new Set<string>();
    const last = Math.max(...POINTS);
    const times = new Map<number, number>();
    let previous = new Map<string, string>();
    for (let n = 1; n <= last; n++) {
      const rebalancesBefore = await rebalances(url);
      const started = performance.now();
      const stream = await openStream(`${url}/subscriptions/${subscription}/events?batch_limit=1&batch_flush_timeout=60&commit_timeout=60&stream_timeout=0`, {}, () => undefined);
      if (stream.streamId === undefined) throw new Error('the subscription stream has no X-Broker-StreamId header');
      streams.push(stream);
      open.add(stream.streamId);
      let current: PartitionStat[] = [];
      for (;;) {
        current = await stats(url, subscription);
        if (settled(current, open)) break;
        if (performance.now() - started > SETTLE_TIMEOUT_MS) throw new Error(`${n} streams: not settled within ${SETTLE_TIMEOUT_MS} ms; stats: ${JSON.stringify(current).slice(0, 500)}`);
        await sleep(POLL_MS);
      }
      const ms = performance.now() - started;
      const now = new Map(current.map((p) => [p.partition, p.stream_id ?? '']));
      const moved = [...now].filter(([partition, owner]) => previous.get(partition) !== owner).length;
      previous = now;
      const ended = streams.filter((s) => s.lastDebug !== undefined && s.lastDebug !== 'Stream started');
      if (ended.length > 0) recorder.alarm(`${n} streams: ${ended.length} streams ended: ${[...new Set(ended.map((s) => s.lastDebug))].join('; ')}`);
      if (!POINTS.includes(n)) continue;
      times.set(n, ms);
      const written = (await rebalances(url)) - rebalancesBefore;
      recorder.log(`${n} streams: the ${n}th stream settled in ${ms.toFixed(0)} ms, ${moved} partitions moved, ${written} assignment writes`);
      recorder.add(`${n} streams: settle time of the ${n}th stream`, round(ms, 1), 'ms');
      recorder.add(`${n} streams: partitions moved`, moved, 'partitions');
      recorder.add(`${n} streams: assignment writes (broker_subscription_rebalances_total)`, written, 'writes');
    }
    const low = times.get(POINTS[0] as number);
    const high = times.get(last);
    if (low !== undefined && high !== undefined) {
      recorder.add(`settle time, ${last} ÷ ${POINTS[0] as number} streams`, round(high / low, 1), '×', { op: '<=', value: last / (POINTS[0] as number) });
    }
  } finally {
    for (const s of streams) s.close();
    await sleep(500);
    await stack.stop(recorder);
  }
}

export const rebalance: Scenario = {
  name: 'rebalance',
  title: `time to settle a joining stream on one subscription of ${PARTITIONS} partitions, ${POINTS.join('/')} streams`,
  run,
};
