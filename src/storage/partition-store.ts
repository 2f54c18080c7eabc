import type { PartitionRange } from '../domain/cursor/offsets.js';
import type { StoredTimeline } from '../domain/storages/timeline.js';
import type { Keys } from './keys.js';
import { settleEachBy } from '../util/deadline.js';
import { storageError, type RedisClient } from './redis/redis-connection.js';
import type { ScriptArg, Scripts } from './scripts.js';
import { failureOf } from './script-failures.js';
import { isOutOfMemory, storageFullDetail } from './storage-full.js';
import { firstReceivedAtOrAfter } from '../domain/cursor/time-seek.js';
import { readableEntries, readableNext } from '../domain/cursor/high-watermark.js';
import type { WatermarkObserver } from './watermark-repair.js';
import { decodeEntry, PLAIN_FIELD, ZSTD_FIELD } from '../domain/batch/entry-codec.js';

/**
 * One partition's share of a batch: `count` JSON texts joined by `\n` (or one zstd frame of them: `compressed`). `compactionKeys` (one per event,
 * in order) is set exactly for compacted event types (cleanup_policy `compact`, `compact_and_delete`): their events are then written one
 * stream entry each with their key, and the partition's compaction index points each key at its newest.
 */
export interface PartitionAppend {
  readonly partition: string;
  readonly count: number;
  readonly data: Uint8Array;
  /**
   * `data` is one zstd frame of the texts joined by `\n` (src/domain/batch/entry-codec.ts), stored in the
   * entry's field `z`. Only for plain appends: never with `compactionKeys` or `idempotency`, whose
   * scripts split the texts.
   */
  readonly compressed?: boolean;
  readonly compactionKeys?: readonly string[];
  /**
   * Idempotent publishing (docs/publishing.md "Idempotent publishing"): the 16-byte key of each event's
   * eid, concatenated in order (`writeEidKey`), the event type's window in seconds and the most eids one
   * generation of the partition remembers. An event whose eid the
   * partition stored within the window is left out (it counts as written).
   */
  readonly idempotency?: { readonly eidKeys: Uint8Array; readonly windowSeconds: number; readonly maxEids: number };
}

/**
 * The timeline an append goes to: its `order` names the partition keys, its `id` (uuid) tells this
 * event type's timeline from one of an event type deleted and created again under the same name, whose
 * partitions have the same keys (docs/architecture.md#36-timelines).
 */
export type TimelineRef = Pick<StoredTimeline, 'order' | 'id'>;

/**
 * The script call that appends `write`: publishBatch, publishCompacted when it carries compaction keys,
 * and their idempotent forms (publishIdempotent, publishCompactedIdempotent: two more keys, the eid
 * generations, and the window, the bound and the packed eid keys as arguments) when it carries `idempotency`
 * (docs/publishing.md "Idempotent publishing"). Its keys in the script's header order and its arguments,
 * the timeline's id among them (the script refuses a partition opened for another timeline id). Shared
 * with the replicated appender.
 */
export function appendCall(keys: Keys, name: string, timeline: TimelineRef, write: PartitionAppend): { script: AppendScript; keys: string[]; args: ScriptArg[] } {
  const data = Buffer.from(write.data.buffer, write.data.byteOffset, write.data.byteLength);
  const { order } = timeline;
  const base = [keys.partitionMeta(name, order, write.partition), keys.partitionLog(name, order, write.partition), keys.partitionTimeIndex(name, order, write.partition), keys.partitionNotices(name, order, write.partition)];
  const idempotency = write.idempotency;
  if (write.compressed === true) {
    if (idempotency !== undefined || write.compactionKeys !== undefined) throw new Error('a compressed append cannot be compacted or idempotent: their scripts split the texts');
    return { script: 'publishBatch', keys: base, args: [write.count, data, timeline.id, ZSTD_FIELD] };
  }
  if (idempotency !== undefined) {
    const eids = [keys.partitionEids(name, order, write.partition, 'a'), keys.partitionEids(name, order, write.partition, 'b')];
    const eidKeys = Buffer.from(idempotency.eidKeys.buffer, idempotency.eidKeys.byteOffset, idempotency.eidKeys.byteLength);
    const head: ScriptArg[] = [write.count, data, timeline.id, idempotency.windowSeconds, idempotency.maxEids, eidKeys];
    if (write.compactionKeys === undefined) return { script: 'publishIdempotent', keys: [...base, ...eids], args: head };
    return { script: 'publishCompactedIdempotent', keys: [...base, keys.partitionCompactionIndex(name, order, write.partition), ...eids], args: [...head, ...write.compactionKeys] };
  }
  if (write.compactionKeys === undefined) return { script: 'publishBatch', keys: base, args: [write.count, data, timeline.id] };
  return { script: 'publishCompacted', keys: [...base, keys.partitionCompactionIndex(name, order, write.partition)], args: [write.count, data, timeline.id, ...write.compactionKeys] };
}

