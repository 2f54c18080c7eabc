import type { Keys } from './keys.js';
import { storageError, type RedisClient } from './redis-connection.js';
import type { Scripts } from './scripts.js';

/** What one `compactPartition` step did (offsets are partition offsets). */
export interface CompactionStep {
  /** Where the next step of the round starts (the cut-off offset once `done`). */
  readonly next: number;
  /** True when the round reached the cut-off (events younger than the compaction lag). */
  readonly done: boolean;
  /** Stream entries (events) removed by this step. */
  readonly deleted: number;
  /** Tombstones the round passed and dropped in this step. */
  readonly tombstonesDropped: number;
}

/** Fields of the compaction index looked at per HSCAN call while pruning. */
const PRUNE_SCAN_COUNT = 500;

/**
 * Redis side of log compaction (issue 6; spec "EventType" cleanup_policy, `POST
 * /event-types/{name}/deleted-events`). Per partition of a compacted event type, in the partition's
 * hash-tag slot (keys.ts): the compaction index (key → newest offset, or `d<offset>` for a tombstone) and
 * the tombstone set. Publishing writes the index in the same script as the events (`publishCompacted`);
 * every multi-key change here is one Lua script in one slot, so it works on Redis Cluster.
 */
export class CompactionStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly scripts: Scripts,
    private readonly keys: Keys,
  ) {}

  /**
   * Writes tombstones for `compactionKeys` in one partition: events of those keys already in the
   * partition go at its next compaction round; the tombstones occupy no offset and are never delivered.
   * @returns the tombstone offset (the partition's next offset when the call ran)
   * @throws BrokerError 503 when Redis is unreachable; Error from Redis otherwise
   */
  async markDeleted(name: string, timeline: number, partition: string, compactionKeys: readonly string[]): Promise<number> {
    const keys = [this.keys.partitionMeta(name, timeline, partition), this.keys.partitionCompactionIndex(name, timeline, partition), this.keys.partitionTombstones(name, timeline, partition)];
    return Number(await this.scripts.run('markDeleted', keys, compactionKeys).catch(storageError));
  }

  /**
   * One bounded step of a compaction round (src/storage/lua/compactPartition-5.lua).
   * @param cutoffSeconds unix second: only events received in an earlier second are compacted
   * @param from offset where this step starts (the round starts at 0, i.e. the oldest retained event)
   * @param maxEntries stream entries looked at, at most (also bounds the tombstones dropped)
   * @param trimTimeIndex drop the time index below the cut-off (policy `compact`: no retention needs it)
   * @throws BrokerError 503 when Redis is unreachable
   */
  async compactStep(name: string, timeline: number, partition: string, cutoffSeconds: number, from: number, maxEntries: number, trimTimeIndex: boolean): Promise<CompactionStep> {
    const keys = [
      this.keys.partitionMeta(name, timeline, partition),
      this.keys.partitionLog(name, timeline, partition),
      this.keys.partitionTimeIndex(name, timeline, partition),
      this.keys.partitionCompactionIndex(name, timeline, partition),
      this.keys.partitionTombstones(name, timeline, partition),
    ];
    const reply = (await this.scripts.run('compactPartition', keys, [cutoffSeconds, from, maxEntries, trimTimeIndex ? 1 : 0]).catch(storageError)) as number[];
    const [next = from, done = 1, deleted = 0, dropped = 0] = reply.map(Number);
    return { next, done: done === 1, deleted, tombstonesDropped: dropped };
  }

  /**
   * Drops compaction index fields whose newest event retention removed (policy `compact_and_delete`),
   * in HSCAN batches; each batch is re-checked atomically by `pruneCompactionIndex`.
   * @returns fields dropped
   * @throws BrokerError 503 when Redis is unreachable
   */
  async pruneIndex(name: string, timeline: number, partition: string): Promise<number> {
    const meta = this.keys.partitionMeta(name, timeline, partition);
    const index = this.keys.partitionCompactionIndex(name, timeline, partition);
    const oldest = Number((await this.redis.hget(meta, 'oldest').catch(storageError)) ?? 0);
    if (oldest === 0) return 0;
    let cursor = '0';
    let dropped = 0;
    do {
      const [next, flat] = await this.redis.hscan(index, cursor, 'COUNT', PRUNE_SCAN_COUNT).catch(storageError);
      cursor = next;
      const candidates: string[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) {
        const value = flat[i + 1] as string;
        if (!value.startsWith('d') && Number(value) < oldest) candidates.push(flat[i] as string);
      }
      if (candidates.length > 0) dropped += Number(await this.scripts.run('pruneCompactionIndex', [meta, index], candidates).catch(storageError));
    } while (cursor !== '0');
    return dropped;
  }

  /**
   * Takes the compaction lock of an event type when it is free, or renews it when `owner` holds it.
   * @param ttlMs how long the lock lasts without renewal (milliseconds)
   * @returns whether `owner` holds it now
   * @throws BrokerError 503 when Redis is unreachable
   */
  async holdLock(name: string, owner: string, ttlMs: number): Promise<boolean> {
    return Number(await this.scripts.run('holdLock', [this.keys.compactionLock(name)], [owner, ttlMs]).catch(storageError)) === 1;
  }
}
