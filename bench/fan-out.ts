/**
 * Scenario `fan-out`: what a commit costs the broker nodes as the number of
 * subscriptions grows. Three nodes on one Redis; one event type with 2 partitions and events published
 * beforehand; N subscriptions from `begin` with 2 streams each (`batch_limit=1`,
 * `max_uncommitted_events=1`: a stream sends its next event only once its last one is committed), the
 * streams spread over the nodes. The bench commits at a fixed total rate, round-robin over the streams
 * and over the nodes (as a load balancer would send them: two commits in three go to a node that does
 * not serve the stream), so every commit must reach the stream's node to let it send on.
 *
 * Per point N = 10, 50, 100, 200 (the streams of earlier points stay open): the nodes' CPU per commit
 * (all three nodes, from /proc/<pid>/stat), their CPU with the streams open and nothing committed
 * (heartbeats and safety-net polls), the commit answer latency and the time from a commit until the
 * stream's next event. Target: CPU per commit at 200 subscriptions within 1.5× of 10.
 */
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { brokerWarnings, createEventType, CpuMeter, loadRequest, pidOf, post, round, runBounded, sleep, type Recorder, type Scenario } from './harness.js';
import { startBroker, startRedis, type BrokerProcess, type RedisProcess } from '../scripts/local-processes.js';
import { createSubscription, openStream, percentile, quickMode, request, type OpenStream, type StreamCursor } from './stream-client.js';

const QUICK = quickMode();
const EVENT_TYPE = 'bench.fanout';
const NODES = 3;
const PARTITIONS = 2;
const STREAMS_PER_SUBSCRIPTION = 2;
/** Subscription counts measured, in order (cumulative: the streams of a point stay open for the next). */
export const POINTS: readonly number[] = QUICK ? [2, 6] : [10, 50, 100, 200];
/** Commits per second over all streams and nodes. */
export const COMMIT_RATE = QUICK ? 50 : 300;
const EVENTS = QUICK ? 2_000 : 20_000;
const WARMUP_SECONDS = QUICK ? 2 : 4;
const IDLE_SECONDS = QUICK ? 1 : 3;
const DURATION_SECONDS = QUICK ? 3 : 10;
const TICK_MS = 5;
const OPEN_IN_FLIGHT = 6;
const TARGET_RATIO = 1.5;

/** One subscription stream and its commit state. */
interface FanStream {
  readonly subscription: string;
  /** Index of the node serving the stream. */
  readonly node: number;
  readonly stream: OpenStream;
  readonly streamId: string;
  /** The cursor of the last batch with an event, until it is committed. */
  pending: StreamCursor | undefined;
  /** When the commit in flight was sent (performance.now()); undefined when none. */
  commitSentAt: number | undefined;
  /** When the last commit was sent, until the next event arrives. */
  waitingSince: number | undefined;
}

/** What the commit loop measured since it was last reset. */
class Tally {
  commits = 0;
  failures = 0;
  firstFailure: string | undefined;
  /** Ticks that found no stream with an uncommitted event (the rate was not reached then). */
  starved = 0;
  readonly commitLatencies: number[] = [];
  readonly deliveryLatencies: number[] = [];
}

/** Commits at a fixed total rate, round-robin over the streams and the nodes. */
class CommitLoop {
  private timer: NodeJS.Timeout | undefined;
  private sent = 0;
  private startedAt = 0;
  private nextStream = 0;
  private nextNode = 0;
  private readonly inFlight = new Set<Promise<void>>();
  tally = new Tally();

  constructor(
    private readonly urls: readonly string[],
    private readonly streams: FanStream[],
  ) {}

  /** An event arrived on `s`: it waits to be committed. */
  received(s: FanStream, cursor: StreamCursor): void {
    s.pending = cursor;
    if (s.waitingSince !== undefined) {
      this.tally.deliveryLatencies.push(performance.now() - s.waitingSince);
      s.waitingSince = undefined;
    }
  }

  start(): void {
    this.sent = 0;
    this.startedAt = performance.now();
    this.timer = setInterval(() => this.tick(), TICK_MS);
  }

