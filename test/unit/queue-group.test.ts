import { afterEach, describe, expect, it } from 'vitest';
import { timelineMapOf } from '../../src/domain/storages/timeline.js';
import { QueueGroup } from '../../src/services/consumption/queue/queue-group.js';
import type { PartitionLogs } from '../../src/storage/partition-logs.js';
import type { EventSegment, PartitionSlice } from '../../src/storage/partition-store.js';
import { createLogger } from '../../src/observability/logger.js';

// The stored events a node's queue-mode streams of one subscription share (docs/architecture.md
// "4.5 Queue mode state"): batches are cut from cached stream entries, a read in flight is awaited rather
// than repeated, and events retention removed are skipped. The partition log here is a fake that reads
// like `PartitionStore.read` (entries of several events joined by "\n", the first one cut at the offset
// asked for), so the test can count the reads.

/** One partition's stream entries: `[first, count]`, each event's text `e<offset>`. */
const ENTRIES: readonly (readonly [number, number])[] = [
  [5, 5],
  [10, 5],
  [15, 10],
  [25, 1],
];

class FakeLogs implements Pick<PartitionLogs, 'ranges' | 'notices' | 'read'> {
  reads = 0;
  /** Set to hold every read until released. */
  gate: Promise<void> | undefined;

  ranges(): Promise<{ oldest: number; newest: number }[]> {
    return Promise.resolve([{ oldest: 5, newest: 25 }]);
  }

  notices(): ReturnType<PartitionLogs['notices']> {
    return Promise.resolve({ wakeups: { live: () => true, listen: () => () => undefined }, channel: 'notices', order: 1 });
  }

  async read(_name: string, _timelines: unknown, _partition: string, after: number, maxEntries: number): Promise<PartitionSlice> {
    this.reads++;
    await this.gate;
    const segments: EventSegment[] = [];
    for (const [first, count] of ENTRIES) {
      if (segments.length >= maxEntries) break;
      const end = first + count;
      if (end <= after + 1) continue;
      const from = Math.max(first, after + 1);
      const texts = Array.from({ length: end - from }, (_, i) => `e${from + i}`);
      segments.push({ first: from, count: end - from, data: Buffer.from(texts.join('\n')) });
    }
    return { segments, more: false };
  }
}

const FIELD = 'orders:0';
let group: QueueGroup | undefined;

function groupOn(logs: FakeLogs): QueueGroup {
  group = new QueueGroup([{ eventType: 'orders', partition: '0', timelines: timelineMapOf(undefined, new Date(0).toISOString()) }], logs, { get: () => Promise.resolve(undefined) }, createLogger({ logLevel: 'silent' }), 60_000);
  return group;
}

afterEach(() => group?.close());

/** The texts of the events a read gave, in order. */
const texts = (slices: readonly Buffer[]): string[] => slices.flatMap((s) => s.toString().split('\n'));

describe('QueueGroup', () => {
  it('cuts a batch across stream entries and from the middle of one, and a second batch from the cache', async () => {
    const logs = new FakeLogs();
    const g = groupOn(logs);
    await g.ready;
    const first = await g.read(FIELD, 7, 17);
    expect(texts(first.slices)).toEqual(['e7', 'e8', 'e9', 'e10', 'e11', 'e12', 'e13', 'e14', 'e15', 'e16', 'e17']);
    expect(first.count).toBe(11);
    const reads = logs.reads;
    const second = await g.read(FIELD, 18, 24);
    expect(texts(second.slices)).toEqual(['e18', 'e19', 'e20', 'e21', 'e22', 'e23', 'e24']);
    expect(logs.reads).toBe(reads);
  });

  it('awaits a read another stream has in flight instead of reading the entries again', async () => {
    const logs = new FakeLogs();
    const g = groupOn(logs);
    await g.ready;
    let release: () => void = () => undefined;
    logs.gate = new Promise<void>((resolve) => (release = resolve));
    const a = g.read(FIELD, 10, 12);
    const b = g.read(FIELD, 13, 14);
    release();
    const [x, y] = await Promise.all([a, b]);
    expect(texts(x.slices)).toEqual(['e10', 'e11', 'e12']);
    expect(texts(y.slices)).toEqual(['e13', 'e14']);
    expect(logs.reads).toBe(1);
  });

  it('skips events retention removed: a batch starting before the oldest kept event carries what is left', async () => {
    const g = groupOn(new FakeLogs());
    await g.ready;
    const read = await g.read(FIELD, 2, 6);
    expect(texts(read.slices)).toEqual(['e5', 'e6']);
    expect(read.count).toBe(2);
    const gone = await g.read(FIELD, 0, 3);
    expect(gone.count).toBe(0);
  });

  it('knows the newest offset of each partition once ready', async () => {
    const g = groupOn(new FakeLogs());
    await g.ready;
    expect(g.newest()).toEqual(new Map([[FIELD, 25]]));
  });
});
