import { describe, expect, it } from 'vitest';
import { parseOffset, type ParsedOffset } from '../../src/domain/cursor/offsets.js';
import { legacyTimeline, timelineMapOf, TimelineMap, timelineView, type StoredTimeline } from '../../src/domain/storages/timeline.js';

const at = '2026-11-24T00:00:00.000Z';
const timeline = (order: number, firstOffsets: number[], lastOffsets?: number[], extra: Partial<StoredTimeline> = {}): StoredTimeline => ({
  id: `00000000-0000-4000-8000-00000000000${order}`,
  order,
  storageId: order === 1 ? 'default' : `s${order}`,
  createdAt: at,
  switchedAt: at,
  firstOffsets,
  ...(lastOffsets ? { lastOffsets } : {}),
  ...extra,
});
const parsed = (text: string): ParsedOffset => {
  const p = parseOffset(text);
  if (!p) throw new Error(`malformed ${text}`);
  return p;
};

// Partition 0: 10 events on timeline 1 (0..9), 5 on timeline 2 (10..14), none yet on 3.
// Partition 1: none on timeline 1, 3 on timeline 2 (0..2), timeline 3 active.
// Partition 2: created by repartitioning while timeline 3 was active (starts at 0 there).
const map = new TimelineMap([timeline(1, [], [9, -1]), timeline(2, [10, 0], [14, 2]), timeline(3, [15, 3])]);

describe('TimelineMap', () => {
  it('formats internal offsets with the timeline that holds them, counted from its start', () => {
    expect(map.format('0', -1)).toBe('001-0001--1');
    expect(map.format('0', 0)).toBe('001-0001-000000000000000000');
    expect(map.format('0', 9)).toBe('001-0001-000000000000000009');
    expect(map.format('0', 10)).toBe('001-0002-000000000000000000');
    expect(map.format('0', 14)).toBe('001-0002-000000000000000004');
    expect(map.format('0', 15)).toBe('001-0003-000000000000000000');
    // An unused timeline 1: before anything is its -1; the first event is on timeline 2.
    expect(map.format('1', -1)).toBe('001-0001--1');
    expect(map.format('1', 0)).toBe('001-0002-000000000000000000');
    expect(map.format('1', 2)).toBe('001-0002-000000000000000002');
    // A partition that exists since timeline 3 only.
    expect(map.format('2', -1)).toBe('001-0003--1');
    expect(map.format('2', 4)).toBe('001-0003-000000000000000004');
  });

  it('resolves wire offsets back to internal ones and refuses positions that do not exist', () => {
    const range = { oldest: 0, newest: 16 };
    expect(map.resolve(parsed('001-0001-000000000000000009'), '0', range)).toEqual({ ok: true, offset: 9 });
    expect(map.resolve(parsed('001-0002--1'), '0', range)).toEqual({ ok: true, offset: 9 });
    expect(map.resolve(parsed('001-0002-000000000000000004'), '0', range)).toEqual({ ok: true, offset: 14 });
    expect(map.resolve(parsed('001-0003-000000000000000001'), '0', range)).toEqual({ ok: true, offset: 16 });
    expect(map.resolve(parsed('BEGIN'), '0', { oldest: 4, newest: 16 })).toEqual({ ok: true, offset: 3 });
    expect(map.resolve(parsed('5'), '0', range)).toEqual({ ok: true, offset: 5 });
    expect(map.resolve(parsed('001-0001-000000000000000010'), '0', range)).toMatchObject({ ok: false, reason: 'offset is beyond the end of timeline 1' });
    expect(map.resolve(parsed('001-0004-000000000000000000'), '0', range)).toMatchObject({ ok: false, reason: 'timeline 4 does not exist' });
    expect(map.resolve(parsed('001-0001--1'), '2', { oldest: 0, newest: 4 })).toMatchObject({ ok: false, reason: 'timeline 1 does not exist' });
    expect(map.resolve(parsed('001-0003-000000000000000002'), '0', range)).toMatchObject({ ok: false, reason: 'offset is beyond the newest available offset' });
    expect(map.resolve(parsed('001-0001-000000000000000001'), '0', { oldest: 5, newest: 16 })).toMatchObject({ ok: false, reason: 'offset has expired' });
  });

  it('reads after an offset on the timeline holding the next one', () => {
    expect(map.readAt(0, -1).timeline.order).toBe(1);
    expect(map.readAt(0, 8)).toMatchObject({ timeline: { order: 1 }, end: 9 });
    expect(map.readAt(0, 9)).toMatchObject({ timeline: { order: 2 }, end: 14 });
    expect(map.readAt(0, 14).timeline.order).toBe(3);
    expect(map.readAt(0, 14).end).toBeUndefined();
    expect(map.readAt(1, -1).timeline.order).toBe(2);
    expect(map.readAt(2, -1).timeline.order).toBe(3);
  });

  it('lists the live timelines of a partition: not cleaned up, holding it, and always the active one', () => {
    const cleaned = new TimelineMap([timeline(1, [], [9], { cleanedUpAt: at }), timeline(2, [10])]);
    expect(cleaned.live(0).map((t) => t.order)).toEqual([2]);
    expect(map.live(0).map((t) => t.order)).toEqual([1, 2, 3]);
    expect(map.live(2).map((t) => t.order)).toEqual([3]);
  });

  it('gives event types stored before timelines existed their first timeline on the node storage; refuses orders with gaps', () => {
    const legacy = timelineMapOf(undefined, at);
    expect(legacy.active).toEqual(legacyTimeline(at));
    expect(legacy.format('0', 3)).toBe('001-0001-000000000000000003');
    expect(() => new TimelineMap([])).toThrow();
    expect(() => new TimelineMap([timeline(1, []), timeline(3, [])])).toThrow(/follow/);
  });

  it('serves latest_position counted in the closed timeline (-1 = unused) and a topic naming its keys', () => {
    const [first, second, third] = map.all as [StoredTimeline, StoredTimeline, StoredTimeline];
    expect(timelineView('orders', 'p:', first)).toMatchObject({ order: 1, storage_id: 'default', topic: 'p:{et:orders:*}:t1', latest_position: { offsets: [9, -1] } });
    expect(timelineView('orders', '', second).latest_position).toEqual({ offsets: [4, 2] });
    expect(timelineView('orders', '', third).latest_position).toBeUndefined();
  });
});
