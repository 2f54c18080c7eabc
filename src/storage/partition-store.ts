import type { Redis } from 'ioredis';
import type { PartitionRange } from '../domain/offsets.js';
import type { Keys } from './keys.js';
import { storageError } from './redis-connection.js';
import type { Scripts } from './scripts.js';

/** Outcome of writing one partition's share of a batch. */
export type PartitionWrite = { readonly ok: true; readonly firstOffset: number } | { readonly ok: false; readonly reason: string };

/**
 * Partition logs on Redis Streams with dense offsets (DESIGN.md §3): one stream entry per partition per
 * batch, written by `publishBatch`; ranges are O(1) reads of the partition's counters.
 */
export class PartitionStore {
  constructor(
    private readonly redis: Redis,
    private readonly scripts: Scripts,
    private readonly keys: Keys,
  ) {}

  private keysOf(name: string, timeline: number, partition: string): [string, string, string] {
    return [this.keys.partitionMeta(name, timeline, partition), this.keys.partitionLog(name, timeline, partition), this.keys.partitionTimeIndex(name, timeline, partition)];
  }

  /**
   * Appends events to several partitions at once (one script call each, auto-pipelined). Never throws:
   * each partition reports its own outcome so the caller can answer 207 for partial failures.
   * @param writes partition id → (event count, events joined by `\n`)
   */
  async append(name: string, timeline: number, writes: readonly { partition: string; count: number; data: Uint8Array }[]): Promise<PartitionWrite[]> {
    return Promise.all(
      writes.map(async (w): Promise<PartitionWrite> => {
        try {
          const data = Buffer.from(w.data.buffer, w.data.byteOffset, w.data.byteLength);
          const first = await this.scripts.run('publishBatch', this.keysOf(name, timeline, w.partition), [w.count, data]);
          return { ok: true, firstOffset: Number(first) };
        } catch (err) {
          return { ok: false, reason: /timed out/i.test((err as Error).message) ? 'timed out' : `storage error: ${(err as Error).message}` };
        }
      }),
    );
  }

  /** The available range of each partition (`oldest` first retained offset, `newest` last written or oldest-1). */
  async ranges(name: string, timeline: number, partitions: readonly string[]): Promise<PartitionRange[]> {
    const pipeline = this.redis.pipeline();
    for (const p of partitions) pipeline.hmget(this.keys.partitionMeta(name, timeline, p), 'next', 'oldest');
    const results = (await pipeline.exec().catch(storageError)) ?? [];
    return results.map(([err, value]) => {
      if (err) storageError(err);
      const [next, oldest] = value as [string | null, string | null];
      return { oldest: Number(oldest ?? 0), newest: Number(next ?? 0) - 1 };
    });
  }

  /** Removes entries received before `cutoffSeconds` (unix seconds). @returns the new oldest offset */
  async trim(name: string, timeline: number, partition: string, cutoffSeconds: number): Promise<number> {
    return Number(await this.scripts.run('trimPartition', this.keysOf(name, timeline, partition), [cutoffSeconds]).catch(storageError));
  }

  /** Takes the retention lock of an event type for `ttlMs` if it is free. @returns whether this node holds it */
  async tryRetentionLock(name: string, owner: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.set(this.keys.retentionLock(name), owner, 'PX', ttlMs, 'NX').catch(storageError)) === 'OK';
  }
}
