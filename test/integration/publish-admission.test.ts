import { once } from 'node:events';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, eventsInPartition, startTestBroker, type Answer, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { parseExposition, valueOf } from '../support/prometheus-text.js';

/**
 * Bounded admission of publishing (docs/publishing.md "Refusals and deadlines"): a node holds at most
 * `http.publishMaxInFlightBytes` bytes of publish bodies; one more publish is refused at once with 503
 * `PUBLISH_OVERLOADED`, `Retry-After: 1`, a problem naming the bound, and nothing of it written, while
 * `/health`, `/metrics` and the admitted publish go on. The node under test has a bound of 64 KiB; a
 * client that sends a publish's headers and holds back the rest of its body keeps its declared bytes
 * admitted (seen on the node's own `broker_publish_bytes_in_flight`), so the refusals are deterministic.
 */

const BOUND = 65_536;
const NAME = 'admission.orders';

let node: TestBroker;

beforeAll(async () => {
  node = await startTestBroker({ BROKER_HTTP_PUBLISH_MAX_IN_FLIGHT_BYTES: String(BOUND) });
  expect((await call(node.url, 'POST', '/event-types', businessEventType(NAME))).status).toBe(201);
});
afterAll(async () => {
  const code = await node?.stop();
  expect(code, node?.output()).toBe(0);
});

/** A batch of order events whose JSON is at least `bytes` long, with its eids. */
function batchOf(tag: string, bytes: number): { body: Buffer; eids: string[] } {
  const events: Record<string, unknown>[] = [];
  let size = 2;
  for (let i = 0; size < bytes; i++) {
    const event = orderEvent(`${tag}-${i}`, { note: 'x'.repeat(400) });
    events.push(event);
    size += JSON.stringify(event).length + 1;
  }
  return { body: Buffer.from(JSON.stringify(events)), eids: events.map((e) => (e.metadata as { eid: string }).eid) };
}

/** The node's metrics, parsed. */
async function metrics(): Promise<ReturnType<typeof parseExposition>> {
  const answer = await call(node.url, 'GET', '/metrics');
  expect(answer.status).toBe(200);
  return parseExposition(answer.text);
}

/** Asks the node's metrics until `broker_publish_bytes_in_flight` is `bytes` (at most 20 s). */
async function untilBytesInFlight(bytes: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  let seen: number | undefined;
  while (Date.now() < deadline) {
    seen = valueOf(await metrics(), 'broker_publish_bytes_in_flight');
    if (seen === bytes) return;
  }
  expect(seen, 'bytes of publish bodies in flight').toBe(bytes);
}

/** Events stored in the event type's one partition (its newest offset + 1). */
async function stored(): Promise<number> {
  return eventsInPartition(await call(node.url, 'GET', `/event-types/${NAME}/partitions/0`));
}

/** A publish written to a raw socket: its head and `sent` of its body, the rest held back until {@link HeldPublish.finish}. */
interface HeldPublish {
  readonly socket: net.Socket;
  /** Sends the rest of the body and reads the answer (the node closes the connection after it). */
  finish(): Promise<{ status: number; text: string }>;
}

/** Starts a publish of `body` on a connection of its own, sending all but its last `heldBack` bytes. */
async function holdPublish(body: Buffer, heldBack: number): Promise<HeldPublish> {
  const socket = net.connect(node.port, '127.0.0.1');
  socket.on('error', () => undefined);
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  const ended = once(socket, 'close');
  await once(socket, 'connect');
  socket.write(`POST /event-types/${NAME}/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${body.byteLength}\r\n\r\n`);
  socket.write(body.subarray(0, body.byteLength - heldBack));
  return {
    socket,
    finish: async () => {
      socket.write(body.subarray(body.byteLength - heldBack));
      await ended;
      const text = Buffer.concat(chunks).toString();
      return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]), text };
    },
  };
}

/** The answers read from `socket` one at a time (each a head and a body of its `Content-Length`). */
function answersOn(socket: net.Socket): { next(): Promise<{ status: number; text: string }> } {
  let buffered = Buffer.alloc(0);
  let wake: (() => void) | undefined;
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    wake?.();
  });
  socket.on('close', () => wake?.());
  socket.on('error', () => undefined);
  return {
    async next() {
      for (;;) {
        const headEnd = buffered.indexOf('\r\n\r\n');
        if (headEnd >= 0) {
          const head = buffered.subarray(0, headEnd).toString();
          const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
          const end = headEnd + 4 + length;
          if (buffered.byteLength >= end) {
            const text = buffered.subarray(0, end).toString();
            buffered = buffered.subarray(end);
            return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]), text };
          }
        }
        if (socket.destroyed) throw new Error(`connection closed before a whole answer: ${buffered.toString()}`);
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
  };
}

