import type { BrokerConfig } from '../config/config-schema.js';
import { partitionIds } from '../domain/event-type/event-type.js';
import { ASSUMED_REDIS_BYTES_PER_JSON_BYTE } from '../domain/storages/memory-budget.js';
import type { StoredTimeline } from '../domain/storages/timeline.js';
import type { Logger } from '../observability/logger.js';
import type { EventTypeStorageSample } from '../observability/meters.js';
import type { EventTypeStore, StoredEventType } from '../storage/event-type-store.js';
import type { PartitionLogs } from '../storage/partition-logs.js';
import { masterNodeOf } from '../storage/redis/redis-memory.js';
import { PeriodicRounds } from './periodic-rounds.js';

/** One partition's keys on one timeline, as last measured. */
interface PartitionUsage {
  readonly bytes: number;
  /** Events retained (`next − oldest` of its meta hash). */
  readonly events: number;
  readonly atMs: number;
  /** Net bytes per second since the measurement before (0 after the first). */
  readonly rate: number;
}

/** The usage of one event type: its partitions' on each live timeline, keyed `<timeline order>:<partition>`. */
interface EventTypeUsage {
  readonly partitions: Map<string, PartitionUsage>;
  /** compact or compact_and_delete: retained events are not `next − oldest`, so it is left out of the ratio. */
  compacted: boolean;
}

/** JSON bytes measured below this are too few for a ratio (a partition's fixed overhead would dominate it). */
const MIN_MEASURED_JSON_BYTES = 1024 * 1024;

/** What a {@link StorageUsage} works with. */
export interface StorageUsageOptions {
  readonly eventTypes: Pick<EventTypeStore, 'names' | 'get'>;
  readonly logs: Pick<PartitionLogs, 'storageOf'>;
  readonly config: Pick<BrokerConfig['redisMemory'], 'usageIntervalMs' | 'usagePartitionsPerRound' | 'usageSamples'>;
  /** Mean JSON bytes of the events this node wrote to an event type (`BrokerMetrics.publishedBytesPerEvent`), undefined when it wrote none. */
  readonly jsonBytesPerEvent: (eventType: string) => number | undefined;
  readonly logger: Logger;
  /** Monotonic ms (default `performance.now`). */
  readonly clock?: () => number;
}

/**
 * The Redis bytes each event type holds (docs/metrics.md "Redis memory"; `broker_event_type_stored_bytes`):
 * every `redisMemory.usageIntervalMs` a round measures up to `redisMemory.usagePartitionsPerRound`
 * partitions, each on every live timeline in its storage — `MEMORY USAGE <key> SAMPLES n` of each of the
 * partition's keys (its stream, meta hash, time index, compaction index and tombstones, eid sets) and its
 * retained event count (`next − oldest`) — going through every event type's partitions in turn, so the work
 * of a round is bounded whatever the catalog's size. These are Redis's own bytes of what is stored,
 * so they stay right whatever the stored format (plain or compressed event texts).
 *
 * An event type's bytes are the sum of its partitions' last measurements, its growth the sum of their
 * net rates (each between its last two measurements). The ratio of Redis bytes to event JSON bytes
 * ({@link redisBytesPerJsonByte}) divides the bytes of the event types this node wrote to by their
 * retained events times the mean JSON size of the events this node wrote (compacted event types left
 * out); the capacity warning of event type creation uses it.
 *
 * Memory: one record per partition and live timeline of existing event types; a deleted event type's
 * go with it ({@link forget}, and at the next pass for a deletion this node missed).
 */
export class StorageUsage {
  private readonly usage = new Map<string, EventTypeUsage>();
  /** Event types left to measure in this pass, and the partitions of the one being measured. */
  private pending: string[] = [];
  private current: { readonly name: string; readonly units: { readonly timeline: StoredTimeline; readonly partition: string }[] } | undefined;
  /** Event types seen in this pass (the others are dropped when it ends). */
  private seen = new Set<string>();
  private readonly schedule: PeriodicRounds;
  private readonly clock: () => number;

  constructor(private readonly options: StorageUsageOptions) {
    this.clock = options.clock ?? (() => performance.now());
    this.schedule = new PeriodicRounds(options.config.usageIntervalMs, () => this.runOnce(), options.logger, 'storage usage');
  }

  /** Starts the rounds (one at a time; a failed round is logged and retried next interval). */
  start(): void {
    this.schedule.start();
  }

  /** Stops the rounds; resolves when a running round finished. */
  async stop(): Promise<void> {
    await this.schedule.stop();
  }

  /** The event type was deleted: its series go. */
  forget(name: string): void {
    this.usage.delete(name);
    if (this.current?.name === name) this.current = undefined;
  }

