import { describe, expect, it } from 'vitest';
import { evaluateConsumer, trimSamples, type ConsumerSample, type ConsumerStatus } from '../../src/domain/subscription/consumer-status.js';
import { createLogger } from '../../src/observability/logger.js';
import type { LagSnapshot } from '../../src/observability/meters.js';
import { ConsumerStatusMonitor } from '../../src/services/consumption/consumer-status-monitor.js';
import type { SubscriptionState } from '../../src/storage/subscription-state-store.js';

const WINDOW = 10_000;

/** Samples one second apart from t = 0: `[committed, unconsumed, held]` each. */
function series(points: readonly (readonly [number, number, boolean])[]): ConsumerSample[] {
  return points.map(([committed, unconsumed, held], i) => ({ atMs: i * 1000, committed, unconsumed, held }));
}

/** `n + 1` samples covering `n` seconds, built from the index. */
function over(n: number, f: (i: number) => readonly [number, number, boolean]): ConsumerSample[] {
  return series(Array.from({ length: n + 1 }, (_, i) => f(i)));
}

describe('evaluateConsumer', () => {
  const cases: { name: string; samples: ConsumerSample[]; status: ConsumerStatus; drain: number | undefined }[] = [
    { name: 'no samples', samples: [], status: 'ok', drain: undefined },
    { name: 'caught up, idle', samples: over(12, () => [99, 0, true]), status: 'ok', drain: 0 },
    { name: 'caught up, no stream (nothing waits: not stopped)', samples: over(12, () => [99, 0, false]), status: 'ok', drain: 0 },
    { name: 'keeps up: saw-tooth lag, commits advance', samples: over(12, (i) => [i * 100, i % 2 === 0 ? 40 : 120, true]), status: 'ok', drain: 1 },
    { name: 'lag touched zero within the window', samples: over(12, (i) => [i * 10, i === 7 ? 0 : 50, true]), status: 'ok', drain: 5 },
    { name: 'history shorter than the window: not judged yet', samples: over(8, () => [5, 100, true]), status: 'ok', drain: undefined },
    { name: 'events wait, commits stopped, a stream holds it: stalled', samples: over(12, (i) => [5, 100 + i, true]), status: 'stalled', drain: undefined },
    { name: 'events wait, no stream the whole window: stopped', samples: over(12, (i) => [5, 100 + i, false]), status: 'stopped', drain: undefined },
    { name: 'the stream left mid-window: still stalled until a window without one', samples: over(12, (i) => [5, 100, i < 6]), status: 'stalled', drain: undefined },
    { name: 'commits before the window, none in it: stalled', samples: over(20, (i) => [i < 5 ? i * 10 : 50, 30 + i, true]), status: 'stalled', drain: undefined },
    { name: 'slow consumer: commits advance, lag grows across the window', samples: over(12, (i) => [i * 10, 100 + i * 20, true]), status: 'lagging', drain: 34 },
    { name: 'slow consumer with a commit saw-tooth that still separates the halves', samples: over(12, (i) => [i * 10, 100 + i * 30 - (i % 2) * 20, true]), status: 'lagging', drain: 46 },
    { name: 'lag grows then falls back: ok', samples: over(12, (i) => [i * 10, 100 + (i < 6 ? i : 12 - i) * 20, true]), status: 'ok', drain: 10 },
    { name: 'cursor reset moved the committed offset back: not stalled, no rate', samples: over(12, (i) => [i < 11 ? 500 : 10, 100, true]), status: 'ok', drain: undefined },
  ];
  for (const c of cases) {
    it(c.name, () => {
      expect(evaluateConsumer(c.samples, WINDOW)).toEqual({ status: c.status, drainSeconds: c.drain });
    });
  }

  it('looks only at the window: an old stall followed by steady commits is ok', () => {
    const samples = over(30, (i) => [i < 15 ? 0 : (i - 15) * 100, i % 2 === 0 ? 30 : 60, true]);
    expect(evaluateConsumer(samples, WINDOW).status).toBe('ok');
  });

  it('the drain time grows while a slow consumer falls behind', () => {
    const samples = over(40, (i) => [i * 10, 100 + i * 20, true]);
    const early = evaluateConsumer(samples.slice(0, 15), WINDOW).drainSeconds ?? 0;
    const late = evaluateConsumer(samples, WINDOW).drainSeconds ?? 0;
    expect(late).toBeGreaterThan(early);
  });
});

