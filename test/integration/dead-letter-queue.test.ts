import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, uniquePrefix, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { parseExposition, valueOf } from '../support/prometheus-text.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';

/**
 * The automatic dead-letter queue (docs/consuming.md "Dead letters"). A consumer that never commits one
 * poison event among others: once the poison event's batch was sent `subscription-max-event-send-count`
 * times without a commit, the partition is searched one event per batch, the poison event is skipped (stored once in
 * `broker.dead.letter.queue`), every other event is delivered and committed, nothing else is skipped —
 * on one node, and with the consumer's streams spread over two nodes.
 */

const DLQ = 'broker.dead.letter.queue';
const MAX_SENDS = 2;
let nodes: TestBroker[];

beforeAll(async () => {
  const prefix = uniquePrefix();
  // Two nodes on one deployment. Streams end by their commit timeout and leave at once; the default lease
  // (10 s) keeps a heartbeat delayed on a loaded machine from ending a session early (which would not count).
  nodes = await Promise.all([0, 1].map(() => startTestBroker({ BROKER_REDIS_KEY_PREFIX: prefix })));
});
afterAll(async () => {
  const codes = await Promise.all(nodes.map((n) => n.stop()));
  expect(codes, nodes.map((n) => n.output()).join('\n')).toEqual([0, 0]);
});

const node = (i: number): TestBroker => nodes[i % nodes.length] as TestBroker;

function dlqAnnotations(policy = 'DEAD_LETTER_QUEUE', count = String(MAX_SENDS)): Record<string, string> {
  return { 'broker.io/subscription-max-event-send-count': count, 'broker.io/unprocessable-event-policy': policy };
}

async function createSubscription(eventType: string, annotations: Record<string, string>): Promise<string> {
  const answer = await call(node(0).url, 'POST', '/subscriptions', { owning_application: 'dlq-test', event_types: [eventType], read_from: 'begin', annotations });
  expect(answer.status, answer.text).toBe(201);
  return (answer.json as { id: string }).id;
}

/** Publishes `count` events to a 1-partition event type; returns their order numbers in offset order. */
async function publishOrders(eventType: string, count: number): Promise<string[]> {
  expect((await call(node(0).url, 'POST', '/event-types', businessEventType(eventType))).status).toBe(201);
  const numbers = Array.from({ length: count }, (_, i) => `${eventType}-${i}`);
  const answer = await call(node(0).url, 'POST', `/event-types/${eventType}/events`, numbers.map((n) => orderEvent(n)));
  expect(answer.status, answer.text).toBe(200);
  return numbers;
}

interface PartitionStat {
  partition: string;
  state: string;
  failed_send_count?: number;
  dead_letter_search_until?: string;
}

async function partitionStats(id: string): Promise<PartitionStat> {
  const answer = await call(node(0).url, 'GET', `/subscriptions/${id}/stats`);
  expect(answer.status, answer.text).toBe(200);
  return (answer.json as { items: { partitions: PartitionStat[] }[] }).items[0]?.partitions[0] as PartitionStat;
}

const orderNumber = (event: Record<string, unknown>): string => String(event.order_number);

/**
 * A consumer that commits every batch except one holding `poison`: it then stops committing and waits
 * for the broker to end the stream (commit timeout), and reconnects — to the next node in turn.
 * @returns each order number with how often it was delivered, the connections made, and the stats seen before each
 */
