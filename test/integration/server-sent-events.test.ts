import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { SseClient, type SseFrame } from '../support/sse-client.js';

/**
 * Streams as server-sent events (docs/server-sent-events.md "Framing"): `Accept: text/event-stream`
 * on low-level and subscription streams, read here with fetch to check the framing byte by byte; the
 * browser's `EventSource` is in browser-sse.test.ts.
 */

let broker: TestBroker;

beforeAll(async () => {
  broker = await startTestBroker({ BROKER_CONSUMPTION_POLL_INTERVAL_MS: '200' });
});
afterAll(async () => {
  await broker.stop();
});

const BEFORE_FIRST = '001-0001--1';
const offset = (n: number): string => `001-0001-${String(n).padStart(18, '0')}`;

interface Batch {
  cursor: { partition: string; offset: string; event_type?: string; cursor_token?: string };
  events?: { order_number: string }[];
  info?: { debug?: string; stream_id?: string; stream_close_reason?: string };
}

/** Creates a `user_defined` business event type with `partitions` partitions. */
async function createEventType(name: string, partitions: number): Promise<void> {
  const stat = { messages_per_minute: 1, message_size: 1, read_parallelism: partitions, write_parallelism: partitions };
  const created = await call(broker.url, 'POST', '/event-types', businessEventType(name, { partition_strategy: 'user_defined', default_statistic: stat }));
  expect(created.status, created.text).toBe(201);
}

/** Publishes one event per order number to `partition`, expecting 200. */
async function publish(name: string, partition: string, orders: readonly string[]): Promise<void> {
  const events = orders.map((o) => {
    const event = orderEvent(o);
    (event.metadata as Record<string, unknown>).partition = partition;
    return event;
  });
  const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, events);
  expect(answer.status, answer.text).toBe(200);
}

/** The frames that are events (carry `data`), their data parsed. */
function batches(frames: readonly SseFrame[]): { id: string | undefined; batch: Batch }[] {
  return frames.filter((f) => f.data !== undefined).map((f) => ({ id: f.id, batch: JSON.parse(f.data ?? '') as Batch }));
}

const ordersOf = (list: readonly { batch: Batch }[]): string[] => list.flatMap((b) => (b.batch.events ?? []).map((e) => e.order_number));

