import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { parseChunked, readStreamHead, type StreamHead } from '../support/raw-stream.js';

/**
 * How streams start on the wire, read with a raw socket: the status line and every
 * header, `X-Broker-StreamId` included, must arrive as soon as the stream is established.
 *
 * The goal is that the read completing the header block carries no body bytes (clients that parse the
 * header block with one buffered reader and then read the chunked body from the socket lose whatever
 * that reader buffered). The HTTP engine cannot do that: uWS 20.30 writes the blank line that ends the
 * header block only as the first bytes of the first chunk (`\r\n<size>\r\n<data>` in one call), and a
 * zero-length `write` writes nothing. So every stream writes an opening batch at once, in the same
 * read as the blank line; the tests below pin those bytes, and the goal itself is kept as an
 * expected failure (docs/consuming.md "Keep-alives", docs/decisions/0008-http-engine-uwebsockets.md;
 * bench/probes/probe-stream-head.ts for the bytes of each approach).
 */

const FLUSH_SECONDS = 3;
let broker: TestBroker;
const heads = new Map<string, StreamHead>();

beforeAll(async () => {
  broker = await startTestBroker({ BROKER_CONSUMPTION_POLL_INTERVAL_MS: '60000' });
});
afterAll(async () => {
  for (const head of heads.values()) head.close();
  await broker.stop();
});

async function eventType(name: string): Promise<void> {
  const statistic = { messages_per_minute: 1, message_size: 1, read_parallelism: 1, write_parallelism: 1 };
  const created = await call(broker.url, 'POST', '/event-types', businessEventType(name, { default_statistic: statistic }));
  expect(created.status, created.text).toBe(201);
}

async function subscription(name: string, readFrom: 'begin' | 'end'): Promise<string> {
  const answer = await call(broker.url, 'POST', '/subscriptions', { owning_application: `app-${crypto.randomUUID()}`, event_types: [name], read_from: readFrom });
  expect(answer.status, answer.text).toBe(201);
  return (answer.json as { id: string }).id;
}

/** The header block came complete and at once: well before the first batch would be due. */
function expectPromptHead(head: StreamHead): void {
  expect(head.status).toBe(200);
  expect(head.headers['content-type']).toBe('application/x-json-stream');
  expect(head.headers['transfer-encoding']).toBe('chunked');
  expect(head.atMs).toBeLessThan(FLUSH_SECONDS * 1000);
}

/**
 * The opening batch that travels with the blank line (engine limit): one keep-alive line without events,
 * complete (the backpressure writer hands it to uWS in two writes, so it is two chunks).
 */
function expectOpeningBatch(head: StreamHead, debug: string | undefined): void {
  const carried = parseChunked(head.carried).chunks.join('');
  expect(carried.endsWith('\n'), JSON.stringify(head.carried.toString())).toBe(true);
  expect(carried.indexOf('\n')).toBe(carried.length - 1);
  const batch = JSON.parse(carried) as { cursor: unknown; events?: unknown; info?: { debug?: string } };
  expect(batch.events).toBeUndefined();
  expect(batch.info?.debug).toBe(debug);
}

describe('stream heads on the wire (raw socket)', () => {
  it('subscription stream with no events pending: the header block with X-Broker-StreamId arrives at once, with the opening batch', async () => {
    await eventType('head.idle');
    const id = await subscription('head.idle', 'end');
    const head = await readStreamHead(broker.url, `/subscriptions/${id}/events?batch_flush_timeout=${FLUSH_SECONDS}`);
    heads.set('subscription, no events pending', head);
    expectPromptHead(head);
    expect(head.headers['x-broker-streamid']).toMatch(/^[0-9a-f-]{36}$/);
    expectOpeningBatch(head, 'Stream started');
  });

  it('subscription stream with events pending: the header block arrives at once, with the opening batch; the events follow when due', async () => {
    await eventType('head.pending');
    const published = await call(broker.url, 'POST', '/event-types/head.pending/events', [orderEvent('p-1'), orderEvent('p-2'), orderEvent('p-3')]);
    expect(published.status, published.text).toBe(200);
    const id = await subscription('head.pending', 'begin');
    const head = await readStreamHead(broker.url, `/subscriptions/${id}/events?batch_limit=10&batch_flush_timeout=${FLUSH_SECONDS}&stream_timeout=${FLUSH_SECONDS}`);
    heads.set('subscription, events pending', head);
    expectPromptHead(head);
    expect(head.headers['x-broker-streamid']).toMatch(/^[0-9a-f-]{36}$/);
    expectOpeningBatch(head, 'Stream started');
    // The three events are not a full batch: they come at batch_flush_timeout, then the stream times out.
    const body = parseChunked(Buffer.concat([head.carried, await head.rest]));
    expect(body.complete).toBe(true);
    const events = body.chunks
      .join('')
      .split('\n')
      .filter((l) => l.length > 0)
      .flatMap((l) => (JSON.parse(l) as { events?: { order_number: string }[] }).events ?? []);
    expect(events.map((e) => e.order_number)).toEqual(['p-1', 'p-2', 'p-3']);
  });

  it('low-level stream: the header block arrives at once, with the opening batch', async () => {
    await eventType('head.lowlevel');
    const head = await readStreamHead(broker.url, `/event-types/head.lowlevel/events?batch_flush_timeout=${FLUSH_SECONDS}`);
    heads.set('low-level', head);
    expectPromptHead(head);
    expect(head.headers.warning).toBeDefined();
    expectOpeningBatch(head, undefined);
  });

  // The goal above, not reached: see the file's comment. Passes only while it fails.
  it.fails('the read completing the header block carries no body bytes (fails: uWS 20.30 ends the header block only with a chunk)', () => {
    expect([...heads.keys()].sort()).toEqual(['low-level', 'subscription, events pending', 'subscription, no events pending']);
    for (const [what, head] of heads) expect(head.carried.toString('latin1'), what).toBe('');
  });
});
