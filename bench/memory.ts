/**
 * Scenario `memory`: Redis memory per stored event. `INFO memory` used_memory before and
 * after publishing 1,000,000 small events (~100 bytes of JSON as sent) in batches of 1000 with
 * bounded concurrency, compared with the event's JSON size as stored (one entry read back with
 * `XRANGE ... COUNT 1`). Twice: an `undefined` category event type (no enrichment: stored as sent)
 * and a business one (enriched metadata makes the stored JSON larger than the sent JSON).
 */
import { Redis } from 'ioredis';
import { decodeEntry } from '../src/domain/batch/entry-codec.js';
import { SMALL_BUSINESS_SCHEMA, SMALL_SCHEMA, businessEventType, prng, smallBusinessEvent, smallEvent, undefinedEventType } from './events.js';
import { createEventType, keysMatching, loadRequest, post, round, runBounded, sleep, startStack, type LoadRequest, type Recorder, type Scenario } from './harness.js';

export const EVENTS = 1_000_000;
export const BATCH = 1000;
export const IN_FLIGHT = 4;
const PARTITIONS = 4;
const DISTINCT_BODIES = 16;
const TARGET_RATIO = 1.3;
/** The broker's default `redis.keyPrefix`. */
const KEY_PREFIX = 'broker:';

async function usedMemory(client: Redis): Promise<number> {
  const info = await client.info('memory');
  const match = /^used_memory:(\d+)/m.exec(info);
  if (!match?.[1]) throw new Error('INFO memory has no used_memory');
  return Number(match[1]);
}

interface Phase {
  readonly label: string;
  readonly name: string;
  readonly definition: object;
  readonly event: (random: () => number) => object;
}

async function measurePhase(recorder: Recorder, brokerUrl: string, client: Redis, phase: Phase): Promise<void> {
  await createEventType(brokerUrl, phase.definition);
  const random = prng(4);
  const path = `/event-types/${phase.name}/events`;
  const bodies: LoadRequest[] = Array.from({ length: DISTINCT_BODIES }, () => loadRequest(path, Array.from({ length: BATCH }, () => phase.event(random))));
  const sentBytes = bodies.reduce((sum, b) => sum + b.eventBytes, 0) / bodies.reduce((sum, b) => sum + b.events, 0);

  await sleep(200);
  const before = await usedMemory(client);
  let failures = 0;
  const started = performance.now();
  await runBounded(EVENTS / BATCH, IN_FLIGHT, async (i) => {
    const body = bodies[i % bodies.length];
    if (!body) return;
    const { status, text } = await post(brokerUrl + path, body.body);
    if (status !== 200) {
      failures += body.events;
      if (failures === body.events) recorder.alarm(`${phase.label}: publish answered ${status}: ${text.slice(0, 600)}`);
    }
  });
  const seconds = (performance.now() - started) / 1000;
  await sleep(200);
  const after = await usedMemory(client);

  // What was stored: the dense offsets of every partition, and one entry read back.
  const metas = await keysMatching(client, `${KEY_PREFIX}{et:${phase.name}:*}*:meta`);
  let stored = 0;
  for (const key of metas) stored += Number((await client.hget(key, 'next')) ?? 0);
  const logs = await keysMatching(client, `${KEY_PREFIX}{et:${phase.name}:*}*:log`);
  let entries = 0;
  for (const key of logs) entries += await client.xlen(key);
  const firstLog = logs[0];
  if (firstLog === undefined) throw new Error(`${phase.label}: no partition log keys found`);
  const [entry] = await client.xrangeBuffer(firstLog, '-', '+', 'COUNT', 1);
  const fields = entry?.[1] ?? [];
  let count = 0;
  let data: Buffer | undefined;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const field = fields[i]?.toString();
    if (field === 'n') count = Number(fields[i + 1]?.toString());
    const value = fields[i + 1];
    if ((field === 'd' || field === 'z') && value !== undefined) data = decodeEntry(field, value);
  }
  if (data === undefined || count === 0) throw new Error(`${phase.label}: unexpected stream entry layout: ${fields.map((f) => f.toString().slice(0, 40)).join(' ')}`);
  // The entry holds the events' JSON texts joined by "\n": the separators are not part of the JSON.
  const storedBytes = (data.byteLength - (count - 1)) / count;
  const perEvent = (after - before) / stored;

  recorder.log(
    `${phase.label}: ${stored} events stored in ${entries} stream entries (${Math.round(EVENTS / seconds)} events/s); used_memory ${before} → ${after} B; ${perEvent.toFixed(1)} B/event; JSON sent ${sentBytes.toFixed(1)} B, stored ${storedBytes.toFixed(1)} B`,
  );
  if (failures > 0 || stored !== EVENTS) recorder.alarm(`${phase.label}: ${failures} events rejected, ${stored} stored of ${EVENTS}`);
  recorder.add(`${phase.label}: events rejected`, failures, 'events', { op: '<=', value: 0 });
  recorder.add(`${phase.label}: events stored`, stored, 'events');
  recorder.add(`${phase.label}: stream entries`, entries, 'entries');
  recorder.add(`${phase.label}: publish rate while loading`, Math.round(EVENTS / seconds), 'events/s');
  recorder.add(`${phase.label}: event JSON as sent`, round(sentBytes, 1), 'bytes');
  recorder.add(`${phase.label}: event JSON as stored`, round(storedBytes, 1), 'bytes');
  recorder.add(`${phase.label}: used_memory growth per event`, round(perEvent, 1), 'bytes');
  recorder.add(`${phase.label}: memory / stored JSON size`, round(perEvent / storedBytes, 3), '×', { op: '<=', value: TARGET_RATIO });
  recorder.add(`${phase.label}: memory / sent JSON size`, round(perEvent / sentBytes, 3), '×');
}

async function run(recorder: Recorder): Promise<void> {
  const stack = await startStack();
  const client = new Redis(stack.redis.url, { maxRetriesPerRequest: 1 });
  try {
    await measurePhase(recorder, stack.broker.url, client, {
      label: 'undefined category',
      name: 'bench.small',
      definition: undefinedEventType('bench.small', SMALL_SCHEMA, PARTITIONS),
      event: smallEvent,
    });
    await measurePhase(recorder, stack.broker.url, client, {
      label: 'business category',
      name: 'bench.small-business',
      definition: businessEventType('bench.small-business', SMALL_BUSINESS_SCHEMA, PARTITIONS),
      event: smallBusinessEvent,
    });
  } finally {
    client.disconnect();
    await stack.stop(recorder);
  }
}

export const memory: Scenario = {
  name: 'memory',
  title: `Redis memory per stored event after ${EVENTS.toLocaleString('en')} small events (undefined and business category)`,
  run,
};
