import { readFileSync } from 'node:fs';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compress as zstdCompress, decompress as zstdDecompress } from 'zstd-napi';
import zstd from 'zstd-napi/binding.js';
import { masterNodes, type RedisClient } from '../../src/storage/redis/redis-connection.js';
import { call, harnessRedis, startTestBrokerProcess, type Answer, type TestBrokerProcess } from '../support/broker.js';
import { CompressedStreamClient } from '../support/compressed-stream.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';

/**
 * Compression both ways (docs/compression.md "Streams", "Publishing"):
 * consumption streams sent with zstd or gzip as `Accept-Encoding` asks, each batch flushed as complete
 * compressed blocks; publish bodies accepted with `Content-Encoding: zstd` as well as gzip, within
 * `http.maxInflatedBodyBytes`.
 *
 * Streams are read as sent (node:http, no automatic decoding) through a streaming decoder
 * (test/support/compressed-stream.ts): a batch is decoded only once every compressed byte of it
 * arrived. The node runs with a one-minute safety-net poll and streams with a one-minute
 * `batch_flush_timeout`, so within a test's time budget a stream sends nothing but what the test
 * caused.
 */

const MAX_INFLATED = 1024 * 1024;
const LONG_FLUSH = 60;
let broker: TestBrokerProcess;
let redis: RedisClient;
const open: CompressedStreamClient[] = [];

beforeAll(async () => {
  broker = await startTestBrokerProcess({ BROKER_CONSUMPTION_POLL_INTERVAL_MS: '60000', BROKER_HTTP_MAX_INFLATED_BODY_BYTES: String(MAX_INFLATED) });
  redis = harnessRedis();
});
afterAll(async () => {
  for (const client of open) client.close();
  await broker.stop();
  redis.disconnect();
});

const CODINGS = ['zstd', 'gzip'] as const;

async function eventType(name: string): Promise<void> {
  const statistic = { messages_per_minute: 1, message_size: 1, read_parallelism: 1, write_parallelism: 1 };
  const created = await call(broker.url, 'POST', '/event-types', businessEventType(name, { default_statistic: statistic }));
  expect(created.status, created.text).toBe(201);
}

async function publish(name: string, orders: readonly string[]): Promise<void> {
  const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, orders.map((o) => orderEvent(o)));
  expect(answer.status, answer.text).toBe(200);
}

async function stream(path: string, acceptEncoding: string, headers: Record<string, string> = {}): Promise<CompressedStreamClient> {
  const client = await CompressedStreamClient.open(broker.url + path, acceptEncoding, headers);
  open.push(client);
  expect(client.status).toBe(200);
  return client;
}

/** Subscribers of the notice channel of partition 0 of an event type (summed over masters). */
async function noticeSubscribers(name: string): Promise<number> {
  await redis.ping();
  let count = 0;
  for (const node of masterNodes(redis)) {
    const reply = (await node.call('PUBSUB', 'SHARDNUMSUB', broker.keys.partitionNotices(name, 1, '0'))) as unknown[];
    count += Number(reply[1]);
  }
  return count;
}