/**
 * The `confirmReplicated` call that moves partition `partition`'s high watermark up to `confirmedNext`
 * (0: moves nothing, writes, and answers the partition's `next`, which a following `WAIT` then confirms;
 * docs/operations.md "Durability"). Shared with the replicated appender.
 */
export function confirmCall(keys: Keys, name: string, timeline: number, partition: string, confirmedNext: number): { script: 'confirmReplicated'; keys: string[]; args: ScriptArg[] } {
  return { script: 'confirmReplicated', keys: [keys.partitionMeta(name, timeline, partition), keys.partitionReplicatedNotices(name, timeline, partition)], args: [confirmedNext] };
}

/** The partition's `next` from a `confirmReplicated` reply, or undefined when the partition is gone (PARTITION_MISSING). */
export function confirmedNext(reply: unknown): number | undefined {
  return failureOf(reply, ['PARTITION_MISSING']) === undefined ? Number(reply) : undefined;
}

/** The scripts that append a batch's share of one partition (see {@link appendCall}). */
export type AppendScript = 'publishBatch' | 'publishCompacted' | 'publishIdempotent' | 'publishCompactedIdempotent';

/**
 * Outcome of writing one partition's share of a batch. Nothing was written when it failed; `closed`:
 * the partition's timeline was closed by a timeline switch (the publisher retries on the new timeline);
 * `missing`: the partition was never opened — its event type was deleted (the publisher answers 404);
 * `outOfMemory`: Redis refused it for lack of memory (the publisher names the master's state, 507 or 207).
 */
export type PartitionWrite = { readonly ok: true; readonly firstOffset: number } | { readonly ok: false; readonly reason: string; readonly closed?: true; readonly missing?: true; readonly outOfMemory?: true };

/** A write not acknowledged within its deadline: sent, so it may still land (docs/operations.md "Redis stalls"). */
export function timedOut(): PartitionWrite {
  return { ok: false, reason: 'timed out' };
}

/** The {@link PartitionWrite} of an append script's reply: the first offset, its TIMELINE_CLOSED or its PARTITION_MISSING. */
export function appendWrite(reply: unknown): PartitionWrite {
  const failure = failureOf(reply, ['TIMELINE_CLOSED', 'PARTITION_MISSING']);
  if (failure === 'TIMELINE_CLOSED') return { ok: false, reason: 'the event type is switching timelines', closed: true };
  if (failure === 'PARTITION_MISSING') return { ok: false, reason: 'the partition does not exist (the event type was deleted)', missing: true };
  return { ok: true, firstOffset: Number(reply) };
}

/**
 * The failed {@link PartitionWrite} for an append script's error (Redis failed or timed out). Redis
 * refusing it for memory (`OOM`) is `outOfMemory` with the `STORAGE_FULL` text, never Redis's.
 */
export function writeFailure(err: unknown): PartitionWrite {
  if (isOutOfMemory(err)) return { ok: false, reason: storageFullDetail(undefined, 'out_of_memory'), outOfMemory: true };
  const message = err instanceof Error ? err.message : String(err);
  return /timed out/i.test(message) ? timedOut() : { ok: false, reason: `storage error: ${message}` };
}

/** Events of one partition with contiguous offsets: `count` JSON texts joined by `\n`, the first at offset `first`. */
export interface EventSegment {
  readonly first: number;
  readonly count: number;
  readonly data: Buffer;
}

/** What one read returned. */
export interface PartitionSlice {
  /** In offset order; empty when nothing is newer. */
  readonly segments: readonly EventSegment[];
  /** True when the read stopped at `maxEntries`: more entries may follow. */
  readonly more: boolean;
}

const NEWLINE = 0x0a;

