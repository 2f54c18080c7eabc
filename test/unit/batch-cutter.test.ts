import { describe, expect, it } from 'vitest';
import { timelineMapOf } from '../../src/domain/storages/timeline.js';
import { BatchCutter, type BatchOutput, type BatchRules, type CutPolicy } from '../../src/services/consumption/stream/batch-cutter.js';
import { StreamPartition } from '../../src/services/consumption/stream/stream-partition.js';

// Batch cutting on its own (docs/consuming.md "Stream parameters"): no Redis, no clock —
// times are ms passed to cut(), every partition's first window starts at 0.

const timelines = timelineMapOf(undefined, new Date(0).toISOString());

/** What the cutter handed out: a data batch (its events' `n` and the cursor) or a keep-alive. */
type Cut = { batch: number[]; sent: number; key: string } | { keepAlive: number; key: string };

class Recorder implements BatchOutput {
  cuts: Cut[] = [];
  batch(p: StreamPartition, events: readonly Buffer[], count: number): void {
    const ns = Buffer.concat(events.flatMap((e, i) => (i === 0 ? [e] : [Buffer.from('\n'), e])))
      .toString()
      .split('\n')
      .map((text) => (JSON.parse(text) as { n: number }).n);
    expect(ns).toHaveLength(count);
    this.cuts.push({ batch: ns, sent: p.sent, key: p.key });
  }
  keepAlive(p: StreamPartition): void {
    this.cuts.push({ keepAlive: p.sent, key: p.key });
  }
  take(): Cut[] {
    const cuts = this.cuts;
    this.cuts = [];
    return cuts;
  }
}

/** `stream_limit` as the low-level policy applies it: the allowance is what is left of it. */
class Policy implements CutPolicy {
  sentEvents = 0;
  readonly sentCalls: [string, number][] = [];
  readonly skippedAt: number[] = [];
  perPartition: number | undefined;
  constructor(public streamLimit = 0) {}
  allowance(): number {
    return this.streamLimit === 0 ? Number.POSITIVE_INFINITY : this.streamLimit - this.sentEvents;
  }
  partitionAllowance(): number {
    return this.perPartition ?? Number.POSITIVE_INFINITY;
  }
  sent(p: StreamPartition, count: number): void {
    this.sentEvents += count;
    this.sentCalls.push([p.key, count]);
  }
  skipped(p: StreamPartition): void {
    this.skippedAt.push(p.sent);
  }
}

const rules = (overrides: Partial<BatchRules> = {}): BatchRules => ({
  batchLimit: 10,
  batchFlushTimeoutSeconds: 1,
  batchTimespanSeconds: 0,
  streamKeepAliveLimit: 0,
  ...overrides,
});

function setup(r: Partial<BatchRules> = {}, options: { policy?: Policy; maxBufferBytes?: number; partitions?: string[] } = {}) {
  const policy = options.policy ?? new Policy();
  const partitions = new Map<string, StreamPartition>();
  for (const name of options.partitions ?? ['0']) {
    const p = new StreamPartition({ eventType: 'et', partition: name, timelines, start: -1, now: 0 });
    partitions.set(p.key, p);
  }
  const cutter = new BatchCutter({ rules: rules(r), policy, partitions, maxBufferBytes: options.maxBufferBytes ?? 1 << 20 });
  const out = new Recorder();
  const part = (name = '0'): StreamPartition => {
    const p = partitions.get(`et:${name}`);
    if (!p) throw new Error(`no partition ${name}`);
    return p;
  };
  return { policy, partitions, cutter, out, part };
}

/** Stored text of event `n` (optionally with `metadata.received_at` at `ms` past 2026-01-01). */
const eventText = (n: number, ms?: number): string =>
  JSON.stringify(ms === undefined ? { n } : { n, metadata: { received_at: new Date(Date.UTC(2026, 0, 1) + ms).toISOString() } });

/** Buffers events `from..to` of `p` as one stream entry (events joined by `\n`, as stored). */
function entry(cutter: BatchCutter, p: StreamPartition, from: number, to: number): void {
  const texts: string[] = [];
  for (let n = from; n <= to; n++) texts.push(eventText(n));
  cutter.push(p, { first: from, count: texts.length, data: Buffer.from(texts.join('\n')) });
  p.read = to;
}