async function consumeAround(id: string, poison: string, expected: readonly string[], nodeCount: number): Promise<{ deliveries: Map<string, number>; connections: number; stats: PartitionStat[] }> {
  const deliveries = new Map<string, number>();
  const committed = new Set<string>();
  const stats: PartitionStat[] = [];
  const deadline = Date.now() + 60_000;
  let connections = 0;
  while (expected.some((n) => n !== poison && !committed.has(n))) {
    if (Date.now() > deadline) throw new Error(`not every event was committed; committed ${[...committed].join(',')}`);
    // Once the previous stream's session is gone (after its commit window) its failed sends are counted.
    await expect.poll(async () => (await partitionStats(id)).state, { timeout: 10_000 }).toBe('unassigned');
    stats.push(await partitionStats(id));
    const url = node(connections % nodeCount).url;
    connections++;
    const stream = await StreamClient.open(`${url}/subscriptions/${id}/events?batch_limit=5&max_uncommitted_events=5&commit_timeout=1&batch_flush_timeout=1&stream_timeout=30`);
    expect(stream.status, JSON.stringify(stream.problem)).toBe(200);
    const streamId = stream.headers.get('x-broker-streamid') ?? '';
    try {
      for (let batch: StreamBatch | undefined = await stream.next(15_000); batch; batch = await stream.next(15_000)) {
        const events = batch.events ?? [];
        for (const e of events) deliveries.set(orderNumber(e), (deliveries.get(orderNumber(e)) ?? 0) + 1);
        if (events.length === 0) continue;
        if (events.some((e) => orderNumber(e) === poison)) continue; // never committed: the stream ends at its commit timeout
        const commit = await call(url, 'POST', `/subscriptions/${id}/cursors`, { items: [batch.cursor] }, { 'X-Broker-StreamId': streamId });
        expect([200, 204], commit.text).toContain(commit.status);
        for (const e of events) committed.add(orderNumber(e));
        if (expected.every((n) => n === poison || committed.has(n))) break;
      }
    } finally {
      stream.close();
    }
  }
  return { deliveries, connections, stats };
}

/** The dead-letter events of a subscription, read from the dead-letter event type from its beginning. */
async function deadLettersOf(id: string): Promise<Record<string, unknown>[]> {
  const partitions = (await call(node(0).url, 'GET', `/event-types/${DLQ}/partitions`)).json as { partition: string }[];
  const found: Record<string, unknown>[] = [];
  // Every partition from its beginning, until each sent a keep-alive (nothing more to read).
  const stream = await StreamClient.open(`${node(0).url}/event-types/${DLQ}/events?batch_limit=100&batch_flush_timeout=1&stream_keep_alive_limit=1`, {
    headers: { 'X-Broker-Cursors': JSON.stringify(partitions.map((p) => ({ partition: p.partition, offset: 'BEGIN' }))) },
  });
  for (const batch of await stream.untilEnd(10_000)) for (const e of batch.events ?? []) if (e.subscription_id === id) found.push(e);
  return found;
}

async function deadLetterCount(id: string): Promise<number> {
  let total = 0;
  for (const n of nodes) {
    total += valueOf(parseExposition((await call(n.url, 'GET', '/metrics')).text), 'broker_dead_letters_total', { subscription_id: id }) ?? 0;
  }
  return total;
}

describe('subscription annotations of the dead-letter queue', () => {
  it('accepts the two keys together and refuses bad values, one without the other, and other broker.io keys (422)', async () => {
    expect((await call(node(0).url, 'POST', '/event-types', businessEventType('dlq.annotations'))).status).toBe(201);
    const create = (annotations: Record<string, string>) => call(node(0).url, 'POST', '/subscriptions', { owning_application: `dlq-a-${Math.random()}`, event_types: ['dlq.annotations'], annotations });
    expect((await create(dlqAnnotations('SKIP_EVENT', '3'))).status).toBe(201);
    for (const [annotations, detail] of [
      [dlqAnnotations('DEAD_LETTER_QUEUE', '0'), 'must be an integer from 1 to 1000000'],
      [dlqAnnotations('DEAD_LETTER_QUEUE', 'x'), 'must be an integer from 1 to 1000000'],
      [dlqAnnotations('RETRY', '3'), 'must be "SKIP_EVENT" or "DEAD_LETTER_QUEUE"'],
      [{ 'broker.io/subscription-max-event-send-count': '3' }, 'must be given together'],
      [{ 'broker.io/unprocessable-event-policy': 'SKIP_EVENT' }, 'must be given together'],
      [{ 'broker.io/other': 'x' }, 'reserved for the service'],
    ] as const) {
      const answer = await create(annotations);
      expect(answer.status, answer.text).toBe(422);
      expect((answer.json as { detail: string }).detail).toContain(detail);
    }
  });
});

