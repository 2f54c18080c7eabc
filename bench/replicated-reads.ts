/**
 * Scenario `replicated-reads`: what readers waiting for replicas cost (docs/decisions/0031-reads-stop-at-the-high-watermark.md).
 * A standalone master with one replica (both fresh `redis-server`s, nothing persisted) and one broker node
 * at a time on it with `publish.minReplicas` 1, `consumption.waitForReplicas` false (readers take what the
 * master has: the behaviour before the high watermark) and true (the default: every confirmed batch moves
 * its partitions' watermark, one more script per written partition, and readers stop there), alternating
 * for `ROUNDS` rounds (3; 1 with `BENCH_QUICK=1`), a fresh node and key prefix each time. Per node:
 *
 * - publish throughput: autocannon, 1000-event batches of ~520-byte order events over 8 partitions (the
 *   `publish-batches` load), 4 connections, 2 s warm-up then 10 s measured;
 * - publish-to-delivery latency: 1,000 events/s as 100 publishes of 10 events per second (a rate both
 *   settings sustain: every publish waits for its own `WAIT`, and a lane runs one at a time), read by one
 *   subscription stream (`batch_limit` 1, committing as it goes) in this process, each event stamped with
 *   its send time; 2 s warm-up then 10 s measured; the publish answers' latency too.
 *
 * Then the storage side alone, without HTTP, validation or workers: {@link STORAGE_APPENDS} appends of 10
 * pre-serialized events, one after the other from this process, alternating between the two settings
 * append by append (so both see the same moments of a shared machine): through the replicated appender
 * without and with the watermark move, each timed until its answer and, apart, until a reader woken by the
 * partition's notice (the append notice, or the watermark's) read it through a partition store that stops,
 * or does not stop, at the watermark (the reader does not wait for the answer).
 *
 * Recorded: each HTTP figure's median over the rounds, per setting, the ratio of throughputs and the
 * difference of the p99s (with − without), and the storage side's p50/p99. Broker, both Redis servers and
 * the load generator share the machine's cores.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { startBroker, startRedis, type BrokerProcess, type RedisProcess } from '../scripts/local-processes.js';
import { loadConfig } from '../src/config/load-config.js';
import { createLogger } from '../src/observability/logger.js';
import { createKeys } from '../src/storage/keys.js';
import { PartitionStore, type PartitionAppend } from '../src/storage/partition-store.js';
import { connectRedis } from '../src/storage/redis/redis-connection.js';
import { ReplicatedAppender } from '../src/storage/replicated-append.js';
import { Scripts } from '../src/storage/scripts.js';
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { brokerWarnings, createEventType, loadRequest, median, round, runLoad, sleep, type Recorder, type Scenario } from './harness.js';
import { Committer, createSubscription, openStream, percentile, quickMode, request } from './stream-client.js';

const QUICK = quickMode();
const ROUNDS = QUICK ? 1 : 3;
const WARMUP_SECONDS = QUICK ? 1 : 2;
const DURATION_SECONDS = QUICK ? 3 : 10;
const PARTITIONS = 8;
const BATCH = 1000;
const CONNECTIONS = 4;
/** Events per second of the latency point. */
const RATE = 1000;
/** Events per publish of the latency point. */
const EVENTS_PER_PUBLISH = 10;
/** Appends of the storage-side comparison (half per setting). */
const STORAGE_APPENDS = QUICK ? 200 : 4000;
/** How long to wait for the last events after the producer stopped. */
const DRAIN_TIMEOUT_MS = 5000;

const LATENCY_SCHEMA = { type: 'object', properties: { n: { type: 'integer' }, sent_at: { type: 'number' } }, required: ['n', 'sent_at'] } as const;

const load = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ')[0] ?? '?';

/** What one node measured. */
interface Measured {
  readonly eventsPerSecond: number;
  readonly deliveryP50: number;
  readonly deliveryP99: number;
  readonly publishP50: number;
  readonly publishP99: number;
}

async function inSync(replica: RedisProcess): Promise<void> {
  const client = new Redis(replica.url, { maxRetriesPerRequest: 1 });
  try {
    const deadline = Date.now() + 10_000;
    while (!(await client.info('replication')).includes('master_link_status:up')) {
      if (Date.now() > deadline) throw new Error('the replica did not sync');
      await sleep(50);
    }
  } finally {
    client.disconnect();
  }
}

