import { capacityWarning, type MasterMemory } from '../domain/storages/memory-budget.js';
import type { EventType } from '../domain/event-type/event-type.js';
import type { EventTypeStorageSample, MasterMemorySample, StorageSnapshot } from '../observability/meters.js';
import type { EventTypeStore } from '../storage/event-type-store.js';
import type { PartitionLogs } from '../storage/partition-logs.js';
import type { RedisMemoryWatch } from '../storage/redis/redis-memory.js';
import type { StorageHandle } from '../storage/storage-pool.js';
import type { StorageUsage } from './storage-usage.js';

/** A master's memory with the storage id of its deployment. */
export type StorageMaster = MasterMemory & { readonly storage: string };

/** What the console's overview shows (`GET /ui/api/storage-headroom`). */
export interface StorageHeadroomView {
  /** Every master read, by storage then address. */
  readonly masters: readonly StorageMaster[];
  /** The event types holding the most Redis bytes, largest first (at most 10). */
  readonly eventTypes: readonly EventTypeStorageSample[];
  /** Redis bytes per byte of event JSON, and whether it was measured (else the documented assumption). */
  readonly ratio: { readonly value: number; readonly measured: boolean };
}

/** The event types the console's headroom lists (largest first). */
const LISTED_EVENT_TYPES = 10;

/** Whether the node's Redis masters have room for publishes (`GET /health/storage`). */
export interface StorageReadiness {
  /** Masters read, over every storage this node has opened. */
  readonly masters: number;
  /** Those at or above their high-water mark. */
  readonly full: readonly MasterMemory[];
}

/**
 * The node's view of its Redis memory headroom, for the metrics, the storage readiness, the console
 * and the capacity warning of event type changes (docs/operations.md "Memory and retention"): the
 * masters of every storage this node has opened (one memory watch per deployment), what the
 * event types hold ({@link StorageUsage}). Reads only what the node keeps; no Redis round trip but the
 * event type read of a capacity check.
 */
export class StorageHeadroom {
  constructor(
    /** The storages this node has opened (`StoragePool.opened`). */
    private readonly storages: () => readonly StorageHandle[],
    private readonly usage: StorageUsage,
    private readonly eventTypes: Pick<EventTypeStore, 'get'>,
    private readonly logs: Pick<PartitionLogs, 'storageOf'>,
  ) {}

  /** Each deployment's watch once (storages of one deployment share it). */
  private watches(): RedisMemoryWatch[] {
    return [...new Set(this.storages().map((h) => h.memory))];
  }

  /** Every master read, with the storage id of its deployment. */
  masters(): StorageMaster[] {
    return this.watches().flatMap((watch) => watch.masters().map((m) => ({ ...m, storage: watch.storage })));
  }

  /** What `/metrics` shows of Redis memory (docs/metrics.md "Redis memory"). */
  snapshot(): StorageSnapshot {
    const masters: MasterMemorySample[] = this.masters().map((m) => ({ storage: m.storage, master: m.master, usedBytes: m.usedBytes, limitBytes: m.limitBytes, markBytes: m.markBytes, secondsToMark: m.secondsToMark }));
    return { masters, eventTypes: this.usage.eventTypes(), redisBytesPerJsonByte: this.usage.redisBytesPerJsonByte() };
  }

  /** Whether every master has room (`GET /health/storage`). */
  readiness(): StorageReadiness {
    const masters = this.masters();
    return { masters: masters.length, full: masters.filter((m) => m.full) };
  }

  /** The console's headroom: masters, the largest event types and the ratio. */
  view(): StorageHeadroomView {
    return {
      masters: this.masters().sort((a, b) => a.storage.localeCompare(b.storage) || a.master.localeCompare(b.master)),
      eventTypes: this.usage
        .eventTypes()
        .sort((a, b) => b.bytes - a.bytes)
        .slice(0, LISTED_EVENT_TYPES),
      ratio: this.usage.ratio(),
    };
  }

  /**
   * The `Warning` text of an event type creation or update whose declared traffic cannot fit
   * (`capacityWarning`): its `default_statistic` × `retention_time` × the Redis-bytes-per-JSON-byte
   * ratio against the room below the mark of the storage of its active timeline, plus what it holds
   * already. Undefined when it fits, declares no `default_statistic`, or cannot be checked (it is
   * advice: a failure to check never fails the change).
   */
  async capacityWarning(record: EventType): Promise<string | undefined> {
    const statistic = record.default_statistic;
    if (statistic === undefined) return undefined;
    try {
      const stored = await this.eventTypes.get(record.name);
      if (stored === undefined) return undefined;
      const handle = await this.logs.storageOf(stored.timelines.active);
      const room = handle.memory.roomBytes();
      if (!Number.isFinite(room) || handle.memory.masters().length === 0) return undefined;
      const ratio = this.usage.ratio();
      return capacityWarning({
        eventType: record.name,
        statistic,
        retentionMs: record.options.retention_time,
        redisBytesPerJsonByte: ratio.value,
        ratioMeasured: ratio.measured,
        storage: handle.id,
        roomBytes: room,
        heldBytes: this.usage.bytesOf(record.name) ?? 0,
      });
    } catch {
      return undefined;
    }
  }
}
