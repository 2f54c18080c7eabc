import type { Keys } from './keys.js';
import { storageError, type RedisClient } from './redis/redis-connection.js';
import type { Scripts } from './scripts.js';
import { failureOf } from './script-failures.js';

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
 * Redis side of log compaction (cleanup_policy `compact` / `compact_and_delete` and `POST
 * /event-types/{name}/deleted-events`; docs/concepts.md "Retention and compaction"). Per partition of a compacted event type, in the partition's
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
   * Events of a closed timeline's partition after offset `after` that were received before
   * `cutoffSeconds`, up to `maxEntries` stream entries, with their compaction keys (entries without a
   * key are skipped). A closed timeline gets no appends, so its entries only ever disappear.
   * @returns the keyed entries, the offset the next call starts after, and whether more may follow
   * @throws BrokerError 503 when Redis is unreachable
   */
  async keyedEntries(name: string, timeline: number, partition: string, after: number, cutoffSeconds: number, maxEntries: number): Promise<{ entries: { id: string; key: string }[]; last: number; more: boolean }> {
    const [young, next] = await Promise.all([
      this.redis.zrangebyscore(this.keys.partitionTimeIndex(name, timeline, partition), cutoffSeconds, '+inf', 'LIMIT', 0, 1),
      this.redis.hget(this.keys.partitionMeta(name, timeline, partition), 'next'),
    ]).catch(storageError);
    const limit = young[0] !== undefined ? Number(young[0]) : Number(next ?? 0);
    if (after + 1 >= limit) return { entries: [], last: after, more: false };
    // Entries holding offsets after .. limit - 1 have ids after + 2 .. limit.
    const raw = await this.redis.xrange(this.keys.partitionLog(name, timeline, partition), `${after + 2}-0`, `${limit}-0`, 'COUNT', maxEntries).catch(storageError);
    const entries: { id: string; key: string }[] = [];
    for (const [id, fields] of raw) {
      const at = fields.indexOf('k');
      if (at >= 0 && at % 2 === 0 && fields[at + 1] !== undefined) entries.push({ id, key: fields[at + 1] as string });
    }
    const tail = raw[raw.length - 1];
    const last = tail === undefined ? limit - 1 : Number.parseInt(tail[0], 10) - 1;
    return { entries, last, more: raw.length >= maxEntries && last + 1 < limit };
  }

  /**
   * Which of `compactionKeys` this partition's compaction index knows (a newer event, or a tombstone):
   * on a later timeline, that supersedes every event of the key on an earlier one.
   * @throws BrokerError 503 when Redis is unreachable
   */
  async knownKeys(name: string, timeline: number, partition: string, compactionKeys: readonly string[]): Promise<Set<string>> {
    if (compactionKeys.length === 0) return new Set();
    const values = await this.redis.hmget(this.keys.partitionCompactionIndex(name, timeline, partition), ...compactionKeys).catch(storageError);
    return new Set(compactionKeys.filter((_, i) => values[i] !== null && values[i] !== undefined));
  }

  /** Deletes stream entries of a partition by id. @returns entries deleted @throws BrokerError 503 */
  async removeEntries(name: string, timeline: number, partition: string, ids: readonly string[]): Promise<number> {
    if (ids.length === 0) return 0;
    return Number(await this.redis.xdel(this.keys.partitionLog(name, timeline, partition), ...ids).catch(storageError));
  }

  /**
   * Takes the compaction lock of an event type when it is free, or renews it when `owner` holds it.
   * @param ttlMs how long the lock lasts without renewal (milliseconds)
   * @returns whether `owner` holds it now
   * @throws BrokerError 503 when Redis is unreachable
   */
  async holdLock(name: string, owner: string, ttlMs: number): Promise<boolean> {
    return failureOf(await this.scripts.run('holdLock', [this.keys.compactionLock(name)], [owner, ttlMs]).catch(storageError), ['LOCK_HELD']) === undefined;
  }
}
