import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type Answer, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient } from '../support/stream-client.js';

/**
 * No schema can stall a node (docs/publishing.md "Schema cost budget"): the schema shapes that froze a node (exponential `$ref`
 * fan-out, a 100,000-value `enum`, `uniqueItems` over a 100,000-item array) are refused at
 * registration, fast, while `/health` keeps answering; schema checks run in workers under
 * `eventTypes.schemaCompileTimeoutMs`. After each, the node still publishes and streams.
 */

let broker: TestBroker;
/** A node whose schema checks may take 500 ms at most (the service's own event types pass; a 2,000-property schema takes about 1.3 s to compile). */
let strict: TestBroker;
const CONTROL = 'cost.control';

beforeAll(async () => {
  [broker, strict] = await Promise.all([startTestBroker({ BROKER_PUBLISH_WORKER_THREADS: '2' }), startTestBroker({ BROKER_EVENT_TYPES_SCHEMA_COMPILE_TIMEOUT_MS: '500' })]);
  expect((await call(broker.url, 'POST', '/event-types', businessEventType(CONTROL))).status).toBe(201);
});
afterAll(async () => {
  const codes = await Promise.all([broker.stop(), strict.stop()]);
  expect(codes, broker.output() + strict.output()).toEqual([0, 0]);
});

/** An event type body for a business event type with `schema`. */
function eventTypeWith(name: string, schema: object): Record<string, unknown> {
  return businessEventType(name, { schema: { type: 'json_schema', schema: JSON.stringify(schema) } });
}

/** The 2,544-byte schema of the issue: d_i = allOf of two refs to d_(i-1), one property referring to d_levels. */
function fanOutSchema(levels: number): object {
  const definitions: Record<string, object> = { d0: { type: 'string' } };
  for (let i = 1; i <= levels; i++) definitions[`d${i}`] = { allOf: [{ $ref: `#/definitions/d${i - 1}` }, { $ref: `#/definitions/d${i - 1}` }] };
  return { type: 'object', definitions, properties: { x: { $ref: `#/definitions/d${levels}` } } };
}

/**
 * Runs `request` while polling `/health` of the node back to back.
 * @returns the answer, how long it took and the slowest `/health` answer meanwhile (ms)
 */
async function whileHealthPolled(url: string, request: () => Promise<Answer>): Promise<{ answer: Answer; ms: number; worstHealthMs: number }> {
  let done = false;
  let worstHealthMs = 0;
  const poller = (async () => {
    while (!done) {
      const started = performance.now();
      const health = await fetch(`${url}/health`);
      await health.arrayBuffer();
      worstHealthMs = Math.max(worstHealthMs, performance.now() - started);
    }
  })();
  const started = performance.now();
  const answer = await request().finally(() => (done = true));
  const ms = performance.now() - started;
  await poller;
  return { answer, ms, worstHealthMs };
}

/** The node publishes one event to {@link CONTROL} and streams exactly it back from the previous newest offset. */
async function expectPublishesAndStreams(node: TestBroker): Promise<void> {
  const partition = await call(node.url, 'GET', `/event-types/${CONTROL}/partitions/0`);
  expect(partition.status, partition.text).toBe(200);
  const newest = (partition.json as { newest_available_offset: string }).newest_available_offset;
  const event = orderEvent('after-attack');
  expect((await call(node.url, 'POST', `/event-types/${CONTROL}/events`, [event])).status).toBe(200);
  const stream = await StreamClient.open(`${node.url}/event-types/${CONTROL}/events?batch_limit=1&stream_limit=1&batch_flush_timeout=1`, {
    headers: { 'X-Broker-Cursors': JSON.stringify([{ partition: '0', offset: newest }]) },
  });
  try {
    const [batch] = await stream.events(1, 5000);
    expect(batch?.events?.map((e) => (e.metadata as { eid: string }).eid)).toEqual([(event.metadata as { eid: string }).eid]);
  } finally {
    stream.close();
  }
}

function detailOf(answer: Answer): string {
  return (answer.json as { detail?: string }).detail ?? '';
}

