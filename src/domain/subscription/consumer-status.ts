/**
 * The verdict on a subscription's consumer on one partition (docs/consuming.md "Consumer status"):
 * `ok` — nothing waits, or the consumer keeps up; `lagging` — commits advance but the lag grows;
 * `stalled` — events wait and commits stopped while a stream holds the partition; `stopped` — events
 * wait and no stream holds the partition.
 */
export type ConsumerStatus = (typeof CONSUMER_STATUSES)[number];

/** Every consumer status, in order of severity (the label values of `broker_subscription_consumer_status`). */
export const CONSUMER_STATUSES = ['ok', 'lagging', 'stalled', 'stopped'] as const;

/** One observation of a subscription's position on a partition. */
export interface ConsumerSample {
  /** When it was taken (ms, any monotonic clock shared by the samples of one partition). */
  readonly atMs: number;
  /** The committed offset (-1 = nothing consumed yet). */
  readonly committed: number;
  /** Events after the committed offset up to the newest, those removed by retention left out (`unconsumed_events`). */
  readonly unconsumed: number;
  /** Whether a live stream held the partition (queue mode: whether any live stream reads the subscription). */
  readonly held: boolean;
}

/** The evaluation of one partition's samples. */
export interface ConsumerVerdict {
  readonly status: ConsumerStatus;
  /**
   * Seconds until the events waiting now are consumed at the recent consumption rate (whole seconds,
   * rounded up; 0 when nothing waits); undefined when no consumption was seen to compute a rate from.
   */
  readonly drainSeconds: number | undefined;
}

/**
 * Evaluates a partition's consumer over a sliding window of samples, Burrow-like (docs/consuming.md
 * "Consumer status"). Pure: the same samples give the same verdict. `samples` are oldest first; the
 * window is the last sample taken at or before `windowMs` before the newest one, and every sample after it.
 *
 * 1. Nothing waits in the newest sample, or in any sample of the window: `ok`.
 * 2. The samples do not cover the window yet (a partition seen for less than `windowMs`): `ok`.
 * 3. No stream held the partition in any sample of the window: `stopped`.
 * 4. The committed offset did not move over the window: `stalled`.
 * 5. The lag grows: split in thirds by time, every lag of each third is above every lag of the third
 *    before it (the saw-tooth of a consumer that keeps up does not order the thirds): `lagging`.
 * 6. Otherwise `ok`.
 *
 * `drainSeconds` is the newest lag divided by the commit rate over the window (over what there is when
 * the samples cover less): undefined when that rate is not positive.
 * @param windowMs the window's length (ms, > 0)
 */
export function evaluateConsumer(samples: readonly ConsumerSample[], windowMs: number): ConsumerVerdict {
  const last = samples[samples.length - 1];
  if (last === undefined) return { status: 'ok', drainSeconds: undefined };
  const start = windowStart(samples, last.atMs - windowMs);
  const window = samples.slice(start);
  const first = window[0] ?? last;
  const drainSeconds = drainTime(first, last);
  if (window.some((s) => s.unconsumed === 0)) return { status: 'ok', drainSeconds };
  if (first.atMs > last.atMs - windowMs) return { status: 'ok', drainSeconds };
  if (!window.some((s) => s.held)) return { status: 'stopped', drainSeconds };
  if (last.committed === first.committed) return { status: 'stalled', drainSeconds };
  return { status: lagGrows(window, first.atMs, last.atMs) ? 'lagging' : 'ok', drainSeconds };
}

/**
 * Whether the lag grows across the window: split in thirds by time, every lag of a later third is above
 * every lag of the third before it. A consumer that keeps up has a lag that moves up and down with its
 * commits; for its samples to order themselves so by chance is rare (about 1 in 35,000 evaluations with
 * 12 samples of independent lags), while a lag that grows by more than a commit's saw-tooth per third does.
 */
function lagGrows(window: readonly ConsumerSample[], fromMs: number, toMs: number): boolean {
  const third = (toMs - fromMs) / 3;
  const min = [Infinity, Infinity, Infinity];
  const max = [-Infinity, -Infinity, -Infinity];
  for (const s of window) {
    const i = Math.min(2, Math.floor((s.atMs - fromMs) / third));
    min[i] = Math.min(min[i] as number, s.unconsumed);
    max[i] = Math.max(max[i] as number, s.unconsumed);
  }
  return (min[1] as number) > (max[0] as number) && (min[2] as number) > (max[1] as number);
}

/** Index of the last sample taken at or before `fromMs` (0 when none is). */
function windowStart(samples: readonly ConsumerSample[], fromMs: number): number {
  for (let i = samples.length - 1; i >= 0; i--) if ((samples[i] as ConsumerSample).atMs <= fromMs) return i;
  return 0;
}

/** The newest lag ÷ the commit rate from `first` to `last` (whole seconds, rounded up); 0 when nothing waits. */
function drainTime(first: ConsumerSample, last: ConsumerSample): number | undefined {
  if (last.unconsumed === 0) return 0;
  const seconds = (last.atMs - first.atMs) / 1000;
  const consumed = last.committed - first.committed;
  if (seconds <= 0 || consumed <= 0) return undefined;
  return Math.ceil(last.unconsumed / (consumed / seconds));
}

/**
 * Drops the samples no longer needed for a window of `windowMs` ending at the newest one: everything
 * before the last sample at or before the window's start. Keeps a partition's history bounded by
 * `windowMs ÷ sampling interval + 2` samples.
 */
export function trimSamples(samples: ConsumerSample[], windowMs: number): void {
  const last = samples[samples.length - 1];
  if (last === undefined) return;
  const start = windowStart(samples, last.atMs - windowMs);
  if (start > 0) samples.splice(0, start);
}
