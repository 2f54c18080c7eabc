import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../scripts/local-processes.js';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { runChild } from '../support/child-process.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { SseClient } from '../support/sse-client.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';

/**
 * Filters evaluated on the server (docs/consuming.md "Filters"): a subscription's `filter`, and the
 * `filter` query parameter of low-level streams (JSON lines and server-sent events). Events a filter
 * does not match are passed over: not sent, covered by the cursors (and, on subscriptions, committed by
 * the broker once what was sent before them is), while `unconsumed_events` counts every event not yet
 * passed over. Two nodes on one Redis: events are published on one and read on the other.
 */

let a: TestBroker;
let b: TestBroker;

beforeAll(async () => {
  a = await startTestBroker();
  b = await startTestBroker({ BROKER_REDIS_KEY_PREFIX: a.prefix });
});
afterAll(async () => {
  await Promise.all([a.stop(), b.stop()]);
});

/** Matches the orders whose number starts with `m-`. */
const MATCHING_ORDERS = { properties: { order_number: { type: 'string', pattern: '^m-' } } };

/** A business event type with one partition. */
async function eventType(): Promise<string> {
  const name = `filter.${crypto.randomUUID().slice(0, 8)}`;
  const created = await call(a.url, 'POST', '/event-types', businessEventType(name));
  expect(created.status, created.text).toBe(201);
  return name;
}

/** Publishes one order per number, in batches of at most 1,000 events. */
async function publish(name: string, numbers: readonly string[]): Promise<void> {
  for (let i = 0; i < numbers.length; i += 1000) {
    const answer = await call(a.url, 'POST', `/event-types/${name}/events`, numbers.slice(i, i + 1000).map((n) => orderEvent(n)));
    expect(answer.status, answer.text).toBe(200);
  }
}

/** `count` order numbers, those at `matching` indexes `m-<i>`, the others `x-<i>`. */
function orders(count: number, matching: (i: number) => boolean): string[] {
  return Array.from({ length: count }, (_, i) => `${matching(i) ? 'm' : 'x'}-${i}`);
}

async function subscribe(name: string, filter: unknown, consumerGroup = 'default'): Promise<{ status: number; json: unknown; text: string }> {
  return call(a.url, 'POST', '/subscriptions', { owning_application: 'filter-test', event_types: [name], consumer_group: consumerGroup, read_from: 'begin', ...(filter === undefined ? {} : { filter }) });
}

async function unconsumed(id: string): Promise<number> {
  const answer = await call(b.url, 'GET', `/subscriptions/${id}/stats`);
  expect(answer.status).toBe(200);
  const items = (answer.json as { items: { partitions: { unconsumed_events?: number }[] }[] }).items;
  return items.flatMap((i) => i.partitions).reduce((sum, p) => sum + (p.unconsumed_events ?? 0), 0);
}

async function committedOffset(id: string): Promise<string | undefined> {
  const answer = await call(b.url, 'GET', `/subscriptions/${id}/cursors`);
  return (answer.json as { items: { offset: string }[] }).items[0]?.offset;
}

async function eventually(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > timeoutMs) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The order numbers of the batches' events. */
const numbersOf = (batches: readonly StreamBatch[]): unknown[] => batches.flatMap((x) => (x.events ?? []).map((e) => e.order_number));

/** Reads data batches until `count` events came (keep-alives in between are passed over). */
async function read(stream: StreamClient, count: number, timeoutMs = 20_000): Promise<StreamBatch[]> {
  const batches: StreamBatch[] = [];
  let events = 0;
  while (events < count) {
    const batch = await stream.next(timeoutMs);
    if (batch === undefined) throw new Error(`the stream ended after ${events} of ${count} events`);
    if (batch.events === undefined) continue;
    batches.push(batch);
    events += batch.events.length;
  }
  return batches;
}

