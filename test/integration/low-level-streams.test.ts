import { readFileSync } from 'node:fs';
import http from 'node:http';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisProcess } from '../../scripts/local-processes.js';
import { formatOffset } from '../../src/domain/cursor/offsets.js';
import { masterNodes, type RedisClient } from '../../src/storage/redis/redis-connection.js';
import { call, harnessRedis, startTestBroker, startTestBrokerProcess, type TestBroker, type TestBrokerProcess } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';

/**
 * The low-level stream `GET /event-types/{name}/events` (docs/consuming.md "Low-level streams", "Stream
 * parameters"; docs/concepts.md "Offsets and cursors").
 *
 * Both nodes run with a one-minute safety-net poll, so an event that arrives within a test's time
 * budget was read at stream start or woken by a publish notice, never found by the poll.
 *
 * A stream may open with a keep-alive line sent at once (it lets the headers out); tests accept it.
 * Tests that publish after opening wait for the stream's notice subscription ({@link openSubscribed}),
 * so they do not depend on when the headers arrive.
 */

let broker: TestBroker;
let other: TestBroker;
let redis: RedisClient;
const cleanups: (() => Promise<unknown>)[] = [];

const SLOW_POLL = { BROKER_CONSUMPTION_POLL_INTERVAL_MS: '60000' };

beforeAll(async () => {
  broker = await startTestBroker(SLOW_POLL);
  other = await startTestBroker({ ...SLOW_POLL, BROKER_REDIS_KEY_PREFIX: broker.prefix });
  redis = harnessRedis();
});
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  await Promise.all([broker.stop(), other.stop()]);
  redis.disconnect();
});

const FULL_OFFSET = /^001-0001-[0-9]{18}$/;
const BEFORE_FIRST = '001-0001--1';

interface Cursor {
  partition: string;
  offset: string;
}

type Params = Record<string, string | number>;

/** Creates a business event type with `partitions` partitions and `user_defined` partitioning. */
async function createEventType(name: string, partitions = 1, node: TestBroker = broker): Promise<void> {
  const created = await call(
    node.url,
    'POST',
    '/event-types',
    businessEventType(name, {
      partition_strategy: 'user_defined',
      default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: partitions, write_parallelism: partitions },
    }),
  );
  expect(created.status, created.text).toBe(201);
}

/** An event for partition `partition` carrying its publish sequence number `seq`. */
function eventIn(partition: string, seq: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const event = orderEvent(`O${seq}`, { seq, ...extra });
  (event.metadata as Record<string, unknown>).partition = partition;
  return event;
}

/** Publishes a batch and expects 200. */
async function publish(name: string, events: Record<string, unknown>[], node: TestBroker = broker): Promise<void> {
  const answer = await call(node.url, 'POST', `/event-types/${name}/events`, events);
  expect(answer.status, answer.text).toBe(200);
}

const range = (from: number, to: number): number[] => Array.from({ length: to - from }, (_, i) => from + i);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function streamPath(name: string, params: Params = {}): string {
  const query = new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, String(v)])).toString();
  return `/event-types/${encodeURIComponent(name)}/events${query ? `?${query}` : ''}`;
}

function cursorHeaders(cursors: Cursor[] | string | undefined): Record<string, string> {
  if (cursors === undefined) return {};
  return { 'X-Broker-Cursors': typeof cursors === 'string' ? cursors : JSON.stringify(cursors) };
}

/** Opens a low-level stream (resolves with the headers); the client is closed after the file in any case. */
async function openStream(name: string, params: Params = {}, cursors?: Cursor[] | string, node: TestBroker = broker): Promise<StreamClient> {
  const client = await StreamClient.open(node.url + streamPath(name, params), { headers: cursorHeaders(cursors) });
  cleanups.push(() => Promise.resolve(client.close()));
  return client;
}

/**
 * Subscribers of the notice channels of `partitions` of an event type (all nodes of the prefix). In a
 * cluster each master counts the subscribers of its own shard channels, so the counts are summed.
 */
async function noticeSubscribers(name: string, partitions: string[]): Promise<number[]> {
  await redis.ping();
  const counts = partitions.map(() => 0);
  for (const node of masterNodes(redis)) {
    const reply = (await node.call('PUBSUB', 'SHARDNUMSUB', ...partitions.map((p) => broker.keys.partitionNotices(name, 1, p)))) as unknown[];
    partitions.forEach((_, i) => (counts[i] = (counts[i] ?? 0) + Number(reply[2 * i + 1])));
  }
  return counts;
}

