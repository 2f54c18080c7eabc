import type { Logger } from '../../observability/logger.js';
import type { Clock } from './clock.js';
import type { StreamPartition } from './event-stream.js';
import type { SessionLoop, SessionStore } from './session-types.js';

/** What {@link SessionCommits} works with. */
export interface SessionCommitsOptions {
  /** Where skipped events are committed (fenced like a client commit). */
  readonly store: Pick<SessionStore, 'commit'>;
  readonly logger: Logger;
  /** The session's clock: when events started to wait for a commit. */
  readonly clock: Clock;
  readonly subscriptionId: string;
  readonly streamId: string;
  /** The partitions of the stream now (its loop's; none before the loop exists). */
  readonly partitions: () => Iterable<StreamPartition>;
  /** Told of each partition whose committed offset moved (dead-letter bookkeeping), before the stream skips ahead. */
  readonly onCommitted: (field: string, offset: number) => void;
}

/**
 * What one subscription stream sent and what of it is committed (WIRE.md "Streaming", "Commits"):
 * committed offsets per partition, events sent and committed in the stream (`stream_limit`), since when
 * sent events wait for a commit (`commit_timeout`), and the auto-commit of skipped events (issue 3 §2.7).
 * Offsets are internal offsets; a partition is keyed by its offsets field (`offsetField`).
 */
export class SessionCommits {
  /** Per partition: the committed offset as this stream last saw it. */
  readonly committed = new Map<string, number>();
  /** Per partition: the cursor of the last batch with events sent. */
  private readonly acceptedThrough = new Map<string, number>();
  /** Per partition: skipped events up to this offset wait for the auto-commit. */
  private readonly autoCommits = new Map<string, number>();
  private sentEvents = 0;
  private committedEvents = 0;
  /** Since when (clock ms) sent events wait for a commit; undefined when nothing waits. */
  private uncommittedSince: number | undefined;
  /** While a commit window waits: wakes it to look at the commits again. */
  private commitsSeen: (() => void) | undefined;

  constructor(private readonly options: SessionCommitsOptions) {}

  /** Events sent on this stream (for `stream_limit`). */
  get sentInStream(): number {
    return this.sentEvents;
  }

  /** Events sent on this stream and committed since (`stream_limit` ends the stream over these). */
  get committedInStream(): number {
    return this.committedEvents;
  }

  /** Events sent on this stream and not committed, over all its partitions. */
  uncommitted(): number {
    let n = 0;
    for (const p of this.options.partitions()) n += Math.max(0, p.sent - (this.committed.get(p.key) ?? p.sent));
    return n;
  }

  /** Ms until sent events have waited `timeoutMs` without commit progress (≤ 0: they have), or undefined when nothing waits. */
  msUntilTimeout(timeoutMs: number): number | undefined {
    if (this.uncommittedSince === undefined || this.uncommitted() === 0) return undefined;
    return this.uncommittedSince + timeoutMs - this.options.clock.now();
  }

  /** Whether sent events waited `timeoutMs` (the stream's `commit_timeout`) without any commit progress. */
  timedOut(timeoutMs: number): boolean {
    return this.uncommittedSince !== undefined && this.options.clock.now() - this.uncommittedSince >= timeoutMs && this.uncommitted() > 0;
  }

  /** A batch with `count` events of `partition` went out (`partition.sent` already advanced). */
  sent(partition: StreamPartition, count: number): void {
    this.sentEvents += count;
    this.acceptedThrough.set(partition.key, partition.sent);
    this.uncommittedSince ??= this.options.clock.now();
  }

  /** Skipped events are committed by the broker once everything sent before them is (issue 3 §2.7). */
  skipped(partition: StreamPartition): void {
    this.autoCommits.set(partition.key, partition.sent);
    this.uncommittedSince ??= this.options.clock.now();
    this.autoCommit();
  }

  /**
   * Takes new committed offsets (by offsets field): flow control, stream limit, skip-ahead (a commit
   * beyond what was sent moves an active partition of `loop` there), commit timeout.
   */
  apply(offsets: ReadonlyMap<string, number>, loop: Pick<SessionLoop, 'current' | 'skipTo'>): void {
    let progressed = false;
    for (const p of loop.current) {
      const field = p.key;
      const before = this.committed.get(field) ?? -1;
      const now = offsets.get(field) ?? before;
      if (now <= before) continue;
      progressed = true;
      this.committedEvents += Math.min(now, p.sent) - before > 0 ? Math.min(now, p.sent) - before : 0;
      this.committed.set(field, now);
      this.options.onCommitted(field, now);
      if (p.active && now > p.sent) loop.skipTo(p, now);
    }
    if (this.uncommitted() === 0) this.uncommittedSince = undefined;
    else if (progressed) this.uncommittedSince = this.options.clock.now();
    if (progressed) this.autoCommit();
  }

  /**
   * The commit window (WIRE.md "Commits"): waits until nothing sent is uncommitted, the clock reaches
   * `deadline` (clock ms), or `stopping()` says the node stops; looks again at each {@link recheck}.
   */
  async waitForCommits(deadline: number, stopping: () => boolean): Promise<void> {
    const { clock } = this.options;
    while (this.uncommitted() > 0 && clock.now() < deadline && !stopping()) {
      await new Promise<void>((resolve) => {
        const cancel = clock.setTimeout(resolve, Math.max(1, deadline - clock.now()));
        this.commitsSeen = () => {
          cancel();
          resolve();
        };
      });
      this.commitsSeen = undefined;
    }
  }

  /** Wakes a waiting commit window to look at the commits (and whether the node stops) again. */
  recheck(): void {
    this.commitsSeen?.();
  }

  /** Commits pending skipped ranges whose preceding sent events are committed (fenced like a client commit). */
  private autoCommit(): void {
    const due: { field: string; offset: number }[] = [];
    for (const [field, offset] of this.autoCommits) {
      if ((this.committed.get(field) ?? -1) >= (this.acceptedThrough.get(field) ?? -1)) {
        due.push({ field, offset });
        this.autoCommits.delete(field);
      }
    }
    if (due.length === 0) return;
    const { store, logger, subscriptionId, streamId } = this.options;
    store.commit(subscriptionId, streamId, due).catch((err: unknown) => {
      logger.warn({ err: (err as Error).message, subscription: subscriptionId }, 'auto-commit of skipped events failed; they are redelivered after a rebalance');
    });
  }
}