/** Publish throughput of the node: 1000-event batches, 4 connections. */
async function throughput(recorder: Recorder, broker: BrokerProcess, label: string): Promise<number> {
  const name = 'bench.order';
  await createEventType(broker.url, businessEventType(name, ORDER_SCHEMA, PARTITIONS));
  const random = prng(7);
  const requests = Array.from({ length: 4 }, () => loadRequest(`/event-types/${name}/events`, Array.from({ length: BATCH }, () => orderEvent(random))));
  await runLoad({ url: broker.url, requests, connections: CONNECTIONS, durationSeconds: WARMUP_SECONDS });
  const r = await runLoad({ url: broker.url, requests, connections: CONNECTIONS, durationSeconds: DURATION_SECONDS });
  recorder.log(`${label}: ${Math.round(r.eventsPerSecond)} events/s, p99 ${r.latencyMs.p99.toFixed(1)} ms, non-2xx ${r.non2xx}, errors ${r.errors}, load ${load()}`);
  if (r.non2xx > 0 || r.errors > 0) recorder.alarm(`${label}: ${r.non2xx} non-2xx, ${r.errors} errors; first: ${String(r.firstFailure)}`);
  return r.eventsPerSecond;
}

/** Publish-to-delivery latency at {@link RATE} events per second, {@link EVENTS_PER_PUBLISH} per publish. @returns delivery and publish p50/p99 (ms) */
async function latency(recorder: Recorder, broker: BrokerProcess, label: string): Promise<Omit<Measured, 'eventsPerSecond'>> {
  const name = 'bench.latency';
  await createEventType(broker.url, businessEventType(name, LATENCY_SCHEMA, 4));
  const id = await createSubscription(broker.url, 'bench-replicated-reads', name, 'begin');
  const publishes = (RATE / EVENTS_PER_PUBLISH) * (WARMUP_SECONDS + DURATION_SECONDS);
  const total = publishes * EVENTS_PER_PUBLISH;
  const warmup = RATE * WARMUP_SECONDS;
  const delivery = new Float64Array(total).fill(Number.NaN);
  /** Per event: whether its publish was answered 200. */
  const published = new Uint8Array(total);
  const publishMs: number[] = [];
  let failures = 0;
  let firstFailure: string | undefined;
  let committer: Committer | undefined;
  let delivered = 0;
  let expected = Number.POSITIVE_INFINITY;
  let allDelivered: (() => void) | undefined;
  const stream = await openStream(
    `${broker.url}/subscriptions/${id}/events?batch_limit=1&max_uncommitted_events=1000&batch_flush_timeout=1`,
    { onOpen: (streamId) => void (streamId !== undefined && (committer = new Committer(`${broker.url}/subscriptions/${id}/cursors`, streamId))) },
    (line) => {
      const at = performance.now();
      for (const event of line.events ?? []) {
        const { n, sent_at: sentAt } = event as { n?: unknown; sent_at?: unknown };
        if (typeof n !== 'number' || typeof sentAt !== 'number' || n < 0 || n >= total || !Number.isNaN(delivery[n] ?? 0)) continue;
        delivery[n] = at - sentAt;
        delivered += 1;
      }
      if (line.events?.length) committer?.add(line.cursor);
      if (delivered >= expected) allDelivered?.();
    },
  );
  const inFlight = new Set<Promise<void>>();
  const started = performance.now();
  let next = 0;
  while (next < publishes) {
    const due = Math.min(publishes, Math.floor(((performance.now() - started) / 1000) * (RATE / EVENTS_PER_PUBLISH)));
    while (next < due) {
      const first = next++ * EVENTS_PER_PUBLISH;
      const sent = performance.now();
      const occurredAt = new Date().toISOString();
      const body = JSON.stringify(Array.from({ length: EVENTS_PER_PUBLISH }, (_, i) => ({ metadata: { eid: randomUUID(), occurred_at: occurredAt }, n: first + i, sent_at: sent })));
      const sending = request('POST', `${broker.url}/event-types/${name}/events`, body).then(
        ({ status, text }) => {
          if (first >= warmup) publishMs.push(performance.now() - sent);
          if (status === 200) published.fill(1, first, first + EVENTS_PER_PUBLISH);
          else {
            failures += 1;
            firstFailure ??= `${status} ${text.slice(0, 300)}`;
          }
        },
        (err: unknown) => {
          failures += 1;
          firstFailure ??= err instanceof Error ? err.message : String(err);
        },
      );
      const tracked = sending.finally(() => inFlight.delete(tracked));
      inFlight.add(tracked);
    }
    await sleep(1);
  }
  await Promise.all(inFlight);
  expected = published.reduce((sum, flag) => sum + flag, 0);
  if (delivered < expected) await Promise.race([new Promise<void>((resolve) => (allDelivered = resolve)), sleep(DRAIN_TIMEOUT_MS), stream.ended]);
  await committer?.flush();
  stream.close();
  const measured: number[] = [];
  let missing = 0;
  for (let n = warmup; n < total; n++) {
    if (published[n] !== 1) continue;
    const value = delivery[n] ?? Number.NaN;
    if (Number.isNaN(value)) missing += 1;
    else measured.push(value);
  }
  const sorted = Float64Array.from(measured).sort();
  const publishSorted = Float64Array.from(publishMs).sort();
  const result = {
    deliveryP50: round(percentile(sorted, 50), 2),
    deliveryP99: round(percentile(sorted, 99), 2),
    publishP50: round(percentile(publishSorted, 50), 2),
    publishP99: round(percentile(publishSorted, 99), 2),
  };
  recorder.log(
    `${label}: ${RATE} events/s (${EVENTS_PER_PUBLISH} per publish), ${measured.length} measured: delivery p50 ${result.deliveryP50} ms, p99 ${result.deliveryP99} ms; publish p50 ${result.publishP50} ms, p99 ${result.publishP99} ms; ${missing} not delivered, ${failures} publish failures, load ${load()}`,
  );
  if (failures > 0 || missing > 0) recorder.alarm(`${label}: ${failures} publishes failed (first: ${String(firstFailure)}), ${missing} events not delivered`);
  return result;
}


