import { observeWatermark, stallDue, type WatermarkStall } from '../domain/cursor/high-watermark.js';
import type { Logger } from '../observability/logger.js';
import type { Keys } from './keys.js';
import type { RedisClient } from './redis/redis-connection.js';
import type { PartitionRef, ReplicatedAppend } from './replica-lanes.js';

/** What reads report of the high watermarks they meet (`PartitionStore`, when reads wait for replicas). */
export interface WatermarkObserver {
  /**
   * A read of a partition's counters or entries.
   * @param replicated the partition's high watermark as read (0 when it has none yet)
   * @param behind whether the read found events at or past it (written, not known to be replicated)
   */
  observe(name: string, timeline: number, partition: string, replicated: number, behind: boolean): void;
}

/**
 * ms a stalled watermark waits beyond `publish.replicaTimeoutMs` before it is confirmed: the move after a
 * confirmed `WAIT` is one round trip, far less even on a loaded machine.
 */
export const WATERMARK_MARGIN_MS = 250;

/**
 * Takes on high watermarks that stopped behind their partition's newest event (docs/operations.md
 * "Durability"; src/domain/cursor/high-watermark.ts). A watermark moves with every confirmed append, but some
 * events get there without one: the move after a confirmed `WAIT` failed (the master stopped right then,
 * or this node did), a failover left the new master's watermark — which came by replication — behind the
 * events it holds, the partition was written before watermarks existed or by a node whose readers do not
 * wait for replicas, or an append's `WAIT` fell short and its producer never retried. Readers would wait
 * for them until the next confirmed append of the partition, which may never come.
 *
 * So every read that finds events beyond a watermark reports it here; a watermark seen at the same value,
 * with events beyond it, for `publish.replicaTimeoutMs` + {@link WATERMARK_MARGIN_MS} (no append in
 * flight can still move it) is read again and, still there, confirmed as the partition is
 * (`ReplicatedAppend.confirm`: a write, `WAIT`, the watermark moved to the `next` the write saw; its
 * notice wakes the readers). A confirmation that falls short changes nothing; the next read that still
 * finds the partition behind starts the wait again.
 *
 * Bounded: one record per partition that a read on this node found behind within the last delay (a
 * record goes when a read finds its partition caught up, or when it is confirmed), one timer, one round
 * of confirmations at a time (one `WAIT` per master).
 */
export class WatermarkRepair implements WatermarkObserver {
  private readonly stalls = new Map<string, { readonly ref: PartitionRef; readonly stall: WatermarkStall }>();
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private closed = false;
  /** How long a watermark stays put, with events beyond it, before it is confirmed (ms). */
  readonly delayMs: number;

  /**
   * @param appender confirms partitions (its storage's reserved connections)
   * @param redis the storage's command connection (the watermark is read again before confirming)
   * @param keys the storage's key names
   * @param replicaTimeoutMs `publish.replicaTimeoutMs`
   */
  constructor(
    private readonly appender: Pick<ReplicatedAppend, 'confirm'>,
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly logger: Logger,
    replicaTimeoutMs: number,
  ) {
    this.delayMs = replicaTimeoutMs + WATERMARK_MARGIN_MS;
  }

  observe(name: string, timeline: number, partition: string, replicated: number, behind: boolean): void {
    if (this.closed) return;
    // Event type names never hold `|` (keys.ts checks them before any read).
    const key = `${name}|${timeline}|${partition}`;
    const known = this.stalls.get(key);
    const stall = observeWatermark(known?.stall, replicated, behind, performance.now());
    if (stall === undefined) {
      this.stalls.delete(key);
      return;
    }
    if (stall !== known?.stall) this.stalls.set(key, { ref: { name, timeline, partition }, stall });
    this.schedule();
  }

  /** Records kept now (bounded as the class says). */
  get size(): number {
    return this.stalls.size;
  }

  /** Stops: no more confirmations. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.stalls.clear();
  }

  /** Sets the timer for the earliest stall that comes due (one timer; none while a round runs). */
  private schedule(): void {
    if (this.timer !== undefined || this.running || this.closed || this.stalls.size === 0) return;
    let earliest = Number.POSITIVE_INFINITY;
    for (const { stall } of this.stalls.values()) earliest = Math.min(earliest, stall.since + this.delayMs);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = true;
      this.confirmDue()
        .catch((err: unknown) => this.logger.warn({ err: (err as Error).message }, 'could not confirm stalled high watermarks'))
        .finally(() => {
          this.running = false;
          this.schedule();
        });
    }, Math.max(0, earliest - performance.now()));
    this.timer.unref();
  }

  /** Reads the due partitions' counters again and confirms those whose watermark is still where it stalled, with events beyond. */
  private async confirmDue(): Promise<void> {
    const now = performance.now();
    const due = [...this.stalls].filter(([, s]) => stallDue(s.stall, now, this.delayMs));
    for (const [key] of due) this.stalls.delete(key);
    if (due.length === 0) return;
    const counters = await Promise.all(due.map(([, { ref }]) => this.redis.hmget(this.keys.partitionMeta(ref.name, ref.timeline, ref.partition), 'next', 'replicated')));
    const stuck = due
      .filter(([, { stall }], i) => {
        const [next, replicated] = counters[i] ?? [];
        return Number(replicated ?? 0) === stall.replicated && Number(next ?? 0) > stall.replicated;
      })
      .map(([, { ref }]) => ref);
    if (stuck.length === 0 || this.closed) return;
    const moved = await this.appender.confirm(stuck, this.keys);
    const confirmed = moved.filter(Boolean).length;
    this.logger.debug({ partitions: stuck.length, confirmed }, 'confirmed stalled high watermarks');
  }
}
