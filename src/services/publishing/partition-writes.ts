import type { BrokerConfig } from '../../config/config-schema.js';
import { brokerError, type BrokerError } from '../../errors/catalog.js';
import type { MasterMemory } from '../../domain/storages/memory-budget.js';
import type { StorageFullMeter } from '../../observability/meters.js';
import type { PartitionAppend, PartitionWrite } from '../../storage/partition-store.js';
import type { PartitionLogs } from '../../storage/partition-logs.js';
import { storageFull, storageFullDetail, type StorageFullCause } from '../../storage/storage-full.js';
import type { RedisWaitBudget } from '../../util/deadline.js';
import type { CachedEventType, EventTypeCache } from '../event-types/event-type-cache.js';

/**
 * The partition writes of a validated batch (docs/publishing.md "Answers"; docs/operations.md "Memory
 * and retention"; docs/concepts.md "Timelines and storages"), for the {@link Publisher}: only to
 * masters with room, written again on the next timeline when a switch closed the partitions, and on
 * partitions opened anew when they were never opened.
 */
export class PartitionWrites {
  private readonly timelineSwitchWaitMs: number;

  /**
   * @param cache the event types, read again when a timeline switch or missing partitions need it
   * @param logs the partition logs written to
   * @param config `publish.timelineSwitchWaitMs`: how long a batch waits for the new timeline
   * @param storageFullMeter counts publishes refused in whole or in part for memory
   */
  constructor(
    private readonly cache: EventTypeCache,
    private readonly logs: PartitionLogs,
    config: Pick<BrokerConfig['publish'], 'timelineSwitchWaitMs'>,
    private readonly storageFullMeter: StorageFullMeter | undefined,
  ) {
    this.timelineSwitchWaitMs = config.timelineSwitchWaitMs;
  }

  /**
   * Writes the partitions whose Redis master has room (docs/operations.md "Memory and retention"): a
   * partition whose master is at or above its high-water mark is not sent (failed with the
   * `STORAGE_FULL` text naming the master); a partition Redis refused for memory itself (`OOM`: a burst
   * past the mark, another client) is failed the same way, and the node reads its masters again at once.
   * When no partition was written and each was refused for memory, the batch is refused: 507, nothing
   * written. Otherwise the answer tells each partition's true state (a 207 on a Redis Cluster whose
   * batch spans full and other masters; on a standalone Redis the one master is full or not, so a batch
   * is written whole or refused whole).
   * @param deadlineAt `performance.now()` ms of the request's deadline: partitions are written again (a
   *   timeline switch, partitions never opened) only before it
   * @returns per append, in order, its outcome (see {@link write})
   * @throws BrokerError 507 STORAGE_FULL, 503 TIMELINE_SWITCHING, 404 (see {@link write})
   */
  async writeWithRoom(eventType: CachedEventType, appends: readonly PartitionAppend[], budget: RedisWaitBudget, deadlineAt: number): Promise<PartitionWrite[]> {
    const name = eventType.record.name;
    const atMark = this.logs.fullMasters(name, eventType.timelines, appends.map((a) => a.partition));
    const sent = appends.filter((_, i) => atMark[i] === undefined);
    if (sent.length === 0) throw this.refusedForMemory(atMark[0], 'high_water_mark');
    const written = await this.write(eventType, sent, budget, deadlineAt);
    if (written.every((w) => !w.ok && w.closed === true)) {
      throw brokerError('TIMELINE_SWITCHING', { name });
    }
    let j = 0;
    const writes = appends.map((_, i): PartitionWrite => {
      const master = atMark[i];
      return master === undefined ? (written[j++] as PartitionWrite) : { ok: false, reason: storageFullDetail(master, 'high_water_mark') };
    });
    const outOfMemory = writes.flatMap((w, i) => (!w.ok && w.outOfMemory === true ? [i] : []));
    if (outOfMemory.length > 0) {
      void this.logs.memoryOf(eventType.timelines.active)?.refresh();
      for (const i of outOfMemory) writes[i] = { ok: false, reason: storageFullDetail(this.logs.masterOf(name, eventType.timelines, (appends[i] as PartitionAppend).partition), 'out_of_memory'), outOfMemory: true };
    }
    const refusedForMemory = outOfMemory.length + atMark.filter((m) => m !== undefined).length;
    if (refusedForMemory === 0) return writes;
    const cause: StorageFullCause = outOfMemory.length > 0 ? 'out_of_memory' : 'high_water_mark';
    if (refusedForMemory === writes.length) {
      const first = outOfMemory[0];
      throw this.refusedForMemory(first === undefined ? atMark.find((m) => m !== undefined) : this.logs.masterOf(name, eventType.timelines, (appends[first] as PartitionAppend).partition), cause);
    }
    this.storageFullMeter?.publishStorageFull(cause);
    return writes;
  }