/** A chunked publish of `body` (no Content-Length), answered on its own connection. */
async function chunkedPublish(body: Buffer): Promise<{ status: number; text: string }> {
  const socket = net.connect(node.port, '127.0.0.1');
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  const ended = once(socket, 'close');
  await once(socket, 'connect');
  socket.write(`POST /event-types/${NAME}/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n`);
  socket.write(Buffer.concat([Buffer.from(`${body.byteLength.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]));
  await ended;
  const text = Buffer.concat(chunks).toString();
  return { status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1]), text };
}

/** The refusal's problem: 503, `Retry-After: 1`, type publish-overloaded, detail naming the bound. */
function expectRefusal(answer: Answer): void {
  expect(answer.status, answer.text).toBe(503);
  expect(answer.headers.get('retry-after')).toBe('1');
  expect(answer.headers.get('content-type')).toBe('application/problem+json');
  const problem = answer.json as { type: string; detail: string };
  expect(problem.type).toBe('/problems/publish-overloaded');
  expect(problem.detail).toMatch(new RegExp(`\\(http\\.publishMaxInFlightBytes ${BOUND}\\); nothing of it was read or written`));
}

describe('publish admission', () => {
  it('beyond the bound a publish is refused at once with 503, Retry-After and the bound named, nothing of it written; /health, /metrics and the admitted publish go on', async () => {
    const before = await stored();
    const refusedBefore = valueOf(await metrics(), 'broker_publish_refused_total', { reason: 'bytes_in_flight' }) ?? 0;
    const held = batchOf('held', 60_000);
    const holder = await holdPublish(held.body, 100);
    try {
      await untilBytesInFlight(held.body.byteLength);
      const refused = batchOf('refused', 8_000);
      const started = performance.now();
      const answer = await call(node.url, 'POST', `/event-types/${NAME}/events`, refused.body);
      const refusedMs = performance.now() - started;
      expectRefusal(answer);
      expect((answer.json as { detail: string }).detail).toContain(`holds ${held.body.byteLength} bytes`);
      // At once: no queue, no timer (generous for a shared machine; typically a few ms).
      expect(refusedMs).toBeLessThan(1000);
      expect((await call(node.url, 'GET', '/health')).status).toBe(200);
      const exposition = await metrics();
      expect(valueOf(exposition, 'broker_publish_refused_total', { reason: 'bytes_in_flight' })).toBe(refusedBefore + 1);
      expect(valueOf(exposition, 'broker_publish_requests_in_flight')).toBe(1);
      // Nothing of the refused batch was written: only the held batch is, once its body is in.
      expect(await stored()).toBe(before);
      const finished = await holder.finish();
      expect(finished.status, finished.text).toBe(200);
      expect(await stored()).toBe(before + held.eids.length);
      // The bytes were given back with the answer: the refused batch goes through now.
      await untilBytesInFlight(0);
      const again = await call(node.url, 'POST', `/event-types/${NAME}/events`, refused.body);
      expect(again.status, again.text).toBe(200);
      expect(await stored()).toBe(before + held.eids.length + refused.eids.length);
    } finally {
      holder.socket.destroy();
    }
  });

  it('the refusal is answered before any of the body is sent; the body sent after it is skipped and the connection serves the next request', async () => {
    const before = await stored();
    const held = batchOf('held-early', 60_000);
    const holder = await holdPublish(held.body, 100);
    const socket = net.connect(node.port, '127.0.0.1');
    const received = answersOn(socket);
    try {
      await once(socket, 'connect');
      await untilBytesInFlight(held.body.byteLength);
      const refused = batchOf('early', 200_000);
      socket.write(`POST /event-types/${NAME}/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${refused.body.byteLength}\r\n\r\n`);
      // Not one byte of the body is on the wire yet: the answer comes from the headers alone.
      const refusal = await received.next();
      expect(refusal.status, refusal.text).toBe(503);
      expect(refusal.text).toMatch(/retry-after: 1/i);
      expect(refusal.text).toContain('http.publishMaxInFlightBytes');
      expect(refusal.text).not.toMatch(/connection: close/i);
      // The client sends the body it started, then another request on the same connection.
      socket.write(refused.body);
      socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
      const next = await received.next();
      expect(next.status, next.text).toBe(200);
      expect((await holder.finish()).status).toBe(200);
      expect(await stored()).toBe(before + held.eids.length);
    } finally {
      socket.destroy();
      holder.socket.destroy();
    }
  });

  it('a chunked body is counted once it is in: beyond the bound it is refused before any validation, nothing written', async () => {
    const before = await stored();
    const held = batchOf('held-chunked', 60_000);
    const holder = await holdPublish(held.body, 100);
    try {
      await untilBytesInFlight(held.body.byteLength);
      const answer = await chunkedPublish(batchOf('chunked', 8_000).body);
      expect(answer.status, answer.text).toBe(503);
      expect(answer.text).toMatch(/retry-after: 1/i);
      expect(answer.text).toContain('http.publishMaxInFlightBytes');
      expect((await holder.finish()).status).toBe(200);
      expect(await stored()).toBe(before + held.eids.length);
    } finally {
      holder.socket.destroy();
    }
  });

  it('a client that leaves before its body is in gives its bytes back at once', async () => {
    const left = batchOf('left', 60_000);
    const holder = await holdPublish(left.body, 100);
    await untilBytesInFlight(left.body.byteLength);
    holder.socket.destroy();
    await untilBytesInFlight(0);
    const answer = await call(node.url, 'POST', `/event-types/${NAME}/events`, batchOf('after-leave', 20_000).body);
    expect(answer.status, answer.text).toBe(200);
  });

  it('one publish alone is admitted whatever its size (up to http.maxBodyBytes)', async () => {
    await untilBytesInFlight(0);
    const large = batchOf('large', 3 * BOUND);
    const answer = await call(node.url, 'POST', `/event-types/${NAME}/events`, large.body);
    expect(answer.status, answer.text).toBe(200);
  });
});
