import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { SseClient } from '../support/sse-client.js';
import { StreamClient } from '../support/stream-client.js';

// An event stored after a stream's headers were sent reaches the stream on its publish notice, not on the
// safety-net poll (docs/architecture.md "Wake-ups on sharded channels"): each stream kind is opened many
// times, one event published right after its headers arrive, while two producers keep the node busy. The
// kinds run at the same time, each on an event type of its own, and load each other too. A reader that
// went to sleep before it heard a notice sent meanwhile would deliver the event only at its next poll
// (10 s while notices are live; queue-mode streams claim again at their next keep-alive, 1 s here).

/** Rounds per stream kind (the stress lane, docs/getting-started.md, may ask for more). */
const ROUNDS = Number(process.env.BROKER_TEST_WAKEUP_ROUNDS ?? 100);
/** Publish answer to delivery, ms: well under the safety-net poll, with room for a busy machine. */
const BOUND_MS = 500;
const QUEUE = { 'broker.io/consumption-mode': 'queue' };
/** One event type per stream kind, so the kinds can run at once without reading each other's events. */
const KINDS = ['wake.subscription', 'wake.queue', 'wake.low-level', 'wake.sse-subscription', 'wake.sse-low-level'] as const;
type Kind = (typeof KINDS)[number];
/** The streams' parameters: a stream stays open longer than a round waits. */
const STREAM = 'batch_limit=1&batch_flush_timeout=1&stream_timeout=30';
/** How long a round waits for its event before it counts it as missed (reported as `Infinity`), ms. */
const WAIT_MS = 2_000;
/** A round (a subscription, a stream, a publish, the event) takes well under a second even with every core busy. */
const TEST_TIMEOUT_MS = ROUNDS * 1_000;

let node: TestBroker;
const load = { running: true, published: 0, done: Promise.resolve() };

const statistic = { default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: 1, write_parallelism: 1 } };

beforeAll(async () => {
  node = await startTestBroker();
  for (const name of [...KINDS, 'wake.load']) {
    const created = await call(node.url, 'POST', '/event-types', businessEventType(name, statistic));
    expect(created.status, created.text).toBe(201);
  }
  // Two producers publishing batches of 200 events to another event type for the whole file.
  const batch = Array.from({ length: 200 }, (_, i) => orderEvent(`load-${i}`));
  const producer = async (): Promise<void> => {
    while (load.running) {
      const answer = await call(node.url, 'POST', '/event-types/wake.load/events', batch.map((e) => ({ ...e, metadata: { eid: crypto.randomUUID(), occurred_at: new Date().toISOString() } })));
      if (answer.status !== 200) throw new Error(`load publish answered ${answer.status}: ${answer.text}`);
      load.published += batch.length;
    }
  };
  load.done = Promise.all([producer(), producer()]).then(() => undefined);
  // A subscription reading from the end of a partition that holds events.
  for (const kind of KINDS) for (const tag of ['before-1', 'before-2']) await publishOne(kind, tag);
});
afterAll(async () => {
  load.running = false;
  await load.done;
  await node.stop();
});

/** Publishes one event to the event type of a kind. @returns when its `200` arrived (`performance.now()` ms) */
async function publishOne(kind: Kind, orderNumber: string): Promise<number> {
  const answer = await call(node.url, 'POST', `/event-types/${kind}/events`, [orderEvent(orderNumber)]);
  expect(answer.status, answer.text).toBe(200);
  return performance.now();
}

async function subscription(kind: Kind, annotations: Record<string, string> = {}): Promise<string> {
  const answer = await call(node.url, 'POST', '/subscriptions', { owning_application: `app-${crypto.randomUUID()}`, event_types: [kind], read_from: 'end', annotations });
  expect(answer.status, answer.text).toBe(201);
  return (answer.json as { id: string }).id;
}

/** The order number of the events of a batch line (JSON lines or an SSE frame's data). */
function orderNumbers(batch: { events?: Record<string, unknown>[] }): unknown[] {
  return (batch.events ?? []).map((e) => e.order_number);
}

