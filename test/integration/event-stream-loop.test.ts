import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StreamParameters } from '../../src/domain/stream/stream-parameters.js';
import type { StreamSink } from '../../src/domain/stream/stream-sink.js';
import { streamClose, type StreamClose } from '../../src/domain/stream/stream-close-reason.js';
import { EventStreamLoop, type StreamPartition, type StreamPolicy, type TimelineSource } from '../../src/services/consumption/stream/event-stream.js';
import { NODE_STORAGE_ID } from '../../src/domain/storages/storage.js';
import { timelineMapOf } from '../../src/domain/storages/timeline.js';
import { PartitionLogs } from '../../src/storage/partition-logs.js';
import { StoragePool } from '../../src/storage/storage-pool.js';
import { RedisMemoryWatch } from '../../src/storage/redis/redis-memory.js';
import { PartitionWakeups } from '../../src/storage/partition-wakeups.js';
import { createKeys } from '../../src/storage/keys.js';
import { PartitionStore } from '../../src/storage/partition-store.js';
import { duplicateForShardedSubscribe, type RedisClient } from '../../src/storage/redis/redis-connection.js';
import { Scripts } from '../../src/storage/scripts.js';
import { createLogger } from '../../src/observability/logger.js';
import { loadConfig } from '../../src/config/load-config.js';
import { harnessRedis, uniquePrefix } from '../support/broker.js';

// The batch loop on its own, against the harness Redis: skipping events, batch_timespan, backpressure.
let redis: RedisClient;
let subscriber: RedisClient;
let store: PartitionStore;
let wakeups: PartitionWakeups;
let logs: PartitionLogs;
const keys = createKeys(uniquePrefix());
/** Every event type here has only its first timeline, on the node's storage. */
const timelines = timelineMapOf(undefined, new Date(0).toISOString());
const noChanges: TimelineSource = { get: () => Promise.resolve(undefined), onChange: () => () => undefined };

beforeAll(() => {
  redis = harnessRedis();
  const logger = createLogger({ logLevel: 'silent' });
  subscriber = duplicateForShardedSubscribe(redis, logger);
  wakeups = new PartitionWakeups(subscriber, logger);
  const scripts = new Scripts(redis);
  store = new PartitionStore(redis, scripts, keys);
  // Its memory watch is never started: no master is known, so none is full.
  const memory = new RedisMemoryWatch(redis, NODE_STORAGE_ID, { highWaterPercent: 90, checkIntervalMs: 1000 }, logger);
  const pool = new StoragePool({ node: { id: NODE_STORAGE_ID, redis, scripts, keys, partitions: store, wakeups, memory }, records: { get: () => Promise.resolve(undefined) }, redis: loadConfig({}).redis, logger });
  logs = new PartitionLogs(pool);
});
afterAll(() => {
  wakeups.close();
  redis.disconnect();
});

const params = (overrides: Partial<StreamParameters> = {}): StreamParameters => ({
  batchLimit: 10,
  streamLimit: 0,
  batchFlushTimeoutSeconds: 1,
  batchTimespanSeconds: 0,
  streamTimeoutSeconds: 3,
  streamKeepAliveLimit: 0,
  maxUncommittedEvents: 10,
  commitTimeoutSeconds: 60,
  partitions: [],
  ...overrides,
});

async function append(name: string, events: readonly object[]): Promise<void> {
  const texts = events.map((e) => JSON.stringify(e));
  await store.open(name, timelines.active, '0', 0); // as the registry opens a new event type's partitions (idempotent)
  const [written] = await store.append(name, timelines.active, [{ partition: '0', count: texts.length, data: Buffer.from(texts.join('\n')) }]);
  expect(written?.ok).toBe(true);
}

/** A sink that records lines; `blocked` makes write() report backpressure until `release()`. */
class FakeSink implements StreamSink {
  readonly lines: string[] = [];
  blocked = false;
  writes = 0;
  private waiter: (() => void) | undefined;
  private readonly controller = new AbortController();
  readonly signal = this.controller.signal;
  closed = false;
  bufferedBytes = 0;
  write(chunk: string | Buffer | readonly Buffer[]): boolean {
    this.writes += 1;
    const text = typeof chunk === 'string' || Buffer.isBuffer(chunk) ? chunk.toString() : Buffer.concat(chunk).toString();
    this.lines.push(...text.split('\n').filter((l) => l.length > 0));
    if (this.blocked) this.bufferedBytes += text.length;
    return !this.blocked;
  }
  drained(): Promise<void> {
    if (!this.blocked) return Promise.resolve();
    return new Promise((resolve) => (this.waiter = resolve));
  }
  release(): void {
    this.blocked = false;
    this.bufferedBytes = 0;
    this.waiter?.();
  }
  abort(): void {
    this.closed = true;
    this.controller.abort();
  }
}