/** Stream entries one page of a time seek reads ({@link PartitionStore.seekTime}). */
export const SEEK_PAGE_ENTRIES = 100;
/** The most stream entries a time seek compares before it answers at the index's one-second granularity. */
export const SEEK_MAX_ENTRIES = 10_000;

/**
 * Partition logs on Redis Streams with dense offsets (docs/architecture.md#34-the-write-publishbatch-dense-offsets-notices): one stream entry per partition per
 * batch, written by `publishBatch`; ranges are O(1) reads of the partition's counters.
 *
 * With a `watermark` (appends wait for replicas and so do reads: docs/operations.md "Durability"), every
 * read stops at the partition's high watermark (`replicated` in its meta hash; src/domain/cursor/high-watermark.ts):
 * ranges end below it, reads leave the entries at or past it out, and readers are woken by its notices
 * ({@link noticeChannel}); each read that finds events beyond it tells the observer, which confirms a
 * partition whose watermark stopped moving.
 */
export class PartitionStore {
  /**
   * @param watermark set when reads wait for replicas: told of every partition a read finds with events
   *   beyond its watermark
   */
  constructor(
    private readonly redis: RedisClient,
    private readonly scripts: Scripts,
    private readonly keys: Keys,
    private readonly watermark?: WatermarkObserver,
  ) {}

  /** Whether reads stop at the high watermark (see the class). */
  get guarded(): boolean {
    return this.watermark !== undefined;
  }

  /**
   * The channel whose notices announce that a partition has more for readers: the replicated-offset
   * notices when reads wait for replicas, else the append notices (docs/architecture.md "Wake-ups on sharded channels").
   */
  noticeChannel(name: string, timeline: number, partition: string): string {
    return this.guarded ? this.keys.partitionReplicatedNotices(name, timeline, partition) : this.keys.partitionNotices(name, timeline, partition);
  }

  private keysOf(name: string, timeline: number, partition: string): [string, string, string] {
    return [this.keys.partitionMeta(name, timeline, partition), this.keys.partitionLog(name, timeline, partition), this.keys.partitionTimeIndex(name, timeline, partition)];
  }

  /**
   * Appends events to several partitions at once (one script call each, sent together in one socket
   * write on a standalone Redis). Never throws: each partition reports its own outcome so the caller
   * can answer 207 for partial failures.
   * On a Redis Cluster, auto-pipelining groups the calls per node (one pipeline per master, never one
   * across nodes); each partition's script runs atomically in its own slot and fails on its own (a dead
   * master fails only its partitions, after ioredis's retries; docs/operations.md "Redis Cluster").
   * @param timeline the active timeline: its order names the keys, its id is checked against the one each
   *   partition recorded when opened (another id: `missing`)
   * @param writes partition id → (event count, events joined by `\n`, compaction keys for compacted types)
   * @param deadlineAt `performance.now()` ms by which each partition reports (docs/operations.md "Redis stalls"): a script
   *   not answered by then is reported `timed out` (it was sent, so it may still be written)
   */
  async append(name: string, timeline: TimelineRef, writes: readonly PartitionAppend[], deadlineAt?: number): Promise<PartitionWrite[]> {
    const written = writes.map(async (w): Promise<PartitionWrite> => {
      try {
        const call = appendCall(this.keys, name, timeline, w);
        return appendWrite(await this.scripts.run(call.script, call.keys, call.args));
      } catch (err) {
        return writeFailure(err);
      }
    });
    return settleEachBy(written, deadlineAt, timedOut);
  }

  /**
   * The available range of each partition (`oldest` first retained offset, `newest` last written — or, when
   * reads wait for replicas, last below the high watermark — or oldest-1).
   */
  async ranges(name: string, timeline: number, partitions: readonly string[]): Promise<PartitionRange[]> {
    // One command per partition, sent together (one socket write per node). An explicit
    // pipeline would span the slots of every partition, which a cluster refuses.
    const fields = this.guarded ? ['next', 'oldest', 'replicated'] : ['next', 'oldest'];
    const results = await Promise.all(partitions.map((p) => this.redis.hmget(this.keys.partitionMeta(name, timeline, p), ...fields))).catch(storageError);
    return results.map(([next, oldest, replicated], i) => {
      const counters = { next: Number(next ?? 0), oldest: Number(oldest ?? 0), replicated: replicated == null ? undefined : Number(replicated) };
      const readable = readableNext(counters, this.guarded);
      if (this.watermark) this.watermark.observe(name, timeline, partitions[i] as string, counters.replicated ?? 0, counters.next > readable);
      return { oldest: counters.oldest, newest: readable - 1 };
    });
  }