/** The storage side's p50/p99 (ms) per setting: until the append's answer, and until a woken reader read it. */
interface StorageFigures {
  readonly answerP50: number;
  readonly answerP99: number;
  readonly readableP50: number;
  readonly readableP99: number;
}

/**
 * The storage side alone (see the file's comment): appends alternating between the appender without the
 * watermark move (read through a store that does not stop at it, woken by append notices) and with it
 * (read through a store that stops there, woken by the watermark's notices).
 */
async function storageSide(recorder: Recorder, master: RedisProcess): Promise<Map<boolean, StorageFigures>> {
  const config = loadConfig({ BROKER_REDIS_URL: master.url, BROKER_LOG_LEVEL: 'warn' });
  const logger = createLogger(config);
  const redis = await connectRedis(master.url, config.redis, logger);
  const subscriber = redis.duplicate({ lazyConnect: true });
  await subscriber.connect();
  const keys = createKeys('rrs:');
  const scripts = new Scripts(redis);
  const timeline = { order: 1, id: randomUUID() };
  const ignore = { observe: (): void => undefined };
  const random = prng(11);
  const data = Buffer.from(Array.from({ length: EVENTS_PER_PUBLISH }, () => JSON.stringify(orderEvent(random))).join('\n'));
  const sides = await Promise.all(
    [false, true].map(async (waiting) => {
      const name = waiting ? 'rrs.on' : 'rrs.off';
      const store = new PartitionStore(redis, scripts, keys, waiting ? ignore : undefined);
      await store.open(name, timeline, '0', 0);
      const appender = await ReplicatedAppender.open(redis, keys, 1, config.publish.replicaTimeoutMs, waiting);
      return { waiting, name, store, appender, channel: store.noticeChannel(name, 1, '0'), answers: [] as number[], readable: [] as number[] };
    }),
  );
  /** Per channel, the reader waiting for `next` to reach a value. */
  const waiters = new Map<string, { until: number; wake: () => void }>();
  subscriber.on('smessage', (channel: string, message: string) => {
    const waiter = waiters.get(channel);
    if (waiter !== undefined && Number(message) >= waiter.until) waiter.wake();
  });
  try {
    await subscriber.ssubscribe(...sides.map((side) => side.channel));
    const write: PartitionAppend = { partition: '0', count: EVENTS_PER_PUBLISH, data };
    for (let i = 0; i < STORAGE_APPENDS; i++) {
      const side = sides[i % 2] as (typeof sides)[number];
      const started = performance.now();
      // The next offset after this append, as the notice announces it.
      const until = (Math.floor(i / 2) + 1) * EVENTS_PER_PUBLISH;
      const woken = new Promise<void>((wake) => waiters.set(side.channel, { until, wake }));
      // The reader does not wait for the append's answer: it reads when its notice comes.
      const answered = side.appender.append(side.name, timeline, [write]).then(([written]) => {
        if (!written?.ok) throw new Error(`append failed: ${JSON.stringify(written)}`);
        return performance.now() - started;
      });
      const read = woken.then(async () => {
        const slice = await side.store.read(side.name, 1, '0', until - EVENTS_PER_PUBLISH - 1, 1);
        if (slice.segments[0]?.first !== until - EVENTS_PER_PUBLISH) throw new Error(`the reader did not find the append at ${until - EVENTS_PER_PUBLISH}`);
        return performance.now() - started;
      });
      const [answer, readable] = await Promise.all([answered, read]);
      side.answers.push(answer);
      side.readable.push(readable);
    }
  } finally {
    for (const side of sides) side.appender.close();
    subscriber.disconnect();
    redis.disconnect();
  }
  const p = (values: readonly number[], q: number): number => round(percentile(Float64Array.from(values).sort(), q), 3);
  const out = new Map<boolean, StorageFigures>();
  for (const side of sides) {
    const figures = { answerP50: p(side.answers, 50), answerP99: p(side.answers, 99), readableP50: p(side.readable, 50), readableP99: p(side.readable, 99) };
    recorder.log(
      `storage, readers ${side.waiting ? 'wait for replicas' : 'do not wait'}: ${side.answers.length} appends of ${EVENTS_PER_PUBLISH} events: answered p50 ${figures.answerP50} ms, p99 ${figures.answerP99} ms; read by a woken reader p50 ${figures.readableP50} ms, p99 ${figures.readableP99} ms; load ${load()}`,
    );
    out.set(side.waiting, figures);
  }
  return out;
}