class TestPolicy implements StreamPolicy {
  skippedAt: number[] = [];
  constructor(private readonly skip?: (event: string) => boolean) {}
  allowance(): number {
    return Number.POSITIVE_INFINITY;
  }
  endReason(): StreamClose | undefined {
    return undefined;
  }
  sent(_p: StreamPartition, _count: number): void {}
  accept(_p: StreamPartition, event: string): boolean {
    return !(this.skip?.(event) ?? false);
  }
  skipped(p: StreamPartition): void {
    this.skippedAt.push(p.sent);
  }
  readonly debugInfo = false;
  cursor(p: StreamPartition): string {
    return String(p.sent);
  }
}

const config = { maxStreamBufferBytes: 65_536, pollIntervalMs: 100, readEntries: 4, waitForReplicas: true };
type Line = { cursor: number; events?: { n: number }[] };

describe('event stream loop', () => {
  it('leaves skipped events out; the cursor moves past them; a skipped tail moves it at the next flush', async () => {
    await append('loop.skip', [{ n: 0 }, { n: 1, skip: true }, { n: 2 }, { n: 3, skip: true }, { n: 4, skip: true }]);
    const sink = new FakeSink();
    const policy = new TestPolicy((e) => e.includes('"skip":true'));
    const loop = new EventStreamLoop({ params: params({ batchLimit: 2, streamTimeoutSeconds: 2 }), sink, policy: policy, logs, eventTypes: noChanges, config });
    loop.add('loop.skip', '0', timelines, -1);
    await loop.run(false);
    const lines = sink.lines.map((l) => JSON.parse(l) as Line);
    const data = lines.filter((l) => l.events);
    // 0 and 2 make a full batch; its cursor moves over the skipped tail 3..4 already read behind it.
    expect(data).toEqual([{ cursor: 4, events: [{ n: 0 }, { n: 2 }] }]);
    expect(lines.every((l) => l.cursor === 4)).toBe(true);
  });

  it('a tail of skipped events alone moves the cursor with a keep-alive and reports it', async () => {
    await append('loop.tail', [{ n: 0 }]);
    const sink = new FakeSink();
    const policy = new TestPolicy((e) => e.includes('"skip":true'));
    const loop = new EventStreamLoop({ params: params({ batchLimit: 1, streamTimeoutSeconds: 3 }), sink, policy: policy, logs, eventTypes: noChanges, config });
    loop.add('loop.tail', '0', timelines, -1);
    const running = loop.run(false);
    // The tail comes after the first batch went out.
    await expect.poll(() => sink.lines.length, { timeout: 2_000, interval: 10 }).toBeGreaterThan(0);
    await append('loop.tail', [{ n: 1, skip: true }, { n: 2, skip: true }]);
    await running;
    const lines = sink.lines.map((l) => JSON.parse(l) as Line);
    expect(lines[0]).toEqual({ cursor: 0, events: [{ n: 0 }] });
    expect(lines.at(-1)?.cursor).toBe(2);
    expect(policy.skippedAt).toEqual([2]);
  });

  it('batch_timespan closes a batch as soon as an event falls outside the window', async () => {
    const at = (ms: number) => ({ metadata: { received_at: new Date(Date.UTC(2026, 0, 1) + ms).toISOString() } });
    await append('loop.span', [
      { n: 0, ...at(0) },
      { n: 1, ...at(500) },
      { n: 2, ...at(3000) },
    ]);
    const sink = new FakeSink();
    const loop = new EventStreamLoop({ params: params({ batchLimit: 10, batchTimespanSeconds: 1, batchFlushTimeoutSeconds: 2, streamTimeoutSeconds: 2 }), sink, policy: new TestPolicy(), logs, eventTypes: noChanges, config });
    loop.add('loop.span', '0', timelines, -1);
    const started = Date.now();
    const running = loop.run(false);
    while (sink.lines.length === 0 && Date.now() - started < 1500) await new Promise((resolve) => setTimeout(resolve, 10));
    // The first batch (0, 1) went out at once, long before the 2 s flush timeout; 2 waits for more.
    expect(Date.now() - started).toBeLessThan(1000);
    expect((JSON.parse(sink.lines[0] ?? '{}') as Line).events?.map((e) => e.n)).toEqual([0, 1]);
    await running;
    expect(sink.lines.map((l) => (JSON.parse(l) as Line).events?.map((e) => e.n)).filter((e) => e !== undefined)).toEqual([[0, 1], [2]]);
  });

  it('backpressure: while the client does not drain, the loop writes nothing more and reads at most the buffer cap', async () => {
    const big = 'x'.repeat(4000);
    for (let i = 0; i < 50; i++) await append('loop.slow', Array.from({ length: 10 }, (_, j) => ({ n: i * 10 + j, big })));
    const sink = new FakeSink();
    sink.blocked = true;
    const loop = new EventStreamLoop({ params: params({ batchLimit: 10, streamTimeoutSeconds: 3 }), sink, policy: new TestPolicy(), logs, eventTypes: noChanges, config });
    loop.add('loop.slow', '0', timelines, -1);
    const running = loop.run(false);
    // A negative check: the window in which a loop ignoring backpressure would write again and read on.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const writesWhileBlocked = sink.writes;
    const buffered = [...loop.current].reduce((sum, p) => sum + p.bufferBytes, 0);
    expect(writesWhileBlocked).toBe(1);
    // Reading stopped near the cap: one read (readEntries entries of 10 events) past it at most.
    expect(buffered + sink.bufferedBytes).toBeLessThan(config.maxStreamBufferBytes + 4 * 10 * 4100);
    sink.release();
    await running;
    const events = sink.lines.flatMap((l) => (JSON.parse(l) as Line).events ?? []);
    expect(events.map((e) => e.n)).toEqual(Array.from({ length: 500 }, (_, i) => i));
  });

  it('a stream held by flow control sleeps until a commit pokes it: no loop round per millisecond on a stale poll', async () => {
    await append('loop.held', Array.from({ length: 5 }, (_, n) => ({ n })));
    /** max_uncommitted_events 1, never committed: one event goes out, then nothing may. */
    class HeldPolicy extends TestPolicy {
      sentEvents = 0;
      rounds = 0;
      override allowance(): number {
        return this.sentEvents >= 1 ? 0 : 1;
      }
      override sent(_p: StreamPartition, count: number): void {
        this.sentEvents += count;
      }
      override endReason(): StreamClose | undefined {
        this.rounds += 1;
        return undefined;
      }
    }
    const sink = new FakeSink();
    const policy = new HeldPolicy();
    // The poll interval (100 ms) passes many times while the stream waits 2 s for a commit.
    const loop = new EventStreamLoop({ params: params({ batchLimit: 1, maxUncommittedEvents: 1, batchFlushTimeoutSeconds: 1, streamTimeoutSeconds: 2 }), sink, policy, logs, eventTypes: noChanges, config });
    loop.add('loop.held', '0', timelines, -1);
    await loop.run(false);
    const events = sink.lines.flatMap((l) => (JSON.parse(l) as Line).events ?? []);
    expect(events.map((e) => e.n)).toEqual([0]);
    // A round per flush timeout (a keep-alive) and a few around them; the stale poll deadline made it ~2,000.
    expect(policy.rounds).toBeLessThan(50);
  });

  it('a held stream still ends when the policy\'s time runs out (commit_timeout), not at the next flush or poll', async () => {
    await append('loop.timeout', Array.from({ length: 3 }, (_, n) => ({ n })));
    /** One event may go out and is never committed; the commit timeout runs out 500 ms after the start. */
    class TimeoutPolicy extends TestPolicy {
      sentEvents = 0;
      readonly endsAt = performance.now() + 500;
      override allowance(): number {
        return this.sentEvents >= 1 ? 0 : 1;
      }
      override sent(_p: StreamPartition, count: number): void {
        this.sentEvents += count;
      }
      override endReason(): StreamClose | undefined {
        return performance.now() >= this.endsAt ? streamClose('commit_timeout_reached', 'Commit timeout reached') : undefined;
      }
      msUntilEnd(): number {
        return this.endsAt - performance.now();
      }
    }
    const sink = new FakeSink();
    const loop = new EventStreamLoop({ params: params({ batchLimit: 1, maxUncommittedEvents: 1, batchFlushTimeoutSeconds: 30, streamTimeoutSeconds: 10 }), sink, policy: new TimeoutPolicy(), logs, eventTypes: noChanges, config });
    loop.add('loop.timeout', '0', timelines, -1);
    const started = performance.now();
    const end = await loop.run(false);
    expect(end).toEqual({ kind: 'reason', reason: 'commit_timeout_reached', debug: 'Commit timeout reached' });
    // Ends at the timeout (500 ms), long before the 30 s flush timeout or the 10 s stream timeout.
    expect(performance.now() - started).toBeLessThan(3000);
  });
});
