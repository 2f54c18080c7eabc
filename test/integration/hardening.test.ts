import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, harnessRedis, scanKeys, startTestBrokerProcess, type Answer, type TestBrokerProcess } from '../support/broker.js';
import type { RedisClient } from '../../src/storage/redis/redis-connection.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';

/**
 * Hardening (docs/security.md "Hostile input": bad input never crashes a node and never half-writes a
 * batch): hostile bodies, names and clients. Every case sends the bad input, checks the answer
 * (a problem with X-Flow-Id, never a 500), checks that nothing was written or lost, and then proves the
 * node still serves a normal publish and a low-level stream ({@link expectHealthy}).
 *
 * The node runs with small body limits so oversized bodies stay cheap to send: 64 KB as sent, 1 MB
 * inflated.
 */

const MAX_BODY = 64 * 1024;
const MAX_INFLATED = 1024 * 1024;
/** The event type {@link expectHealthy} publishes to and reads back from. */
const CONTROL = 'hard.control';
/** The event type hostile publishes target: no hostile request changes its offsets. */
const TARGET = 'hard.target';

let broker: TestBrokerProcess;
let redis: RedisClient;
/** Every event {@link expectHealthy} published, in order. */
const controlEids: string[] = [];

beforeAll(async () => {
  broker = await startTestBrokerProcess({
    BROKER_HTTP_MAX_BODY_BYTES: String(MAX_BODY),
    BROKER_HTTP_MAX_INFLATED_BODY_BYTES: String(MAX_INFLATED),
    BROKER_CONSUMPTION_POLL_INTERVAL_MS: '200',
  });
  redis = harnessRedis();
  for (const name of [CONTROL, TARGET]) expect((await call(broker.url, 'POST', '/event-types', businessEventType(name))).status).toBe(201);
});
afterAll(async () => {
  redis.disconnect();
  const code = await broker.stop();
  expect(code, broker.output()).toBe(0);
});

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const arrays = (depth: number, inner = ''): string => '['.repeat(depth) + inner + ']'.repeat(depth);

/**
 * The node still works: publishes one event to {@link CONTROL} and reads exactly it back through a
 * low-level stream started at the previous newest offset.
 */
async function expectHealthy(): Promise<void> {
  const partition = await call(broker.url, 'GET', `/event-types/${CONTROL}/partitions/0`);
  expect(partition.status, partition.text).toBe(200);
  const newest = (partition.json as { newest_available_offset: string }).newest_available_offset;
  const event = orderEvent(`health-${controlEids.length}`);
  const eid = (event.metadata as { eid: string }).eid;
  const published = await call(broker.url, 'POST', `/event-types/${CONTROL}/events`, [event]);
  expect(published.status, published.text).toBe(200);
  controlEids.push(eid);
  const stream = await StreamClient.open(`${broker.url}/event-types/${CONTROL}/events?batch_limit=1&stream_limit=1&batch_flush_timeout=1`, {
    headers: { 'X-Broker-Cursors': JSON.stringify([{ partition: '0', offset: newest }]) },
  });
  try {
    expect(stream.status).toBe(200);
    const [batch] = await stream.events(1, 5000);
    expect(batch?.events?.map((e) => (e.metadata as { eid: string }).eid)).toEqual([eid]);
  } finally {
    stream.close();
  }
}

/** Newest offset of every partition of an event type. */
async function newestOffsets(name: string): Promise<string[]> {
  const answer = await call(broker.url, 'GET', `/event-types/${name}/partitions`);
  expect(answer.status).toBe(200);
  return (answer.json as { partition: string; newest_available_offset: string }[]).map((p) => `${p.partition}:${p.newest_available_offset}`);
}

/** Every key under the test node's prefix. */
function prefixKeys(): Promise<string[]> {
  return scanKeys(redis, `${broker.prefix}*`);
}

/** An answer refusing hostile input: the expected 4xx, as a problem with X-Flow-Id. */
function expectProblem(answer: Answer, statuses: readonly number[], what: string): void {
  expect(statuses, `${what}: ${answer.status} ${answer.text}`).toContain(answer.status);
  expect(answer.headers.get('content-type'), what).toBe('application/problem+json');
  expect(answer.headers.get('x-flow-id'), what).toBeTruthy();
  expect((answer.json as { status: number }).status, what).toBe(answer.status);
}

/** Sends raw bytes (fetch would refuse some of the paths tested) and reads one answer. */
function rawRequest(request: string | Buffer, timeoutMs = 5000): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(broker.port, '127.0.0.1');
    let data = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      const text = data.toString('latin1');
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [statusLine = '', ...lines] = text.slice(0, end).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines) headers[line.slice(0, line.indexOf(':')).toLowerCase()] = line.slice(line.indexOf(':') + 1).trim();
      const length = Number(headers['content-length'] ?? 0);
      if (data.byteLength < end + 4 + length) return;
      clearTimeout(timer);
      socket.end();
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: data.subarray(end + 4, end + 4 + length).toString() });
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.write(request);
  });
}