/** Polls `check` every 20 ms for up to `ms`. @returns whether it held */
async function eventually(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = performance.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (performance.now() > deadline) return false;
    await sleep(20);
  }
}

/**
 * Opens a stream and returns once the broker has set it up (its notice channels of `partitions` are
 * subscribed), without waiting for the headers. `client` resolves when the headers arrive.
 */
async function openSubscribed(name: string, partitions: string[], params: Params, cursors?: Cursor[], node: TestBroker = broker): Promise<{ client: Promise<StreamClient> }> {
  const client = openStream(name, params, cursors, node);
  client.catch(() => undefined);
  const subscribed = await eventually(async () => (await noticeSubscribers(name, partitions)).every((n) => n >= 1), 2_000);
  expect(subscribed, 'the stream subscribes its partitions notice channels').toBe(true);
  return { client };
}

/** The lines without an opening keep-alive (no events, the start cursor) that a stream may send at once. */
function withoutOpening(lines: StreamBatch[], startOffset: string): StreamBatch[] {
  const [first, ...rest] = lines;
  return first && first.events === undefined && first.cursor.offset === startOffset ? rest : lines;
}

const seqsOf = (batch: StreamBatch | undefined): number[] => (batch?.events ?? []).map((e) => e.seq as number);
const sizesOf = (batches: StreamBatch[]): number[] => batches.map((b) => (b.events ?? []).length);

/** Checks a data batch: full-form cursor equal to the offset of its last event, given the first event's offset. */
function expectBatchCursor(batch: StreamBatch | undefined, partition: string, firstOffset: number): void {
  const events = batch?.events ?? [];
  expect(events.length).toBeGreaterThan(0);
  expect(batch?.cursor.partition).toBe(partition);
  expect(batch?.cursor.offset).toMatch(FULL_OFFSET);
  expect(batch?.cursor.offset).toBe(formatOffset(1, firstOffset + events.length - 1));
  for (const event of events) expect((event.metadata as { partition: string }).partition).toBe(partition);
}