  /**
   * Reads the events after offset `after` (the last consumed one) of one partition: up to `maxEntries`
   * stream entries, each one batch's share of the partition
   * (docs/decisions/0001-one-stream-entry-per-partition-per-batch.md), as raw bytes. Entries are
   * `<offset after the entry>-0`, so the entry holding offset `after + 1` is the first with id ≥
   * `after + 2`. Compressed entries (field `z`: src/domain/batch/entry-codec.ts) are decompressed here, so
   * every reader gets the texts joined by `\n` whichever way they were stored. Events of the first entry
   * at or before `after` are cut off. An expired `after` reads
   * from the oldest retained entry. When reads wait for replicas, the watermark is read with the entries
   * (one round trip: both are in the partition's slot) and entries ending past it are left out; whichever
   * runs first, the result holds, as the watermark only moves up and the entries below it never change.
   * @returns one segment per entry (events joined by `\n`, contiguous offsets), in offset order
   * @throws BrokerError 503 when Redis fails
   */
  async read(name: string, timeline: number, partition: string, after: number, maxEntries: number): Promise<PartitionSlice> {
    const log = this.keys.partitionLog(name, timeline, partition);
    const [replicated, read] = await Promise.all([
      this.guarded ? this.redis.hget(this.keys.partitionMeta(name, timeline, partition), 'replicated') : undefined,
      this.redis.xrangeBuffer(log, `${after + 2}-0`, '+', 'COUNT', maxEntries),
    ]).catch(storageError);
    let entries = read;
    let more = read.length >= maxEntries;
    if (this.watermark) {
      const watermark = Number(replicated ?? 0);
      const readable = readableEntries(read.map(([id]) => Number.parseInt(id.toString(), 10)), watermark);
      if (readable < read.length) {
        entries = read.slice(0, readable);
        more = false;
      }
      this.watermark.observe(name, timeline, partition, watermark, readable < read.length);
    }
    const segments: EventSegment[] = [];
    for (const [id, fields] of entries) {
      const end = Number.parseInt(id.toString(), 10);
      const count = Number((fields[1] ?? Buffer.alloc(0)).toString());
      let first = end - count;
      let skip = after + 1 - first;
      if (skip >= count) continue;
      let data = decodeEntry(fields[2] ?? PLAIN_FIELD, fields[3] ?? Buffer.alloc(0));
      let position = 0;
      for (; skip > 0; skip--) position = data.indexOf(NEWLINE, position) + 1;
      if (position > 0) {
        data = data.subarray(position);
        first = Math.max(first, after + 1);
      }
      segments.push({ first, count: end - first, data });
    }
    return { segments, more };
  }

  /**
   * The first offset the time index records at unix second `second` or later (the first event received
   * in the earliest indexed second ≥ `second`), or undefined when every indexed second is earlier. One
   * `ZRANGEBYSCORE … LIMIT 0 1` (O(log n)); docs/consuming.md "Seeking by time".
   * @throws BrokerError 503 when Redis fails
   */
  async indexedFrom(name: string, timeline: number, partition: string, second: number): Promise<number | undefined> {
    const [member] = await this.redis.zrangebyscore(this.keys.partitionTimeIndex(name, timeline, partition), second, '+inf', 'LIMIT', 0, 1).catch(storageError);
    return member === undefined ? undefined : Number(member);
  }

