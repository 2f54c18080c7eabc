import type { Logger } from '../../../observability/logger.js';
import type { Clock } from '../clock.js';
import type { StreamPartition } from '../stream/event-stream.js';
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
  /**
   * Told when the broker's own commit moved a partition past offsets that retention removed before the
   * subscription read them (`expired` events; counted once, by the commit that passed them).
   */
  readonly onExpiredPassed?: (partition: { readonly key: string; readonly eventType: string }, expired: number) => void;
}

/** Events of one data batch a stream sent: its last offset and how many events it carried. */
interface SentBatch {
  readonly through: number;
  count: number;
}

/** An offset the broker commits for the stream once everything sent before it is committed. */
interface AutoCommit {
  readonly offset: number;
  /** The last offset the stream had sent of the partition before it passed over them: committed first. */
  readonly after: number;
  /** Events retention removed unread among the offsets this commit passes (0 for skipped or compacted-away ones). */
  readonly expired: number;
  /** The partition's event type (the expired events' metric series). */
  readonly eventType: string;
}

/**
 * What one subscription stream sent and what of it is committed (docs/consuming.md "Commits"):
 * committed offsets per partition, the data batches sent and not yet committed (flow control by
 * `max_uncommitted_events` and the `commit_timeout` window count the events these batches carried,
 * never offsets: offsets without an event behind them — removed by retention or compaction, or passed
 * over by a per-event filter — are never in flight), events sent and committed in the stream
 * (`stream_limit`), and the broker's own commits of offsets passed over without delivery (events the
 * reader skipped, offsets removed before the stream reached them), made once everything sent before
 * them is committed. Offsets are internal offsets; a partition is keyed by its offsets field (`offsetField`).
 */
export class SessionCommits {
  /** Per partition: the committed offset as this stream last saw it. */
  readonly committed = new Map<string, number>();
  /** Per partition: the cursor of the last batch with events sent. */
  private readonly acceptedThrough = new Map<string, number>();
  /** Per partition: the data batches sent whose last offset is above the committed one, oldest first. */
  private readonly inFlight = new Map<string, SentBatch[]>();
  /** Per partition: offsets passed over without delivery up to this one wait for the broker's commit. */
  private readonly autoCommits = new Map<string, AutoCommit>();
  private sentEvents = 0;
  private committedEvents = 0;
  /** Since when (clock ms) sent events wait for a commit; undefined when nothing waits. */
  private uncommittedSince: number | undefined;
  /** While a commit window waits: wakes it to look at the commits again. */
  private commitsSeen: (() => void) | undefined;

  constructor(private readonly options: SessionCommitsOptions) {}

  /**
   * The stream (re)starts `field` after `offset` (its committed offset when the stream takes the
   * partition): what it sent of the partition before is sent again from there, so none of it is in flight.
   */
  begin(field: string, offset: number): void {
    this.committed.set(field, offset);
    this.inFlight.delete(field);
    this.acceptedThrough.delete(field);
  }

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
    for (const p of this.options.partitions()) n += this.uncommittedOf(p);
    return n;
  }

  /**
   * Events of `partition` sent on this stream and not committed: the events of its data batches after
   * the committed offset (a commit inside a batch leaves at most the offsets after it). Offsets the
   * stream moved past without sending an event count nothing.
   */
  uncommittedOf(partition: StreamPartition): number {
    const batches = this.inFlight.get(partition.key);
    if (batches === undefined) return 0;
    const committed = this.committed.get(partition.key) ?? -1;
    let n = 0;
    for (const b of batches) if (b.through > committed) n += Math.min(b.count, b.through - committed);
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
    if (count > 0) {
      let batches = this.inFlight.get(partition.key);
      if (batches === undefined) this.inFlight.set(partition.key, (batches = []));
      batches.push({ through: partition.sent, count });
      this.uncommittedSince ??= this.options.clock.now();
    }
  }

  /**
   * The stream moved `partition`'s cursor (`partition.sent`) past offsets without sending them: events
   * the reader skipped, or offsets removed by retention or compaction before the stream reached them.
   * The broker commits that cursor once everything sent before it is committed, so no client commit is
   * needed to pass them and a later stream does not read past them again.
   * @param expired events among those offsets that retention removed before they were read (0 = none)
   */
  skipped(partition: StreamPartition, expired = 0): void {
    const pending = this.autoCommits.get(partition.key);
    const after = this.acceptedThrough.get(partition.key) ?? -1;
    this.autoCommits.set(partition.key, { offset: partition.sent, after, expired: expired + (pending?.expired ?? 0), eventType: partition.eventType });
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
      this.committedEvents += this.settle(field, now);
      this.committed.set(field, now);
      this.options.onCommitted(field, now);
      if (p.active && now > p.sent) loop.skipTo(p, now);
    }
    if (this.uncommitted() === 0) this.uncommittedSince = undefined;
    else if (progressed) this.uncommittedSince = this.options.clock.now();
    if (progressed) this.autoCommit();
  }

  /**
   * The commit window (docs/consuming.md "Commits"): waits until nothing sent is uncommitted, the clock reaches
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

  /**
   * Drops the in-flight batches of `field` that a commit at `offset` covers.
   * @returns the events the commit covered (whole batches, and the covered part of one it falls inside)
   */
  private settle(field: string, offset: number): number {
    const batches = this.inFlight.get(field);
    if (batches === undefined) return 0;
    const before = this.committed.get(field) ?? -1;
    let covered = 0;
    while (batches.length > 0) {
      const b = batches[0] as SentBatch;
      const open = Math.min(b.count, b.through - before);
      if (b.through <= offset) {
        covered += Math.max(0, open);
        batches.shift();
        continue;
      }
      const left = Math.min(open, b.through - offset);
      covered += Math.max(0, open - left);
      break;
    }
    if (batches.length === 0) this.inFlight.delete(field);
    return covered;
  }

  /**
   * Commits pending passed-over offsets whose preceding sent events are committed (fenced like a client
   * commit). A commit the fence accepts reports the expired events it passed (`onExpiredPassed`).
   */
  private autoCommit(): void {
    const due: { field: string; offset: number; expired: number; eventType: string }[] = [];
    for (const [field, pending] of this.autoCommits) {
      if ((this.committed.get(field) ?? -1) >= pending.after) {
        due.push({ field, offset: pending.offset, expired: pending.expired, eventType: pending.eventType });
        this.autoCommits.delete(field);
      }
    }
    if (due.length === 0) return;
    const { store, logger, subscriptionId, streamId, onExpiredPassed } = this.options;
    store
      .commit(
        subscriptionId,
        streamId,
        due.map(({ field, offset }) => ({ field, offset })),
      )
      .then((outcome) => {
        // Accepted by the fence: the stream still held the partition, so the subscription's committed offset
        // is now past the jump — moved by this commit, or already by the client's commit of a later cursor.
        if (outcome.kind !== 'ok' || onExpiredPassed === undefined) return;
        for (const d of due) if (d.expired > 0) onExpiredPassed({ key: d.field, eventType: d.eventType }, d.expired);
      })
      .catch((err: unknown) => {
        logger.warn({ err: (err as Error).message, subscription: subscriptionId }, 'the broker could not commit offsets passed over without delivery; a later stream of the partition passes them again');
      });
  }
}