  /**
   * One round: measures up to `usagePartitionsPerRound` partitions, continuing where the last round
   * stopped; a pass that ended starts again with the current event types (dropping the deleted ones).
   * @returns partitions measured
   */
  async runOnce(): Promise<number> {
    const budget = this.options.config.usagePartitionsPerRound;
    let measured = 0;
    let startedPass = false;
    while (measured < budget) {
      if (this.current === undefined || this.current.units.length === 0) {
        const name = this.pending.shift();
        if (name === undefined) {
          if (startedPass) break; // every event type is measured within one round: wait for the next
          this.endPass();
          this.pending = await this.options.eventTypes.names();
          startedPass = true;
          continue;
        }
        const stored = await this.options.eventTypes.get(name);
        if (stored === undefined) {
          this.forget(name);
          continue;
        }
        this.seen.add(name);
        this.current = { name, units: unitsOf(stored) };
        const usage = this.usage.get(name);
        const compacted = stored.record.cleanup_policy !== 'delete';
        if (usage === undefined) this.usage.set(name, { partitions: new Map(), compacted });
        else usage.compacted = compacted;
      }
      const { name, units } = this.current;
      const batch = units.splice(0, budget - measured);
      await Promise.all(batch.map(({ timeline, partition }) => this.measure(name, timeline, partition)));
      measured += batch.length;
    }
    return measured;
  }

  /** Drops the event types the pass that ended did not see (deleted meanwhile). */
  private endPass(): void {
    if (this.seen.size > 0 || this.usage.size > 0) for (const name of [...this.usage.keys()]) if (!this.seen.has(name)) this.usage.delete(name);
    this.seen = new Set();
  }

  private async measure(name: string, timeline: StoredTimeline, partition: string): Promise<void> {
    const handle = await this.options.logs.storageOf(timeline);
    const { keys } = handle;
    const order = timeline.order;
    const log = keys.partitionLog(name, order, partition);
    const node = masterNodeOf(handle.redis, log);
    if (node === undefined) return;
    const samples = String(this.options.config.usageSamples);
    const partitionKeys = [
      log,
      keys.partitionMeta(name, order, partition),
      keys.partitionTimeIndex(name, order, partition),
      keys.partitionCompactionIndex(name, order, partition),
      keys.partitionTombstones(name, order, partition),
      keys.partitionEids(name, order, partition, 'a'),
      keys.partitionEids(name, order, partition, 'b'),
    ];
    const [sizes, [next, oldest]] = await Promise.all([
      Promise.all(partitionKeys.map((key) => node.call('MEMORY', 'USAGE', key, 'SAMPLES', samples) as Promise<number | null>)),
      node.hmget(keys.partitionMeta(name, order, partition), 'next', 'oldest'),
    ]);
    const usage = this.usage.get(name);
    if (usage === undefined) return; // deleted meanwhile
    const bytes = sizes.reduce<number>((sum, size) => sum + (size ?? 0), 0);
    const events = Math.max(0, Number(next ?? 0) - Number(oldest ?? 0));
    const id = `${order}:${partition}`;
    const atMs = this.clock();
    const before = usage.partitions.get(id);
    const rate = before === undefined || atMs <= before.atMs ? 0 : ((bytes - before.bytes) * 1000) / (atMs - before.atMs);
    usage.partitions.set(id, { bytes, events, atMs, rate });
  }

  /** The Redis bytes an event type holds as last measured, or undefined before its first measurement. */
  bytesOf(name: string): number | undefined {
    const usage = this.usage.get(name);
    if (usage === undefined || usage.partitions.size === 0) return undefined;
    let bytes = 0;
    for (const p of usage.partitions.values()) bytes += p.bytes;
    return bytes;
  }

  /** Every measured event type's bytes and growth (`broker_event_type_stored_bytes`, `…_growth_bytes_per_second`). */
  eventTypes(): EventTypeStorageSample[] {
    const out: EventTypeStorageSample[] = [];
    for (const [eventType, usage] of this.usage) {
      if (usage.partitions.size === 0) continue;
      let bytes = 0;
      let growth = 0;
      for (const p of usage.partitions.values()) {
        bytes += p.bytes;
        growth += p.rate;
      }
      out.push({ eventType, bytes, growthBytesPerSecond: growth });
    }
    return out;
  }

  /**
   * Redis bytes per byte of event JSON, over the event types this node wrote to and measured (not
   * compacted ones): Σ bytes ÷ Σ (retained events × mean JSON bytes per event this node wrote). Undefined
   * while less than 1 MiB of JSON is behind it.
   */
  redisBytesPerJsonByte(): number | undefined {
    let redisBytes = 0;
    let jsonBytes = 0;
    for (const [eventType, usage] of this.usage) {
      if (usage.compacted) continue;
      const perEvent = this.options.jsonBytesPerEvent(eventType);
      if (perEvent === undefined) continue;
      for (const p of usage.partitions.values()) {
        if (p.events === 0) continue;
        redisBytes += p.bytes;
        jsonBytes += p.events * perEvent;
      }
    }
    return jsonBytes >= MIN_MEASURED_JSON_BYTES ? redisBytes / jsonBytes : undefined;
  }

  /** {@link redisBytesPerJsonByte}, or the documented assumption while nothing is measured. */
  ratio(): { readonly value: number; readonly measured: boolean } {
    const measured = this.redisBytesPerJsonByte();
    return measured === undefined ? { value: ASSUMED_REDIS_BYTES_PER_JSON_BYTE, measured: false } : { value: measured, measured: true };
  }
}

/** Every partition of an event type on each timeline that still holds its data. */
function unitsOf(stored: StoredEventType): { timeline: StoredTimeline; partition: string }[] {
  return partitionIds(stored.topology).flatMap((partition) => stored.timelines.live(Number(partition)).map((timeline) => ({ timeline, partition })));
}