describe('low-level stream: where it starts', () => {
  it('without X-Broker-Cursors starts every partition at its newest offset and wakes on publishes of another node', async () => {
    const name = 'll.newest';
    await createEventType(name, 2);
    await publish(name, [eventIn('0', 0), eventIn('0', 1), eventIn('1', 2)]);

    const opening = await openSubscribed(name, ['0', '1'], { batch_flush_timeout: 30, batch_limit: 1 });
    await publish(name, [eventIn('0', 10), eventIn('1', 11)], other);
    const client = await opening.client;
    expect(client.status).toBe(200);
    const batches = await client.events(2, 3_000);
    expect(batches.flatMap(seqsOf).sort((a, b) => a - b)).toEqual([10, 11]);
    expectBatchCursor(batches.find((b) => b.cursor.partition === '0'), '0', 2);
    expectBatchCursor(batches.find((b) => b.cursor.partition === '1'), '1', 1);

    // Once more: still nothing old, offsets go on.
    await publish(name, [eventIn('0', 12)], other);
    const [next] = await client.events(1, 3_000);
    expect(seqsOf(next)).toEqual([12]);
    expect(next?.cursor).toEqual({ partition: '0', offset: formatOffset(1, 3) });
    expect(client.received.flatMap(seqsOf)).toEqual(expect.not.arrayContaining([0, 1, 2]));
    client.close();
  });

  it('from BEGIN streams only the requested partitions, in batches of at most batch_limit, in order, full batches at once', async () => {
    const name = 'll.begin';
    await createEventType(name, 3);
    // Several stream entries per partition, so batches cross entry boundaries.
    await publish(name, [...range(0, 3).map((s) => eventIn('0', s)), ...range(100, 102).map((s) => eventIn('1', s))]);
    await publish(name, [...range(3, 6).map((s) => eventIn('0', s)), ...range(102, 104).map((s) => eventIn('1', s)), eventIn('2', 200)]);

    const opened = performance.now();
    const client = await openStream(name, { batch_limit: 2, batch_flush_timeout: 10 }, [
      { partition: '0', offset: 'BEGIN' },
      { partition: '1', offset: 'begin' },
    ]);
    expect(client.status).toBe(200);
    const batches = await client.events(10, 3_000);
    // 6 and 4 events with batch_limit 2: every batch is full, so none waits for the 10 s flush timeout.
    expect(performance.now() - opened).toBeLessThan(1_500);
    expect(sizesOf(batches)).toEqual([2, 2, 2, 2, 2]);
    const of = (p: string): StreamBatch[] => batches.filter((b) => b.cursor.partition === p);
    expect(of('0').flatMap(seqsOf)).toEqual(range(0, 6));
    expect(of('1').flatMap(seqsOf)).toEqual(range(100, 104));
    expect(of('2')).toEqual([]);
    of('0').forEach((b, i) => expectBatchCursor(b, '0', 2 * i));
    of('1').forEach((b, i) => expectBatchCursor(b, '1', 2 * i));
    client.close();
  });

  it('from a given offset (last consumed) starts with the next event; full form and bare numbers are accepted', async () => {
    const name = 'll.offset';
    await createEventType(name, 2);
    await publish(name, [...range(0, 5).map((s) => eventIn('0', s)), ...range(10, 13).map((s) => eventIn('1', s))]);

    const client = await openStream(name, { batch_limit: 10, batch_flush_timeout: 1 }, [
      { partition: '0', offset: formatOffset(1, 2) },
      { partition: '1', offset: '0' },
    ]);
    expect(client.status).toBe(200);
    const batches = await client.events(4, 3_000);
    const zero = batches.find((b) => b.cursor.partition === '0');
    const one = batches.find((b) => b.cursor.partition === '1');
    expect(seqsOf(zero)).toEqual([3, 4]);
    expect(seqsOf(one)).toEqual([11, 12]);
    expectBatchCursor(zero, '0', 3);
    expectBatchCursor(one, '1', 1);
    client.close();
    // The closed stream's notice subscriptions go first: while they last, openSubscribed below would count
    // them and return before the new stream is set up.
    expect(await eventually(async () => (await noticeSubscribers(name, ['0', '1'])).every((n) => n === 0), 5_000), 'the closed stream releases its notice channels').toBe(true);

    // At the newest offset: nothing old, the next publish comes (the budget is wide for a loaded CI machine;
    // a publish that woke nobody would wait for the one-minute poll and still fail).
    const atNewest = await openSubscribed(name, ['0'], { batch_limit: 1, batch_flush_timeout: 30 }, [{ partition: '0', offset: formatOffset(1, 4) }]);
    await publish(name, [eventIn('0', 5)]);
    const [batch] = await (await atNewest.client).events(1, 10_000);
    expect(seqsOf(batch)).toEqual([5]);
    expect(batch?.cursor).toEqual({ partition: '0', offset: formatOffset(1, 5) });

    // Before the first event of an empty partition.
    await createEventType('ll.offset-empty');
    const empty = await openSubscribed('ll.offset-empty', ['0'], { batch_limit: 1, batch_flush_timeout: 30 }, [{ partition: '0', offset: BEFORE_FIRST }]);
    await publish('ll.offset-empty', [eventIn('0', 0)]);
    const [first] = await (await empty.client).events(1, 10_000);
    expect(seqsOf(first)).toEqual([0]);
    expect(first?.cursor).toEqual({ partition: '0', offset: formatOffset(1, 0) });
  });

  // Regression: a read stopped at consumption.readEntries used to leave the loop asleep until the
  // poll or the flush deadline although the partition held more events.
  it('flushes full batches at once when the backlog spans more stream entries than one read fetches', async () => {
    const name = 'll.backlog';
    await createEventType(name);
    for (const seq of range(0, 200)) await publish(name, [eventIn('0', seq)]); // 200 stream entries

    const opened = performance.now();
    const client = await openStream(name, { batch_limit: 100, batch_flush_timeout: 2 }, [{ partition: '0', offset: 'BEGIN' }]);
    const batches = await client.events(200, 3_000);
    expect(performance.now() - opened).toBeLessThan(1_500);
    expect(sizesOf(batches)).toEqual([100, 100]);
    expect(batches.flatMap(seqsOf)).toEqual(range(0, 200));
    client.close();
  });
});

