import type { RedisClient } from '../storage/redis/redis-connection.js';
import { randomUUID } from 'node:crypto';
import { partitionIds } from '../domain/event-type/event-type.js';
import type { EventTypeStore } from '../storage/event-type-store.js';
import type { PartitionStore } from '../storage/partition-store.js';
import type { PartitionLogs } from '../storage/partition-logs.js';
import type { Timelines } from './event-types/timelines.js';
import type { Logger } from '../observability/logger.js';
import { lockTtlFor, PeriodicRounds } from './periodic-rounds.js';

/**
 * Time-based retention (docs/concepts.md "Retention and compaction"; `options.retention_time`): every `checkIntervalMs` one node per
 * event type (a lock its holder renews before each partition; another node takes over once it lapses,
 * after {@link RetentionTrimmer.lockTtlMs}) trims each partition to events received within the retention
 * time, measured on Redis's clock. Offsets of kept events never change; `oldest_available_offset`
 * moves up. Event types with cleanup_policy `compact` are never trimmed (they keep the latest event per key). Every timeline that
 * still has data is trimmed in its storage; closed timelines past their retention are cleaned up.
 */
export class RetentionTrimmer {
  private readonly owner = randomUUID();
  private readonly schedule: PeriodicRounds;

  constructor(
    private readonly redis: RedisClient,
    private readonly eventTypes: EventTypeStore,
    /** The node's partition store: the retention locks. */
    private readonly partitions: Pick<PartitionStore, 'holdRetentionLock'>,
    private readonly checkIntervalMs: number,
    private readonly logger: Logger,
    /** Partitions over all timelines: every live timeline is trimmed in its own storage. */
    private readonly logs: PartitionLogs,
    /** Cleans up closed timelines past their retention (docs/operations.md "Storages and timelines"). */
    private readonly timelines: Pick<Timelines, 'cleanUp'>,
  ) {
    this.schedule = new PeriodicRounds(this.checkIntervalMs, () => this.runOnce(), logger, 'retention');
  }

  /** How long an event type's retention lock lasts without renewal: three intervals, at least 5 s (ms). */
  get lockTtlMs(): number {
    return lockTtlFor(this.checkIntervalMs);
  }

  /** Starts the periodic rounds (one at a time; a failed round is logged and retried next interval). */
  start(): void {
    this.schedule.start();
  }

  /** One round over all event types. @returns partitions trimmed by this node */
  async runOnce(): Promise<number> {
    const [seconds] = await this.redis.time();
    const now = Number(seconds);
    let trimmed = 0;
    for (const record of await this.eventTypes.list()) {
      // cleanup_policy `compact` keeps the latest event per key for ever; `compact_and_delete` is trimmed too.
      if (record.cleanup_policy === 'compact') continue;
      if (!(await this.partitions.holdRetentionLock(record.name, this.owner, this.lockTtlMs))) continue;
      const stored = await this.eventTypes.get(record.name);
      if (!stored) continue;
      const cutoff = now - Math.floor(stored.record.options.retention_time / 1000);
      for (const p of partitionIds(stored.topology)) {
        // A round longer than the lock's lifetime must not overlap another node's: renew, or stop here.
        if (!(await this.partitions.holdRetentionLock(record.name, this.owner, this.lockTtlMs))) break;
        for (const t of stored.timelines.live(Number(p))) await (await this.logs.storageOf(t)).partitions.trim(record.name, t.order, p, cutoff);
        trimmed++;
      }
      await this.timelines.cleanUp(stored, now * 1000);
      this.logger.debug({ eventType: record.name, partitions: stored.topology.partitionCount }, 'retention round');
    }
    return trimmed;
  }

  /** Stops the rounds; resolves when a running round finished. */
  async stop(): Promise<void> {
    await this.schedule.stop();
  }
}