describe('server-sent events', () => {
  it('low-level: one event per batch, id = every partition cursor after it; Last-Event-ID resumes right after it', async () => {
    const name = 'sse.low';
    await createEventType(name, 2);
    await publish(name, '0', ['a0', 'a1', 'a2']);
    await publish(name, '1', ['b0', 'b1']);
    const start = JSON.stringify([
      { partition: '0', offset: BEFORE_FIRST },
      { partition: '1', offset: BEFORE_FIRST },
    ]);
    const url = `${broker.url}/event-types/${name}/events?batch_limit=2&stream_limit=4&batch_flush_timeout=1&cursors=${encodeURIComponent(start)}`;
    const first = await SseClient.open(url);
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toBe('text/event-stream');
    expect(first.headers.get('cache-control')).toBe('no-cache');
    expect(first.headers.get('warning')).toMatch(/deprecated/);
    const frames = await first.untilEnd();
    expect(first.raw.startsWith('retry: 1000\n')).toBe(true);
    expect(frames[0]?.retry).toBe(1000);
    const all = batches(frames);
    // The last event is the closing batch: no events, why the stream ended (docs/consuming.md "Why a stream ended").
    const closing = all[all.length - 1];
    expect(closing?.batch.events).toBeUndefined();
    expect(closing?.batch.info).toEqual({ debug: 'Stream limit in events reached: 4', stream_close_reason: 'stream_limit_reached' });
    const got = all.slice(0, -1);
    // stream_limit 4 of the 5 events: a0 a1 | b0 b1 in some partition order (each batch one partition).
    expect(ordersOf(got).sort()).toEqual(['a0', 'a1', 'b0', 'b1']);
    for (const { id, batch } of got) {
      // Low-level batches as on application/x-json-stream: cursor and events, no info.
      expect(Object.keys(batch).sort()).toEqual(['cursor', 'events']);
      const cursors = JSON.parse(id ?? '') as { partition: string; offset: string }[];
      expect(cursors.map((c) => c.partition)).toEqual(['0', '1']);
      expect(cursors.find((c) => c.partition === batch.cursor.partition)).toEqual(batch.cursor);
    }
    const lastId = got[got.length - 1]?.id ?? '';
    expect(JSON.parse(lastId)).toEqual([
      { partition: '0', offset: offset(1) },
      { partition: '1', offset: offset(1) },
    ]);
    // Every event block is `id:` then one `data:` line.
    for (const block of first.raw.split('\n\n').filter((b) => b.includes('data: '))) {
      expect(block.replace(/^retry: 1000\n/, '')).toMatch(/^id: [^\n]+\ndata: [^\n]+$/);
    }

    // Reconnect as EventSource does: the same URL (with its cursors parameter) plus Last-Event-ID.
    await publish(name, '1', ['b2']);
    const second = await SseClient.open(url, { headers: { 'last-event-id': lastId } });
    expect(second.status).toBe(200);
    const resumed: { id: string | undefined; batch: Batch }[] = [];
    while (ordersOf(resumed).length < 2) {
      const frame = await second.next();
      if (frame === undefined) break;
      resumed.push(...batches([frame]));
    }
    second.close();
    expect(ordersOf(resumed).sort()).toEqual(['a2', 'b2']);

    // A malformed Last-Event-ID is a problem before the stream starts.
    const bad = await SseClient.open(url, { headers: { 'last-event-id': 'nope' } });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('content-type')).toBe('application/problem+json');
    expect((bad.problem as { detail: string }).detail).toMatch(/Last-Event-ID/);
  });

  it('keep-alives are SSE comments: no event is dispatched for them; the closing batch is an event', async () => {
    const name = 'sse.keepalive';
    await createEventType(name, 1);
    const stream = await SseClient.open(`${broker.url}/event-types/${name}/events?batch_flush_timeout=1&stream_keep_alive_limit=2`);
    expect(stream.status).toBe(200);
    const frames = await stream.untilEnd();
    const keepAlives = frames.slice(0, -1);
    expect(keepAlives.length).toBeGreaterThanOrEqual(2);
    for (const frame of keepAlives) {
      expect(frame.data).toBeUndefined();
      expect(frame.comments).toEqual(['keep-alive']);
    }
    const closing = `{"cursor":{"partition":"0","offset":"${BEFORE_FIRST}"},"info":{"debug":"Stream keep-alive limit reached","stream_close_reason":"keep_alive_limit_reached"}}`;
    expect(stream.raw).toBe(`retry: 1000\n${': keep-alive\n\n'.repeat(keepAlives.length)}id: [{"partition":"0","offset":"${BEFORE_FIRST}"}]\ndata: ${closing}\n\n`);
  });

  it('subscription: stream id in the first event, id = the batch cursor, commits with it, closing batch as an event', async () => {
    const name = 'sse.sub';
    await createEventType(name, 1);
    await publish(name, '0', ['s0', 's1', 's2', 's3']);
    const created = await call(broker.url, 'POST', '/subscriptions', { owning_application: 'sse-app', event_types: [name], read_from: 'begin' });
    expect(created.status, created.text).toBe(201);
    const id = (created.json as { id: string }).id;

    const stream = await SseClient.open(`${broker.url}/subscriptions/${id}/events?batch_limit=2&stream_limit=4&batch_flush_timeout=1`);
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toBe('text/event-stream');
    const streamId = stream.headers.get('x-broker-streamid') ?? '';
    expect(streamId).toMatch(/^[0-9a-f-]{36}$/);

    const got: { id: string | undefined; batch: Batch }[] = [];
    while (ordersOf(got).length < 4) {
      const frame = await stream.next();
      if (frame === undefined) throw new Error('the stream ended early');
      got.push(...batches([frame]));
    }
    expect(got[0]?.batch.info).toEqual({ debug: 'Stream started', stream_id: streamId });
    for (const { batch } of got.slice(1)) expect(batch.info).toBeUndefined();
    for (const { id: eventId, batch } of got) {
      expect(JSON.parse(eventId ?? '')).toEqual(batch.cursor);
      expect(batch.cursor.event_type).toBe(name);
    }
    const withEvents = got.filter((g) => g.batch.events !== undefined);
    const committed = await call(broker.url, 'POST', `/subscriptions/${id}/cursors`, { items: withEvents.map((g) => g.batch.cursor) }, { 'X-Broker-StreamId': got[0]?.batch.info?.stream_id ?? '' });
    expect(committed.status, committed.text).toBe(204);

    // stream_limit counts committed events: the stream ends with its closing batch, an event too.
    const rest = batches(await stream.untilEnd());
    expect(rest[rest.length - 1]?.batch.info?.debug).toBe('Stream limit in events reached: 4');
    const stats = await call(broker.url, 'GET', `/subscriptions/${id}/stats`);
    expect((stats.json as { items: { partitions: { unconsumed_events: number }[] }[] }).items[0]?.partitions[0]?.unconsumed_events).toBe(0);
  });

  it('errors before the stream starts stay problems; gzip applies to event streams as to JSON lines', async () => {
    const missing = await SseClient.open(`${broker.url}/subscriptions/${crypto.randomUUID()}/events`);
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toBe('application/problem+json');

    const name = 'sse.gzip';
    await createEventType(name, 1);
    await publish(name, '0', ['g0']);
    const cursors = encodeURIComponent(JSON.stringify([{ partition: '0', offset: BEFORE_FIRST }]));
    // One-minute flush: the event can only arrive promptly because each write is flushed as gzip blocks.
    const stream = await SseClient.open(`${broker.url}/event-types/${name}/events?batch_flush_timeout=60&cursors=${cursors}`, { headers: { 'accept-encoding': 'gzip' } });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-encoding')).toBe('gzip');
    const frame = await stream.next(5_000);
    stream.close();
    expect(frame?.retry).toBe(1000);
    expect(ordersOf(batches(frame ? [frame] : []))).toEqual(['g0']);

    // Both X-Broker-Cursors and the cursors parameter: 400.
    const both = await SseClient.open(`${broker.url}/event-types/${name}/events?cursors=${cursors}`, { headers: { 'x-broker-cursors': decodeURIComponent(cursors) } });
    expect(both.status).toBe(400);
  });

  it('application/x-json-stream is still the default and is chosen over event-stream by q-value', async () => {
    const name = 'sse.negotiate';
    await createEventType(name, 1);
    const accepts = ['*/*', 'application/x-json-stream', 'text/event-stream;q=0.5, application/x-json-stream'];
    await Promise.all(
      accepts.map(async (accept) => {
        const res = await fetch(`${broker.url}/event-types/${name}/events?stream_timeout=1&batch_flush_timeout=1`, { headers: { accept } });
        expect(res.headers.get('content-type'), accept).toBe('application/x-json-stream');
        const text = await res.text();
        expect(text.startsWith('{"cursor":'), text).toBe(true);
      }),
    );
  });
});