describe('low-level stream: flushing and end conditions', () => {
  it('sends a partial batch at the flush timeout, then keep-alives repeating the cursor, and ends at stream_keep_alive_limit', async () => {
    const name = 'll.keepalive';
    await createEventType(name);
    await publish(name, [eventIn('0', 0), eventIn('0', 1)]);

    const opened = performance.now();
    const client = await openStream(name, { batch_limit: 5, batch_flush_timeout: 1, stream_keep_alive_limit: 2 }, [{ partition: '0', offset: 'BEGIN' }]);
    const lines = withoutOpening(await client.untilEnd(6_000), BEFORE_FIRST);
    const elapsed = performance.now() - opened;
    expect(client.done).toBe(true);
    expect(lines).toHaveLength(3);
    const [data, ...keepAlives] = lines;
    expect(seqsOf(data)).toEqual([0, 1]);
    expect(data?.cursor).toEqual({ partition: '0', offset: formatOffset(1, 1) });
    for (const line of keepAlives) expect(line).toEqual({ cursor: { partition: '0', offset: formatOffset(1, 1) } });
    // Three flush windows of 1 s: the partial batch, two keep-alives, then the end.
    expect(elapsed).toBeGreaterThan(2_700);
    expect(elapsed).toBeLessThan(5_000);
  });

  it('keep-alives of an empty partition carry the offset before its first event', async () => {
    const name = 'll.keepalive-empty';
    await createEventType(name);
    const opened = performance.now();
    const client = await openStream(name, { batch_flush_timeout: 1, stream_keep_alive_limit: 1 });
    const lines = await client.untilEnd(4_000);
    const elapsed = performance.now() - opened;
    expect(client.done).toBe(true);
    // One keep-alive after the 1 s flush window, perhaps preceded by an opening one (not counted).
    expect(lines.length).toBeGreaterThanOrEqual(1);
    expect(lines.length).toBeLessThanOrEqual(2);
    for (const line of lines) expect(line).toEqual({ cursor: { partition: '0', offset: BEFORE_FIRST } });
    expect(elapsed).toBeGreaterThan(900);
    expect(elapsed).toBeLessThan(2_500);
  });

  it('ends after exactly stream_limit events, the last batch cut short', async () => {
    const name = 'll.streamlimit';
    await createEventType(name);
    await publish(name, range(0, 7).map((s) => eventIn('0', s)));

    const client = await openStream(name, { batch_limit: 3, stream_limit: 5, batch_flush_timeout: 1 }, [{ partition: '0', offset: 'BEGIN' }]);
    const lines = await client.untilEnd(4_000);
    expect(client.done).toBe(true);
    const data = lines.filter((l) => l.events);
    expect(sizesOf(data)).toEqual([3, 2]);
    expect(data.flatMap(seqsOf)).toEqual(range(0, 5));
    expect(data.map((b) => b.cursor.offset)).toEqual([formatOffset(1, 2), formatOffset(1, 4)]);
  });

  // Regression: the end condition used to be checked only at the next wake-up, so the stream stayed
  // open for up to batch_flush_timeout after its last event.
  it('ends at once when stream_limit is reached, not at the next flush timeout', async () => {
    const name = 'll.streamlimit-prompt';
    await createEventType(name);
    await publish(name, range(0, 7).map((s) => eventIn('0', s)));

    const client = await openStream(name, { batch_limit: 3, stream_limit: 5, batch_flush_timeout: 10 }, [{ partition: '0', offset: 'BEGIN' }]);
    const lines = await client.untilEnd(2_000);
    expect(lines.flatMap(seqsOf)).toEqual(range(0, 5));
  });

  it('ends at stream_timeout and flushes the events still pending', async () => {
    const name = 'll.timeout';
    await createEventType(name);
    const opened = performance.now();
    const client = await openStream(name, { batch_limit: 10, batch_flush_timeout: 2, stream_timeout: 3 });
    // The first flush window ends with a keep-alive at ~2 s; the next would end at ~4 s, after the stream timeout.
    let keepAlive = await client.next(4_000);
    if (performance.now() - opened < 1_500) keepAlive = await client.next(4_000); // the opening keep-alive
    expect(performance.now() - opened).toBeGreaterThan(1_500);
    expect(keepAlive).toEqual({ cursor: { partition: '0', offset: BEFORE_FIRST } });
    await publish(name, range(0, 3).map((s) => eventIn('0', s)));
    const rest = await client.untilEnd(4_000);
    const elapsed = performance.now() - opened;
    expect(client.done).toBe(true);
    expect(rest.flatMap(seqsOf)).toEqual([0, 1, 2]);
    expect(rest.at(-1)?.cursor).toEqual({ partition: '0', offset: formatOffset(1, 2) });
    expect(elapsed).toBeGreaterThan(2_800);
    expect(elapsed).toBeLessThan(3_900);
  });
});