  /**
   * The first offset of this timeline's partition whose event was received at or after `atMs` (unix
   * ms), or undefined when none is (docs/consuming.md "Seeking by time"). With `exact` the time index
   * narrows the search to the events indexed in the seconds around `atMs` (one second before to one
   * after, for the moments between receiving a batch and appending it), whose stream entries are read
   * in pages and compared by `metadata.received_at`; the events indexed two seconds later or more count
   * as later. After {@link SEEK_MAX_ENTRIES} entries without an answer, or without `exact` (events
   * without `received_at`), the answer has the index's one-second granularity: the first event indexed
   * in `atMs`'s second or later.
   * @throws BrokerError 503 when Redis fails
   */
  async seekTime(name: string, timeline: number, partition: string, atMs: number, exact: boolean): Promise<number | undefined> {
    const second = Math.floor(atMs / 1000);
    if (!exact) return this.indexedFrom(name, timeline, partition, second);
    const [low, high] = await Promise.all([this.indexedFrom(name, timeline, partition, second - 1), this.indexedFrom(name, timeline, partition, second + 2)]);
    if (low === undefined) return undefined;
    let after = low - 1;
    for (let scanned = 0; scanned < SEEK_MAX_ENTRIES; ) {
      const slice = await this.read(name, timeline, partition, after, SEEK_PAGE_ENTRIES);
      const within = high === undefined ? slice.segments : slice.segments.filter((s) => s.first < high);
      const hit = firstReceivedAtOrAfter(within, atMs);
      if (hit !== undefined) return hit;
      const last = within[within.length - 1];
      if (!slice.more || last === undefined || within.length < slice.segments.length) return high;
      after = last.first + last.count - 1;
      scanned += slice.segments.length;
    }
    return this.indexedFrom(name, timeline, partition, second);
  }

  /** Removes entries received before `cutoffSeconds` (unix seconds). @returns the new oldest offset */
  async trim(name: string, timeline: number, partition: string, cutoffSeconds: number): Promise<number> {
    return Number(await this.scripts.run('trimPartition', this.keysOf(name, timeline, partition), [cutoffSeconds]).catch(storageError));
  }

  /**
   * Closes a partition of a timeline for appends (a timeline switch: docs/architecture.md#36-timelines): from now on every
   * append answers TIMELINE_CLOSED. Atomic with respect to appends, idempotent.
   * @returns the partition's last offset (-1 = none) at the moment it closed
   * @throws BrokerError 503 when Redis fails
   */
  async close(name: string, timeline: number, partition: string): Promise<number> {
    const meta = this.keys.partitionMeta(name, timeline, partition);
    const results = await this.redis.multi().hset(meta, 'closed', '1').hget(meta, 'next').exec().catch(storageError);
    const next = results?.[1]?.[1];
    return Number(typeof next === 'string' ? next : 0) - 1;
  }

  /**
   * Prepares a partition of a new timeline to continue at internal offset `first` (its next event gets
   * `first`; its range is empty until then) and records the timeline's id in its meta hash (field
   * `timeline`: appends for another id are refused) and, when reads wait for replicas, its high watermark
   * (`replicated` = `first`: no event of it lies below). Idempotent: an existing partition is left as it
   * is (a meta written before timeline ids were recorded gets the field).
   * @throws BrokerError 503 when Redis fails
   */
  async open(name: string, timeline: TimelineRef, partition: string, first: number): Promise<void> {
    const meta = this.keys.partitionMeta(name, timeline.order, partition);
    const opening = this.redis.multi().hsetnx(meta, 'next', first).hsetnx(meta, 'oldest', first).hsetnx(meta, 'timeline', timeline.id);
    await (this.guarded ? opening.hsetnx(meta, 'replicated', first) : opening).exec().catch(storageError);
  }

  /**
   * Deletes every key of partitions `0 .. partitionCount - 1` of one timeline (one `DEL` per partition:
   * its keys share a slot, partitions do not). @throws BrokerError 503 when Redis fails
   */
  async drop(name: string, timeline: number, partitionCount: number): Promise<void> {
    await Promise.all(
      Array.from({ length: partitionCount }, (_, i) => {
        const p = String(i);
        return this.redis.del(
          this.keys.partitionLog(name, timeline, p),
          this.keys.partitionMeta(name, timeline, p),
          this.keys.partitionTimeIndex(name, timeline, p),
          this.keys.partitionCompactionIndex(name, timeline, p),
          this.keys.partitionTombstones(name, timeline, p),
          this.keys.partitionEids(name, timeline, p, 'a'),
          this.keys.partitionEids(name, timeline, p, 'b'),
        );
      }),
    ).catch(storageError);
  }

  /**
   * Takes the retention lock of an event type for `ttlMs` if it is free, or renews it for its holder
   * (`holdLock-1.lua`): one node trims an event type at a time; another takes over once it lapses.
   * @returns whether `owner` holds it now
   * @throws BrokerError 503 when Redis fails
   */
  async holdRetentionLock(name: string, owner: string, ttlMs: number): Promise<boolean> {
    return failureOf(await this.scripts.run('holdLock', [this.keys.retentionLock(name)], [owner, ttlMs]).catch(storageError), ['LOCK_HELD']) === undefined;
  }
}