  /** Stops sending and waits for the commits in flight. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await Promise.all(this.inFlight);
  }

  private tick(): void {
    const due = Math.floor(((performance.now() - this.startedAt) / 1000) * COMMIT_RATE) - this.sent;
    for (let i = 0; i < due; i++) {
      const s = this.pick();
      if (s === undefined) {
        this.tally.starved += 1;
        // Not caught up later: the rate is what was sent, not what was due.
        this.sent += due - i;
        return;
      }
      this.sent += 1;
      this.commit(s);
    }
  }

  private pick(): FanStream | undefined {
    for (let tried = 0; tried < this.streams.length; tried++) {
      const s = this.streams[this.nextStream % this.streams.length];
      this.nextStream = (this.nextStream + 1) % this.streams.length;
      if (s !== undefined && s.pending !== undefined && s.commitSentAt === undefined) return s;
    }
    return undefined;
  }

  private commit(s: FanStream): void {
    const cursor = s.pending as StreamCursor;
    s.pending = undefined;
    const url = this.urls[this.nextNode % this.urls.length] as string;
    this.nextNode += 1;
    const sentAt = performance.now();
    s.commitSentAt = sentAt;
    s.waitingSince = sentAt;
    const tally = this.tally;
    const done = request('POST', `${url}/subscriptions/${s.subscription}/cursors`, JSON.stringify({ items: [cursor] }), { 'X-Broker-StreamId': s.streamId }, 'commits')
      .then((answer) => {
        if (answer.status === 204 || answer.status === 200) {
          tally.commits += 1;
          tally.commitLatencies.push(performance.now() - sentAt);
        } else {
          tally.failures += 1;
          tally.firstFailure ??= `${answer.status} ${answer.text.slice(0, 300)}`;
        }
      })
      .catch((err: unknown) => {
        tally.failures += 1;
        tally.firstFailure ??= err instanceof Error ? err.message : String(err);
      })
      .finally(() => {
        s.commitSentAt = undefined;
        this.inFlight.delete(done);
      });
    this.inFlight.add(done);
  }
}

/** Opens a stream of `subscription` on node `node`; its events go to `loop`. */
async function openFanStream(urls: readonly string[], subscription: string, node: number, loop: { received(s: FanStream, c: StreamCursor): void }): Promise<FanStream> {
  const opened: { self?: FanStream } = {};
  const early: StreamCursor[] = [];
  const url = `${urls[node] as string}/subscriptions/${subscription}/events?batch_limit=1&max_uncommitted_events=1&batch_flush_timeout=30&commit_timeout=60`;
  const stream = await openStream(url, {}, (line) => {
    if ((line.events?.length ?? 0) === 0) return;
    if (opened.self === undefined) early.push(line.cursor);
    else loop.received(opened.self, line.cursor);
  });
  if (stream.streamId === undefined) throw new Error('the subscription stream has no X-Broker-StreamId header');
  const self: FanStream = { subscription, node, stream, streamId: stream.streamId, pending: undefined, commitSentAt: undefined, waitingSince: undefined };
  opened.self = self;
  for (const cursor of early) loop.received(self, cursor);
  return self;
}

function sorted(values: readonly number[]): Float64Array {
  return Float64Array.from(values).sort();
}

async function run(recorder: Recorder): Promise<void> {
  const redis: RedisProcess = await startRedis();
  const nodes: BrokerProcess[] = [];
  const streams: FanStream[] = [];
  try {
    for (let i = 0; i < NODES; i++) nodes.push(await startBroker({ BROKER_REDIS_URL: redis.url, BROKER_LOG_LEVEL: 'warn' }));
    const urls = nodes.map((n) => n.url);
    const first = urls[0] as string;
    await createEventType(first, businessEventType(EVENT_TYPE, ORDER_SCHEMA, PARTITIONS));
    const random = prng(153);
    const body = loadRequest(`/event-types/${EVENT_TYPE}/events`, Array.from({ length: 500 }, () => orderEvent(random)));
    for (let published = 0; published < EVENTS; published += body.events) {
      const answer = await post(`${first}/event-types/${EVENT_TYPE}/events`, body.body);
      if (answer.status !== 200) throw new Error(`publish answered ${answer.status}: ${answer.text.slice(0, 300)}`);
    }
    const loop = new CommitLoop(urls, streams);
    const meter = new CpuMeter([...nodes.map((n, i) => ({ label: `node ${i + 1}`, pid: pidOf(n.process) })), { label: 'redis-server', pid: pidOf(redis.process) }]);
    const nodeCpu = (byLabel: Readonly<Record<string, number>>): number => nodes.reduce((sum, _n, i) => sum + (byLabel[`node ${i + 1}`] ?? 0), 0);
    const perCommit = new Map<number, number>();
    let subscriptions = 0;

    for (const count of POINTS) {
      const label = `${count} subscriptions`;
      const started = performance.now();
      const from = subscriptions;
      await runBounded(count - from, OPEN_IN_FLIGHT, async (k) => {
        const index = from + k;
        const id = await createSubscription(urls[index % NODES] as string, `bench-fanout-${index}`, EVENT_TYPE, 'begin');
        // Stream j of subscription i on node (2i + j) mod 3: every node serves streams of every kind.
        for (let j = 0; j < STREAMS_PER_SUBSCRIPTION; j++) streams.push(await openFanStream(urls, id, (STREAMS_PER_SUBSCRIPTION * index + j) % NODES, loop));
      });
      subscriptions = count;
      recorder.log(`${label}: ${streams.length} streams open after ${((performance.now() - started) / 1000).toFixed(1)} s`);

      loop.start();
      await sleep(WARMUP_SECONDS * 1000);
      await loop.stop();

      meter.start();
      await sleep(IDLE_SECONDS * 1000);
      const idle = meter.stop();

      loop.tally = new Tally();
      meter.start();
      const measureStart = performance.now();
      loop.start();
      await sleep(DURATION_SECONDS * 1000);
      const cpu = meter.stop();
      const seconds = (performance.now() - measureStart) / 1000;
      await loop.stop();
      const tally = loop.tally;

      const nodeCoreSeconds = (nodeCpu(cpu.byLabel) / 100) * seconds;
      const cpuPerCommitUs = tally.commits === 0 ? Number.NaN : (nodeCoreSeconds * 1e6) / tally.commits;
      const idleNodes = nodeCpu(idle.byLabel);
      const netPerCommitUs = tally.commits === 0 ? Number.NaN : (((nodeCpu(cpu.byLabel) - idleNodes) / 100) * seconds * 1e6) / tally.commits;
      const commitMs = sorted(tally.commitLatencies);
      const deliveryMs = sorted(tally.deliveryLatencies);
      perCommit.set(count, cpuPerCommitUs);
      const ended = streams.filter((s) => s.stream.lastDebug !== undefined && s.stream.lastDebug !== 'Stream started');

      recorder.log(
        `${label}: ${(tally.commits / seconds).toFixed(0)} commits/s, node CPU ${nodeCpu(cpu.byLabel).toFixed(0)}% of a core (idle ${idleNodes.toFixed(0)}%), ` +
          `${cpuPerCommitUs.toFixed(0)} µs per commit (${netPerCommitUs.toFixed(0)} over idle), commit p50 ${percentile(commitMs, 50).toFixed(1)} ms p99 ${percentile(commitMs, 99).toFixed(1)} ms, ` +
          `next event p99 ${percentile(deliveryMs, 99).toFixed(1)} ms; redis ${(cpu.byLabel['redis-server'] ?? 0).toFixed(0)}%, other processes ${(cpu.byLabel['other processes'] ?? 0).toFixed(0)}%`,
      );
      if (tally.failures > 0) recorder.alarm(`${label}: ${tally.failures} commits failed; first: ${tally.firstFailure ?? ''}`);
      if (tally.starved > 0) recorder.alarm(`${label}: ${tally.starved} ticks found no stream with an uncommitted event (rate not reached)`);
      if (ended.length > 0) recorder.alarm(`${label}: ${ended.length} streams ended: ${[...new Set(ended.map((s) => s.stream.lastDebug))].join('; ')}`);

      recorder.add(`${label}: node CPU per commit (3 nodes)`, round(cpuPerCommitUs, 0), 'µs');
      recorder.add(`${label}: node CPU per commit over idle`, round(netPerCommitUs, 0), 'µs');
      recorder.add(`${label}: node CPU while committing (3 nodes)`, round(nodeCpu(cpu.byLabel), 1), '% of a core');
      recorder.add(`${label}: node CPU idle, streams open (3 nodes)`, round(idleNodes, 1), '% of a core');
      recorder.add(`${label}: redis-server CPU while committing`, round(cpu.byLabel['redis-server'] ?? 0, 1), '% of a core');
      recorder.add(`${label}: CPU of other processes while committing (noise)`, round(cpu.byLabel['other processes'] ?? 0, 1), '% of a core');
      recorder.add(`${label}: commits/s`, round(tally.commits / seconds, 0), 'commits/s');
      recorder.add(`${label}: commit latency p50`, round(percentile(commitMs, 50), 2), 'ms');
      recorder.add(`${label}: commit latency p99`, round(percentile(commitMs, 99), 2), 'ms');
      recorder.add(`${label}: commit to next event p99`, round(percentile(deliveryMs, 99), 2), 'ms');
      recorder.add(`${label}: failed commits`, tally.failures, 'requests', { op: '<=', value: 0 });
    }
    const low = perCommit.get(POINTS[0] as number);
    const high = perCommit.get(POINTS[POINTS.length - 1] as number);
    if (low !== undefined && high !== undefined) {
      recorder.add(`node CPU per commit, ${POINTS[POINTS.length - 1] as number} ÷ ${POINTS[0] as number} subscriptions`, round(high / low, 2), '×', { op: '<=', value: TARGET_RATIO });
    }
  } finally {
    for (const s of streams) s.stream.close();
    await sleep(500);
    const codes = await Promise.all(nodes.map((n) => n.stop('SIGTERM')));
    await redis.stop();
    codes.forEach((code, i) => {
      if (code !== 0) recorder.alarm(`node ${i + 1} exited with code ${String(code)} on SIGTERM`);
    });
    const warnings = nodes.flatMap((n) => brokerWarnings(n.output()));
    if (warnings.length > 0) {
      recorder.alarm(`the nodes wrote ${warnings.length} log line(s) at warn or above; first ones:`);
      for (const line of warnings.slice(0, 5)) recorder.alarm(`  ${line.slice(0, 400)}`);
    }
    recorder.add('broker log lines at warn or above (3 nodes)', warnings.length, 'lines');
  }
}

export const fanOut: Scenario = {
  name: 'fan-out',
  title: `commit cost as subscriptions grow: 3 nodes, ${POINTS.join('/')} subscriptions × ${STREAMS_PER_SUBSCRIPTION} streams, ${COMMIT_RATE} commits/s in all`,
  run,
};