describe('a subscription with a filter', () => {
  it('delivers only the events it matches, metadata included; the commit of the last batch covers the events passed over', async () => {
    const name = await eventType();
    // 10 that do not match, 2 that do, 10 that do not: the last events of the partition are passed over.
    const numbers = orders(22, (i) => i === 10 || i === 11);
    await publish(name, numbers);
    const created = await subscribe(name, { ...MATCHING_ORDERS, required: ['metadata'], properties: { ...MATCHING_ORDERS.properties, metadata: { properties: { event_type: { enum: [name] } } } } });
    expect(created.status, created.text).toBe(201);
    const record = created.json as { id: string; filter?: unknown };
    expect(record.filter).toEqual({ ...MATCHING_ORDERS, required: ['metadata'], properties: { ...MATCHING_ORDERS.properties, metadata: { properties: { event_type: { enum: [name] } } } } });
    expect((await call(b.url, 'GET', `/subscriptions/${record.id}`)).json).toEqual(record);

    const stream = await StreamClient.open(`${b.url}/subscriptions/${record.id}/events?batch_flush_timeout=1`);
    expect(stream.status).toBe(200);
    const batches = await read(stream, 2);
    expect(numbersOf(batches)).toEqual(['m-10', 'm-11']);
    const last = batches[batches.length - 1];
    if (last === undefined) throw new Error('no batch');
    // The last batch's cursor covers the events passed over before and after it (all were read at once); until a
    // commit every event counts, matching or not.
    expect(last.cursor.offset).toBe('001-0001-000000000000000021');
    expect(await unconsumed(record.id)).toBe(22);
    const committed = await call(b.url, 'POST', `/subscriptions/${record.id}/cursors`, { items: [last.cursor] }, { 'X-Broker-StreamId': stream.headers.get('x-broker-streamid') ?? '' });
    expect(committed.status, committed.text).toBe(204);
    expect(await unconsumed(record.id)).toBe(0);
    // Events that arrive later and match nothing are passed over too: with nothing sent and uncommitted before
    // them, the broker commits them.
    await publish(name, orders(10, () => false));
    await eventually(async () => (await unconsumed(record.id)) === 0 && (await committedOffset(record.id)) === '001-0001-000000000000000031', 15_000, 'the later events are passed over and committed');
    stream.close();
  });

  it('moves through a partition where few events match to its end', async () => {
    const name = await eventType();
    const numbers = orders(5000, (i) => i % 250 === 249);
    await publish(name, numbers);
    const created = await subscribe(name, MATCHING_ORDERS);
    expect(created.status, created.text).toBe(201);
    const { id } = created.json as { id: string };
    const stream = await StreamClient.open(`${b.url}/subscriptions/${id}/events?batch_limit=5&max_uncommitted_events=100&batch_flush_timeout=1`);
    const batches = await read(stream, 20);
    expect(numbersOf(batches)).toEqual(numbers.filter((n) => n.startsWith('m-')));
    const streamId = stream.headers.get('x-broker-streamid') ?? '';
    const committed = await call(b.url, 'POST', `/subscriptions/${id}/cursors`, { items: batches.map((x) => x.cursor) }, { 'X-Broker-StreamId': streamId });
    expect(committed.status, committed.text).toBe(204);
    // The last matching event is the last one published: nothing is left.
    expect(await unconsumed(id)).toBe(0);
    stream.close();
  });

  it('delivers runs of matching events whole, one event at a time with batch_timespan too', async () => {
    const name = await eventType();
    // Runs of two matching events between single ones that do not match, in one stored entry.
    const numbers = orders(30, (i) => i % 3 !== 0);
    await publish(name, numbers);
    const expected = numbers.filter((n) => n.startsWith('m-'));
    for (const [consumerGroup, init] of [
      ['runs', {}],
      ['per-event', { method: 'POST', body: JSON.stringify({ batch_timespan: 3600 }), headers: { 'content-type': 'application/json' } }],
    ] as const) {
      const created = await subscribe(name, MATCHING_ORDERS, consumerGroup);
      expect(created.status, created.text).toBe(201);
      const stream = await StreamClient.open(`${b.url}/subscriptions/${(created.json as { id: string }).id}/events?batch_limit=7&max_uncommitted_events=100&batch_flush_timeout=1`, init);
      expect(stream.status).toBe(200);
      expect(numbersOf(await read(stream, expected.length))).toEqual(expected);
      stream.close();
    }
  });

  it('refuses filters that are not usable JSON Schemas, and is fixed with the subscription', async () => {
    const name = await eventType();
    const refusals: [unknown, number, string][] = [
      ['{"type":"object"}', 400, 'filter'],
      [{ type: 'string' }, 422, 'Field "filter" is not a usable filter'],
      [{ type: 5 }, 422, 'Field "filter" is not a usable filter'],
      [{ properties: { order_number: { pattern: '(?=m)' } } }, 422, 'Field "filter" is not a usable filter'],
      [{ $ref: 'http://example.org/schema' }, 422, 'Field "filter" is not a usable filter'],
    ];
    for (const [filter, status, detail] of refusals) {
      const answer = await subscribe(name, filter);
      expect(answer.status, answer.text).toBe(status);
      expect((answer.json as { detail?: string }).detail).toContain(detail);
    }
    const created = await subscribe(name, MATCHING_ORDERS);
    expect(created.status).toBe(201);
    const { id } = created.json as { id: string };
    // The same key with the same filter (in another key order) is the same subscription.
    const again = await subscribe(name, { properties: { order_number: { pattern: '^m-', type: 'string' } } });
    expect(again.status).toBe(200);
    expect((again.json as { id: string }).id).toBe(id);
    // Another filter, or none, is refused, naming the difference.
    for (const other of [{ properties: { order_number: { pattern: '^x-' } } }, undefined]) {
      const answer = await subscribe(name, other);
      expect(answer.status, answer.text).toBe(422);
      expect((answer.json as { detail: string }).detail).toContain(`Field "filter" differs from the existing subscription ${id}`);
    }
    // A filter cannot be changed.
    const record = (await call(a.url, 'GET', `/subscriptions/${id}`)).json as Record<string, unknown>;
    const update = await call(a.url, 'PUT', `/subscriptions/${id}`, { ...record, filter: { properties: { order_number: { pattern: '^x-' } } } });
    expect(update.status, update.text).toBe(422);
    expect((update.json as { detail: string }).detail).toContain('Field "filter" cannot be changed');
  });
});

