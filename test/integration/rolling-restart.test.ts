import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { DeliveryChecker } from '../support/delivery-checker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';

// A rolling restart (docs/operations.md "Rolling restarts and upgrades"): restart the three nodes one by
// one (SIGTERM, wait for exit, start a new process on the same key prefix, wait for /health) under
// continuous publish and consume load. Producers and consumers behave like clients behind a load
// balancer: a 503 (draining node) or a connection error sends them to another node. Only events answered 200 count as acknowledged; at the end every one of
// them was delivered at least once, and every partition was streamed and committed up to its newest offset.

const PARTITIONS = 6;
const PRODUCERS = 3;
const CONSUMERS = 3;
const BATCH_EVENTS = 10;
const EVENT_TYPE = 'rolling.restart';
const ENV = {
  BROKER_SUBSCRIPTIONS_LEASE_TTL_MS: '3000',
  BROKER_CONSUMPTION_POLL_INTERVAL_MS: '200',
  BROKER_HTTP_SHUTDOWN_GRACE_MS: '5000',
};

/** The three node slots; a restart replaces a slot's node. Clients read the URLs at each attempt. */
const slots: TestBroker[] = [];
const retired: TestBroker[] = [];
let prefix = '';

beforeAll(async () => {
  const first = await startTestBroker(ENV);
  prefix = first.prefix;
  slots.push(first, ...(await Promise.all([startTestBroker({ ...ENV, BROKER_REDIS_KEY_PREFIX: prefix }), startTestBroker({ ...ENV, BROKER_REDIS_KEY_PREFIX: prefix })])));
});
afterAll(async () => {
  await Promise.all([...slots, ...retired].map((b) => b.stop()));
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const urlOf = (i: number): string => slots[i % slots.length]?.url ?? '';
const offsetNumber = (offset: string): number => Number(offset.slice(offset.lastIndexOf('-') + 1));

/** Problems the load loops met (anything but 200/207/503/connection errors); the test fails on any. */
const problems: string[] = [];

interface Counts {
  published: number;
  acknowledged: number;
  /** Requests sent again to another node: after a 503, or after a connection error. */
  retriedAfter503: number;
  retriedAfterConnectionError: number;
  deliveredEvents: number;
  commits: number;
  streamsOpened: number;
}
const counts: Counts = { published: 0, acknowledged: 0, retriedAfter503: 0, retriedAfterConnectionError: 0, deliveredEvents: 0, commits: 0, streamsOpened: 0 };

/**
 * POSTs `body` to node `start`, then the next nodes, until one answers; connection errors and 503
 * move on to the next node after a short pause.
 * @returns the answer, or undefined when `stopped()` turned true first
 */
async function send(start: number, path: string, body: unknown, headers: Record<string, string> = {}, stopped: () => boolean = () => false): Promise<{ status: number; json: unknown } | undefined> {
  for (let attempt = 0; !stopped(); attempt++) {
    try {
      const answer = await call(urlOf(start + attempt), 'POST', path, body, headers);
      if (answer.status !== 503) return answer;
      counts.retriedAfter503++;
    } catch {
      // connection refused or reset: the node is gone or going
      counts.retriedAfterConnectionError++;
    }
    if (attempt > 300) {
      problems.push(`${path}: no node answered in ${attempt} attempts`);
      return undefined;
    }
    await sleep(20);
  }
  return undefined;
}

/** Publishes batches until `stop()`; a batch is retried on other nodes until answered (200, or 207 for its failed items). */
async function produce(checker: DeliveryChecker, producer: number, stop: () => boolean): Promise<void> {
  for (let batchNumber = 0; !stop(); batchNumber++) {
    let events = Array.from({ length: BATCH_EVENTS }, (_, i) => orderEvent(`p${producer}-${batchNumber}-${i}`));
    counts.published += events.length;
    while (events.length > 0) {
      const answer = await send(producer + batchNumber, `/event-types/${EVENT_TYPE}/events`, events);
      if (!answer) return;
      const eids = events.map((e) => (e.metadata as { eid: string }).eid);
      if (answer.status === 200) {
        checker.submitted(eids);
        counts.acknowledged += eids.length;
        events = [];
      } else if (answer.status === 207) {
        const items = answer.json as { eid: string; publishing_status: string }[];
        const submitted = new Set(items.filter((item) => item.publishing_status === 'submitted').map((item) => item.eid));
        checker.submitted([...submitted]);
        counts.acknowledged += submitted.size;
        events = events.filter((e) => !submitted.has((e.metadata as { eid: string }).eid));
      } else {
        problems.push(`publish answered ${answer.status}: ${JSON.stringify(answer.json)}`);
        return;
      }
    }
    await sleep(15); // pacing: the publishing rate, not a wait for anything
  }
}

/** Newest delivered offset per partition, over every stream. */
const deliveredUpTo = new Map<string, number>();
/** Every event id delivered, acknowledged or not (a publish whose answer was lost may still be stored). */
const deliveredEids = new Set<string>();
/** Every `partition:offset` delivered. */
const deliveredOffsets = new Set<string>();
/** What each consumer's streams did (seconds since the module loaded), printed when the drain times out. */
const streamHistory: string[] = [];
const loaded = Date.now();
const note = (line: string): void => {
  streamHistory.push(`${((Date.now() - loaded) / 1000).toFixed(2)} ${line}`);
};

/**
 * One consumer: opens a subscription stream on a node, feeds the checker, commits what it got every
 * 100 ms; when the stream ends or cannot open, commits what is pending and reconnects to the next node.
 */
async function consume(checker: DeliveryChecker, subscriptionId: string, consumer: number, stop: () => boolean): Promise<void> {
  for (let attempt = consumer; !stop(); attempt++) {
    let stream: StreamClient;
    const node = attempt;
    try {
      stream = await StreamClient.open(`${urlOf(node)}/subscriptions/${subscriptionId}/events?batch_limit=50&batch_flush_timeout=1&max_uncommitted_events=5000`);
    } catch {
      await sleep(50);
      continue;
    }
    note(`consumer ${consumer} node ${node % 3}: ${stream.status} ${stream.headers.get('x-broker-streamid') ?? ''}`);
    if (stream.status !== 200) {
      // 503 draining, or 409 while the partitions of a released stream are still being handed over
      if (stream.status !== 503 && stream.status !== 409) problems.push(`stream answered ${stream.status}: ${JSON.stringify(stream.problem)}`);
      await sleep(100);
      continue;
    }
    counts.streamsOpened++;
    const streamId = stream.headers.get('x-broker-streamid') ?? '';
    const pending = new Map<string, StreamBatch['cursor']>();
    const commit = async (): Promise<void> => {
      if (pending.size === 0) return;
      const items = [...pending.values()];
      pending.clear();
      const answer = await send(node, `/subscriptions/${subscriptionId}/cursors`, { items }, { 'X-Broker-StreamId': streamId });
      if (answer?.status === 204 || answer?.status === 200) checker.committed(streamId, items, performance.now());
      counts.commits++;
      // 422: the session is gone (its node stopped, or the partition moved); the new owner redelivers.
      if (answer && answer.status !== 204 && answer.status !== 200 && answer.status !== 422) problems.push(`commit answered ${answer.status}: ${JSON.stringify(answer.json)}`);
    };
    let committing = Promise.resolve();
    let lastCommit = Date.now();
    try {
      for (;;) {
        if (stop()) {
          stream.close();
          break;
        }
        const batch = await stream.next(5000);
        if (!batch) break;
        if (batch.events && batch.events.length > 0) {
          checker.batch(streamId, batch, stream.arrivedAt(batch));
          counts.deliveredEvents += batch.events.length;
          for (const event of batch.events) deliveredEids.add((event.metadata as { eid: string }).eid);
          const lastOffset = offsetNumber(batch.cursor.offset);
          for (let o = lastOffset - batch.events.length + 1; o <= lastOffset; o++) deliveredOffsets.add(`${batch.cursor.partition}:${o}`);
          const key = batch.cursor.partition;
          deliveredUpTo.set(key, Math.max(deliveredUpTo.get(key) ?? -1, offsetNumber(batch.cursor.offset)));
          pending.set(key, batch.cursor);
        }
        if (Date.now() - lastCommit >= 100) {
          lastCommit = Date.now();
          await committing;
          committing = commit();
        }
      }
      note(`consumer ${consumer} node ${node % 3}: stream ${streamId} ended`);
    } catch (err) {
      note(`consumer ${consumer} node ${node % 3}: stream ${streamId} failed: ${String(err)}`);
      stream.close(); // nothing within 5 s: treat as a lost stream
    }
    await committing;
    await commit();
  }
}

/** SIGTERM the node in slot `i`, wait for its exit, start a new node on the same prefix, wait for /health. */
async function restart(i: number): Promise<{ stopMs: number; startMs: number }> {
  const old = slots[i] as TestBroker;
  const started = Date.now();
  const code = await old.stop('SIGTERM');
  retired.push(old);
  expect(code, old.output()).toBe(0);
  const stopMs = Date.now() - started;
  const fresh = await startTestBroker({ ...ENV, BROKER_REDIS_KEY_PREFIX: prefix });
  for (;;) {
    const health = await fetch(`${fresh.url}/health`).catch(() => undefined);
    if (health?.status === 200) break;
    await sleep(50);
  }
  slots[i] = fresh;
  note(`node ${i} restarted`);
  return { stopMs, startMs: Date.now() - started - stopMs };
}

interface PartitionStats {
  partition: string;
  state: string;
  unconsumed_events?: number;
  stream_id?: string;
}

async function stats(subscriptionId: string): Promise<PartitionStats[]> {
  const answer = await call(urlOf(0), 'GET', `/subscriptions/${subscriptionId}/stats`);
  expect(answer.status).toBe(200);
  return (answer.json as { items: { partitions: PartitionStats[] }[] }).items.flatMap((item) => item.partitions);
}

describe('rolling restart', () => {
  it(
    'restarts the three nodes one by one under publish and consume load: no acknowledged event lost, every partition streamed to its newest offset',
    async () => {
      const created = await call(
        urlOf(0),
        'POST',
        '/event-types',
        businessEventType(EVENT_TYPE, { default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: PARTITIONS, write_parallelism: PARTITIONS } }),
      );
      expect(created.status).toBe(201);
      const subscription = await call(urlOf(1), 'POST', '/subscriptions', { owning_application: 'rolling', event_types: [EVENT_TYPE], read_from: 'begin' });
      expect(subscription.status).toBe(201);
      const id = (subscription.json as { id: string }).id;

      const checker = new DeliveryChecker();
      let producing = true;
      let consuming = true;
      const producers = Array.from({ length: PRODUCERS }, (_, p) => produce(checker, p, () => !producing));
      const consumers = Array.from({ length: CONSUMERS }, (_, c) => consume(checker, id, c, () => !consuming));

      const began = Date.now();
      await sleep(2500); // load before the first restart
      const restarts: { stopMs: number; startMs: number }[] = [];
      for (let i = 0; i < slots.length; i++) {
        restarts.push(await restart(i));
        await sleep(2000); // load on the new topology before the next restart
      }
      producing = false;
      await Promise.all(producers);
      const loadMs = Date.now() - began;

      // Consumers catch up and commit: every acknowledged event delivered, nothing left unconsumed.
      const drainStarted = Date.now();
      let last: PartitionStats[] = [];
      for (;;) {
        last = await stats(id);
        const caughtUp = last.length === PARTITIONS && last.every((p) => p.unconsumed_events === 0) && checker.report().length === 0;
        if (caughtUp || Date.now() - drainStarted > 20_000) break;
        await sleep(200);
      }
      consuming = false;
      await Promise.all(consumers);

      const partitions = ((await call(urlOf(2), 'GET', `/event-types/${EVENT_TYPE}/partitions`)).json as { partition: string; newest_available_offset: string }[]).sort((x, y) => Number(x.partition) - Number(y.partition));
      const stored = partitions.reduce((sum, p) => sum + offsetNumber(p.newest_available_offset) + 1, 0);
      const summary = {
        ...counts,
        stored,
        acknowledgedDelivered: checker.deliveredCount,
        distinctDelivered: deliveredEids.size,
        duplicates: counts.deliveredEvents - deliveredOffsets.size,
        staleDeliveries: checker.staleDeliveries(),
        loadSeconds: loadMs / 1000,
        drainSeconds: (Date.now() - drainStarted) / 1000,
        restarts,
        // Diagnostics when the drain timed out: each partition's state and stream, and the consumers' stream history.
        ...(last.every((p) => p.unconsumed_events === 0) ? {} : { partitionsAtEnd: last, streamHistory }),
      };
      console.log(`rolling restart: ${JSON.stringify(summary)}`);

      expect(problems).toEqual([]);
      expect(checker.report()).toEqual([]);
      // A stopping node writes (or drops) a stream's last batch before the stream's
      // partitions move; no batch reaches a client after its partition's next holder committed past it.
      expect(checker.staleDeliveries()).toEqual([]);
      expect(counts.acknowledged).toBeGreaterThan(500);
      expect(checker.deliveredCount).toBe(counts.acknowledged);
      // Stored at least everything acknowledged (retries after a lost answer may store a batch twice).
      expect(stored).toBeGreaterThanOrEqual(counts.acknowledged);
      // Every partition streamed up to its newest offset and committed there.
      expect(partitions.map((p) => [p.partition, deliveredUpTo.get(p.partition)])).toEqual(partitions.map((p) => [p.partition, offsetNumber(p.newest_available_offset)]));
      expect(last.map((p) => [p.partition, p.unconsumed_events]).sort()).toEqual(partitions.map((p) => [p.partition, 0]));
      // Every stored offset of every partition was delivered (acknowledged events, and any stored from a batch whose answer was lost).
      expect(deliveredOffsets.size).toBe(stored);
    },
    60_000,
  );
});
