import type { CancelTimer, Clock } from '../../src/services/consumption/clock.js';

interface FakeTimer {
  readonly id: number;
  at: number;
  readonly every: number | undefined;
  readonly callback: () => void;
}

/** Lets every promise chain that waits on nothing but other promises settle (a few macrotask turns). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

/**
 * A hand-driven {@link Clock} for unit tests: time starts at 0 and moves only with {@link advance}, which
 * fires the timers that fall due in time order (each at its own time) and lets what they started settle.
 */
export class FakeClock implements Clock {
  private time = 0;
  private nextId = 1;
  private readonly timers = new Map<number, FakeTimer>();

  now(): number {
    return this.time;
  }

  setTimeout(callback: () => void, ms: number): CancelTimer {
    return this.add(callback, ms, undefined);
  }

  setInterval(callback: () => void, ms: number): CancelTimer {
    return this.add(callback, ms, Math.max(1, ms));
  }

  /** Timers set and neither fired (one-shot) nor cancelled. */
  get pending(): number {
    return this.timers.size;
  }

  /** Moves the time `ms` forward, firing due timers in order and settling after each. */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    for (;;) {
      let next: FakeTimer | undefined;
      for (const t of this.timers.values()) if (t.at <= end && (next === undefined || t.at < next.at)) next = t;
      if (next === undefined) break;
      this.time = next.at;
      if (next.every === undefined) this.timers.delete(next.id);
      else next.at += next.every;
      next.callback();
      await settle();
    }
    this.time = end;
    await settle();
  }

  private add(callback: () => void, ms: number, every: number | undefined): CancelTimer {
    const id = this.nextId++;
    this.timers.set(id, { id, at: this.time + Math.max(0, ms), every, callback });
    return () => {
      this.timers.delete(id);
    };
  }
}
