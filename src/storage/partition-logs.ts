import type { MasterMemory } from '../domain/storages/memory-budget.js';
import type { PartitionRange } from '../domain/cursor/offsets.js';
import { firstOffset, type StoredTimeline, type TimelineMap } from '../domain/storages/timeline.js';
import { brokerError } from '../errors/catalog.js';
import { settleBy } from '../util/deadline.js';
import type { PartitionAppend, PartitionSlice, PartitionWrite } from './partition-store.js';
import type { PartitionChangeFeed } from './partition-wakeups.js';
import type { RedisMemoryWatch } from './redis/redis-memory.js';
import type { StorageHandle, StoragePool } from './storage-pool.js';

/**
 * An event type's partitions over all its timelines (docs/concepts.md "Timelines and storages"; `domain/storages/timeline.ts`): appends go
 * to the active timeline's storage; ranges span the live timelines (oldest from the first one that
 * still holds events, newest from the active one); a read after an offset goes to the timeline holding
 * the next offset, so a reader that reaches the end of a closed timeline continues on the next one with
 * no gap and no duplicate. Offsets are the internal, continuous ones.
 */
export class PartitionLogs {
  constructor(private readonly pool: StoragePool) {}

  /**
   * The storage of a timeline. @throws BrokerError 503 when it cannot be opened
   */
  async storageOf(t: StoredTimeline): Promise<StorageHandle> {
    return this.storage(t.storageId);
  }

  /** A storage by id, opened on first use. @throws BrokerError 503 when it cannot be opened */
  async storage(id: string): Promise<StorageHandle> {
    return this.pool.peek(id) ?? this.pool.open(id);
  }

  /**
   * Appends to the active timeline (see `PartitionStore.append`), confirmed by replicas when its
   * storage has a replicated appender (`publish.minReplicas` ≥ 1; docs/operations.md "Durability"). Never throws: a
   * storage that cannot be opened fails every write; a closed timeline (a switch is running) fails
   * with `closed`.
   * @param deadlineAt `performance.now()` ms by which every write reports (docs/operations.md "Redis stalls"): one not
   *   acknowledged by then is `timed out` (see `PartitionStore.append`); opening the storage counts too
   */
  async append(name: string, timelines: TimelineMap, writes: readonly PartitionAppend[], deadlineAt?: number): Promise<PartitionWrite[]> {
    const active = timelines.active;
    const opened = this.storageOf(active).then(
      (handle) => ({ handle }),
      (err: unknown) => ({ failed: (err as Error).message }),
    );
    const storage = await settleBy<{ handle: StorageHandle } | { failed: string }>(opened, deadlineAt, () => ({ failed: 'timed out' }));
    if ('failed' in storage) return writes.map(() => ({ ok: false, reason: storage.failed }));
    const { handle } = storage;
    const written = handle.replicated !== undefined ? await handle.replicated.append(name, active, writes, handle.keys, deadlineAt) : await handle.partitions.append(name, active, writes, deadlineAt);
    // The memory watch counts what this node appended until its next read of the masters.
    written.forEach((w, i) => {
      const write = writes[i];
      if (w.ok && write !== undefined) handle.memory.noteAppended(handle.keys.partitionLog(name, active.order, write.partition), write.data.byteLength + (write.idempotency?.eidKeys.byteLength ?? 0));
    });
    return written;
  }

  /**
   * The memory watch of a timeline's storage when this node has opened that storage (publishing opens
   * the active timeline's), else undefined (docs/operations.md "Memory and retention").
   */
  memoryOf(t: StoredTimeline): RedisMemoryWatch | undefined {
    return this.pool.peek(t.storageId)?.memory;
  }

  /**
   * A master of the active timeline's storage when every master of it is at or above its high-water
   * mark, so a publish is refused (507) before its events are looked at; else undefined. A map lookup.
   */
  storageFull(timelines: TimelineMap): MasterMemory | undefined {
    return this.memoryOf(timelines.active)?.allFull();
  }

  /**
   * Per partition of the active timeline (in the order given), the master holding it when that master is
   * at or above its high-water mark (the partition's share of a batch is refused), else undefined.
   * Map lookups: a partition's master from its hash tag's slot, its state from the last periodic read.
   */
  fullMasters(name: string, timelines: TimelineMap, partitions: readonly string[]): (MasterMemory | undefined)[] {
    const handle = this.pool.peek(timelines.active.storageId);
    if (handle === undefined || !handle.memory.anyFull()) return partitions.map(() => undefined);
    return partitions.map((p) => handle.memory.fullMasterOf(handle.keys.partitionLog(name, timelines.active.order, p)));
  }

  /** The last known state of the master holding a partition of the active timeline (named when Redis refused a write for memory). */
  masterOf(name: string, timelines: TimelineMap, partition: string): MasterMemory | undefined {
    const handle = this.pool.peek(timelines.active.storageId);
    return handle?.memory.masterOf(handle.keys.partitionLog(name, timelines.active.order, partition));
  }

  /**
   * The available range of each partition over its live timelines (internal offsets).
   * @throws BrokerError 503 when a storage fails
   */
  async ranges(name: string, timelines: TimelineMap, partitions: readonly string[]): Promise<PartitionRange[]> {
    const active = timelines.active;
    const current = await (await this.storageOf(active)).partitions.ranges(name, active.order, partitions);
    if (timelines.all.length === 1) return current;
    return Promise.all(
      partitions.map(async (partition, i) => {
        const range = current[i] as PartitionRange;
        const p = Number(partition);
        for (const t of timelines.live(p)) {
          if (t === active) break;
          const last = t.lastOffsets?.[p] ?? -1;
          if (last < firstOffset(t, p)) continue;
          const [own] = await (await this.storageOf(t)).partitions.ranges(name, t.order, [partition]);
          const oldest = Math.max(own?.oldest ?? 0, firstOffset(t, p));
          if (oldest <= last) return { oldest, newest: range.newest };
        }
        return range;
      }),
    );
  }