describe('trimSamples', () => {
  it('keeps the last sample at or before the window start and everything after it', () => {
    const samples = over(30, () => [0, 1, true]);
    trimSamples(samples, WINDOW);
    expect(samples.map((s) => s.atMs)).toEqual(Array.from({ length: 11 }, (_, i) => 20_000 + i * 1000));
  });

  it('keeps a history shorter than the window whole', () => {
    const samples = over(5, () => [0, 1, true]);
    trimSamples(samples, WINDOW);
    expect(samples).toHaveLength(6);
  });
});

describe('ConsumerStatusMonitor', () => {
  const logger = createLogger({ logLevel: 'silent' });
  const lagOf = (subscriptions: { id: string; partition: string; committed: number; unconsumed: number }[]): LagSnapshot => ({
    partitions: [],
    eventTypes: ['e'],
    subscriptionIds: [...new Set(subscriptions.map((s) => s.id))],
    subscriptions: subscriptions.map((s) => ({ subscriptionId: s.id, consumerGroup: 'g', eventType: 'e', partition: s.partition, committed: s.committed, unconsumedEvents: s.unconsumed, lagSeconds: undefined })),
  });
  /** Subscription `a` on partitions 0 and 1, held by a streaming session, partition 1 never committing. */
  const held: SubscriptionState = {
    nowMs: 0,
    version: 1,
    resetRunning: false,
    sessions: [{ id: 's', expiresAt: 1, info: { requested: [], state: 'streaming', node: 'n' } }],
    assignments: ['0', '1'].map((partition) => ({ eventType: 'e', partition, state: 'assigned', session: 's', nextSession: '', assignmentType: 'auto' })),
  };

  it('judges each partition from its samples, keeps at most a window of them, and forgets what ends', async () => {
    let now = 0;
    let snapshot = lagOf([]);
    const monitor = new ConsumerStatusMonitor(() => Promise.resolve(snapshot), { read: () => Promise.resolve(held) }, { windowMs: WINDOW, intervalMs: 1000 }, logger, () => now);
    const samples = (m: ConsumerStatusMonitor): number[] => [...(m as unknown as { histories: Map<string, { samples: unknown[] }> }).histories.values()].map((h) => h.samples.length);
    for (let i = 0; i <= 30; i++) {
      now = i * 1000;
      snapshot = lagOf([
        { id: 'a', partition: '0', committed: i * 10, unconsumed: i % 2 === 0 ? 0 : 5 },
        { id: 'a', partition: '1', committed: 3, unconsumed: 10 + i },
      ]);
      await monitor.sample();
    }
    expect(monitor.verdict('a', 'e', '0')).toMatchObject({ status: 'ok', drainSeconds: 0 });
    expect(monitor.verdict('a', 'e', '1')?.status).toBe('stalled');
    expect(monitor.verdicts().map((v) => `${v.subscriptionId}/${v.partition}:${v.status}`)).toEqual(['a/0:ok', 'a/1:stalled']);
    // Bounded: a window of 10 s sampled every second keeps 11 samples, whatever ran before.
    expect(samples(monitor)).toEqual([11, 11]);

    // A partition or subscription gone from the lag read is dropped at the next round; forget() drops at once.
    snapshot = lagOf([{ id: 'a', partition: '0', committed: 400, unconsumed: 0 }]);
    await monitor.sample();
    expect(monitor.verdict('a', 'e', '1')).toBeUndefined();
    monitor.forget('a');
    expect(monitor.verdicts()).toEqual([]);
  });
});