/** A request with a chunked body (no Content-Length), sent in `chunks` pieces. */
function chunkedRequest(method: string, path: string, body: Buffer, chunks = 8): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${broker.url}${path}`, { method, headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        const headers = new Headers();
        for (const [key, value] of Object.entries(res.headers)) if (typeof value === 'string') headers.set(key, value);
        resolve({ status: res.statusCode ?? 0, headers, text, json: text ? (JSON.parse(text) as unknown) : undefined });
      });
    });
    req.on('error', reject);
    const size = Math.ceil(body.byteLength / chunks);
    for (let i = 0; i < body.byteLength; i += size) req.write(body.subarray(i, i + size));
    req.end();
  });
}

/** Sends a request with the path exactly as given (fetch would normalize `..` and `%2E%2E`). */
async function rawCall(method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<Answer> {
  const lines = [`${method} ${path} HTTP/1.1`, 'Host: broker', 'Connection: close', ...Object.entries(headers).map(([key, value]) => `${key}: ${value}`)];
  if (body !== undefined) lines.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`);
  const answer = await rawRequest(`${lines.join('\r\n')}\r\n\r\n${body ?? ''}`);
  const answerHeaders = new Headers();
  for (const [key, value] of Object.entries(answer.headers)) answerHeaders.set(key, value);
  let json: unknown;
  try {
    json = JSON.parse(answer.body);
  } catch {
    json = undefined;
  }
  return { status: answer.status, headers: answerHeaders, text: answer.body, json };
}

/**
 * The shape of every key the broker writes (src/storage/keys.ts): a hash tag of `{registry}`,
 * `{settings}`, `{et:<name>[:<partition>]}` or `{sub:<uuid>}` with a valid name, partition or uuid,
 * then lower-case suffixes. A key built from an unchecked name would not match.
 */
function keyGrammar(): RegExp {
  const prefix = broker.prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const name = '[a-zA-Z][-0-9a-zA-Z_]*(\\.[0-9a-zA-Z][-0-9a-zA-Z_]*)*';
  const uuid = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
  const partition = '(0|[1-9][0-9]{0,5})';
  return new RegExp(
    `^${prefix}(` +
      `\\{registry\\}:[-a-z]+(:(${name}|${uuid})(:[-a-z]+)?)?` +
      `|\\{et:${name}(:${partition})?\\}:[-a-z0-9]+(:[-a-z]+)?` +
      `|\\{sub:${uuid}\\}:[-a-z]+` +
      `|\\{settings\\}:[-a-z]+` +
      ')$',
  );
}

/** Opens a stream and answers like {@link call}; a stream that opens (200) is closed at once. */
async function streamAnswer(path: string, init: RequestInit): Promise<Answer> {
  const client = await StreamClient.open(broker.url + path, init);
  client.close();
  return { status: client.status, headers: client.headers, text: JSON.stringify(client.problem ?? null), json: client.problem };
}

