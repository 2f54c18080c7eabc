import type { Logger } from '../observability/logger.js';

/**
 * How long a per-event-type lock of a periodic job (retention, compaction) lasts without renewal:
 * three intervals, at least 5 s (ms). Its holder renews it during a round; another node takes over
 * only once it lapsed.
 * @param intervalMs the job's interval (ms)
 */
export function lockTtlFor(intervalMs: number): number {
  return Math.max(3 * intervalMs, 5000);
}

/**
 * Runs `round` every `intervalMs`, one round at a time (a tick while a round runs is skipped); a
 * failed round is logged at warn and retried at the next tick. The timer does not keep the process
 * alive. Shared by retention and compaction.
 */
export class PeriodicRounds {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;

  /** @param what names the job in the log line of a failed round, e.g. `compaction` */
  constructor(
    private readonly intervalMs: number,
    private readonly round: () => Promise<unknown>,
    private readonly logger: Logger,
    private readonly what: string,
  ) {}

  /** Starts the ticks. */
  start(): void {
    this.timer = setInterval(() => {
      this.running ??= this.round()
        .then(() => undefined)
        .catch((err: unknown) => this.logger.warn({ err }, `${this.what} round failed; retrying next interval`))
        .finally(() => (this.running = undefined));
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Stops the ticks; resolves when a running round finished. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }
}