describe('low-level stream: headers and errors', () => {
  it('answers 200 application/x-json-stream with a deprecation Warning', async () => {
    const name = 'll.headers';
    await createEventType(name);
    await publish(name, [eventIn('0', 0)]);
    const client = await openStream(name, { batch_flush_timeout: 30 }, [{ partition: '0', offset: 'BEGIN' }]);
    expect(client.status).toBe(200);
    expect(client.headers.get('content-type')).toBe('application/x-json-stream');
    expect(client.headers.get('warning')).toMatch(/deprecated/i);
    client.close();
  });

  // Regression: `res.write('')` did not send the headers (uWS completes them only with body bytes),
  // so clients waited for the first batch, up to batch_flush_timeout.
  it('sends the headers at once, before any batch is due', async () => {
    const name = 'll.headers-early';
    await createEventType(name);
    const started = performance.now();
    const client = await openStream(name, { batch_flush_timeout: 3, stream_timeout: 3 });
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(client.status).toBe(200);
    expect(client.headers.get('content-type')).toBe('application/x-json-stream');
    // At most an opening keep-alive so far, no data.
    expect(client.received.every((line) => line.events === undefined)).toBe(true);
    client.close();
  });

  /** Opens a stream that must fail; checks the problem JSON. */
  async function expectProblem(name: string, cursors: string | Cursor[] | undefined, status: number, params: Params = {}): Promise<void> {
    const client = await openStream(name, { batch_flush_timeout: 1, stream_timeout: 1, ...params }, cursors);
    client.close();
    expect(client.status, `${JSON.stringify(cursors)} ${JSON.stringify(params)}`).toBe(status);
    expect(client.headers.get('content-type')).toBe('application/problem+json');
    expect(client.problem).toMatchObject({ status });
  }

  it('rejects a malformed X-Broker-Cursors with 400 and invalid cursors with 412', async () => {
    const name = 'll.cursors';
    await createEventType(name, 2);
    await publish(name, [eventIn('0', 0), eventIn('0', 1)]);

    await expectProblem(name, '[{"partition":"0",', 400);
    await expectProblem(name, '{"partition":"0","offset":"BEGIN"}', 400);
    await expectProblem(name, '[{"partition":0,"offset":"BEGIN"}]', 400);
    await expectProblem(name, [{ partition: '0', offset: 'BEGIN' }, { partition: '0', offset: formatOffset(1, 0) }], 400);
    // An empty list would stream nothing until stream_timeout: refused.
    await expectProblem(name, [], 400);

    await expectProblem(name, [{ partition: '7', offset: 'BEGIN' }], 412);
    await expectProblem(name, [{ partition: '0', offset: 'not-an-offset' }], 412);
    await expectProblem(name, [{ partition: '0', offset: '001-0001-12' }], 412);
    await expectProblem(name, [{ partition: '0', offset: formatOffset(2, 0) }], 412);
    await expectProblem(name, [{ partition: '0', offset: formatOffset(1, 2) }], 412);
    await expectProblem(name, [{ partition: '0', offset: '2' }], 412);
    await expectProblem(name, [{ partition: '1', offset: formatOffset(1, 0) }], 412);
    // One valid cursor does not save an invalid one.
    await expectProblem(name, [{ partition: '0', offset: 'BEGIN' }, { partition: '1', offset: '5' }], 412);
  });

  it('answers 404 for an unknown event type', async () => {
    await expectProblem('ll.nope', undefined, 404);
    await expectProblem('ll.nope', [{ partition: '0', offset: 'BEGIN' }], 404);
  });

  it('checks the stream parameters: rule violations 422, non-integers 400', async () => {
    const name = 'll.params';
    await createEventType(name);
    await expectProblem(name, undefined, 422, { batch_limit: 5, stream_limit: 3 });
    await expectProblem(name, undefined, 422, { batch_flush_timeout: 10, stream_timeout: 5 });
    await expectProblem(name, undefined, 422, { batch_flush_timeout: 0, stream_timeout: 10 }); // 0 means 30 s
    await expectProblem(name, undefined, 400, { batch_limit: 'abc' });
    await expectProblem(name, undefined, 400, { batch_limit: '1.5' });
    await expectProblem(name, undefined, 400, { stream_limit: '-1' });
    await expectProblem(name, undefined, 400, { batch_flush_timeout: 'soon' });
    await expectProblem(name, undefined, 400, { stream_keep_alive_limit: '2x' });
  });
});