/**
 * One round on a JSON-lines stream: opens it, waits for its headers, publishes one event and waits for it.
 * @returns ms from the publish answer to the event's arrival
 */
async function roundOnLines(kind: Kind, url: string, tag: string): Promise<number> {
  const stream = await StreamClient.open(url);
  expect(stream.status, JSON.stringify(stream.problem)).toBe(200);
  try {
    const published = await publishOne(kind, tag);
    for (;;) {
      const left = WAIT_MS - (performance.now() - published);
      if (left <= 0) return Number.POSITIVE_INFINITY;
      const batch = await stream.next(left).catch(() => null);
      if (batch === null) return Number.POSITIVE_INFINITY;
      if (batch === undefined) throw new Error(`stream ended before ${tag} arrived`);
      if (orderNumbers(batch).includes(tag)) return stream.arrivedAt(batch) - published;
    }
  } finally {
    stream.close();
  }
}

/** Like {@link roundOnLines}, on a server-sent-event stream. */
async function roundOnEvents(kind: Kind, url: string, tag: string): Promise<number> {
  const stream = await SseClient.open(url);
  expect(stream.status, JSON.stringify(stream.problem)).toBe(200);
  try {
    const published = await publishOne(kind, tag);
    for (;;) {
      const left = WAIT_MS - (performance.now() - published);
      if (left <= 0) return Number.POSITIVE_INFINITY;
      const frame = await stream.next(left).catch(() => null);
      if (frame === null) return Number.POSITIVE_INFINITY;
      if (frame === undefined) throw new Error(`stream ended before ${tag} arrived`);
      if (frame.data !== undefined && orderNumbers(JSON.parse(frame.data) as { events?: Record<string, unknown>[] }).includes(tag)) return performance.now() - published;
    }
  } finally {
    stream.close();
  }
}

/** Runs `ROUNDS` rounds and checks every delay against the bound; the slowest ones name their round. */
async function rounds(kind: Kind, round: (tag: string) => Promise<number>): Promise<void> {
  const delays: number[] = [];
  for (let i = 0; i < ROUNDS; i++) delays.push(await round(`${kind}-${i}`));
  const late = delays.flatMap((ms, i) => (ms > BOUND_MS ? [{ round: i, ms: Number.isFinite(ms) ? Math.round(ms) : 'missed' }] : []));
  expect(late, `events delivered later than ${BOUND_MS} ms after their publish answer`).toEqual([]);
  expect(load.published, 'the load producers ran meanwhile').toBeGreaterThan(0);
}

describe.concurrent('an event published right after a stream opened arrives on its notice', () => {
  it('subscription stream', async () => {
    await rounds('wake.subscription', async (tag) => roundOnLines('wake.subscription', `${node.url}/subscriptions/${await subscription('wake.subscription')}/events?${STREAM}`, tag));
  }, TEST_TIMEOUT_MS);

  it('subscription stream in queue mode', async () => {
    await rounds('wake.queue', async (tag) => roundOnLines('wake.queue', `${node.url}/subscriptions/${await subscription('wake.queue', QUEUE)}/events?${STREAM}`, tag));
  }, TEST_TIMEOUT_MS);

  it('low-level stream', async () => {
    await rounds('wake.low-level', (tag) => roundOnLines('wake.low-level', `${node.url}/event-types/wake.low-level/events?${STREAM}`, tag));
  }, TEST_TIMEOUT_MS);

  it('server-sent events of a subscription stream', async () => {
    await rounds('wake.sse-subscription', async (tag) => roundOnEvents('wake.sse-subscription', `${node.url}/subscriptions/${await subscription('wake.sse-subscription')}/events?${STREAM}`, tag));
  }, TEST_TIMEOUT_MS);

  it('server-sent events of a low-level stream', async () => {
    await rounds('wake.sse-low-level', (tag) => roundOnEvents('wake.sse-low-level', `${node.url}/event-types/wake.sse-low-level/events?${STREAM}`, tag));
  }, TEST_TIMEOUT_MS);
});
