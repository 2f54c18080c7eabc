import { brokerError, BrokerError } from '../errors/catalog.js';
import type { PublishRefusalReason } from '../observability/meters.js';

/**
 * The second bound of publish admission: the worker threads' queue delay (docs/decisions/0028-publish-admission-by-queue-delay.md).
 */
export interface QueueDelayBound {
  /** Most ms the oldest task waiting for a worker thread may have waited for a publish to be admitted (config `http.publishMaxQueueDelayMs`, ≥ 1). */
  readonly maxMs: number;
  /** Bodies declaring at most this many bytes are not held to it (config `publish.inlineMaxBytes`: such batches are validated on the main thread). */
  readonly exemptBytes: number;
  /** The queue delay now, ms (`WorkerPool.queueDelayMs`). */
  readonly read: () => number;
  /**
   * The bound applies only while at least this many publishes are in flight (config
   * `http.publishQueueDelayMinInFlight`; default 1: whenever another is): a few producers are never
   * refused for a slow moment of the threads (a cold start), since refusing them would only idle the node.
   */
  readonly minInFlight?: number;
}

/**
 * Bounded admission of publishing, per node (docs/publishing.md "Refusals and deadlines";
 * docs/decisions/0025-publish-admission-by-bytes-in-flight.md): the bytes of the publish bodies this
 * node holds — from admission, before the body is read, until the answer — stay within
 * `http.publishMaxInFlightBytes`. A publish that would pass it is refused at once with 503
 * (`PUBLISH_OVERLOADED`, `Retry-After: 1`): no queue, no timer, so a refusal costs a counter check and
 * the problem's few hundred bytes, and the work already admitted keeps the CPU and memory it needs.
 * With a {@link QueueDelayBound}, a publish is also refused (`PUBLISH_QUEUE_DELAYED`) while the oldest
 * task waiting for a worker thread has waited longer than `http.publishMaxQueueDelayMs`
 * (docs/decisions/0028-publish-admission-by-queue-delay.md): the bytes bound caps memory, the delay bound
 * the time an admitted batch waits, whatever its events cost to validate and whatever else uses the cores.
 * One publish is always admitted when none is in flight, so a body larger than the bound (up to
 * `http.maxBodyBytes`) still gets through on an idle node. A refusal's `Retry-After` is the
 * {@link RetryAfterEstimate}'s: 1 s while few producers wait, longer as more do.
 */
export class PublishAdmission {
  private held = 0;
  private holders = 0;
  private readonly retryAfter: RetryAfterEstimate;

  /**
   * @param limitBytes the bound in bytes (config `http.publishMaxInFlightBytes`, ≥ 1)
   * @param queueDelay the bound on the worker threads' queue delay; none when absent
   * @param clock ms on a monotonic clock, for the `Retry-After` estimate (`performance.now` by default)
   */
  constructor(
    readonly limitBytes: number,
    private readonly queueDelay?: QueueDelayBound,
    clock: () => number = () => performance.now(),
  ) {
    this.retryAfter = new RetryAfterEstimate(clock);
  }

  /** Bytes held by admitted publishes now. */
  get bytesInFlight(): number {
    return this.held;
  }

  /** Admitted publishes not yet answered. */
  get inFlight(): number {
    return this.holders;
  }

  /**
   * Admits a publish declaring `declaredBytes` (its `Content-Length`; 0 for a chunked body, whose size is
   * counted once it is in: {@link Admitted.grow}).
   * @returns the admission; release it exactly once when the publish is answered or its client left
   * @throws BrokerError PUBLISH_OVERLOADED (503, `Retry-After` from {@link RetryAfterEstimate}) when the
   *   bytes in flight with these would pass the bound and another publish is in flight;
   *   PUBLISH_QUEUE_DELAYED (503, `Retry-After` likewise) when at least `minInFlight` other publishes are in
   *   flight, the body is not declared small enough to be exempt (a chunked one never is), and the queue
   *   delay passed its bound
   */
  admit(declaredBytes: number): Admitted {
    const bytes = Math.max(0, declaredBytes);
    this.refuseBeyond(bytes, bytes);
    if (this.queueDelay !== undefined && this.holders >= Math.max(1, this.queueDelay.minInFlight ?? 1) && (bytes === 0 || bytes > this.queueDelay.exemptBytes)) {
      const waitedMs = this.queueDelay.read();
      if (waitedMs > this.queueDelay.maxMs) throw brokerError('PUBLISH_QUEUE_DELAYED', { waitedMs: Math.round(waitedMs), limit: this.queueDelay.maxMs, retryAfter: this.retryAfter.refused() });
    }
    this.retryAfter.admitted();
    this.held += bytes;
    this.holders++;
    let mine = bytes;
    let released = false;
    return {
      grow: (actualBytes: number): void => {
        if (released || actualBytes <= mine) return;
        const more = actualBytes - mine;
        // Alone in flight, the publish goes on whatever its size (the route's body limits bound it).
        if (this.holders > 1) this.refuseBeyond(more, actualBytes);
        this.held += more;
        mine = actualBytes;
      },
      release: (): void => {
        if (released) return;
        released = true;
        this.held -= mine;
        this.holders--;
      },
    };
  }