describe('low-level stream: wake-ups and resources', () => {
  it('delivers a published event within milliseconds, not at the 30 s flush timeout or a poll', async () => {
    const name = 'll.latency';
    await createEventType(name);
    const opening = await openSubscribed(name, ['0'], { batch_limit: 1, batch_flush_timeout: 30 });
    const latencies: number[] = [];
    for (const [round, node] of [broker, other, broker, other].entries()) {
      await publish(name, [eventIn('0', round)], node);
      const published = performance.now();
      const [batch] = await (await opening.client).events(1, 2_000);
      latencies.push(performance.now() - published);
      expect(seqsOf(batch)).toEqual([round]);
      expect(batch?.cursor).toEqual({ partition: '0', offset: formatOffset(1, round) });
    }
    expect(Math.max(...latencies), JSON.stringify(latencies)).toBeLessThan(500);
  });

  it('unsubscribes the partition notice channel when the client disconnects', async () => {
    const name = 'll.disconnect';
    await createEventType(name);
    const subscribers = async (): Promise<number> => (await noticeSubscribers(name, ['0']))[0] ?? -1;
    expect(await subscribers()).toBe(0);

    // A client that read a batch, then leaves.
    await publish(name, [eventIn('0', 0)]);
    const client = await openStream(name, { batch_flush_timeout: 30 }, [{ partition: '0', offset: 'BEGIN' }]);
    expect((await client.events(1, 2_000)).flatMap(seqsOf)).toEqual([0]);
    expect(await eventually(async () => (await subscribers()) >= 1, 1_000)).toBe(true);
    await sleep(200); // a negative check: the subscription stays while the client is connected
    expect(await subscribers()).toBeGreaterThanOrEqual(1);
    client.close();
    expect(await eventually(async () => (await subscribers()) === 0, 1_000)).toBe(true);

    // A client that leaves before anything was sent.
    const req = http.get(broker.url + streamPath(name, { batch_flush_timeout: 30 }));
    req.on('error', () => undefined);
    cleanups.push(() => Promise.resolve(req.destroy()));
    expect(await eventually(async () => (await subscribers()) >= 1, 1_000)).toBe(true);
    req.destroy();
    expect(await eventually(async () => (await subscribers()) === 0, 1_000)).toBe(true);

    // Two streams share one subscription; it goes when the last one leaves.
    const a = await openStream(name, { batch_flush_timeout: 30 }, [{ partition: '0', offset: 'BEGIN' }]);
    const b = await openStream(name, { batch_flush_timeout: 30 }, [{ partition: '0', offset: 'BEGIN' }]);
    a.close();
    await sleep(300); // a negative check: the window in which a's leaving would have unsubscribed (it must not: b reads)
    expect(await subscribers()).toBeGreaterThanOrEqual(1);
    await publish(name, [eventIn('0', 1)]);
    expect((await b.events(2, 2_000)).flatMap(seqsOf)).toEqual([0, 1]);
    b.close();
    expect(await eventually(async () => (await subscribers()) === 0, 1_000)).toBe(true);
  });
});

/** Resident set size of a process in bytes (Linux). */
function rssBytes(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match?.[1]) throw new Error(`no VmRSS for ${pid}`);
  return Number(match[1]) * 1024;
}

/** Bytes a Redis server sent to all its clients so far. */
async function netOutputBytes(client: Redis): Promise<number> {
  const match = /^total_net_output_bytes:(\d+)/m.exec(await client.info('stats'));
  if (!match?.[1]) throw new Error('no total_net_output_bytes');
  return Number(match[1]);
}

