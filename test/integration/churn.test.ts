import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { parseExposition, type Exposition } from '../support/prometheus-text.js';
import { StreamClient } from '../support/stream-client.js';

/**
 * Nothing outlives what it describes, so a node that runs for months keeps its memory and its
 * `/metrics` answer bounded. 200 event types and subscriptions are created,
 * published to, streamed, committed and deleted on one node; afterwards `/metrics` names none of
 * them and every in-memory cache (`broker_cache_entries`) is back to its size before the churn.
 */

const ITERATIONS = 200;
const IN_FLIGHT = 4;
let broker: TestBroker;

beforeAll(async () => {
  broker = await startTestBroker({ BROKER_PUBLISH_WORKER_THREADS: '2' });
});
afterAll(async () => {
  const code = await broker.stop();
  expect(code, broker.output()).toBe(0);
});

async function metrics(): Promise<Exposition> {
  const answer = await call(broker.url, 'GET', '/metrics');
  expect(answer.status).toBe(200);
  return parseExposition(answer.text);
}

function cacheSizes(exposition: Exposition): Record<string, number> {
  return Object.fromEntries(exposition.samples.filter((s) => s.name === 'broker_cache_entries').map((s) => [s.labels.cache ?? '', s.value]));
}

/** Create event type and subscription, publish one event, stream and commit it, delete both. @returns the names used */
async function iterate(i: number): Promise<{ eventType: string; subscription: string }> {
  const eventType = `churn.n${i}`;
  expect((await call(broker.url, 'POST', '/event-types', businessEventType(eventType))).status).toBe(201);
  const created = await call(broker.url, 'POST', '/subscriptions', { owning_application: `churn-${i}`, event_types: [eventType], read_from: 'begin' });
  expect(created.status, created.text).toBe(201);
  const subscription = (created.json as { id: string }).id;
  expect((await call(broker.url, 'POST', `/event-types/${eventType}/events`, [orderEvent(`o${i}`)])).status).toBe(200);
  const stream = await StreamClient.open(`${broker.url}/subscriptions/${subscription}/events?batch_limit=1&stream_limit=1&batch_flush_timeout=1`);
  try {
    const [batch] = await stream.events(1, 10_000);
    const commit = await call(broker.url, 'POST', `/subscriptions/${subscription}/cursors`, { items: [batch?.cursor] }, { 'X-Broker-StreamId': stream.headers.get('x-broker-streamid') ?? '' });
    expect([200, 204]).toContain(commit.status);
  } finally {
    stream.close();
  }
  expect((await call(broker.url, 'DELETE', `/subscriptions/${subscription}`)).status).toBe(204);
  expect((await call(broker.url, 'DELETE', `/event-types/${eventType}`)).status).toBe(200);
  return { eventType, subscription };
}

describe('churn of event types and subscriptions', () => {
  it(`leaves no series and no cache entry of ${ITERATIONS} deleted event types and subscriptions`, async () => {
    await metrics(); // the first scrape loads the service's own event types into the cache
    const before = cacheSizes(await metrics());
    expect(Object.keys(before).sort()).toEqual(['event_type_generations', 'event_types', 'main_thread_validators', 'retired_schema_keys', 'worker_validators']);

    const used: { eventType: string; subscription: string }[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: IN_FLIGHT }, async () => {
        while (next < ITERATIONS) used.push(await iterate(next++));
      }),
    );
    expect(used).toHaveLength(ITERATIONS);

    // Deletion notices are handled asynchronously (an existence check): poll until the caches settle.
    await expect.poll(async () => cacheSizes(await metrics()), { timeout: 15_000, interval: 200 }).toEqual(before);
    const after = await metrics();
    const deleted = new Set(used.flatMap((u) => [u.eventType, u.subscription]));
    const naming = after.samples.filter((s) => Object.values(s.labels).some((v) => deleted.has(v)));
    expect(naming.map((s) => `${s.name}${JSON.stringify(s.labels)}`)).toEqual([]);
  }, 120_000);
});