describe('schemas whose validation cost is unbounded are refused at registration', () => {
  it('refuses the exponential $ref fan-out (30 and 40 levels) in milliseconds; 6 levels (254 applications per value, within 256) is accepted and publishes', async () => {
    expect(JSON.stringify(fanOutSchema(30)).length).toBeLessThan(2_600);
    for (const levels of [30, 40]) {
      const { answer, ms } = await whileHealthPolled(broker.url, () => call(broker.url, 'POST', '/event-types', eventTypeWith(`cost.fanout${levels}`, fanOutSchema(levels))));
      expect(answer.status, answer.text).toBe(422);
      expect(detailOf(answer)).toContain('would apply more than 256 subschemas');
      expect(detailOf(answer)).toContain('#/x');
      expect(ms).toBeLessThan(2_000);
    }
    expect((await call(broker.url, 'GET', '/event-types/cost.fanout30')).status).toBe(404);
    const small = await call(broker.url, 'POST', '/event-types', eventTypeWith('cost.fanout6', fanOutSchema(6)));
    expect(small.status, small.text).toBe(201);
    expect((await call(broker.url, 'POST', '/event-types/cost.fanout6/events', [orderEvent('a', { x: 'hello' })])).status).toBe(200);
    expect((await call(broker.url, 'POST', '/event-types/cost.fanout6/events', [orderEvent('b', { x: 1 })])).status).toBe(422);
    await expectPublishesAndStreams(broker);
  });

  it('refuses a $ref loop on the same value, which would never end', async () => {
    const answer = await call(broker.url, 'POST', '/event-types', eventTypeWith('cost.loop', { type: 'object', definitions: { a: { allOf: [{ $ref: '#/definitions/b' }] }, b: { anyOf: [{ $ref: '#/definitions/a' }] } }, properties: { x: { $ref: '#/definitions/a' } } }));
    expect(answer.status, answer.text).toBe(422);
    expect(detailOf(answer)).toContain('would never end');
    await expectPublishesAndStreams(broker);
  });

  it('refuses an enum of 100,000 values before the meta-schema check, with /health answering throughout', async () => {
    const values = Array.from({ length: 100_000 }, (_, i) => `v${i}`);
    const { answer, ms, worstHealthMs } = await whileHealthPolled(broker.url, () => call(broker.url, 'POST', '/event-types', eventTypeWith('cost.enum', { type: 'object', properties: { c: { enum: values } } })));
    expect(answer.status, answer.text).toBe(422);
    expect(detailOf(answer)).toContain('#/properties/c/enum: lists 100000 values, more than the limit of 1000');
    // Without the cost budget: 422 after 23-26 s, /health blocked for 18-21 s.
    expect(ms).toBeLessThan(3_000);
    expect(worstHealthMs).toBeLessThan(2_000);
    await expectPublishesAndStreams(broker);
  });

  it('refuses uniqueItems over non-scalar items without a small maxItems; with one, a 100,000-item array is refused at once', async () => {
    const unbounded = await call(broker.url, 'POST', '/event-types', eventTypeWith('cost.unique', { type: 'object', properties: { list: { type: 'array', uniqueItems: true } } }));
    expect(unbounded.status, unbounded.text).toBe(422);
    expect(detailOf(unbounded)).toContain('#/properties/list/uniqueItems');
    const scalar = await call(broker.url, 'POST', '/event-types', eventTypeWith('cost.unique.scalar', { type: 'object', properties: { list: { type: 'array', uniqueItems: true, items: { type: 'integer' } } } }));
    expect(scalar.status, scalar.text).toBe(201);
    const bounded = await call(broker.url, 'POST', '/event-types', eventTypeWith('cost.unique.bounded', { type: 'object', properties: { list: { type: 'array', uniqueItems: true, maxItems: 100 } } }));
    expect(bounded.status, bounded.text).toBe(201);

    const items = Array.from({ length: 100_000 }, (_, i) => [i]);
    const scalarItems = Array.from({ length: 100_000 }, (_, i) => i);
    const { answer, ms, worstHealthMs } = await whileHealthPolled(broker.url, () => call(broker.url, 'POST', '/event-types/cost.unique.bounded/events', [orderEvent('u', { list: items })]));
    expect(answer.status, answer.text).toBe(422);
    expect(JSON.stringify(answer.json)).toContain('must NOT have more than 100 items');
    // Without the cost budget: the worker was held 30 s and the batch answered 503.
    expect(ms).toBeLessThan(3_000);
    expect(worstHealthMs).toBeLessThan(2_000);
    const linear = await whileHealthPolled(broker.url, () => call(broker.url, 'POST', '/event-types/cost.unique.scalar/events', [orderEvent('s', { list: scalarItems })]));
    expect(linear.answer.status, linear.answer.text).toBe(200);
    expect(linear.ms).toBeLessThan(3_000);
    await expectPublishesAndStreams(broker);
  });
});

describe('schema checks run in workers under eventTypes.schemaCompileTimeoutMs', () => {
  it('refuses a schema whose checks overrun the time limit with 422 naming it, and the node keeps serving', async () => {
    expect((await call(strict.url, 'POST', '/event-types', businessEventType(CONTROL))).status).toBe(201);
    const properties = Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`p${i}`, { type: 'string', enum: [`a${i}`, `b${i}`] }]));
    const { answer, worstHealthMs } = await whileHealthPolled(strict.url, () => call(strict.url, 'POST', '/event-types', eventTypeWith('cost.slow', { type: 'object', properties })));
    expect(answer.status, answer.text).toBe(422);
    expect(detailOf(answer)).toMatch(/took longer than 500 ms|did not compile within 500 ms/);
    expect(worstHealthMs).toBeLessThan(2_000);
    await expectPublishesAndStreams(strict);
  });

  it('runs many registrations at once one schema check at a time, while publishing keeps a worker', async () => {
    // Each check takes tens of milliseconds (300 properties with enums); 24 arrive at once.
    const properties = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`p${i}`, { type: 'string', enum: [`a${i}`, `b${i}`] }]));
    let done = 0;
    const registrations = Promise.all(Array.from({ length: 24 }, (_, i) => call(broker.url, 'POST', '/event-types', eventTypeWith(`cost.queue${i}`, { type: 'object', properties })).finally(() => done++)));
    // A 20 KB batch (beyond publish.inlineMaxBytes: it goes to a worker) while they run.
    const batch = Array.from({ length: 60 }, (_, i) => orderEvent(`q${i}`, { note: 'x'.repeat(300) }));
    const published = await call(broker.url, 'POST', `/event-types/${CONTROL}/events`, batch);
    expect(published.status, published.text).toBe(200);
    // The batch did not wait for the schema checks queued before it.
    expect(done).toBeLessThan(24);
    const answers = await registrations;
    const statuses = answers.map((a) => a.status);
    expect(statuses.every((s) => s === 201 || s === 503), statuses.join()).toBe(true);
    for (const refused of answers.filter((a) => a.status === 503)) expect(refused.headers.get('retry-after')).toBe('1');
    expect(statuses.filter((s) => s === 201).length).toBeGreaterThan(0);
    await expectPublishesAndStreams(broker);
  });
});