describe('the filter query parameter of low-level streams', () => {
  const filterParam = encodeURIComponent(JSON.stringify(MATCHING_ORDERS));
  const begin = encodeURIComponent(JSON.stringify([{ partition: '0', offset: 'BEGIN' }]));

  it('sends only matching events on JSON lines, and refuses an unusable filter before the stream starts', async () => {
    const name = await eventType();
    const numbers = orders(300, (i) => i % 30 === 0);
    await publish(name, numbers);
    const stream = await StreamClient.open(`${b.url}/event-types/${name}/events?cursors=${begin}&filter=${filterParam}&batch_flush_timeout=1&stream_limit=10`);
    expect(stream.status).toBe(200);
    const batches = await read(stream, 10);
    expect(numbersOf(batches)).toEqual(numbers.filter((n) => n.startsWith('m-')));
    stream.close();

    for (const bad of ['{"type":', '{"type":"string"}', '{"properties":{"a":{"pattern":"(?<=a)b"}}}']) {
      const refused = await StreamClient.open(`${b.url}/event-types/${name}/events?cursors=${begin}&filter=${encodeURIComponent(bad)}`);
      expect(refused.status).toBe(422);
      expect((refused.problem as { detail: string }).detail).toContain('Query parameter "filter" is not a usable filter');
    }
  });

  it('sends only matching events as server-sent events', async () => {
    const name = await eventType();
    const numbers = orders(100, (i) => i % 20 === 5);
    await publish(name, numbers);
    const sse = await SseClient.open(`${b.url}/event-types/${name}/events?cursors=${begin}&filter=${filterParam}&batch_flush_timeout=1&stream_limit=5`);
    expect(sse.status).toBe(200);
    const frames = await sse.untilEnd(20_000);
    const events = frames.flatMap((f) => (f.data === undefined ? [] : ((JSON.parse(f.data) as StreamBatch).events ?? [])));
    expect(events.map((e) => e.order_number)).toEqual(numbers.filter((n) => n.startsWith('m-')));
  });
});

describe('broker tail --filter', () => {
  it('prints only the events the filter matches, each offset as an upper bound; a filter that is not a JSON object is a usage error', async () => {
    const name = await eventType();
    const numbers = orders(50, (i) => i % 10 === 3);
    await publish(name, numbers);
    const cli = (args: readonly string[]) => runChild(process.execPath, [path.join(repoRoot, 'dist', 'src', 'cli', 'main.js'), ...args], { env: { ...process.env, BROKER_URL: b.url }, input: '' });
    const json = await cli(['tail', name, '--from', 'begin', '--limit', '5', '--json', '--filter', JSON.stringify(MATCHING_ORDERS)]);
    expect(json.code, json.stderr).toBe(0);
    const printed = json.stdout.split('\n').filter((line) => line !== '').map((line) => (JSON.parse(line) as { order_number: string }).order_number);
    expect(printed).toEqual(numbers.filter((n) => n.startsWith('m-')));
    const human = await cli(['tail', name, '--from', 'begin', '--limit', '1', '--filter', JSON.stringify(MATCHING_ORDERS)]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(new RegExp(`^${name.replace('.', '\\.')}  0  <=001-0001-\\d{18}  \\{.*"order_number":"m-3"`));
    for (const bad of ['[1]', '{"type":']) expect((await cli(['tail', name, '--filter', bad])).code).toBe(2);
    const refused = await cli(['tail', name, '--from', 'begin', '--filter', '{"type":"string"}']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('Query parameter "filter" is not a usable filter');
  });
});
