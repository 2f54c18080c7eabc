/**
 * Scenario `storage`: events stored compressed against stored plain (`publish.storedCompression`), in
 * the same run, in rounds that alternate the setting (each round a fresh Redis and node, so each measures
 * an equally empty Redis). Business order events of ~520 bytes as sent (~700 bytes enriched), one
 * partition, so a batch is one stream entry. Per round:
 *
 * - **1000-event batches**: {@link BIG_BATCHES} batches at {@link IN_FLIGHT} in flight: publish events/s,
 *   and Redis `used_memory` grown per stored event against the event's enriched JSON (read back from the log);
 * - **10-event batches**: {@link SMALL_BATCHES} batches, the same memory figure;
 * - **subscription stream**: the 1000-event batches' events read from `begin` by one committing
 *   subscription stream (`batch_limit` 1000, events left as text by the client): events/s;
 * - **publish to delivery**: 1,000 events/s as 10-event batches every 10 ms for {@link LATENCY_SECONDS} s,
 *   each event carrying its send time, received by a subscription stream (`batch_limit` 10) in this
 *   process: p99 (the first second not counted).
 *
 * Figures are medians over the rounds of each setting; ratios compare those medians. The load average at
 * start and end says how busy the shared machine was.
 */
import { loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { decodeEntry } from '../src/domain/batch/entry-codec.js';
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { createEventType, keysMatching, loadRequest, median, post, round, runBounded, sleep, startStack, type LoadRequest, type Recorder, type Scenario, type Stack } from './harness.js';
import { Committer, createSubscription, openStream, percentile, quickMode, type StreamLine } from './stream-client.js';

const QUICK = quickMode();
/** Rounds per setting (alternating, compressed first every other pair). */
const ROUNDS = QUICK ? 1 : 3;
const BIG = 1000;
const SMALL = 10;
const BIG_BATCHES = QUICK ? 20 : 150;
const SMALL_BATCHES = QUICK ? 200 : 3000;
const IN_FLIGHT = 4;
const SMALL_IN_FLIGHT = 8;
const DISTINCT_BODIES = 16;
const LATENCY_SECONDS = QUICK ? 2 : 6;
const LATENCY_WARMUP_MS = 1000;
const LATENCY_INTERVAL_MS = 10;
const READ_TIMEOUT_MS = 120_000;
/** The broker's default `redis.keyPrefix`. */
const KEY_PREFIX = 'broker:';

const LATENCY_SCHEMA = { ...ORDER_SCHEMA, properties: { ...ORDER_SCHEMA.properties, sent_at: { type: 'number' } } };

type Setting = 'compressed' | 'plain';

/** What one round of one setting measured. */
interface Round {
  readonly bigBytesRatio: number;
  readonly bigBytesPerEvent: number;
  readonly smallBytesRatio: number;
  readonly smallBytesPerEvent: number;
  readonly storedJsonBytes: number;
  readonly publishEventsPerSecond: number;
  readonly smallPublishEventsPerSecond: number;
  readonly streamEventsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

async function usedMemory(client: Redis): Promise<number> {
  const info = await client.info('memory');
  const match = /^used_memory:(\d+)/m.exec(info);
  if (!match?.[1]) throw new Error('INFO memory has no used_memory');
  return Number(match[1]);
}

/** Events stored in an event type (its partitions' `next`) and the mean enriched JSON bytes of the events of its first entry. */
async function stored(client: Redis, name: string): Promise<{ events: number; jsonBytes: number }> {
  let events = 0;
  for (const key of await keysMatching(client, `${KEY_PREFIX}{et:${name}:*}*:meta`)) events += Number((await client.hget(key, 'next')) ?? 0);
  const [log] = await keysMatching(client, `${KEY_PREFIX}{et:${name}:*}*:log`);
  if (log === undefined) throw new Error(`${name}: no partition log`);
  const [entry] = await client.xrangeBuffer(log, '-', '+', 'COUNT', 1);
  const fields = entry?.[1] ?? [];
  const count = Number(fields[1]?.toString() ?? 0);
  const data = decodeEntry(fields[2] ?? 'd', fields[3] ?? Buffer.alloc(0));
  return { events, jsonBytes: (data.byteLength - (count - 1)) / Math.max(1, count) };
}

/** Publishes `count` requests of `bodies` in turn, `inFlight` at once. @returns events/s */
async function publish(recorder: Recorder, url: string, bodies: readonly LoadRequest[], count: number, inFlight: number): Promise<number> {
  let failures = 0;
  let events = 0;
  const started = performance.now();
  await runBounded(count, inFlight, async (i) => {
    const body = bodies[i % bodies.length];
    if (!body) return;
    const { status, text } = await post(url + body.path, body.body);
    if (status === 200) events += body.events;
    else if (++failures === 1) recorder.alarm(`publish answered ${status}: ${text.slice(0, 400)}`);
  });
  return events / ((performance.now() - started) / 1000);
}

/** Memory grown per stored event, in Redis bytes and as a share of the enriched JSON. */
async function memoryPhase(recorder: Recorder, stack: Stack, client: Redis, name: string, batch: number, batches: number, inFlight: number): Promise<{ perEvent: number; ratio: number; json: number; eventsPerSecond: number }> {
  await createEventType(stack.broker.url, businessEventType(name, ORDER_SCHEMA, 1));
  const random = prng(batch);
  const path = `/event-types/${name}/events`;
  const bodies = Array.from({ length: DISTINCT_BODIES }, () => loadRequest(path, Array.from({ length: batch }, () => orderEvent(random))));
  await sleep(200);
  const before = await usedMemory(client);
  const eventsPerSecond = await publish(recorder, stack.broker.url, bodies, batches, inFlight);
  await sleep(200);
  const after = await usedMemory(client);
  const { events, jsonBytes } = await stored(client, name);
  if (events !== batch * batches) recorder.alarm(`${name}: ${events} events stored, expected ${batch * batches}`);
  const perEvent = (after - before) / events;
  return { perEvent, ratio: perEvent / jsonBytes, json: jsonBytes, eventsPerSecond };
}

/** Reads every event of `name` with one committing subscription stream from `begin`. @returns events/s */
async function streamPhase(recorder: Recorder, stack: Stack, name: string, total: number): Promise<number> {
  const id = await createSubscription(stack.broker.url, `bench-storage-${name}`, name, 'begin');
  const url = `${stack.broker.url}/subscriptions/${id}/events?batch_limit=${BIG}&max_uncommitted_events=${BIG * 20}&stream_limit=${total}&batch_flush_timeout=1`;
  let committer: Committer | undefined;
  let received = 0;
  let lastAt = 0;
  let done: () => void = () => undefined;
  const all = new Promise<void>((resolve) => (done = resolve));
  const started = performance.now();
  const stream = await openStream(
    url,
    { events: 'text', onOpen: (streamId) => void (streamId !== undefined && (committer = new Committer(`${stack.broker.url}/subscriptions/${id}/cursors`, streamId))) },
    (line: StreamLine) => {
      if (line.eventsText === undefined) return;
      // One partition, from its first offset: the cursor's offset + 1 is every event received so far.
      received = Number(line.cursor.offset.slice(line.cursor.offset.lastIndexOf('-') + 1)) + 1;
      lastAt = performance.now();
      committer?.add(line.cursor);
      if (received >= total) done();
    },
  );
  const timeout = sleep(READ_TIMEOUT_MS);
  await Promise.race([all, stream.ended, timeout]);
  if (received < total) recorder.alarm(`${name}: the subscription stream received ${received} of ${total} events`);
  await committer?.flush();
  stream.close();
  return received / ((lastAt - started) / 1000);
}

/** 10-event batches every 10 ms, each event with its send time; one subscription stream receives them. @returns p50 and p99 in ms */
async function latencyPhase(recorder: Recorder, stack: Stack, name: string): Promise<{ p50: number; p99: number }> {
  await createEventType(stack.broker.url, businessEventType(name, LATENCY_SCHEMA, 1));
  const id = await createSubscription(stack.broker.url, `bench-storage-${name}`, name, 'end');
  const latencies: number[] = [];
  let committer: Committer | undefined;
  let measureFrom = Number.POSITIVE_INFINITY;
  const stream = await openStream(
    `${stack.broker.url}/subscriptions/${id}/events?batch_limit=${SMALL}&max_uncommitted_events=1000&batch_flush_timeout=1`,
    { onOpen: (streamId) => void (streamId !== undefined && (committer = new Committer(`${stack.broker.url}/subscriptions/${id}/cursors`, streamId))) },
    (line: StreamLine) => {
      const now = performance.now();
      for (const event of line.events ?? []) {
        const sentAt = Number((event as { sent_at?: number }).sent_at);
        if (sentAt >= measureFrom) latencies.push(now - sentAt);
      }
      if ((line.events?.length ?? 0) > 0) committer?.add(line.cursor);
    },
  );
  const random = prng(7);
  const templates = Array.from({ length: 100 }, () => orderEvent(random) as Record<string, unknown>);
  const path = `${stack.broker.url}/event-types/${name}/events`;
  let failures = 0;
  const inFlight = new Set<Promise<void>>();
  const started = performance.now();
  measureFrom = started + LATENCY_WARMUP_MS;
  for (let tick = 0; performance.now() - started < LATENCY_SECONDS * 1000; tick++) {
    const at = started + tick * LATENCY_INTERVAL_MS;
    const wait = at - performance.now();
    if (wait > 0) await sleep(wait);
    const sentAt = performance.now();
    const events = Array.from({ length: SMALL }, (_, i) => ({ ...templates[(tick * SMALL + i) % templates.length], sent_at: sentAt }));
    const sent = post(path, JSON.stringify(events)).then(({ status, text }) => {
      if (status !== 200 && ++failures === 1) recorder.alarm(`latency publish answered ${status}: ${text.slice(0, 400)}`);
    });
    inFlight.add(sent);
    void sent.finally(() => inFlight.delete(sent));
  }
  await Promise.all(inFlight);
  await sleep(1500);
  await committer?.flush();
  stream.close();
  const sorted = Float64Array.from(latencies).sort();
  const expected = ((LATENCY_SECONDS * 1000 - LATENCY_WARMUP_MS) / LATENCY_INTERVAL_MS) * SMALL;
  if (sorted.length < expected * 0.9) recorder.alarm(`${name}: ${sorted.length} latencies measured, expected about ${expected}`);
  return { p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
}

async function runRound(recorder: Recorder, setting: Setting): Promise<Round> {
  const stack = await startStack({ BROKER_PUBLISH_STORED_COMPRESSION: setting === 'compressed' ? 'true' : 'false', BROKER_HTTP_PUBLISH_MAX_QUEUE_DELAY_MS: '0' });
  const client = new Redis(stack.redis.url, { lazyConnect: true });
  try {
    await client.connect();
    const big = await memoryPhase(recorder, stack, client, 'storage.big', BIG, BIG_BATCHES, IN_FLIGHT);
    const small = await memoryPhase(recorder, stack, client, 'storage.small', SMALL, SMALL_BATCHES, SMALL_IN_FLIGHT);
    const streamed = await streamPhase(recorder, stack, 'storage.big', BIG * BIG_BATCHES);
    const latency = await latencyPhase(recorder, stack, 'storage.latency');
    const result: Round = {
      bigBytesRatio: big.ratio,
      bigBytesPerEvent: big.perEvent,
      smallBytesRatio: small.ratio,
      smallBytesPerEvent: small.perEvent,
      storedJsonBytes: big.json,
      publishEventsPerSecond: big.eventsPerSecond,
      smallPublishEventsPerSecond: small.eventsPerSecond,
      streamEventsPerSecond: streamed,
      p50Ms: latency.p50,
      p99Ms: latency.p99,
    };
    recorder.log(
      `${setting}: 1000-event ${round(big.perEvent, 0)} B/event (${round(big.ratio, 3)}x of ${round(big.json, 0)} B JSON), 10-event ${round(small.perEvent, 0)} B/event (${round(small.ratio, 3)}x), publish ${Math.round(big.eventsPerSecond)} events/s, stream ${Math.round(streamed)} events/s, p50 ${round(latency.p50, 2)} ms p99 ${round(latency.p99, 2)} ms`,
    );
    return result;
  } finally {
    client.disconnect();
    await stack.stop(recorder);
  }
}

export const storage: Scenario = {
  name: 'storage',
  title: 'events stored zstd-compressed against plain, alternating rounds: Redis memory per event, publish and stream events/s, publish-to-delivery p99',
  async run(recorder) {
    recorder.add('load average (1 min) at start', round(loadavg()[0] ?? 0, 2), '');
    const rounds: Record<Setting, Round[]> = { compressed: [], plain: [] };
    for (let i = 0; i < ROUNDS; i++) {
      const order: Setting[] = i % 2 === 0 ? ['compressed', 'plain'] : ['plain', 'compressed'];
      for (const setting of order) rounds[setting].push(await runRound(recorder, setting));
    }
    const med = (setting: Setting, pick: (r: Round) => number): number => median(rounds[setting].map(pick));
    recorder.add('enriched JSON per event as stored', round(med('plain', (r) => r.storedJsonBytes), 0), 'bytes');
    for (const setting of ['plain', 'compressed'] as const) {
      recorder.add(`${setting}: 1000-event batches, Redis used_memory per event`, round(med(setting, (r) => r.bigBytesPerEvent), 1), 'bytes');
      recorder.add(`${setting}: 10-event batches, Redis used_memory per event`, round(med(setting, (r) => r.smallBytesPerEvent), 1), 'bytes');
      recorder.add(`${setting}: publish 1000-event batches`, Math.round(med(setting, (r) => r.publishEventsPerSecond)), 'events/s');
      recorder.add(`${setting}: publish 10-event batches`, Math.round(med(setting, (r) => r.smallPublishEventsPerSecond)), 'events/s');
      recorder.add(`${setting}: subscription stream`, Math.round(med(setting, (r) => r.streamEventsPerSecond)), 'events/s');
      recorder.add(`${setting}: publish to delivery p50 at 1,000 events/s (10-event batches)`, round(med(setting, (r) => r.p50Ms), 2), 'ms');
      recorder.add(`${setting}: publish to delivery p99 at 1,000 events/s (10-event batches)`, round(med(setting, (r) => r.p99Ms), 2), 'ms');
    }
    recorder.add('compressed: 1000-event batches, used_memory per event / enriched JSON', round(med('compressed', (r) => r.bigBytesRatio), 3), '×', { op: '<=', value: 0.3 });
    recorder.add('compressed: 10-event batches, used_memory per event / enriched JSON', round(med('compressed', (r) => r.smallBytesRatio), 3), '×', { op: '<=', value: 0.6 });
    recorder.add('plain: 1000-event batches, used_memory per event / enriched JSON', round(med('plain', (r) => r.bigBytesRatio), 3), '×');
    recorder.add('plain: 10-event batches, used_memory per event / enriched JSON', round(med('plain', (r) => r.smallBytesRatio), 3), '×');
    recorder.add('publish events/s, compressed / plain (1000-event batches)', round(med('compressed', (r) => r.publishEventsPerSecond) / med('plain', (r) => r.publishEventsPerSecond), 3), '×', { op: '>=', value: 0.9 });
    recorder.add('subscription stream events/s, compressed / plain', round(med('compressed', (r) => r.streamEventsPerSecond) / med('plain', (r) => r.streamEventsPerSecond), 3), '×', { op: '>=', value: 0.8 });
    recorder.add('publish to delivery p99 at 1,000 events/s, compressed - plain', round(med('compressed', (r) => r.p99Ms) - med('plain', (r) => r.p99Ms), 2), 'ms', { op: '<=', value: 1 });
    recorder.add('load average (1 min) at end', round(loadavg()[0] ?? 0, 2), '');
  },
};