/** Polls `check` until it holds (at most `ms`): waits for the broker to set a stream up, not for time to pass. */
async function eventually(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = performance.now() + ms;
  for (;;) {
    if (await check()) return true;
    if (performance.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function newestOffsets(name: string): Promise<string[]> {
  const answer = await call(broker.url, 'GET', `/event-types/${name}/partitions`);
  expect(answer.status).toBe(200);
  return (answer.json as { partition: string; newest_available_offset: string }[]).map((p) => `${p.partition}:${p.newest_available_offset}`);
}

function brokerRssMb(): number {
  const status = readFileSync(`/proc/${broker.process.pid ?? 0}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
}

function expectProblem(answer: Answer, status: number, detail: string | RegExp): void {
  expect(answer.status, answer.text).toBe(status);
  expect(answer.headers.get('content-type')).toBe('application/problem+json');
  const problem = answer.json as { status: number; detail: string };
  expect(problem.status).toBe(status);
  if (typeof detail === 'string') expect(problem.detail).toBe(detail);
  else expect(problem.detail).toMatch(detail);
}

const FROM_BEGIN = { 'X-Broker-Cursors': JSON.stringify([{ partition: '0', offset: 'BEGIN' }]) };
const orderOf = (batch: { events?: Record<string, unknown>[] }): unknown[] => (batch.events ?? []).map((e) => e.order_number);

describe('compressed consumption streams', () => {
  it('chooses zstd when both are offered (q-values decide, zstd on ties), gzip when only it is, none otherwise; Vary always', async () => {
    const name = 'cmp.negotiate';
    await eventType(name);
    const cases: [string, string | undefined][] = [
      ['gzip, deflate, br, zstd', 'zstd'],
      ['zstd', 'zstd'],
      ['gzip', 'gzip'],
      ['x-gzip', 'gzip'],
      ['gzip;q=1, zstd;q=0.5', 'gzip'],
      ['zstd;q=0, gzip', 'gzip'],
      ['*', 'zstd'],
      ['identity', undefined],
      ['br', undefined],
    ];
    for (const [accept, expected] of cases) {
      const client = await stream(`/event-types/${name}/events?batch_flush_timeout=${LONG_FLUSH}`, accept);
      expect(client.headers['content-encoding'], accept).toBe(expected);
      expect(client.headers.vary, accept).toBe('Accept-Encoding');
      expect(client.headers['content-type']).toBe('application/x-json-stream');
      // The opening batch decodes at once, whatever the coding.
      const opening = await client.next(5_000);
      expect(opening?.events, accept).toBeUndefined();
      client.close();
    }
  });

  for (const coding of CODINGS) {
    it(`low-level stream, ${coding}: the batch of an event published after the stream opened decodes before the stream sends anything else`, async () => {
      const name = `cmp.flush.${coding}`;
      await eventType(name);
      const client = await stream(`/event-types/${name}/events?batch_limit=1&batch_flush_timeout=${LONG_FLUSH}`, coding);
      expect(client.headers['content-encoding']).toBe(coding);
      const opening = await client.next(5_000);
      expect(opening?.events).toBeUndefined();
      expect(await eventually(async () => (await noticeSubscribers(name)) >= 1, 5_000), 'the stream subscribes its notice channel').toBe(true);
      await publish(name, ['F1']);
      const [batch] = await client.events(1, 5_000);
      expect(orderOf(batch ?? {})).toEqual(['F1']);
      // Nothing else can have been sent: the next line is due in a minute (keep-alive) and the answer is open.
      expect(client.ended).toBe(false);
      expect(client.error).toBeUndefined();
      client.close();
    });

    it(`subscription stream, ${coding}: the first data batch decodes while the stream stays open`, async () => {
      const name = `cmp.sub.${coding}`;
      await eventType(name);
      await publish(name, ['S1']);
      const created = await call(broker.url, 'POST', '/subscriptions', { owning_application: `cmp-${coding}`, event_types: [name], read_from: 'begin' });
      expect(created.status, created.text).toBe(201);
      const id = (created.json as { id: string }).id;
      const client = await stream(`/subscriptions/${id}/events?batch_limit=1&batch_flush_timeout=${LONG_FLUSH}`, `${coding};q=1`);
      expect(client.headers['content-encoding']).toBe(coding);
      expect(client.headers.vary).toBe('Accept-Encoding');
      expect(client.headers['x-broker-streamid']).toBeTypeOf('string');
      const [batch] = await client.events(1, 5_000);
      expect(orderOf(batch ?? {})).toEqual(['S1']);
      expect(batch?.cursor.cursor_token).toBeTypeOf('string');
      expect(client.ended).toBe(false);
      client.close();
    });

    it(`low-level stream, ${coding}: a stream that ends sends a complete ${coding === 'zstd' ? 'frame' : 'gzip member'} holding exactly its lines`, async () => {
      const name = `cmp.end.${coding}`;
      await eventType(name);
      await publish(name, ['E1', 'E2', 'E3']);
      const client = await stream(`/event-types/${name}/events?batch_limit=1&stream_limit=3&batch_flush_timeout=${LONG_FLUSH}`, coding, FROM_BEGIN);
      const batches = await client.untilEnd();
      expect(client.error).toBeUndefined();
      expect(client.ended).toBe(true);
      expect(batches.flatMap(orderOf)).toEqual(['E1', 'E2', 'E3']);
      const body = Buffer.concat(client.raw);
      const text = (coding === 'zstd' ? zstdDecompress(body) : zlib.gunzipSync(body)).toString('utf8');
      const lines = text.split('\n');
      expect(lines.pop()).toBe('');
      expect(lines.map((l) => JSON.parse(l) as unknown)).toEqual(batches);
      // Compressed: far smaller than the lines it carries once the history is shared.
      expect(body.byteLength).toBeLessThan(Buffer.byteLength(text));
    });

    it(`low-level stream, ${coding}: 3,000 events in 60-event batches arrive complete and in order`, async () => {
      const name = `cmp.bulk.${coding}`;
      await eventType(name);
      const orders = Array.from({ length: 3000 }, (_, i) => `B${i}`);
      for (let i = 0; i < orders.length; i += 500) await publish(name, orders.slice(i, i + 500));
      const client = await stream(`/event-types/${name}/events?batch_limit=60&stream_limit=3000&batch_flush_timeout=${LONG_FLUSH}`, coding, FROM_BEGIN);
      const batches = await client.untilEnd(20_000);
      expect(client.error).toBeUndefined();
      expect(batches.flatMap(orderOf)).toEqual(orders);
      expect(batches.filter((b) => b.events).every((b) => (b.events ?? []).length === 60)).toBe(true);
    });
  }

  it('keeps serving after clients leave compressed streams mid-way, and logs no stream failure', async () => {
    const name = 'cmp.leave';
    await eventType(name);
    await publish(name, Array.from({ length: 200 }, (_, i) => `L${i}`));
    for (const coding of CODINGS) {
      for (let i = 0; i < 10; i++) {
        const client = await stream(`/event-types/${name}/events?batch_limit=10&batch_flush_timeout=${LONG_FLUSH}`, coding, FROM_BEGIN);
        await client.events(10);
        client.close();
      }
    }
    const after = await stream(`/event-types/${name}/events?batch_limit=200&stream_limit=200&batch_flush_timeout=${LONG_FLUSH}`, 'zstd, gzip', FROM_BEGIN);
    expect((await after.untilEnd()).flatMap(orderOf)).toHaveLength(200);
    expect(broker.output()).not.toMatch(/stream failed|compressed stream failed/);
  });
});

describe('zstd publish bodies', () => {
  const name = 'cmp.publish';

  it('accepts a zstd body and stores its events; a multi-frame body is read frame after frame', async () => {
    await eventType(name);
    const one = zstdCompress(Buffer.from(JSON.stringify([orderEvent('Z1'), orderEvent('Z2')])));
    expect((await call(broker.url, 'POST', `/event-types/${name}/events`, one, { 'Content-Encoding': 'zstd' })).status).toBe(200);
    const text = JSON.stringify([orderEvent('Z3')]);
    const two = Buffer.concat([zstdCompress(Buffer.from(text.slice(0, 10))), zstdCompress(Buffer.from(text.slice(10)))]);
    expect((await call(broker.url, 'POST', `/event-types/${name}/events`, two, { 'Content-Encoding': 'ZSTD' })).status).toBe(200);
    const client = await stream(`/event-types/${name}/events?batch_limit=3&stream_limit=3&batch_flush_timeout=${LONG_FLUSH}`, 'identity', FROM_BEGIN);
    expect((await client.untilEnd()).flatMap(orderOf)).toEqual(['Z1', 'Z2', 'Z3']);
  });

  it('refuses zstd bombs at http.maxInflatedBodyBytes (413, nothing written): declared size at once, undeclared size while decoding', async () => {
    const before = await newestOffsets(name);
    const zeros = Buffer.alloc(60 * 1024 * 1024);
    const declared = zstdCompress(zeros);
    const cctx = new zstd.CCtx();
    cctx.setParameter(zstd.CParameter.contentSizeFlag, 0);
    const out = Buffer.alloc(zstd.compressBound(zeros.length));
    const [left, written] = cctx.compressStream2(out, zeros, zstd.EndDirective.end);
    expect(left).toBe(0);
    const undeclared = out.subarray(0, written);
    expect(zstd.getFrameContentSize(declared)).toBe(zeros.length);
    expect(zstd.getFrameContentSize(undeclared)).toBeNull();
    const rssBefore = brokerRssMb();
    for (const [label, bomb] of [['declared size', declared], ['undeclared size', undeclared]] as const) {
      const started = performance.now();
      const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, bomb, { 'Content-Encoding': 'zstd' });
      const ms = performance.now() - started;
      expectProblem(answer, 413, `the zstd body inflates to more than ${MAX_INFLATED} bytes (http.maxInflatedBodyBytes)`);
      console.log(`zstd bomb, ${label} (${bomb.byteLength} bytes → 60 MiB): 413 in ${ms.toFixed(1)} ms`);
      expect(ms).toBeLessThan(1000);
    }
    const grown = brokerRssMb() - rssBefore;
    console.log(`broker RSS grew by ${grown.toFixed(1)} MB over two zstd bombs`);
    expect(grown).toBeLessThan(30);
    expect(await newestOffsets(name)).toEqual(before);
  });

  it('answers 400 to corrupt or truncated zstd and to a window above 8 MiB, 415 to other codings', async () => {
    const before = await newestOffsets(name);
    const body = zstdCompress(Buffer.from(JSON.stringify(Array.from({ length: 200 }, (_, i) => orderEvent(`T${i}`)))));
    const path = `/event-types/${name}/events`;
    expectProblem(await call(broker.url, 'POST', path, body.subarray(0, body.length - 5), { 'Content-Encoding': 'zstd' }), 400, /^the zstd body cannot be decoded: /);
    expectProblem(await call(broker.url, 'POST', path, Buffer.from('not zstd at all'), { 'Content-Encoding': 'zstd' }), 400, /^the zstd body cannot be decoded: /);
    // A 32 MiB window (windowLog 25): more than RFC 9659 lets an HTTP zstd coding ask for.
    const wide = zstdCompress(Buffer.alloc(16 * 1024 * 1024, 'a'), { windowLog: 25, contentSizeFlag: false });
    expectProblem(await call(broker.url, 'POST', path, wide, { 'Content-Encoding': 'zstd' }), 400, /^the zstd body cannot be decoded: .*memory/);
    expectProblem(await call(broker.url, 'POST', path, '[]', { 'Content-Encoding': 'br' }), 415, 'Content-Encoding "br" is not supported; use zstd, gzip or none');
    expect(await newestOffsets(name)).toEqual(before);
  });
});
