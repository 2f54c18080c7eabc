import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, startTestBrokerProcess, uniquePrefix, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';
import { parseExposition, valueOf } from '../support/prometheus-text.js';

// Queue-mode subscriptions (docs/consuming.md "Queue mode"): any number of streams read the same
// partitions; each batch goes to one stream and is acknowledged on its own; a batch not acknowledged in
// time, or handed back, goes to a stream again; deliveries count towards the dead-letter policy. Real broker
// processes on the harness Redis (standalone or cluster, per project).

const QUEUE = { 'broker.io/consumption-mode': 'queue' };
let node: TestBroker;
let other: TestBroker;
let env: Record<string, string>;

beforeAll(async () => {
  env = { BROKER_REDIS_KEY_PREFIX: uniquePrefix(), BROKER_SUBSCRIPTIONS_LEASE_TTL_MS: '1500' };
  [node, other] = await Promise.all([startTestBroker(env), startTestBroker(env)]);
});
afterAll(async () => {
  await Promise.all([node.stop(), other.stop()]);
});

const statistic = (n: number) => ({ default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: n, write_parallelism: n } });

async function createEventType(name: string, partitions = 1): Promise<void> {
  const created = await call(node.url, 'POST', '/event-types', businessEventType(name, { ...statistic(partitions), partition_strategy: 'user_defined' }));
  expect(created.status, created.text).toBe(201);
}

/** Publishes `count` events numbered from `from` (order numbers `<name>-<i>`), spread over `partitions` partitions. */
async function publish(name: string, count: number, partitions = 1, from = 0): Promise<void> {
  const events = Array.from({ length: count }, (_, i) => {
    const event = orderEvent(`${name}-${from + i}`);
    (event.metadata as Record<string, unknown>).partition = String((from + i) % partitions);
    return event;
  });
  const answer = await call(node.url, 'POST', `/event-types/${name}/events`, events);
  expect(answer.status, answer.text).toBe(200);
}

async function createSubscription(name: string, annotations: Record<string, string> = QUEUE): Promise<string> {
  const answer = await call(node.url, 'POST', '/subscriptions', { owning_application: `app-${crypto.randomUUID()}`, event_types: [name], read_from: 'begin', annotations });
  expect(answer.status, answer.text).toBe(201);
  return (answer.json as { id: string }).id;
}

async function open(id: string, query: string, base: string = node.url): Promise<StreamClient> {
  const stream = await StreamClient.open(`${base}/subscriptions/${id}/events?${query}`);
  expect(stream.status, JSON.stringify(stream.problem)).toBe(200);
  return stream;
}

/**
 * Two events in a new event type, read by a new queue-mode subscription with the dead-letter annotations
 * (`maxSends` deliveries per event, then `policy`) on a stream of `batch_limit` 2.
 * @returns the event type's name, the subscription id and the open stream
 */
async function twoEventsWithPolicy(tag: string, maxSends: number, policy: string): Promise<{ name: string; id: string; stream: StreamClient }> {
  const name = `queue.${tag}.${crypto.randomUUID().slice(0, 8)}`;
  await createEventType(name);
  await publish(name, 2);
  const id = await createSubscription(name, { ...QUEUE, 'broker.io/subscription-max-event-send-count': String(maxSends), 'broker.io/unprocessable-event-policy': policy });
  return { name, id, stream: await open(id, 'batch_limit=2') };
}

/** The next batch with events, skipping keep-alives. */
async function nextData(stream: StreamClient, timeoutMs = 10_000): Promise<StreamBatch> {
  const until = performance.now() + timeoutMs;
  for (;;) {
    const batch = await stream.next(Math.max(1, until - performance.now()));
    if (!batch) throw new Error('the stream ended without a batch with events');
    if ((batch.events?.length ?? 0) > 0) return batch;
  }
}

const streamIdOf = (stream: StreamClient): string => stream.headers.get('x-broker-streamid') ?? '';
const numbers = (batch: StreamBatch): string[] => (batch.events ?? []).map((e) => String(e.order_number));

async function commit(id: string, stream: StreamClient, batch: StreamBatch, base: string = node.url): Promise<number> {
  return (await call(base, 'POST', `/subscriptions/${id}/cursors`, { items: [batch.cursor] }, { 'X-Broker-StreamId': streamIdOf(stream) })).status;
}