/** Resident memory of the broker process, in MB. */
function brokerRssMb(): number {
  const status = readFileSync(`/proc/${broker.process.pid ?? 0}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) / 1024;
}

describe('hardening', () => {
  describe('1. body limits, gzip bombs, JSON depth, strict UTF-8', () => {
    const subscriptionId = randomUUID();
    const endpoints: [string, string][] = [
      ['POST', '/event-types'],
      ['PUT', `/event-types/${TARGET}`],
      ['POST', `/event-types/${TARGET}/events`],
      ['POST', `/event-types/${TARGET}/cursor-distances`],
      ['POST', `/event-types/${TARGET}/cursors-lag`],
      ['POST', '/subscriptions'],
      ['PUT', `/subscriptions/${subscriptionId}`],
      ['POST', `/subscriptions/${subscriptionId}/events`],
      ['POST', `/subscriptions/${subscriptionId}/cursors`],
      ['PATCH', `/subscriptions/${subscriptionId}/cursors`],
      ['POST', '/settings/admins'],
      ['PUT', '/settings/admins'],
      ['POST', '/settings/features'],
      ['GET', `/event-types/${TARGET}`],
      ['DELETE', `/event-types/${TARGET}`],
    ];

    it('answers 413 problems with X-Flow-Id on every endpoint for a body one byte over http.maxBodyBytes', async () => {
      const before = await newestOffsets(TARGET);
      const body = JSON.stringify([orderEvent('big', { pad: 'x'.repeat(MAX_BODY) })]).slice(0, MAX_BODY + 1);
      expect(Buffer.byteLength(body)).toBe(MAX_BODY + 1);
      for (const [method, path] of endpoints) {
        const answer = await rawCall(method, path, body, { 'X-Flow-Id': `too-large-${method}` });
        expectProblem(answer, [413], `${method} ${path}`);
        expect(answer.headers.get('x-flow-id')).toBe(`too-large-${method}`);
        expect((answer.json as { detail: string }).detail).toBe(`the body is ${MAX_BODY + 1} bytes long, more than the limit of ${MAX_BODY} bytes (http.maxBodyBytes)`);
      }
      // Exactly at the limit the body is read (and refused for what it is, not for its size).
      const atLimit = await rawCall('POST', `/event-types/${TARGET}/events`, body.slice(0, MAX_BODY));
      expectProblem(atLimit, [400], 'a body of exactly maxBodyBytes');
      expect(await newestOffsets(TARGET)).toEqual(before);
      expect((await call(broker.url, 'GET', `/event-types/${TARGET}`)).status).toBe(200);
      await expectHealthy();
    });

    it('refuses a chunked body as soon as it passes the limit (413 problem), and accepts a chunked body within it', async () => {
      const before = await newestOffsets(TARGET);
      const big = Buffer.from(JSON.stringify(Array.from({ length: 600 }, (_, i) => orderEvent(`chunk-${i}`))));
      expect(big.byteLength).toBeGreaterThan(MAX_BODY);
      const refused = await chunkedRequest('POST', `/event-types/${TARGET}/events`, big, 16);
      expectProblem(refused, [413], 'chunked publish');
      expect((refused.json as { detail: string }).detail).toBe(`the chunked body is longer than the limit of ${MAX_BODY} bytes (http.maxBodyBytes)`);
      expectProblem(await chunkedRequest('POST', '/event-types', big), [413], 'chunked event type');
      expect(await newestOffsets(TARGET)).toEqual(before);

      const small = [orderEvent('chunked-ok')];
      const accepted = await chunkedRequest('POST', `/event-types/${TARGET}/events`, Buffer.from(JSON.stringify(small)), 3);
      expect(accepted.status, accepted.text).toBe(200);
      expect(await newestOffsets(TARGET)).not.toEqual(before);
      await expectHealthy();
    });

    it('keeps the connection usable after a 413: the next request on it is answered', async () => {
      const body = 'x'.repeat(MAX_BODY + 10);
      const answers = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(broker.port, '127.0.0.1');
        let text = '';
        socket.on('data', (chunk: Buffer) => {
          text += chunk.toString();
          if (text.includes('\r\n\r\nOK')) {
            socket.end();
            resolve(text);
          }
        });
        socket.on('error', reject);
        socket.write(`POST /event-types HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
        socket.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
        setTimeout(() => reject(new Error(`no second answer: ${text}`)), 5000).unref();
      });
      expect(answers).toMatch(/^HTTP\/1\.1 413 Payload Too Large\r\n/);
      expect(answers).toMatch(/\r\n\r\n\{"title":"Payload Too Large","status":413,.*\}HTTP\/1\.1 200 OK\r\n/s);
    });

    it('drops a connection whose header block is 1 MB (uWS), and answers JSON headers nested 10,000 deep with 400', async () => {
      const closed = await new Promise<{ ms: number; received: string }>((resolve) => {
        const started = performance.now();
        const socket = net.connect(broker.port, '127.0.0.1', () => socket.write(`GET /event-types HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(1024 * 1024)}\r\n\r\n`));
        let received = '';
        socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
        socket.on('error', () => undefined);
        socket.on('close', () => resolve({ ms: performance.now() - started, received }));
      });
      console.log(`1 MB header block: connection dropped after ${closed.ms.toFixed(0)} ms`);
      expect(closed.received).toBe('');
      expect(closed.ms).toBeLessThan(2000);
      const deepCursors = await streamAnswer(`/event-types/${TARGET}/events`, { headers: { 'X-Broker-Cursors': arrays(10_000) } });
      expectProblem(deepCursors, [400], 'X-Broker-Cursors nested 10,000 deep');
      await expectHealthy();
    });

    it('refuses a gzip bomb (60 MB of zeros in 60 KB) at http.maxInflatedBodyBytes without inflating it', async () => {
      const before = await newestOffsets(TARGET);
      const bomb = zlib.gzipSync(Buffer.alloc(60 * 1024 * 1024), { level: 9 });
      expect(bomb.byteLength).toBeLessThan(MAX_BODY);
      const rssBefore = brokerRssMb();
      for (const path of [`/event-types/${TARGET}/events`, '/event-types', '/subscriptions']) {
        const started = performance.now();
        const answer = await call(broker.url, 'POST', path, bomb, { 'Content-Encoding': 'gzip' });
        const ms = performance.now() - started;
        expectProblem(answer, [413], `gzip bomb to ${path}`);
        expect((answer.json as { detail: string }).detail).toBe(`the gzip body inflates to more than ${MAX_INFLATED} bytes (http.maxInflatedBodyBytes)`);
        expect(ms).toBeLessThan(1000);
        console.log(`gzip bomb (${bomb.byteLength} bytes → 60 MB) to ${path}: 413 in ${ms.toFixed(1)} ms`);
      }
      const grown = brokerRssMb() - rssBefore;
      console.log(`broker RSS grew by ${grown.toFixed(1)} MB over three gzip bombs`);
      expect(grown).toBeLessThan(30);
      // A corrupt gzip body is 400, an unknown encoding 415.
      expectProblem(await call(broker.url, 'POST', `/event-types/${TARGET}/events`, bomb.subarray(0, 1000), { 'Content-Encoding': 'gzip' }), [400], 'truncated gzip');
      expectProblem(await call(broker.url, 'POST', `/event-types/${TARGET}/events`, '[]', { 'Content-Encoding': 'br' }), [415], 'brotli');
      expect(await newestOffsets(TARGET)).toEqual(before);
      await expectHealthy();
    });

    it('answers 400 at once to bodies nested deeper than 512 levels, plain or gzipped, on publishing and the control plane', async () => {
      const before = await newestOffsets(TARGET);
      const deepEvent = (depth: number): string => `[{"metadata":{"eid":"${randomUUID()}","occurred_at":"${new Date().toISOString()}"},"order_number":"x","deep":${arrays(depth)}}]`;
      const cases: [string, string, string | Buffer, Record<string, string>][] = [
        ['1,000 nested arrays as a batch', `/event-types/${TARGET}/events`, arrays(1000), {}],
        ['an event with 20,000 nested arrays', `/event-types/${TARGET}/events`, deepEvent(20_000), {}],
        ['an event nesting 513 levels (batch array, event, 511 arrays)', `/event-types/${TARGET}/events`, deepEvent(511), {}],
        ['400,000 nested arrays, gzipped', `/event-types/${TARGET}/events`, zlib.gzipSync(arrays(400_000)), { 'Content-Encoding': 'gzip' }],
        ['an event type with 1,000 nested arrays', '/event-types', JSON.stringify(businessEventType('hard.deep')).replace(/}$/, `,"x":${arrays(1000)}}`), {}],
        ['an event type body of 150,000 nested objects, gzipped', '/event-types', zlib.gzipSync('{"a":'.repeat(150_000) + '1' + '}'.repeat(150_000)), { 'Content-Encoding': 'gzip' }],
        ['a subscription with 1,000 nested arrays', '/subscriptions', `{"owning_application":"a","event_types":${arrays(1000, `"${TARGET}"`)}}`, {}],
        ['cursor distances with 1,000 nested arrays', `/event-types/${TARGET}/cursor-distances`, arrays(1000), {}],
      ];
      for (const [what, path, body, headers] of cases) {
        const started = performance.now();
        const answer = await call(broker.url, 'POST', path, body, headers);
        const ms = performance.now() - started;
        expectProblem(answer, [400], what);
        expect((answer.json as { detail: string }).detail, what).toContain('deeper than 512 levels');
        expect(ms, what).toBeLessThan(500);
      }
      // 512 levels (batch array, event, 510 arrays) are accepted.
      const accepted = await call(broker.url, 'POST', `/event-types/${TARGET}/events`, deepEvent(510));
      expect(accepted.status, accepted.text).toBe(200);
      const after = await newestOffsets(TARGET);
      expect(after.filter((o) => !before.includes(o))).toHaveLength(1);
      await expectHealthy();
    });

    it('answers 400 to invalid UTF-8 anywhere in a body, on publishing and the control plane', async () => {
      const before = await newestOffsets(TARGET);
      const sequences: [string, number[]][] = [
        ['a stray continuation byte', [0x80]],
        ['an overlong "/"', [0xc0, 0xaf]],
        ['an encoded surrogate', [0xed, 0xa0, 0x80]],
        ['a truncated sequence', [0xe2, 0x82]],
        ['Latin-1 é', [0xe9]],
        ['0xFF', [0xff]],
      ];
      const inString = (prefix: string, sequence: number[], suffix: string): Buffer => Buffer.concat([Buffer.from(prefix), Buffer.from(sequence), Buffer.from(suffix)]);
      for (const [what, sequence] of sequences) {
        const publish = inString(`[{"metadata":{"eid":"${randomUUID()}","occurred_at":"${new Date().toISOString()}"},"order_number":"`, sequence, '"}]');
        expectProblem(await call(broker.url, 'POST', `/event-types/${TARGET}/events`, publish), [400], `publish: ${what}`);
        expectProblem(await call(broker.url, 'POST', `/event-types/${TARGET}/events`, zlib.gzipSync(publish), { 'Content-Encoding': 'gzip' }), [400], `gzipped publish: ${what}`);
        const eventType = inString('{"name":"hard.utf', sequence, '","owning_application":"a","category":"undefined","schema":{"type":"json_schema","schema":"{}"}}');
        expectProblem(await call(broker.url, 'POST', '/event-types', eventType), [400], `event type: ${what}`);
        expectProblem(await call(broker.url, 'POST', '/subscriptions', inString('{"owning_application":"', sequence, `","event_types":["${TARGET}"]}`)), [400], `subscription: ${what}`);
      }
      expect(await newestOffsets(TARGET)).toEqual(before);
      expect((await call(broker.url, 'GET', '/event-types/hard.utf')).status).toBe(404);
      await expectHealthy();
    });
  });

  describe('2. __proto__, constructor and prototype keys', () => {
    it('refuses __proto__ and constructor.prototype in control-plane bodies (400); a later normal request behaves', async () => {
      const eventType = JSON.stringify(businessEventType('hard.proto'));
      const withKey = (json: string, inner: string): string => json.replace(/^\{/, `{${inner},`);
      const bodies: [string, string, string][] = [
        ['event type, top-level __proto__', '/event-types', withKey(eventType, '"__proto__":{"category":"undefined","polluted":true}')],
        ['event type, __proto__ in options', '/event-types', eventType.replace(/}$/, ',"options":{"__proto__":{"retention_time":1}}}')],
        ['event type, \\u-escaped __proto__', '/event-types', withKey(eventType, '"\\u005f\\u005fproto\\u005f\\u005f":{"polluted":true}')],
        ['event type, constructor.prototype', '/event-types', withKey(eventType, '"constructor":{"prototype":{"polluted":true}}')],
        ['subscription, __proto__', '/subscriptions', `{"__proto__":{"read_from":"begin"},"owning_application":"a","event_types":["${TARGET}"]}`],
        ['cursor distances, __proto__', `/event-types/${TARGET}/cursor-distances`, '[{"__proto__":{"partition":"0"},"initial_cursor":{"partition":"0","offset":"BEGIN"},"final_cursor":{"partition":"0","offset":"BEGIN"}}]'],
      ];
      for (const [what, path, body] of bodies) {
        const answer = await call(broker.url, 'POST', path, body);
        expectProblem(answer, [400], what);
        expect((answer.json as { detail: string }).detail, what).toMatch(/the body must not contain the key "(__proto__|constructor\.prototype)"/);
      }
      expect((await call(broker.url, 'GET', '/event-types/hard.proto')).status).toBe(404);
      // The same body without the keys: created as sent, no field taken from anywhere else.
      const created = await call(broker.url, 'POST', '/event-types', eventType);
      expect(created.status, created.text).toBe(201);
      const stored = (await call(broker.url, 'GET', '/event-types/hard.proto')).json as Record<string, unknown>;
      expect(stored.category).toBe('business');
      expect(stored.polluted).toBeUndefined();
      expect(Object.keys(stored)).not.toContain('__proto__');
      await expectHealthy();
    });

    it('reads no cursor from a __proto__ key of X-Broker-Cursors (400)', async () => {
      const answer = await streamAnswer(`/event-types/${TARGET}/events`, { headers: { 'X-Broker-Cursors': '[{"__proto__":{"partition":"0","offset":"BEGIN"}}]' } });
      expectProblem(answer, [400], 'X-Broker-Cursors with __proto__');
      await expectHealthy();
    });

    it('stores __proto__ and constructor keys of events as plain data, and enrichment is unaffected', async () => {
      const eid = randomUUID();
      const event = `{"metadata":{"eid":"${eid}","occurred_at":"${new Date().toISOString()}"},"order_number":"proto","__proto__":{"metadata":{"flow_id":"evil"},"polluted":true},"constructor":{"prototype":{"isAdmin":true}},"prototype":1}`;
      const partition = await call(broker.url, 'GET', `/event-types/${TARGET}/partitions/0`);
      const newest = (partition.json as { newest_available_offset: string }).newest_available_offset;
      const published = await call(broker.url, 'POST', `/event-types/${TARGET}/events`, `[${event}]`, { 'X-Flow-Id': 'real-flow' });
      expect(published.status, published.text).toBe(200);
      // metadata.__proto__ is an unknown metadata field like any other: 422, nothing written.
      const inMetadata = `[{"metadata":{"eid":"${randomUUID()}","occurred_at":"${new Date().toISOString()}","__proto__":{"event_type":"other"}},"order_number":"m"}]`;
      const refused = await call(broker.url, 'POST', `/event-types/${TARGET}/events`, inMetadata);
      expect(refused.status, refused.text).toBe(422);

      const stream = await StreamClient.open(`${broker.url}/event-types/${TARGET}/events?batch_limit=1&stream_limit=1&batch_flush_timeout=1`, {
        headers: { 'X-Broker-Cursors': JSON.stringify([{ partition: '0', offset: newest }]) },
      });
      const raw = await new Promise<string>((resolve, reject) => {
        // Read the line as text too: JSON.parse in the test must not be what keeps the key.
        const req = http.get(`${broker.url}/event-types/${TARGET}/events?batch_limit=1&stream_limit=1&batch_flush_timeout=1`, { headers: { 'X-Broker-Cursors': JSON.stringify([{ partition: '0', offset: newest }]) } }, (res) => {
          let text = '';
          if (res.statusCode !== 200) reject(new Error(`stream answered ${String(res.statusCode)}`));
          res.on('data', (chunk: Buffer) => {
            text += chunk.toString();
            if (text.includes('"events"')) {
              req.destroy();
              resolve(text);
            }
          });
        });
        req.on('error', reject);
      });
      const [batch] = await stream.events(1, 5000);
      stream.close();
      const got = batch?.events?.[0] as Record<string, unknown> & { metadata: Record<string, unknown> };
      expect(got.metadata.eid).toBe(eid);
      expect(got.metadata.flow_id).toBe('real-flow');
      expect(Object.hasOwn(got, '__proto__')).toBe(true);
      expect(got.constructor).toEqual({ prototype: { isAdmin: true } });
      expect(raw).toContain('"__proto__":{"metadata":{"flow_id":"evil"},"polluted":true}');
      await expectHealthy();
    });
  });

  describe('3. names and ids never escape into other Redis keys', () => {
    const hostileNames = [
      '..%2F..%2Fx',
      '..',
      '%2E%2E',
      'a%2F..%2F..%2Fb',
      'a%00b',
      '%00',
      'a%7Bregistry%7Db',
      '%7Bet:x:0%7D',
      'a:b',
      'a%3Ab',
      '*',
      'a*',
      'a%2A',
      'a?b',
      'a%20b',
      'a%0D%0AX-Injected:%201',
      '%E2%80%AE',
      'x'.repeat(300),
      'a.'.repeat(200) + 'a',
      '%',
      '%zz',
      '.a',
      'a..b',
      '-a',
    ];

    it('answers 400/404 problems to hostile event type names and subscription ids in paths, and no key appears', async () => {
      const keysBefore = await prefixKeys();
      const event = JSON.stringify([orderEvent('x')]);
      const uuid = randomUUID();
      const hostileIds = [...hostileNames, 'not-a-uuid', uuid.toUpperCase(), `${uuid}x`, `${uuid}%00`, `${uuid}:offsets`, `${uuid}%7D`, `%7Bsub:${uuid}%7D`];
      for (const name of hostileNames) {
        for (const [method, path, body] of [
          ['GET', `/event-types/${name}`],
          ['PUT', `/event-types/${name}`, JSON.stringify(businessEventType('x'))],
          ['DELETE', `/event-types/${name}`],
          ['GET', `/event-types/${name}/partitions`],
          ['GET', `/event-types/${name}/partitions/0`],
          ['GET', `/event-types/${name}/schemas`],
          ['POST', `/event-types/${name}/events`, event],
          ['GET', `/event-types/${name}/events`],
          ['POST', `/event-types/${name}/cursor-distances`, '[]'],
          ['POST', `/event-types/${name}/cursors-lag`, '[]'],
        ] as [string, string, string?][]) {
          const answer = await rawCall(method, path, body);
          // 405: `a?b` makes the path `/event-types/a` (query `b/...`), which has no POST.
          expectProblem(answer, [400, 404, 405], `${method} ${path.slice(0, 80)}`);
        }
      }
      for (const id of hostileIds) {
        for (const [method, path, body] of [
          ['GET', `/subscriptions/${id}`],
          ['PUT', `/subscriptions/${id}`, '{}'],
          ['DELETE', `/subscriptions/${id}`],
          ['GET', `/subscriptions/${id}/events`],
          ['POST', `/subscriptions/${id}/events`, '{}'],
          ['POST', `/subscriptions/${id}/cursors`, '{"items":[]}'],
          ['GET', `/subscriptions/${id}/cursors`],
          ['PATCH', `/subscriptions/${id}/cursors`, '{"items":[]}'],
          ['GET', `/subscriptions/${id}/stats`],
        ] as [string, string, string?][]) {
          const answer = await rawCall(method, path, body, { 'X-Broker-StreamId': randomUUID() });
          expectProblem(answer, [400, 404, 405], `${method} ${path.slice(0, 80)}`);
        }
      }
      for (const partition of ['..', '0%7D', '%7B0%7D', '0:x', '*', '-1', '00', '1e3', '0x1', '9'.repeat(300), '%00', '0%00']) {
        expectProblem(await rawCall('GET', `/event-types/${TARGET}/partitions/${partition}`), [400, 404], `partition ${partition}`);
      }
      expect(await prefixKeys()).toEqual(keysBefore);
      for (const key of keysBefore) expect(key, 'every key follows the key grammar').toMatch(keyGrammar());
      await expectHealthy();
    }, 60_000);

    it('refuses hostile names, partitions and stream ids inside bodies and headers (400/404/412/422), and no key appears', async () => {
      const created = await call(broker.url, 'POST', '/subscriptions', { owning_application: 'hard-app-2', event_types: [TARGET], read_from: 'begin' });
      expect(created.status).toBe(201);
      const subscription = (created.json as { id: string }).id;
      const keysBefore = await prefixKeys();
      const names = ['../x', 'a\u0000b', 'a{registry}b', '{et:x:0}', 'a:b', '*', 'x'.repeat(300), '\u202e', 'a b', ''];
      const partitions = ['{0}', '0}', '0:x', '../0', '*', '-1', '00', '9'.repeat(30), '\u0000', ''];
      const checks: [string, () => Promise<Answer>][] = [];
      for (const name of names) {
        checks.push([`event type named ${JSON.stringify(name)}`, () => call(broker.url, 'POST', '/event-types', businessEventType(name))]);
        checks.push([`subscription of ${JSON.stringify(name)}`, () => call(broker.url, 'POST', '/subscriptions', { owning_application: 'a', event_types: [name] })]);
        checks.push([
          `commit of event type ${JSON.stringify(name)}`,
          () => call(broker.url, 'POST', `/subscriptions/${subscription}/cursors`, { items: [{ event_type: name, partition: '0', offset: '001-0001--1', cursor_token: 'x' }] }, { 'X-Broker-StreamId': randomUUID() }),
        ]);
        checks.push([`reset to event type ${JSON.stringify(name)}`, () => call(broker.url, 'PATCH', `/subscriptions/${subscription}/cursors`, { items: [{ event_type: name, partition: '0', offset: 'BEGIN' }] })]);
      }
      for (const partition of partitions) {
        const cursor = { partition, offset: 'BEGIN' };
        checks.push([`cursor distance of partition ${JSON.stringify(partition)}`, () => call(broker.url, 'POST', `/event-types/${TARGET}/cursor-distances`, [{ initial_cursor: cursor, final_cursor: cursor }])]);
        checks.push([`lag of partition ${JSON.stringify(partition)}`, () => call(broker.url, 'POST', `/event-types/${TARGET}/cursors-lag`, [cursor])]);
        checks.push([`reset of partition ${JSON.stringify(partition)}`, () => call(broker.url, 'PATCH', `/subscriptions/${subscription}/cursors`, { items: [{ event_type: TARGET, partition, offset: 'BEGIN' }] })]);
        checks.push([
          `commit of partition ${JSON.stringify(partition)}`,
          () => call(broker.url, 'POST', `/subscriptions/${subscription}/cursors`, { items: [{ event_type: TARGET, partition, offset: '001-0001--1', cursor_token: 'x' }] }, { 'X-Broker-StreamId': randomUUID() }),
        ]);
        checks.push([
          `direct stream of partition ${JSON.stringify(partition)}`,
          () =>
            streamAnswer(`/subscriptions/${subscription}/events`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ partitions: [{ event_type: TARGET, partition }] }),
            }),
        ]);
        checks.push([`low-level stream of partition ${JSON.stringify(partition)}`, () => streamAnswer(`/event-types/${TARGET}/events`, { headers: { 'X-Broker-Cursors': JSON.stringify([cursor]) } })]);
      }
      for (const streamId of ['../x', '{sub:x}', 'a:b', '*', 'x'.repeat(300), `${randomUUID()}:offsets`]) {
        checks.push([
          `commit with stream id ${JSON.stringify(streamId)}`,
          () => call(broker.url, 'POST', `/subscriptions/${subscription}/cursors`, { items: [{ event_type: TARGET, partition: '0', offset: '001-0001--1', cursor_token: 'x' }] }, { 'X-Broker-StreamId': streamId }),
        ]);
      }
      for (const [what, check] of checks) expectProblem(await check(), [400, 404, 412, 422], what);
      expect(await prefixKeys()).toEqual(keysBefore);
      for (const key of keysBefore) expect(key, 'every key follows the key grammar').toMatch(keyGrammar());
      await expectHealthy();
    }, 60_000);
  });

  describe('4. slow and idle clients', () => {
    /** A raw client: `feed` starts writing (and returns how to stop); resolves when the node closes the socket. */
    function slowClient(feed: (socket: net.Socket) => () => void): Promise<{ seconds: number; received: string }> {
      return new Promise((resolve) => {
        const started = performance.now();
        const socket = net.connect(broker.port, '127.0.0.1');
        let received = '';
        let stop = (): void => undefined;
        const giveUp = setTimeout(() => socket.destroy(), 25_000);
        socket.on('connect', () => (stop = feed(socket)));
        socket.on('data', (chunk: Buffer) => (received += chunk.toString()));
        socket.on('error', () => undefined);
        socket.on('close', () => {
          stop();
          clearTimeout(giveUp);
          resolve({ seconds: (performance.now() - started) / 1000, received });
        });
      });
    }

    /** Writes `text` one byte (or one chunk of chunked encoding) every `everyMs`. */
    const trickle =
      (text: string, everyMs: number, head = '', chunked = false) =>
      (socket: net.Socket): (() => void) => {
        if (head) socket.write(head);
        let i = 0;
        const timer = setInterval(() => {
          const char = text[i++];
          if (char !== undefined && !socket.destroyed) socket.write(chunked ? `1\r\n${char}\r\n` : char);
        }, everyMs);
        return () => clearInterval(timer);
      };

    it('cuts off clients that trickle headers or a body, or send nothing, after about 10 s; nothing is written meanwhile', async () => {
      const before = await newestOffsets(TARGET);
      const body = JSON.stringify([orderEvent('slow')]);
      const publishHead = (length: string) => `POST /event-types/${TARGET}/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${length}\r\n\r\n`;
      const clients: Record<string, Promise<{ seconds: number; received: string }>> = {
        'a connection sending nothing': slowClient(() => () => undefined),
        'headers at 1 byte/s': slowClient(trickle(publishHead(`Content-Length: ${body.length}`) + body, 1000)),
        'a body at 1 byte per 500 ms': slowClient(trickle(body, 500, publishHead(`Content-Length: ${body.length}`))),
        'a chunked body at 1 byte per 500 ms': slowClient(trickle(body, 500, publishHead('Transfer-Encoding: chunked'), true)),
        'headers, then no body at all': slowClient(trickle('', 1000, publishHead(`Content-Length: ${body.length}`))),
      };
      // Meanwhile the node serves everyone else (checked across the ~10 s the slow clients take).
      for (let i = 0; i < 3; i++) {
        await sleep(2000);
        await expectHealthy();
      }
      for (const [what, client] of Object.entries(clients)) {
        const { seconds, received } = await client;
        console.log(`slow client, ${what}: cut after ${seconds.toFixed(1)} s`);
        expect(seconds, what).toBeGreaterThan(5);
        expect(seconds, what).toBeLessThan(16);
        expect(received, what).toBe('');
      }
      expect(await newestOffsets(TARGET)).toEqual(before);
      await expectHealthy();
    }, 30_000);

    it('serves normal requests while 2,000 idle connections are open, with flat memory, and closes the idle ones', async () => {
      const rssBefore = brokerRssMb();
      const started = performance.now();
      const closed: number[] = [];
      const sockets: net.Socket[] = [];
      for (let batch = 0; batch < 10; batch++) {
        await Promise.all(
          Array.from(
            { length: 200 },
            (_, i) =>
              new Promise<void>((resolve) => {
                const socket = net.connect(broker.port, '127.0.0.1', () => {
                  // Half send nothing, half the start of a request line.
                  if (i % 2 === 1) socket.write('GET /event-types HTTP/1.1\r\nHost:');
                  resolve();
                });
                socket.on('error', () => resolve());
                socket.on('close', () => closed.push(performance.now() - started));
                sockets.push(socket);
              }),
          ),
        );
      }
      const openMs = performance.now() - started;
      expect(closed.length).toBe(0);
      const rssOpen = brokerRssMb();
      const healthStarted = performance.now();
      await expectHealthy();
      const healthMs = performance.now() - healthStarted;
      console.log(
        `2,000 idle connections opened in ${openMs.toFixed(0)} ms; broker RSS ${rssBefore.toFixed(1)} → ${rssOpen.toFixed(1)} MB; a publish + stream round trip meanwhile took ${healthMs.toFixed(0)} ms`,
      );
      expect(rssOpen - rssBefore).toBeLessThan(50);
      expect(healthMs).toBeLessThan(2000);
      while (closed.length < sockets.length && performance.now() - started < 20_000) await sleep(200);
      expect(closed.length).toBe(sockets.length);
      console.log(`the node closed all 2,000 idle connections between ${((closed[0] ?? 0) / 1000).toFixed(1)} and ${((closed.at(-1) ?? 0) / 1000).toFixed(1)} s`);
      await expectHealthy();
    }, 30_000);
  });

  describe('5. commits with foreign stream ids or partitions', () => {
    it("answers 422 to commits with another stream's id, another subscription's stream or cursors, or a partition the stream does not own; offsets stay", async () => {
      const name = 'hard.commits';
      const other = 'hard.commits-other';
      const twoPartitions = { partition_strategy: 'user_defined', default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: 2, write_parallelism: 2 } };
      expect((await call(broker.url, 'POST', '/event-types', businessEventType(name, twoPartitions))).status).toBe(201);
      expect((await call(broker.url, 'POST', '/event-types', businessEventType(other))).status).toBe(201);
      const inPartition = (partition: string, i: number) => orderEvent(`c-${partition}-${i}`, { metadata: { eid: randomUUID(), occurred_at: new Date().toISOString(), partition } });
      expect((await call(broker.url, 'POST', `/event-types/${name}/events`, [0, 1, 2].flatMap((i) => [inPartition('0', i), inPartition('1', i)]))).status).toBe(200);
      expect((await call(broker.url, 'POST', `/event-types/${other}/events`, [orderEvent('other')])).status).toBe(200);
      const subscribe = async (eventType: string): Promise<string> => {
        const answer = await call(broker.url, 'POST', '/subscriptions', { owning_application: `app-${randomUUID()}`, event_types: [eventType], read_from: 'begin' });
        expect(answer.status).toBe(201);
        return (answer.json as { id: string }).id;
      };
      const [mine, theirs] = [await subscribe(name), await subscribe(other)];
      const direct = (subscription: string, eventType: string, partition: string) =>
        StreamClient.open(`${broker.url}/subscriptions/${subscription}/events`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ partitions: [{ event_type: eventType, partition }], batch_limit: 1, batch_flush_timeout: 1 }),
        });
      const zero = await direct(mine, name, '0');
      const one = await direct(mine, name, '1');
      const foreign = await direct(theirs, other, '0');
      try {
        for (const stream of [zero, one, foreign]) expect(stream.status, JSON.stringify(stream.problem)).toBe(200);
        const ids = [zero, one, foreign].map((s) => s.headers.get('x-broker-streamid') ?? '');
        const [zeroId = '', oneId = '', foreignId = ''] = ids;
        const [zeroBatches, oneBatches, foreignBatches] = await Promise.all([zero.events(3), one.events(3), foreign.events(1)]);
        const cursorOf = (batches: StreamBatch[], i: number) => (batches[i] as StreamBatch).cursor;
        const commit = (subscription: string, cursors: unknown[], streamId: string) => call(broker.url, 'POST', `/subscriptions/${subscription}/cursors`, { items: cursors }, { 'X-Broker-StreamId': streamId });
        expect((await commit(mine, [cursorOf(zeroBatches, 0)], zeroId)).status).toBe(204);
        expect((await commit(mine, [cursorOf(oneBatches, 0)], oneId)).status).toBe(204);
        const committed = async (subscription: string) =>
          ((await call(broker.url, 'GET', `/subscriptions/${subscription}/cursors`)).json as { items: { event_type: string; partition: string; offset: string }[] }).items.map(
            (c) => `${c.event_type}/${c.partition}:${c.offset}`,
          );
        const before = [await committed(mine), await committed(theirs)];

        const hostile: [string, () => Promise<Answer>][] = [
          ["partition 0 with the id of partition 1's stream", () => commit(mine, [cursorOf(zeroBatches, 2)], oneId)],
          ["partition 1 with the id of partition 0's stream", () => commit(mine, [cursorOf(oneBatches, 2)], zeroId)],
          ["the id of another subscription's stream", () => commit(mine, [cursorOf(zeroBatches, 2)], foreignId)],
          ['an unknown stream id', () => commit(mine, [cursorOf(zeroBatches, 2)], randomUUID())],
          ['an owned and a foreign partition in one commit', () => commit(mine, [cursorOf(zeroBatches, 1), cursorOf(oneBatches, 1)], zeroId)],
          ['a partition the event type does not have', () => commit(mine, [{ ...cursorOf(zeroBatches, 2), partition: '7' }], zeroId)],
          ['an event type the subscription does not read', () => commit(mine, [cursorOf(foreignBatches, 0)], zeroId)],
          ["this subscription's cursors on another subscription, with that one's stream", () => commit(theirs, [cursorOf(zeroBatches, 2)], foreignId)],
          ["another subscription's cursor with this subscription's stream id", () => commit(theirs, [cursorOf(foreignBatches, 0)], zeroId)],
        ];
        for (const [what, send] of hostile) expectProblem(await send(), [422], what);
        expect([await committed(mine), await committed(theirs)]).toEqual(before);

        // The owners still commit normally.
        expect((await commit(mine, [cursorOf(zeroBatches, 2)], zeroId)).status).toBe(204);
        expect((await commit(mine, [cursorOf(oneBatches, 2)], oneId)).status).toBe(204);
        expect((await committed(mine)).sort()).toEqual([`${name}/0:${cursorOf(zeroBatches, 2).offset}`, `${name}/1:${cursorOf(oneBatches, 2).offset}`]);
      } finally {
        for (const stream of [zero, one, foreign]) stream.close();
      }
      await expectHealthy();
    });
  });

  describe('6. nothing lost', () => {
    it('stored every event published between the hostile requests, once and in order, and logged no unexpected error', async () => {
      await expectHealthy();
      const stream = await StreamClient.open(`${broker.url}/event-types/${CONTROL}/events?batch_limit=${controlEids.length}&stream_limit=${controlEids.length}&batch_flush_timeout=1`, {
        headers: { 'X-Broker-Cursors': JSON.stringify([{ partition: '0', offset: 'BEGIN' }]) },
      });
      try {
        const batches = await stream.events(controlEids.length);
        expect(batches.flatMap((b) => (b.events ?? []).map((e) => (e.metadata as { eid: string }).eid))).toEqual(controlEids);
      } finally {
        stream.close();
      }
      expect(broker.output()).not.toContain('unexpected error');
      expect(broker.process.exitCode).toBeNull();
    });
  });
});
