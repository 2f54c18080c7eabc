/**
 * The machine's ceiling the publish-batches scenario records beside its ratios (so a missed target can be told from the machine's limit): CPU per
 * event of the node, Redis and the load generator, and the events/s the cores carry at that cost.
 */
import { describe, expect, it } from 'vitest';
import { publishCeiling } from '../../bench/publish-batches.js';

describe('publishCeiling', () => {
  it('divides the CPU of the node, Redis and the load generator by the events, and the cores by that', () => {
    const use = {
      byLabel: { 'broker main thread': 40, 'broker other threads': 80, 'redis-server': 60, 'load generator (bench process)': 20, 'other processes': 50, 'stolen by the hypervisor': 5 },
      seconds: 10,
    };
    // 200 % of a core for 200,000 events/s: 10 µs of CPU per event; 2 cores carry 200,000 events/s, 4 cores 400,000.
    expect(publishCeiling(use, 200_000, 2)).toEqual({ cpuPerEventUs: 10, eventsPerSecond: 200_000 });
    expect(publishCeiling(use, 200_000, 4)?.eventsPerSecond).toBe(400_000);
    // Half the CPU for the same events: twice the ceiling.
    const lighter = { ...use, byLabel: { 'broker main thread': 20, 'broker other threads': 40, 'redis-server': 30, 'load generator (bench process)': 10 } };
    expect(publishCeiling(lighter, 200_000, 2)).toEqual({ cpuPerEventUs: 5, eventsPerSecond: 400_000 });
  });

  it('gives nothing when nothing was measured', () => {
    expect(publishCeiling({ byLabel: {}, seconds: 10 }, 200_000, 2)).toBeUndefined();
    expect(publishCeiling({ byLabel: { 'redis-server': 50 }, seconds: 10 }, 0, 2)).toBeUndefined();
  });
});