  /**
   * The cursor (internal "last consumed" offset) from which partition `partition` streams the first
   * event received at or after `atMs` (unix ms): the offset before that event; `range.oldest - 1` (as
   * `BEGIN`) when every retained event is later; `range.newest` when none is at or after it. Searches
   * the live timelines oldest first, each with `PartitionStore.seekTime` (docs/consuming.md "Seeking by time").
   * @param range the partition's available range ({@link ranges})
   * @param exact compare `metadata.received_at` (false for events without it: one-second granularity)
   * @throws BrokerError 503 when a storage fails
   */
  async cursorAtTime(name: string, timelines: TimelineMap, partition: string, range: PartitionRange, atMs: number, exact: boolean): Promise<number> {
    const p = Number(partition);
    for (const t of timelines.live(p)) {
      const last = t === timelines.active ? range.newest : (t.lastOffsets?.[p] ?? -1);
      if (last < Math.max(firstOffset(t, p), range.oldest)) continue;
      const found = await (await this.storageOf(t)).partitions.seekTime(name, t.order, partition, atMs, exact);
      if (found !== undefined && found <= last) return Math.max(found, range.oldest) - 1;
    }
    return range.newest;
  }

  /**
   * Reads up to `maxEntries` stream entries after internal offset `after` from the timeline holding
   * `after + 1` (a cleaned-up timeline is skipped: the read continues at the next one's start and the
   * caller sees the gap as expired events). See `PartitionStore.read`.
   * @throws BrokerError 503 when the storage fails
   */
  async read(name: string, timelines: TimelineMap, partition: string, after: number, maxEntries: number): Promise<PartitionSlice> {
    const p = Number(partition);
    let from = after;
    let { timeline } = timelines.readAt(p, from);
    while (timeline.cleanedUpAt !== undefined && timeline !== timelines.active) {
      const next = timelines.byOrder(timeline.order + 1) as StoredTimeline;
      from = Math.max(from, firstOffset(next, p) - 1);
      ({ timeline } = timelines.readAt(p, from));
    }
    return (await this.storageOf(timeline)).partitions.read(name, timeline.order, partition, from, maxEntries);
  }

  /**
   * Where the notices that a partition has more for readers arrive: the active timeline's channel —
   * append notices, or the high watermark's when reads wait for replicas (`PartitionStore.noticeChannel`) —
   * and the hub of its storage. @throws BrokerError 503 when the storage cannot be opened
   */
  async notices(name: string, timelines: TimelineMap, partition: string): Promise<{ wakeups: PartitionChangeFeed; channel: string; order: number }> {
    const active = timelines.active;
    const handle = await this.storageOf(active);
    return { wakeups: handle.wakeups, channel: handle.partitions.noticeChannel(name, active.order, partition), order: active.order };
  }

  /**
   * Confirms the partitions of timeline `t` as they are, when its storage's reads wait for replicas
   * (docs/operations.md "Durability", "Storages and timelines"): after a timeline is closed, so that its
   * last events — appended, perhaps not yet confirmed — lie below its high watermark before readers are
   * told where the timeline ends (a closed timeline takes no more appends that could confirm them). Nothing
   * to do otherwise.
   * @param partitions the partitions that hold events on `t` (one without any has nothing to confirm)
   * @throws BrokerError 503 when a partition's replicas did not confirm within `publish.replicaTimeoutMs`
   */
  async confirmPartitions(name: string, t: StoredTimeline, partitions: readonly string[]): Promise<void> {
    const handle = await this.storageOf(t);
    if (!handle.partitions.guarded || handle.replicated === undefined) return;
    const moved = await handle.replicated.confirm(partitions.map((partition) => ({ name, timeline: t.order, partition })), handle.keys);
    const short = partitions.filter((_, i) => moved[i] !== true);
    if (short.length > 0) {
      throw brokerError('STORAGE_UNAVAILABLE', { reason: `the replicas did not confirm the last events of partitions ${short.join(', ')} of timeline ${t.order} of event type "${name}" within ${handle.replicated.timeoutMs} ms` });
    }
  }

  /**
   * Opens `partitions` of timeline `t` in its storage, each to continue at its first offset on `t`
   * (`PartitionStore.open`; idempotent): an append to a partition never opened answers PARTITION_MISSING.
   * Called when a timeline is created with its event type and when the
   * partition count grows (docs/operations.md "Repartitioning"), and by a publish that finds an
   * existing event type's partition never opened.
   * @param partitions partition ids (decimal strings, `0 .. partitionCount - 1`)
   * @throws BrokerError 503
   */
  async openPartitions(name: string, t: StoredTimeline, partitions: readonly string[]): Promise<void> {
    const handle = await this.storageOf(t);
    await Promise.all(partitions.map((p) => handle.partitions.open(name, t, p, firstOffset(t, Number(p)))));
  }

  /**
   * Deletes every key of partitions `0 .. partitionCount - 1` of one timeline in its storage (event
   * type deletion, timeline clean-up). @throws BrokerError 503
   */
  async dropTimeline(name: string, t: StoredTimeline, partitionCount: number): Promise<void> {
    const handle = await this.storageOf(t);
    await handle.partitions.drop(name, t.order, partitionCount);
  }
}
