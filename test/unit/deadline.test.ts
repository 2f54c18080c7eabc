/**
 * Deadlines for waiting on Redis: `settleEachBy` lets each work resolve on its own and
 * reports the ones still pending at the deadline as timed out, with one timer for all (fake timers here).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { settleEachBy } from '../../src/util/deadline.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('settleEachBy', () => {
  it('keeps what answered before the deadline and times out the rest, with one timer', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    let answerLate: (value: string) => void = () => undefined;
    const late = new Promise<string>((resolve) => (answerLate = resolve));
    const settled = settleEachBy([Promise.resolve('a'), late, Promise.resolve('c')], performance.now() + 100, () => 'timed out');
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(100);
    await expect(settled).resolves.toEqual(['a', 'timed out', 'c']);
    answerLate('b'); // too late: ignored
    expect(vi.getTimerCount()).toBe(0);
  });

  it('clears its timer once every work answered in time', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const settled = settleEachBy([Promise.resolve(1), Promise.resolve(2)], performance.now() + 5_000, () => 0);
    await expect(settled).resolves.toEqual([1, 2]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('waits for every work without a deadline', async () => {
    await expect(settleEachBy([Promise.resolve('x')], undefined, () => 'never')).resolves.toEqual(['x']);
  });
});
