import { brokerError, BrokerError } from '../errors/catalog.js';

/**
 * A counting semaphore with a bounded FIFO queue, per node (docs/operations.md): at most `concurrency`
 * holders at once, at most `queueLength` waiting; one more is refused at once with a 503
 * (`OVERLOADED`, `Retry-After: 1`) before anything was done. The HTTP server runs control-plane work
 * that grows with a request's size (reading and parsing its body, validating its lists, the Redis
 * lookups they fan out to) under one of these, so many large valid requests queue or get 503 instead
 * of adding up to the node's heap limit. No timers: a waiter is woken only by a release.
 */
export class ConcurrencyLimiter {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  /**
   * @param concurrency holders at once (≥ 1; config `http.controlConcurrency`)
   * @param queueLength waiters beyond them (≥ 0; config `http.controlQueueLength`)
   */
  constructor(
    readonly concurrency: number,
    readonly queueLength: number,
  ) {}

  /** Holders now. */
  get running(): number {
    return this.active;
  }

  /** Waiters now. */
  get queued(): number {
    return this.waiting.length;
  }

  /**
   * Takes a slot, waiting in line when all are held.
   * @param signal aborted when the request is gone (its client left): a waiter leaves the line and the
   *   promise rejects with BAD_REQUEST (nobody reads that answer)
   * @returns the release function; call it exactly once (later calls do nothing)
   * @throws BrokerError OVERLOADED (503, `Retry-After: 1`) when the queue is full; BAD_REQUEST when `signal` aborts first
   */
  async acquire(signal?: AbortSignal): Promise<() => void> {
    if (signal?.aborted === true) throw gone();
    if (this.active < this.concurrency) this.active++;
    else if (this.waiting.length < this.queueLength) {
      await new Promise<void>((resolve, reject) => {
        const leave = (): void => {
          const at = this.waiting.indexOf(take);
          if (at >= 0) this.waiting.splice(at, 1);
          reject(gone());
        };
        const take = (): void => {
          signal?.removeEventListener('abort', leave);
          resolve();
        };
        signal?.addEventListener('abort', leave, { once: true });
        this.waiting.push(take);
      });
    } else {
      throw brokerError('OVERLOADED', { active: this.active, waiting: this.waiting.length, concurrency: this.concurrency, queueLength: this.queueLength });
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // The slot passes straight to the next waiter (the count stays), or is freed.
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    };
  }

  /** Runs `work` holding a slot (no abort signal). @throws what {@link acquire} and `work` throw */
  async run<T>(work: () => Promise<T>): Promise<T> {
    const release = await this.acquire();
    try {
      return await work();
    } finally {
      release();
    }
  }
}

/** The rejection of a waiter whose request is gone. */
function gone(): BrokerError {
  return brokerError('BAD_REQUEST', { reason: 'the client left while its request waited for a control-plane slot' });
}
