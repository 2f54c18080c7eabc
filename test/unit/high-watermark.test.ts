import { describe, expect, it } from 'vitest';
import { observeWatermark, readableEntries, readableNext, stallDue, type PartitionCounters } from '../../src/domain/cursor/high-watermark.js';

describe('how far a reader may go (the high watermark)', () => {
  it.each<[string, PartitionCounters, boolean, number]>([
    ['reads that do not wait for replicas go to next', { next: 10, oldest: 0, replicated: 4 }, false, 10],
    ['…whatever the watermark says', { next: 10, oldest: 0 }, false, 10],
    ['reads that wait stop at the watermark', { next: 10, oldest: 0, replicated: 4 }, true, 4],
    ['a watermark at next lets everything through', { next: 10, oldest: 0, replicated: 10 }, true, 10],
    ['never past next (a watermark from another master’s history)', { next: 10, oldest: 0, replicated: 12 }, true, 10],
    ['no watermark yet: nothing is known to be replicated', { next: 10, oldest: 0 }, true, 0],
    ['never below oldest: retention removed what lay below the watermark', { next: 10, oldest: 6, replicated: 4 }, true, 6],
    ['an empty partition', { next: 0, oldest: 0, replicated: 0 }, true, 0],
    ['a new timeline opened at 7 (watermark set at opening)', { next: 7, oldest: 7, replicated: 7 }, true, 7],
  ])('%s', (_, counters, guarded, expected) => {
    expect(readableNext(counters, guarded)).toBe(expected);
  });

  it.each<[string, number[], number, number]>([
    ['every entry ends at or below the watermark', [3, 5, 9], 9, 3],
    ['an entry ending past it stays back, with all after it', [3, 5, 9], 8, 2],
    ['an entry ending exactly at it is readable (its id is the next offset after it)', [3, 5, 9], 5, 2],
    ['nothing readable', [3, 5, 9], 2, 0],
    ['nothing read', [], 4, 0],
    ['no watermark yet', [1], 0, 0],
  ])('entries: %s', (_, ends, readable, expected) => {
    expect(readableEntries(ends, readable)).toBe(expected);
  });
});

describe('when a stalled watermark is confirmed', () => {
  it('keeps no record while nothing lies beyond the watermark', () => {
    expect(observeWatermark(undefined, 5, false, 100)).toBeUndefined();
    expect(observeWatermark({ replicated: 5, since: 0 }, 5, false, 100)).toBeUndefined();
  });

  it('starts the wait when a read first finds events beyond the watermark, and keeps it while the watermark stays put', () => {
    const first = observeWatermark(undefined, 5, true, 100);
    expect(first).toEqual({ replicated: 5, since: 100 });
    expect(observeWatermark(first, 5, true, 900)).toBe(first);
  });

  it('starts again whenever the watermark moved (a steady load never lets one age), also when it went down (a failover)', () => {
    expect(observeWatermark({ replicated: 5, since: 100 }, 8, true, 900)).toEqual({ replicated: 8, since: 900 });
    expect(observeWatermark({ replicated: 5, since: 100 }, 3, true, 900)).toEqual({ replicated: 3, since: 900 });
  });

  it('is due once the watermark stayed put for the delay, not before', () => {
    const stall = { replicated: 5, since: 1000 };
    expect(stallDue(stall, 1000 + 549, 550)).toBe(false);
    expect(stallDue(stall, 1000 + 550, 550)).toBe(true);
  });
});