  /** @throws BrokerError PUBLISH_OVERLOADED when `more` bytes pass the bound and anything is in flight */
  private refuseBeyond(more: number, declared: number): void {
    if (this.holders > 0 && this.held + more > this.limitBytes) {
      throw brokerError('PUBLISH_OVERLOADED', { inFlight: this.held, declared, limit: this.limitBytes, retryAfter: this.retryAfter.refused() });
    }
  }
}

/** Seconds of admissions and refusals the {@link RetryAfterEstimate} looks back on. */
const RETRY_AFTER_WINDOW_SECONDS = 5;
/** The longest `Retry-After` of an admission refusal, seconds. */
export const MAX_ADMISSION_RETRY_AFTER_SECONDS = 10;
/**
 * Fewer refusals than this in the window keep `Retry-After` at 1 s: so few bodies refused again cost little,
 * and a line that short may only mean the node is briefly busy (one large publish held), not slow.
 */
const MIN_REFUSALS_TO_LENGTHEN = 50;
/** What a client following the protocol waits on average per second of `Retry-After`: it adds a random share of up to half (docs/publishing.md "Refusals and deadlines"). */
const MEAN_WAIT_PER_RETRY_AFTER_SECOND = 1.25;

/**
 * The `Retry-After` of an admission refusal, in whole seconds from 1 to
 * {@link MAX_ADMISSION_RETRY_AFTER_SECONDS} (docs/decisions/0035-retry-after-from-the-waiting-producers.md).
 * The producers refused in the last {@link RETRY_AFTER_WINDOW_SECONDS} seconds wait, each for the
 * `Retry-After` it was given and a quarter more on average (its jitter): by Little's law that makes
 * L = Σ waits ÷ window producers waiting at any moment. The node admits A publishes a second; a producer
 * refused now is through that line in about L ÷ A seconds, so it is told that, not to come back in a
 * second with its whole body to be refused again: at 1,024 producers of 520 KB bodies a fixed second made
 * four refusals per admission, each body read and dropped. While fewer than
 * {@link MIN_REFUSALS_TO_LENGTHEN} refusals fall in the window it stays 1 s. Memory: three counters per
 * second of the window.
 */
export class RetryAfterEstimate {
  /** Per second of the window, by the clock's whole second modulo the window: that second, admissions, refusals, seconds of `Retry-After` given. */
  private readonly seconds = Array.from({ length: RETRY_AFTER_WINDOW_SECONDS }, () => ({ second: -1, admitted: 0, refused: 0, waits: 0 }));

  /** @param clock ms on a monotonic clock */
  constructor(private readonly clock: () => number) {}

  /** Counts a publish admitted now. */
  admitted(): void {
    this.current().admitted++;
  }

  /** Counts a refusal now. @returns its `Retry-After`, whole seconds from 1 to {@link MAX_ADMISSION_RETRY_AFTER_SECONDS} */
  refused(): number {
    const now = this.current();
    let admitted = 0;
    let refused = 0;
    let waits = 0;
    for (const second of this.seconds) {
      if (now.second - second.second >= RETRY_AFTER_WINDOW_SECONDS) continue;
      admitted += second.admitted;
      refused += second.refused;
      waits += second.waits;
    }
    let retryAfter = 1;
    if (refused >= MIN_REFUSALS_TO_LENGTHEN) {
      // Nothing admitted in the window: as if one publish had been (the line moves at least that fast).
      const waiting = (waits * MEAN_WAIT_PER_RETRY_AFTER_SECOND) / RETRY_AFTER_WINDOW_SECONDS;
      const perSecond = Math.max(1, admitted) / RETRY_AFTER_WINDOW_SECONDS;
      retryAfter = Math.min(MAX_ADMISSION_RETRY_AFTER_SECONDS, Math.max(1, Math.round(waiting / perSecond)));
    }
    now.refused++;
    now.waits += retryAfter;
    return retryAfter;
  }

  /** This second's counters, emptied when the slot last held an older second. */
  private current(): { second: number; admitted: number; refused: number; waits: number } {
    const second = Math.floor(this.clock() / 1000);
    const slot = this.seconds[second % RETRY_AFTER_WINDOW_SECONDS] as { second: number; admitted: number; refused: number; waits: number };
    if (slot.second !== second) {
      slot.second = second;
      slot.admitted = 0;
      slot.refused = 0;
      slot.waits = 0;
    }
    return slot;
  }
}

/** One admitted publish's hold on the node's bytes in flight ({@link PublishAdmission.admit}). */
export interface Admitted {
  /**
   * Raises the hold to the body's size once it is known (received chunked, or inflated from gzip or zstd).
   * @throws BrokerError PUBLISH_OVERLOADED when that passes the bound while other publishes are in flight
   *   (the hold stays as it was; release it)
   */
  grow(actualBytes: number): void;
  /** Gives the bytes back; later calls do nothing. */
  release(): void;
}

/**
 * Which admission bound refused a publish, as `broker_publish_refused_total` labels it: `bytes_in_flight`
 * for PUBLISH_OVERLOADED, `queue_delay` for PUBLISH_QUEUE_DELAYED; undefined for any other error
 * (docs/publishing.md "Refusals and deadlines").
 */
export function admissionRefusal(err: unknown): PublishRefusalReason | undefined {
  if (!(err instanceof BrokerError)) return undefined;
  if (err.code === 'PUBLISH_OVERLOADED') return 'bytes_in_flight';
  return err.code === 'PUBLISH_QUEUE_DELAYED' ? 'queue_delay' : undefined;
}