describe('BatchCutter: batch_limit and batch_flush_timeout', () => {
  it('cuts full batches of batch_limit at once, before the flush timeout; the rest waits', () => {
    const { cutter, out, part, policy } = setup({ batchLimit: 2 });
    entry(cutter, part(), 0, 4);
    expect(cutter.cut(out, 10, false)).toBe(false);
    expect(out.take()).toEqual([
      { batch: [0, 1], sent: 1, key: 'et:0' },
      { batch: [2, 3], sent: 3, key: 'et:0' },
    ]);
    expect(policy.sentCalls).toEqual([
      ['et:0', 2],
      ['et:0', 2],
    ]);
    // Event 4 is alone in its batch: nothing until the window (restarted by the last batch at 10) ends.
    cutter.cut(out, 1009, false);
    expect(out.take()).toEqual([]);
    cutter.cut(out, 1010, false);
    expect(out.take()).toEqual([{ batch: [4], sent: 4, key: 'et:0' }]);
    expect(part().bufferedEvents).toBe(0);
    expect(cutter.bufferedBytes).toBe(0);
  });

  it('a partial batch goes at the flush timeout, at most batch_limit events of it', () => {
    const { cutter, out, part } = setup({ batchLimit: 3, batchFlushTimeoutSeconds: 2 });
    entry(cutter, part(), 0, 1);
    cutter.cut(out, 1999, false);
    expect(out.take()).toEqual([]);
    cutter.cut(out, 2000, false);
    expect(out.take()).toEqual([{ batch: [0, 1], sent: 1, key: 'et:0' }]);
    expect(cutter.flushDeadline(part())).toBe(4000);
  });

  it('splits a stream entry between batches and keeps the rest buffered with its offsets', () => {
    const { cutter, out, part } = setup({ batchLimit: 2 });
    entry(cutter, part(), 0, 2);
    const before = cutter.bufferedBytes;
    cutter.cut(out, 0, false);
    expect(out.take()).toEqual([{ batch: [0, 1], sent: 1, key: 'et:0' }]);
    expect(part().segments).toHaveLength(1);
    expect(part().segments[0]?.first).toBe(2);
    expect(part().segments[0]?.data.toString()).toBe(eventText(2));
    expect(cutter.bufferedBytes).toBe(part().bufferBytes);
    expect(before - cutter.bufferedBytes).toBe(`${eventText(0)}\n${eventText(1)}\n`.length);
  });

  it('sends everything buffered when final, in batches of batch_limit, with no keep-alive', () => {
    const { cutter, out, part } = setup({ batchLimit: 2, streamKeepAliveLimit: 1 }, { partitions: ['0', '1'] });
    entry(cutter, part('0'), 0, 2);
    expect(cutter.cut(out, 5, true)).toBe(false);
    expect(out.take()).toEqual([
      { batch: [0, 1], sent: 1, key: 'et:0' },
      { batch: [2], sent: 2, key: 'et:0' },
    ]);
  });

  it('leaves an inactive (leaving) partition alone', () => {
    const { cutter, out, part } = setup({ batchLimit: 1 });
    entry(cutter, part(), 0, 1);
    part().active = false;
    cutter.cut(out, 5000, false);
    cutter.cut(out, 5000, true);
    expect(out.take()).toEqual([]);
  });
});

describe('BatchCutter: keep-alives and stream_keep_alive_limit', () => {
  it('sends a keep-alive at the flush timeout when nothing is buffered, then one per window', () => {
    const { cutter, out, part } = setup({ batchFlushTimeoutSeconds: 1 });
    cutter.cut(out, 999, false);
    expect(out.take()).toEqual([]);
    cutter.cut(out, 1000, false);
    expect(out.take()).toEqual([{ keepAlive: -1, key: 'et:0' }]);
    expect(part().keepAlives).toBe(1);
    cutter.cut(out, 1999, false);
    expect(out.take()).toEqual([]);
    cutter.cut(out, 2000, false);
    expect(out.take()).toEqual([{ keepAlive: -1, key: 'et:0' }]);
    expect(part().keepAlives).toBe(2);
  });

  it('ends at stream_keep_alive_limit keep-alives in a row on every partition; a data batch starts the count again', () => {
    const { cutter, out, part } = setup({ batchFlushTimeoutSeconds: 1, streamKeepAliveLimit: 2 }, { partitions: ['0', '1'] });
    expect(cutter.cut(out, 1000, false)).toBe(false);
    entry(cutter, part('1'), 0, 0);
    // Partition 0 reaches the limit; partition 1 sends a batch instead of its second keep-alive.
    expect(cutter.cut(out, 2000, false)).toBe(false);
    expect(part('0').keepAlives).toBe(2);
    expect(part('1').keepAlives).toBe(0);
    expect(cutter.cut(out, 3000, false)).toBe(false);
    expect(cutter.cut(out, 4000, false)).toBe(true);
    expect(out.take().filter((c) => 'keepAlive' in c && c.key === 'et:1')).toHaveLength(3);
  });

  it('never ends on keep-alives when stream_keep_alive_limit is 0', () => {
    const { cutter, out } = setup({ batchFlushTimeoutSeconds: 1, streamKeepAliveLimit: 0 });
    for (let t = 1000; t <= 10_000; t += 1000) expect(cutter.cut(out, t, false)).toBe(false);
    expect(out.take()).toHaveLength(10);
  });
});

