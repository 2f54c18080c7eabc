/**
 * Deadlines for waiting on Redis, so a stalled Redis makes a request fail in bounded time instead of
 * hanging (docs/operations.md "Redis stalls"). Times are
 * `performance.now()` milliseconds (monotonic), never wall-clock time.
 */

/**
 * Resolves with `work`'s value, or with `onTimeout()` once `deadlineAt` passed, whichever comes first.
 * `work` goes on after a timeout (a Redis command already sent may still run); its outcome is then
 * ignored (a later rejection is handled here and dropped).
 * @param deadlineAt `performance.now()` milliseconds; undefined = wait for `work` without a deadline
 * @throws what `work` throws before the deadline, or what `onTimeout` throws
 */
export async function settleBy<T>(work: Promise<T>, deadlineAt: number | undefined, onTimeout: () => T): Promise<T> {
  if (deadlineAt === undefined) return work;
  const [value] = await settleEachBy([work], deadlineAt, onTimeout);
  return value as T;
}

/**
 * {@link settleBy} for several works sharing one deadline, with one timer for all of them (a batch's
 * partition scripts: one timer per batch, not per partition). Each resolves on its own: with its work's
 * value, or with `onTimeout()` once `deadlineAt` passed.
 * @param works the works (a batch's partition writes never reject: each outcome is a value)
 * @param deadlineAt `performance.now()` milliseconds; undefined = wait for every work without a deadline
 * @throws what a work throws before the deadline, or what `onTimeout` throws
 */
export async function settleEachBy<T>(works: readonly Promise<T>[], deadlineAt: number | undefined, onTimeout: () => T): Promise<T[]> {
  if (deadlineAt === undefined) return Promise.all(works);
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, Math.max(0, deadlineAt - performance.now()));
  }).then(onTimeout);
  try {
    return await Promise.all(works.map((work) => Promise.race([work, expired])));
  } finally {
    clearTimeout(timer);
  }
}

/**
 * How long one request may still wait for Redis, over all its Redis steps together (a publish: the
 * event type lookup on a cache miss, opening a storage, the partition scripts, re-reads during a
 * timeline switch). Time spent elsewhere (validation in a worker, the pauses of a timeline-switch wait)
 * does not count. Every request has its own budget, so a request never waits out another's timeout.
 */
export class RedisWaitBudget {
  private spentMs = 0;

  /** @param budgetMs the request's whole allowance in ms (`redis.commandTimeoutMs`, plus `publish.replicaTimeoutMs` when replicas must confirm) */
  constructor(readonly budgetMs: number) {}

  /** Milliseconds left (0 when spent). */
  get remainingMs(): number {
    return Math.max(0, this.budgetMs - this.spentMs);
  }

  /**
   * Waits for `work` at most the remaining budget and counts the time waited as spent.
   * @returns `work`'s value, or `onTimeout()` when the budget ran out first
   * @throws what `work` or `onTimeout` throws
   */
  async wait<T>(work: Promise<T>, onTimeout: () => T): Promise<T> {
    const started = performance.now();
    try {
      return await settleBy(work, started + this.remainingMs, onTimeout);
    } finally {
      this.spentMs += performance.now() - started;
    }
  }

  /**
   * Runs `step` with the absolute deadline (`performance.now()` ms) the remaining budget gives, for steps
   * that settle parts of their work by it themselves (each partition of a batch), and counts the time.
   */
  async within<T>(step: (deadlineAt: number) => Promise<T>): Promise<T> {
    const started = performance.now();
    try {
      return await step(started + this.remainingMs);
    } finally {
      this.spentMs += performance.now() - started;
    }
  }
}
