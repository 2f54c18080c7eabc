/**
 * The high watermark of a partition (docs/operations.md "Durability"; docs/architecture.md "Reads stop at
 * the high watermark"): with replica acknowledgements (`publish.minReplicas` ≥ 1, readers waiting for
 * replicas), readers are given only the events the replicas are known to hold, so that a failover cannot
 * take back an event once read, nor give its offset to another event.
 *
 * Each partition keeps, beside its `next` offset, a `replicated` offset: every event below it is known to
 * be held by the replicas (a `WAIT` after its append, or after a later write on the same master,
 * confirmed it — replication is ordered, so a confirmed write confirms everything the master wrote
 * before it). It only moves up, never past `next`, and readers stop below it. These are the pure rules;
 * the counters live in Redis (the partition's meta hash) and move in `confirmReplicated-2.lua`.
 */

/** A partition's counters as read from its meta hash (offsets; `replicated` absent when never written). */
export interface PartitionCounters {
  /** The offset the next event gets (one past the newest event). */
  readonly next: number;
  /** The oldest retained offset. */
  readonly oldest: number;
  /** One past the newest event the replicas are known to hold; absent = none known yet. */
  readonly replicated?: number | undefined;
}

/**
 * The end (exclusive) of what readers may be given: `next` when reads do not wait for replicas, else
 * `replicated` (never past `next`, never below `oldest`: a range is never negative; nothing confirmed
 * yet counts as 0). The newest readable offset is one less.
 * @param guarded whether reads wait for replicas
 */
export function readableNext(counters: PartitionCounters, guarded: boolean): number {
  if (!guarded) return counters.next;
  return Math.max(counters.oldest, Math.min(counters.next, counters.replicated ?? 0));
}

/**
 * How many of a read's stream entries a reader may be given: the leading entries whose ids (each entry's
 * id is the `next` offset after it, so it ends below its id) are at most `readable` — the entry holding
 * an offset at or past `readable` and every later one stay back whole, as entries are written whole.
 * @param entryEnds the entries' ids as numbers, ascending
 * @param readable {@link readableNext} (or the `replicated` offset read with the entries)
 */
export function readableEntries(entryEnds: readonly number[], readable: number): number {
  let count = 0;
  while (count < entryEnds.length && (entryEnds[count] as number) <= readable) count++;
  return count;
}

/**
 * A partition whose watermark was seen behind its newest event: the watermark then, and since when
 * (ms, `performance.now()`) it has not moved.
 */
export interface WatermarkStall {
  readonly replicated: number;
  readonly since: number;
}

/**
 * What an observation of a partition makes of its stall record: none when nothing is beyond the
 * watermark; the same record while the watermark stays where it was; a new one (since `now`) when it
 * moved — under a steady publish load it moves with every acknowledged batch and no stall ever ages.
 * @param behind whether events exist beyond the watermark
 */
export function observeWatermark(previous: WatermarkStall | undefined, replicated: number, behind: boolean, now: number): WatermarkStall | undefined {
  if (!behind) return undefined;
  if (previous !== undefined && previous.replicated === replicated) return previous;
  return { replicated, since: now };
}

/**
 * Whether a stall has lasted long enough that no write in flight can still move the watermark: a write's
 * `WAIT` answers within `publish.replicaTimeoutMs` and its confirmation follows one round trip later, so
 * a watermark that stayed put for `delayMs` (that timeout plus a margin) waits for nothing; then the
 * partition is confirmed as it is (a write, `WAIT`, and the watermark moved to the `next` the write saw).
 */
export function stallDue(stall: WatermarkStall, now: number, delayMs: number): boolean {
  return now - stall.since >= delayMs;
}