describe('BatchCutter: allowance (stream_limit, flow control)', () => {
  it('cuts a batch at what stream_limit still allows at once, then keeps the rest back', () => {
    const policy = new Policy(3);
    const { cutter, out, part } = setup({ batchLimit: 10, streamKeepAliveLimit: 1 }, { policy });
    entry(cutter, part(), 0, 4);
    cutter.cut(out, 0, false);
    expect(out.take()).toEqual([{ batch: [0, 1, 2], sent: 2, key: 'et:0' }]);
    // Allowance 0 with events waiting: the keep-alive at the timeout does not count towards the limit.
    expect(cutter.cut(out, 1000, false)).toBe(false);
    expect(out.take()).toEqual([{ keepAlive: 2, key: 'et:0' }]);
    expect(part().keepAlives).toBe(0);
    expect(part().bufferedEvents).toBe(2);
    cutter.cut(out, 5000, true);
    expect(out.take()).toEqual([]);
  });

  it("a partition's own allowance caps its batches (one event each in dead-letter search)", () => {
    const policy = new Policy();
    policy.perPartition = 1;
    const { cutter, out, part } = setup({ batchLimit: 10 }, { policy });
    entry(cutter, part(), 0, 2);
    cutter.cut(out, 0, false);
    expect(out.take()).toEqual([
      { batch: [0], sent: 0, key: 'et:0' },
      { batch: [1], sent: 1, key: 'et:0' },
      { batch: [2], sent: 2, key: 'et:0' },
    ]);
  });

  it('at the buffer cap a batch under batch_limit goes at once', () => {
    const { cutter, out, part } = setup({ batchLimit: 10 }, { maxBufferBytes: 10 });
    entry(cutter, part(), 0, 1);
    expect(cutter.atCap()).toBe(true);
    expect(cutter.fullBatch(part())).toBe(2);
    cutter.cut(out, 0, false);
    expect(out.take()).toEqual([{ batch: [0, 1], sent: 1, key: 'et:0' }]);
    expect(cutter.atCap()).toBe(false);
  });
});

describe('BatchCutter: batch_timespan', () => {
  it('closes a batch where an event falls more than the timespan after its first', () => {
    const { cutter, out, part } = setup({ batchLimit: 10, batchTimespanSeconds: 1 });
    for (const [n, ms] of [
      [0, 0],
      [1, 1000],
      [2, 1001],
      [3, 1500],
    ] as const) {
      cutter.push(part(), { first: n, count: 1, data: Buffer.from(eventText(n, ms)) });
    }
    cutter.cut(out, 0, false);
    // 0 and 1 (exactly 1 s apart) share a batch; 2 starts the next one, which stays open.
    expect(out.take()).toEqual([{ batch: [0, 1], sent: 1, key: 'et:0' }]);
    expect(cutter.fullBatch(part())).toBe(0);
  });
});

describe('BatchCutter: skipped events', () => {
  it('a batch moves the cursor over the skipped events read behind it', () => {
    const { cutter, out, part } = setup({ batchLimit: 2 });
    cutter.push(part(), { first: 0, count: 1, data: Buffer.from(eventText(0)) });
    cutter.push(part(), { first: 2, count: 1, data: Buffer.from(eventText(2)) });
    cutter.skip(part(), 3);
    cutter.skip(part(), 4);
    cutter.cut(out, 0, false);
    expect(out.take()).toEqual([{ batch: [0, 2], sent: 4, key: 'et:0' }]);
  });

  it('only skipped events since the last batch: the keep-alive carries the cursor past them', () => {
    const { cutter, out, part, policy } = setup({ batchFlushTimeoutSeconds: 1, streamKeepAliveLimit: 1 });
    cutter.skip(part(), 5);
    expect(cutter.cut(out, 1000, false)).toBe(true);
    expect(out.take()).toEqual([{ keepAlive: 5, key: 'et:0' }]);
    expect(policy.skippedAt).toEqual([5]);
    expect(part().skippedThrough).toBe(-1);
  });

  it('clear drops the buffered events and the skipped tail; release stops counting the bytes', () => {
    const { cutter, part } = setup();
    entry(cutter, part(), 0, 3);
    cutter.skip(part(), 4);
    cutter.clear(part());
    expect([part().bufferedEvents, part().bufferBytes, part().skippedThrough, cutter.bufferedBytes]).toEqual([0, 0, -1, 0]);
    entry(cutter, part(), 5, 6);
    cutter.release(part());
    expect(cutter.bufferedBytes).toBe(0);
  });
});
