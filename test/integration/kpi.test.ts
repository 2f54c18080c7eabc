import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient } from '../support/stream-client.js';

/**
 * KPI events (docs/operations.md "The broker's own event types"; feature `kpi_collection`): the KPI
 * event types exist from startup; while the feature is on, publishing, streaming, event type and
 * subscription changes and every answered request become events of them, published within a second.
 */

let broker: TestBroker;

beforeAll(async () => {
  broker = await startTestBroker();
});
afterAll(async () => {
  await broker?.stop();
});

const KPI_TYPES = ['broker.batch.published', 'broker.data.streamed', 'broker.event-type.log', 'broker.subscription.log', 'broker.access.log'];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type KpiEvent = Record<string, unknown> & { metadata: { event_type: string; published_by: string } };

/** Every event stored so far in `eventType` (a low-level stream from BEGIN on every partition, read until it ends). */
async function storedEvents(eventType: string): Promise<KpiEvent[]> {
  const partitions = (await call(broker.url, 'GET', `/event-types/${eventType}/partitions`)).json as { partition: string }[];
  const stream = await StreamClient.open(`${broker.url}/event-types/${eventType}/events?batch_limit=1000&batch_flush_timeout=1&stream_timeout=1`, {
    headers: { 'X-Broker-Cursors': JSON.stringify(partitions.map((p) => ({ partition: p.partition, offset: 'BEGIN' }))) },
  });
  expect(stream.status).toBe(200);
  const batches = await stream.untilEnd(5000);
  return batches.flatMap((b) => b.events ?? []) as unknown as KpiEvent[];
}

/** Waits (about 5 s) until `eventType` holds an event `match` accepts. @returns that event */
async function kpiEvent(eventType: string, match: (event: KpiEvent) => boolean): Promise<KpiEvent> {
  let stored: KpiEvent[] = [];
  for (let i = 0; i < 5; i++) {
    stored = await storedEvents(eventType); // takes its stream_timeout, 1 s
    const found = stored.find(match);
    if (found) return found;
  }
  throw new Error(`no matching ${eventType} event within 5 s; stored: ${JSON.stringify(stored).slice(0, 2000)}`);
}

async function setKpi(enabled: boolean): Promise<void> {
  expect((await call(broker.url, 'POST', '/settings/features', { feature: 'kpi_collection', enabled })).status).toBe(204);
}

describe('KPI events', () => {
  it('has every KPI event type from startup, written only by administrators', async () => {
    for (const name of KPI_TYPES) {
      const answer = await call(broker.url, 'GET', `/event-types/${name}`);
      expect(answer.status, name).toBe(200);
      expect(answer.json).toMatchObject({ category: 'business', owning_application: 'broker', authorization: { writers: [{ data_type: 'user', value: 'unauthenticated' }] } });
    }
  });

  it('publishes nothing while the feature is off', async () => {
    expect((await call(broker.url, 'POST', '/event-types', businessEventType('kpi.quiet'))).status).toBe(201);
    expect((await call(broker.url, 'POST', '/event-types/kpi.quiet/events', [orderEvent('q1')])).status).toBe(200);
    // A negative check: KPI events are flushed every second, so the window is one flush and a margin.
    await sleep(1500);
    for (const name of KPI_TYPES) expect(await storedEvents(name), name).toEqual([]);
  });

  it('publishes batch, stream, change and access KPIs while the feature is on', async () => {
    await setKpi(true);
    const created = await call(broker.url, 'POST', '/event-types', businessEventType('kpi.orders'));
    expect(created.status).toBe(201);
    const batch = [orderEvent('k1'), orderEvent('k2'), orderEvent('k3')];
    const published = await call(broker.url, 'POST', '/event-types/kpi.orders/events', batch, { 'User-Agent': 'kpi-test/1.0' });
    expect(published.status).toBe(200);

    // A subscription stream reads the three events and ends at its stream_limit.
    const subscription = await call(broker.url, 'POST', '/subscriptions', { owning_application: 'kpi-reader', event_types: ['kpi.orders'], read_from: 'begin' });
    expect(subscription.status).toBe(201);
    const id = (subscription.json as { id: string }).id;
    const stream = await StreamClient.open(`${broker.url}/subscriptions/${id}/events?batch_flush_timeout=1&stream_limit=3`);
    expect(stream.status).toBe(200);
    const lines = await stream.events(3, 5000);
    const last = lines.at(-1);
    expect((await call(broker.url, 'POST', `/subscriptions/${id}/cursors`, { items: [last?.cursor] }, { 'X-Broker-StreamId': stream.headers.get('x-broker-streamid') ?? '' })).status).toBe(204);
    await stream.untilEnd(5000); // stream_limit reached and committed: the stream ends
    const dataBatches = lines.length;
    expect(dataBatches).toBeGreaterThan(0);
    expect((await call(broker.url, 'DELETE', `/subscriptions/${id}`)).status).toBe(204);

    const batchKpi = await kpiEvent('broker.batch.published', (e) => e.event_type === 'kpi.orders');
    expect(batchKpi).toMatchObject({ app: 'unauthenticated', result: 'submitted', number_of_events: 3, metadata: { published_by: 'broker' } });
    expect(batchKpi.batch_size).toBe(Buffer.byteLength(JSON.stringify(batch)));
    expect(batchKpi.ms_spent).toBeGreaterThan(0);

    const streamedKpi = await kpiEvent('broker.data.streamed', (e) => e.subscription === id);
    expect(streamedKpi).toMatchObject({ event_type: 'kpi.orders', app: 'unauthenticated', number_of_events: 3, batches_streamed: dataBatches });
    expect(streamedKpi.bytes_streamed).toBeGreaterThan(Buffer.byteLength(JSON.stringify(batch)) - 10);

    expect(await kpiEvent('broker.event-type.log', (e) => e.event_type === 'kpi.orders')).toMatchObject({ status: 'created', category: 'business', authz: 'disabled', compatibility_mode: 'forward' });
    const subscriptionLogs = (await storedEvents('broker.subscription.log')).filter((e) => e.subscription_id === id);
    expect(subscriptionLogs.map((e) => e.status).sort()).toEqual(['created', 'deleted']);

    const access = await kpiEvent('broker.access.log', (e) => e.path === '/event-types/kpi.orders/events' && e.method === 'POST');
    expect(access).toMatchObject({ status_code: 200, app: 'unauthenticated', user_agent: 'kpi-test/1.0', query: '', request_length: Buffer.byteLength(JSON.stringify(batch)) });
    const streamAccess = await kpiEvent('broker.access.log', (e) => e.path === `/subscriptions/${id}/events`);
    expect(streamAccess).toMatchObject({ method: 'GET', status_code: 200, query: 'batch_flush_timeout=1&stream_limit=3' });

    // Refused requests are logged too; the quiet event type from before the feature was on never is.
    expect((await call(broker.url, 'GET', '/event-types/kpi.nowhere')).status).toBe(404);
    expect(await kpiEvent('broker.access.log', (e) => e.path === '/event-types/kpi.nowhere')).toMatchObject({ status_code: 404 });
    expect((await storedEvents('broker.batch.published')).filter((e) => e.event_type === 'kpi.quiet')).toEqual([]);
    await setKpi(false);
  }, 60_000);
});