async function run(recorder: Recorder): Promise<void> {
  const master = await startRedis();
  let replica: RedisProcess | undefined;
  const results = new Map<boolean, Measured[]>([
    [false, []],
    [true, []],
  ]);
  let storage: Map<boolean, StorageFigures> | undefined;
  try {
    replica = await startRedis({ extraArgs: ['--replicaof', '127.0.0.1', String(master.port)] });
    await inSync(replica);
    storage = await storageSide(recorder, master);
    for (let r = 1; r <= ROUNDS; r++) {
      for (const waiting of [false, true]) {
        const label = `round ${r}, readers ${waiting ? 'wait for replicas' : 'do not wait'}`;
        const broker = await startBroker({
          BROKER_REDIS_URL: master.url,
          BROKER_REDIS_KEY_PREFIX: `rr${r}${waiting ? 'w' : 'n'}:`,
          BROKER_PUBLISH_MIN_REPLICAS: '1',
          BROKER_CONSUMPTION_WAIT_FOR_REPLICAS: String(waiting),
          BROKER_LOG_LEVEL: 'warn',
        });
        try {
          const eventsPerSecond = await throughput(recorder, broker, label);
          const delivery = await latency(recorder, broker, label);
          results.get(waiting)?.push({ eventsPerSecond, ...delivery });
        } finally {
          await sleep(1000);
          await broker.stop('SIGTERM');
          const warnings = brokerWarnings(broker.output());
          if (warnings.length > 0) recorder.alarm(`${label}: broker wrote ${warnings.length} line(s) at warn or above; first: ${(warnings[0] ?? '').slice(0, 300)}`);
        }
      }
    }
  } finally {
    await replica?.stop();
    await master.stop();
  }
  const of = (waiting: boolean, pick: (m: Measured) => number): number => median((results.get(waiting) ?? []).map(pick));
  for (const waiting of [false, true]) {
    const setting = waiting ? 'readers wait for replicas' : 'readers do not wait';
    recorder.add(`publish events/s, 1000-event batches, 4 connections, minReplicas 1, ${setting}`, Math.round(of(waiting, (m) => m.eventsPerSecond)), 'events/s');
    recorder.add(`publish-to-delivery p50 at 1,000 events/s (10 per publish), ${setting}`, of(waiting, (m) => m.deliveryP50), 'ms');
    recorder.add(`publish-to-delivery p99 at 1,000 events/s (10 per publish), ${setting}`, of(waiting, (m) => m.deliveryP99), 'ms');
    recorder.add(`publish answer p50 at 1,000 events/s (10 per publish), ${setting}`, of(waiting, (m) => m.publishP50), 'ms');
    recorder.add(`publish answer p99 at 1,000 events/s (10 per publish), ${setting}`, of(waiting, (m) => m.publishP99), 'ms');
  }
  for (const waiting of [false, true]) {
    const setting = waiting ? 'readers wait for replicas' : 'readers do not wait';
    const figures = storage?.get(waiting);
    if (figures === undefined) continue;
    recorder.add(`storage: 10-event append answered p50, ${setting}`, figures.answerP50, 'ms');
    recorder.add(`storage: 10-event append answered p99, ${setting}`, figures.answerP99, 'ms');
    recorder.add(`storage: append to read by a woken reader p50, ${setting}`, figures.readableP50, 'ms');
    recorder.add(`storage: append to read by a woken reader p99, ${setting}`, figures.readableP99, 'ms');
  }
  recorder.add('publish events/s, readers waiting ÷ not waiting', round(of(true, (m) => m.eventsPerSecond) / of(false, (m) => m.eventsPerSecond), 2), 'ratio');
  recorder.add('publish-to-delivery p99, readers waiting − not waiting', round(of(true, (m) => m.deliveryP99) - of(false, (m) => m.deliveryP99), 2), 'ms');
}

export const replicatedReads: Scenario = {
  name: 'replicated-reads',
  title: 'minReplicas 1 with readers waiting for replicas (high watermark) against not: publish events/s, publish-to-delivery p99',
  run,
};