  /**
   * The 507 `STORAGE_FULL` of a publish refused for memory (naming the master, when known), counted in
   * `broker_publish_storage_full_total` by cause. @returns the error to throw
   */
  refusedForMemory(master: MasterMemory | undefined, cause: StorageFullCause): BrokerError {
    this.storageFullMeter?.publishStorageFull(cause);
    return storageFull(master, cause);
  }

  /**
   * Appends to the active timeline; partitions refused because a timeline switch closed them are
   * written again on the next timeline once this node sees it (polling the registry every 20 ms, at
   * most `publish.timelineSwitchWaitMs`); partitions refused as never opened go to {@link writeMissing}.
   * Every Redis step waits within `budget`: a partition not acknowledged in time is failed `timed out`.
   * Writes again (closed or missing partitions) only while the request's deadline has not passed; the
   * partitions not written again stay failed.
   * @throws BrokerError 404 when the event type was deleted (only then)
   */
  private async write(eventType: CachedEventType, appends: readonly PartitionAppend[], budget: RedisWaitBudget, requestDeadlineAt: number): Promise<PartitionWrite[]> {
    const name = eventType.record.name;
    const writes = await budget.within((deadlineAt) => this.logs.append(name, eventType.timelines, appends, deadlineAt));
    if (writes.some((w) => !w.ok && w.missing === true)) await this.writeMissing(eventType, appends, writes, budget, requestDeadlineAt);
    if (!writes.some((w) => !w.ok && w.closed === true)) return writes;
    const deadline = Date.now() + this.timelineSwitchWaitMs;
    let closedOrder = eventType.timelines.active.order;
    while (Date.now() < deadline && performance.now() < requestDeadlineAt) {
      const current = await budget.wait(this.cache.reload(name).catch(() => undefined), () => undefined);
      if (current === undefined || performance.now() >= requestDeadlineAt) break;
      if (current.timelines.active.order === closedOrder) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        continue;
      }
      const retry = appends.filter((_, i) => { const w = writes[i]; return w !== undefined && !w.ok && w.closed === true; });
      const again = await budget.within((deadlineAt) => this.logs.append(name, current.timelines, retry, deadlineAt));
      let j = 0;
      writes.forEach((w, i) => {
        if (!w.ok && w.closed === true) writes[i] = again[j++] as PartitionWrite;
      });
      if (!writes.some((w) => !w.ok && w.closed === true)) return writes;
      closedOrder = current.timelines.active.order;
    }
    return writes;
  }

  /**
   * Partitions that refused the append as never opened or opened for another timeline id
   * (PARTITION_MISSING): the event type is read from Redis again. Gone — it was deleted and this node
   * still held its copy — the batch is answered 404 (appending would have created keys no event type
   * owns; whatever of it was written went with the deletion). Created again under the same name since
   * (another first timeline id; its partitions record that id and refuse the batch), the batch was
   * validated and partitioned for the deleted one: 404 as well, so the producer sends it again to the new
   * one. Still the same event type — created before partitions were opened, or a publish that came before
   * its creation opened them — the partitions are opened on the active timeline and written again.
   * Replaces the entries of `writes` it wrote (in place); a Redis failure leaves them failed.
   * @param eventType the copy the batch was processed with
   * @throws BrokerError 404 when that event type no longer exists
   */
  private async writeMissing(eventType: CachedEventType, appends: readonly PartitionAppend[], writes: PartitionWrite[], budget: RedisWaitBudget, requestDeadlineAt: number): Promise<void> {
    const name = eventType.record.name;
    const current = await budget.wait(
      this.cache.reload(name).then((reloaded) => reloaded ?? null, () => undefined),
      () => undefined,
    );
    if (current === undefined) return; // Redis did not answer: the partitions stay failed
    if (current === null || current.timelines.all[0]?.id !== eventType.timelines.all[0]?.id) throw brokerError('EVENT_TYPE_NOT_FOUND', { name });
    const missing = writes.flatMap((w, i) => (!w.ok && w.missing === true ? [i] : []));
    const retry = missing.map((i) => appends[i] as PartitionAppend);
    const opened = await budget.wait(
      this.logs.openPartitions(name, current.timelines.active, retry.map((a) => a.partition)).then(() => true, () => false),
      () => false,
    );
    if (!opened || performance.now() >= requestDeadlineAt) return;
    const again = await budget.within((deadlineAt) => this.logs.append(name, current.timelines, retry, deadlineAt));
    missing.forEach((i, j) => {
      writes[i] = again[j] as PartitionWrite;
    });
  }
}