async function committedOffset(id: string): Promise<string | undefined> {
  const answer = await call(node.url, 'GET', `/subscriptions/${id}/cursors`);
  return (answer.json as { items: { offset: string }[] }).items[0]?.offset;
}

interface QueueStats {
  state: string;
  unconsumed_events?: number;
  in_flight_events?: number;
  redelivery_events?: number;
  undelivered_events?: number;
}

async function stats(id: string): Promise<QueueStats[]> {
  const answer = await call(node.url, 'GET', `/subscriptions/${id}/stats`);
  expect(answer.status, answer.text).toBe(200);
  return (answer.json as { items: { partitions: QueueStats[] }[] }).items.flatMap((i) => i.partitions);
}

describe('queue-mode subscriptions', () => {
  it('the mode is an annotation fixed at creation; a queue-mode subscription takes no filter', async () => {
    const name = `queue.rules.${crypto.randomUUID().slice(0, 8)}`;
    await createEventType(name);
    const base = { owning_application: 'app-rules', event_types: [name] };
    const wrong = await call(node.url, 'POST', '/subscriptions', { ...base, annotations: { 'broker.io/consumption-mode': 'shared' } });
    expect(wrong.status, wrong.text).toBe(422);
    expect(wrong.text).toContain('must be \\"stream\\" or \\"queue\\"');
    const filtered = await call(node.url, 'POST', '/subscriptions', { ...base, annotations: QUEUE, filter: { type: 'object' } });
    expect(filtered.status).toBe(422);
    const id = await createSubscription(name);
    const changed = await call(node.url, 'PUT', `/subscriptions/${id}`, { annotations: {} });
    expect(changed.status).toBe(422);
    expect(changed.text).toContain('cannot be changed');
    const kept = await call(node.url, 'PUT', `/subscriptions/${id}`, { annotations: { ...QUEUE, 'example.org/team': 'a' } });
    expect(kept.status, kept.text).toBe(204);
  });

  it('more streams than partitions, on two nodes: every event delivered once, acknowledged batch by batch', async () => {
    const name = `queue.share.${crypto.randomUUID().slice(0, 8)}`;
    await createEventType(name, 2);
    await publish(name, 60, 2);
    const id = await createSubscription(name);
    const streams = await Promise.all([open(id, 'batch_limit=5&max_uncommitted_events=5'), open(id, 'batch_limit=5&max_uncommitted_events=5'), open(id, 'batch_limit=5&max_uncommitted_events=5', other.url), open(id, 'batch_limit=5&max_uncommitted_events=5', other.url)]);
    const seen: string[] = [];
    const perStream = streams.map(() => 0);
    // Each stream acknowledges every batch it gets, until all 60 events were seen.
    await Promise.all(
      streams.map(async (stream, i) => {
        while (seen.length < 60) {
          const batch = await nextData(stream).catch(() => undefined);
          if (!batch) return;
          seen.push(...numbers(batch));
          perStream[i] = (perStream[i] ?? 0) + numbers(batch).length;
          expect(await commit(id, stream, batch, i < 2 ? node.url : other.url)).toBe(204);
          // All seen: the other streams stop waiting.
          if (seen.length >= 60) for (const s of streams) s.close();
        }
      }),
    );
    expect(seen.sort()).toEqual(Array.from({ length: 60 }, (_, i) => `${name}-${i}`).sort());
    expect(perStream.filter((n) => n > 0).length, `events per stream: ${perStream.join(', ')}`).toBeGreaterThan(2);
    const partitions = await stats(id);
    expect(partitions.map((p) => [p.unconsumed_events, p.in_flight_events, p.redelivery_events, p.undelivered_events])).toEqual([
      [0, 0, 0, 0],
      [0, 0, 0, 0],
    ]);
  });

  it('an acknowledgement covers its batch only: the committed cursor stops below the oldest batch not acknowledged', async () => {
    const name = `queue.floor.${crypto.randomUUID().slice(0, 8)}`;
    await createEventType(name);
    await publish(name, 10);
    const id = await createSubscription(name);
    const first = await open(id, 'batch_limit=5&max_uncommitted_events=5');
    const a = await nextData(first);
    const second = await open(id, 'batch_limit=5&max_uncommitted_events=5');
    const b = await nextData(second);
    expect(numbers(a)).toEqual([0, 1, 2, 3, 4].map((i) => `${name}-${i}`));
    expect(numbers(b)).toEqual([5, 6, 7, 8, 9].map((i) => `${name}-${i}`));
    const before = await committedOffset(id);
    expect(await commit(id, second, b)).toBe(204);
    expect(await committedOffset(id)).toBe(before);
    // Acknowledged again while an earlier batch is still open: outdated (200), nothing changes.
    expect(await commit(id, second, b)).toBe(200);
    expect((await stats(id))[0]).toMatchObject({ unconsumed_events: 10, in_flight_events: 5, undelivered_events: 0 });
    const metrics = parseExposition((await call(node.url, 'GET', '/metrics')).text);
    const labels = { subscription_id: id, event_type: name, partition: '0' };
    expect(valueOf(metrics, 'broker_subscription_in_flight_events', labels)).toBe(5);
    expect(valueOf(metrics, 'broker_subscription_redelivery_events', labels)).toBe(0);
    expect(valueOf(metrics, 'broker_subscription_lag_events', labels)).toBe(10);
    // Another stream cannot acknowledge a batch it does not hold: refused, nothing changes.
    expect(await commit(id, second, a)).toBe(422);
    expect(await commit(id, first, a)).toBe(204);
    expect(await committedOffset(id)).toBe(b.cursor.offset);
    // A repeated acknowledgement of an acknowledged batch is outdated (200), as a repeated commit is.
    expect(await commit(id, first, a)).toBe(200);
    first.close();
    second.close();
  });

  it('a batch not acknowledged within commit_timeout goes to another stream; the late acknowledgement is refused and changes nothing', async () => {
    const name = `queue.timeout.${crypto.randomUUID().slice(0, 8)}`;
    await createEventType(name);
    await publish(name, 3);
    const id = await createSubscription(name);
    const slow = await open(id, 'batch_limit=3&commit_timeout=1');
    const held = await nextData(slow);
    const ended = await slow.untilEnd(10_000);
    expect(ended.at(-1)?.info?.stream_close_reason).toBe('commit_timeout_reached');
    const next = await open(id, 'batch_limit=3', other.url);
    const again = await nextData(next);
    expect(numbers(again)).toEqual(numbers(held));
    const before = await committedOffset(id);
    expect(await commit(id, slow, held)).toBe(422);
    expect(await committedOffset(id)).toBe(before);
    expect(await commit(id, next, again, other.url)).toBe(204);
    expect(await committedOffset(id)).toBe(again.cursor.offset);
    next.close();
  });

  it('a stream whose client went away: its batch goes to another stream once its deadline passed', async () => {
    const name = `queue.gone.${crypto.randomUUID().slice(0, 8)}`;
    await createEventType(name);
    await publish(name, 2);
    const id = await createSubscription(name);
    const gone = await open(id, 'batch_limit=2&commit_timeout=2');
    const held = await nextData(gone);
    gone.close();
    const next = await open(id, 'batch_limit=2');
    const again = await nextData(next, 15_000);
    expect(numbers(again)).toEqual(numbers(held));
    expect(await commit(id, next, again)).toBe(204);
    next.close();
  });

  it('a handed-back batch is delivered again at once; deliveries count towards the dead-letter policy', async () => {
    const { name, id, stream } = await twoEventsWithPolicy('back', 2, 'SKIP_EVENT');
    const headers = { 'X-Broker-StreamId': streamIdOf(stream) };
    const first = await nextData(stream);
    expect(numbers(first)).toEqual([`${name}-0`, `${name}-1`]);
    expect((await call(node.url, 'POST', `/subscriptions/${id}/cursors/hand-back`, { items: [first.cursor] }, headers)).status).toBe(204);
    // Redelivered one event at a time (the policy counts deliveries per event): the second delivery of each.
    const second = await nextData(stream);
    expect(numbers(second)).toEqual([`${name}-0`]);
    const third = await nextData(stream);
    expect(numbers(third)).toEqual([`${name}-1`]);
    expect(await commit(id, stream, third)).toBe(204);
    expect((await call(node.url, 'POST', `/subscriptions/${id}/cursors/hand-back`, { items: [second.cursor] }, headers)).status).toBe(204);
    // Event 0 was delivered twice: skipped by the broker and acknowledged, so the cursor passes both.
    await expect.poll(() => committedOffset(id), { timeout: 10_000 }).toBe(third.cursor.offset);
    // Handing back a batch the stream does not hold is refused.
    expect((await call(node.url, 'POST', `/subscriptions/${id}/cursors/hand-back`, { items: [third.cursor] }, headers)).status).toBe(422);
    stream.close();
  });

  it('with DEAD_LETTER_QUEUE, an event delivered as often as the policy allows is stored in the dead-letter queue and acknowledged', async () => {
    const { name, id, stream } = await twoEventsWithPolicy('dlq', 1, 'DEAD_LETTER_QUEUE');
    const first = await nextData(stream);
    expect((await call(node.url, 'POST', `/subscriptions/${id}/cursors/hand-back`, { items: [first.cursor] }, { 'X-Broker-StreamId': streamIdOf(stream) })).status).toBe(204);
    // Both events were delivered once, the most the policy allows: stored as dead letters, then acknowledged.
    await expect.poll(() => committedOffset(id), { timeout: 10_000 }).toBe(first.cursor.offset);
    const dlq = await createSubscription('broker.dead.letter.queue', {});
    const reader = await open(dlq, 'batch_limit=100&batch_flush_timeout=1');
    const dead: string[] = [];
    while (dead.length < 2) {
      const batch = await nextData(reader);
      for (const e of batch.events ?? []) if (e.subscription_id === id) dead.push(String((e.event as { order_number: string }).order_number));
    }
    expect(dead.sort()).toEqual([`${name}-0`, `${name}-1`]);
    reader.close();
    stream.close();
  });

  it('a node SIGKILLed with batches in flight: they go to a stream on another node after their deadline, nothing lost', async () => {
    const name = `queue.kill.${crypto.randomUUID().slice(0, 8)}`;
    await createEventType(name);
    await publish(name, 6);
    const id = await createSubscription(name);
    const doomed = await startTestBrokerProcess(env);
    const onDoomed = await open(id, 'batch_limit=3&max_uncommitted_events=6&commit_timeout=2', doomed.url);
    const lost = [...numbers(await nextData(onDoomed)), ...numbers(await nextData(onDoomed))];
    expect(lost).toHaveLength(6);
    expect(await doomed.stop('SIGKILL')).toBeNull();
    const survivor = await open(id, 'batch_limit=3&max_uncommitted_events=6');
    const again: string[] = [];
    while (again.length < 6) {
      const batch = await nextData(survivor, 15_000);
      again.push(...numbers(batch));
      expect(await commit(id, survivor, batch)).toBe(204);
    }
    expect(again.sort()).toEqual(lost.sort());
    expect((await stats(id))[0]).toMatchObject({ unconsumed_events: 0, in_flight_events: 0, redelivery_events: 0 });
    survivor.close();
  });

  it('a cursor reset ends the streams and forgets the batches handed out: streams start again from the reset cursors', async () => {
    const name = `queue.reset.${crypto.randomUUID().slice(0, 8)}`;
    await createEventType(name);
    await publish(name, 4);
    const id = await createSubscription(name);
    const stream = await open(id, 'batch_limit=2');
    const held = await nextData(stream);
    expect(numbers(held)).toEqual([`${name}-0`, `${name}-1`]);
    const reset = await call(node.url, 'PATCH', `/subscriptions/${id}/cursors`, { items: [{ event_type: name, partition: '0', offset: held.cursor.offset }] });
    expect(reset.status, reset.text).toBe(204);
    expect((await stream.untilEnd()).at(-1)?.info?.stream_close_reason).toBe('cursors_reset');
    expect((await stats(id))[0]).toMatchObject({ unconsumed_events: 2, in_flight_events: 0, redelivery_events: 0, undelivered_events: 2 });
    const after = await open(id, 'batch_limit=2');
    expect(numbers(await nextData(after))).toEqual([`${name}-2`, `${name}-3`]);
    after.close();
  });
});