describe('a poison event goes to the dead-letter queue', () => {
  it.each([
    ['one node', 1],
    ['the consumer spread over two nodes', 2],
  ])('%s: the events after it are delivered, it is stored once, nothing else is skipped', async (_name, nodeCount) => {
    const eventType = `dlq.orders${nodeCount}`;
    const numbers = await publishOrders(eventType, 10);
    const poison = numbers[4] as string;
    const id = await createSubscription(eventType, dlqAnnotations());

    const { deliveries, connections, stats } = await consumeAround(id, poison, numbers, nodeCount);

    // Sent MAX_SENDS times in a batch of 5, then MAX_SENDS times alone, then skipped.
    expect(deliveries.get(poison)).toBe(2 * MAX_SENDS);
    for (const n of numbers) if (n !== poison) expect(deliveries.get(n), n).toBeGreaterThanOrEqual(1);
    expect(connections).toBe(2 * MAX_SENDS + 1);
    // The stats showed the failed sends and then the search window (offset 4: the window of batch_limit 5).
    expect(stats.map((s) => s.failed_send_count ?? 0)).toEqual([0, 1, 2, 1, 2]);
    expect(stats.slice(3).every((s) => s.dead_letter_search_until !== undefined)).toBe(true);
    const after = await partitionStats(id);
    expect(after.failed_send_count).toBeUndefined();
    expect(after.dead_letter_search_until).toBeUndefined();

    const letters = await deadLettersOf(id);
    expect(letters).toHaveLength(1);
    const letter = letters[0] as { event_type: string; partition: string; offset: string; error: { message: string }; event: Record<string, unknown> };
    expect(letter.event_type).toBe(eventType);
    expect(letter.partition).toBe('0');
    expect(letter.offset).toBe('001-0001-000000000000000004');
    expect(orderNumber(letter.event)).toBe(poison);
    expect(letter.error.message).toContain(`sent ${MAX_SENDS} times`);
    expect(await deadLetterCount(id)).toBe(1);

    // Everything is committed: the subscription has nothing left to consume.
    const cursors = (await call(node(0).url, 'GET', `/subscriptions/${id}/cursors`)).json as { items: { offset: string }[] };
    expect(cursors.items[0]?.offset).toBe('001-0001-000000000000000009');
  });

  it('with SKIP_EVENT skips without storing it; a cursor reset clears the failed sends', async () => {
    const eventType = 'dlq.skip';
    const numbers = await publishOrders(eventType, 3);
    const id = await createSubscription(eventType, dlqAnnotations('SKIP_EVENT', '1'));
    const { deliveries } = await consumeAround(id, numbers[1] as string, numbers, 1);
    expect(deliveries.get(numbers[1] as string)).toBe(2);
    expect(await deadLettersOf(id)).toEqual([]);
    expect(await deadLetterCount(id)).toBe(1);

    // Fail once more on a reset subscription, then reset again: the count starts over.
    const reset = await call(node(0).url, 'PATCH', `/subscriptions/${id}/cursors`, { items: [{ event_type: eventType, partition: '0', offset: 'BEGIN' }] });
    expect(reset.status, reset.text).toBe(204);
    const stream = await StreamClient.open(`${node(0).url}/subscriptions/${id}/events?batch_limit=5&commit_timeout=1&batch_flush_timeout=1`);
    await stream.events(3, 10_000);
    await stream.untilEnd(10_000);
    await expect.poll(async () => (await partitionStats(id)).failed_send_count, { timeout: 10_000 }).toBe(1);
    expect((await call(node(0).url, 'PATCH', `/subscriptions/${id}/cursors`, { items: [{ event_type: eventType, partition: '0', offset: 'BEGIN' }] })).status).toBe(204);
    expect((await partitionStats(id)).failed_send_count).toBeUndefined();
  });
});