describe('low-level stream: backpressure', () => {
  const MB = 1024 * 1024;
  // ~57 MB in one partition, in stream entries of ~100 KB (25 events per publish).
  const EVENTS = 15_000;
  const PER_REQUEST = 25;
  const PAD = 'x'.repeat(4_000);
  const BATCH_LIMIT = 1000;
  let own: RedisProcess;
  let node: TestBrokerProcess;
  let ownRedis: Redis;

  beforeAll(async () => {
    // A Redis of its own, so the bytes Redis sends are this node's reads (and nothing of other test files).
    own = await startRedis();
    cleanups.push(() => own.stop());
    node = await startTestBrokerProcess({ BROKER_REDIS_URL: own.url, BROKER_CONSUMPTION_MAX_STREAM_BUFFER_BYTES: String(5 * MB), BROKER_CONSUMPTION_POLL_INTERVAL_MS: '10' });
    cleanups.push(() => node.stop());
    ownRedis = new Redis(own.url);
    cleanups.push(() => Promise.resolve(ownRedis.disconnect()));
  });

  it('stops reading and buffering while the client does not read, then delivers everything in order', async () => {
    const name = 'll.backpressure';
    await createEventType(name, 1, node);
    for (let from = 0; from < EVENTS; from += PER_REQUEST) {
      await publish(name, range(from, from + PER_REQUEST).map((s) => eventIn('0', s, { pad: PAD })), node);
    }
    const pid = node.process.pid;
    if (pid === undefined) throw new Error('no broker pid');

    const rssBefore = rssBytes(pid);
    const readBefore = await netOutputBytes(ownRedis);

    const req = http.get(node.url + streamPath(name, { batch_limit: BATCH_LIMIT, batch_flush_timeout: 1 }), { headers: cursorHeaders([{ partition: '0', offset: 'BEGIN' }]) });
    cleanups.push(() => Promise.resolve(req.destroy()));
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      req.once('response', resolve);
      req.once('error', reject);
    });
    res.pause();
    expect(res.statusCode).toBe(200);

    // A negative check: for 2 s the client reads nothing; a broker ignoring backpressure would read on.
    let rssMax = rssBefore;
    for (let i = 0; i < 20; i++) {
      await sleep(100);
      rssMax = Math.max(rssMax, rssBytes(pid));
    }
    const readMB = ((await netOutputBytes(ownRedis)) - readBefore) / MB;
    const growthMB = (rssMax - rssBefore) / MB;
    // A broker that ignores backpressure reads all ~57 MB from Redis and grows by ~175 MB (measured with
    // the cap and the drain wait patched out); a bounded one reads one slice (~6 MB) and grows by < 25 MB.
    // Limits: cap 5 MB + a batch (4 MB) + a read (64 entries of 100 KB) + slack.
    const measured = `read ${readMB.toFixed(1)} MB from Redis, RSS +${growthMB.toFixed(1)} MB`;
    expect(readMB, measured).toBeLessThan(25);
    expect(growthMB, measured).toBeLessThan(100);

    const seqs: number[] = [];
    const cursors: string[] = [];
    let oversized = 0;
    await new Promise<void>((resolve, reject) => {
      let rest = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (!chunk.includes('\n')) {
          rest += chunk;
          return;
        }
        const text = rest + chunk;
        let start = 0;
        for (let newline = text.indexOf('\n', rest.length); newline >= 0; newline = text.indexOf('\n', start)) {
          const batch = JSON.parse(text.slice(start, newline)) as StreamBatch;
          start = newline + 1;
          if (!batch.events) continue;
          if (batch.events.length > BATCH_LIMIT) oversized += 1;
          for (const event of batch.events) seqs.push(event.seq as number);
          cursors.push(batch.cursor.offset);
        }
        rest = text.slice(start);
        if (seqs.length >= EVENTS) resolve();
      });
      res.once('end', () => resolve());
      res.once('error', reject);
      res.resume();
    });
    req.destroy();
    expect(oversized).toBe(0);
    expect(seqs.length).toBe(EVENTS);
    expect(seqs.every((seq, i) => seq === i)).toBe(true);
    expect(cursors.at(-1)).toBe(formatOffset(1, EVENTS - 1));
    // Publishing 600 requests of 25 events of 4 KB and reading the 60 MB back: about 15 s on a quiet
    // machine, up to three times as long with every core busy (npm run test:stress).
  }, 90_000);
});
