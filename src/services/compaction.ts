import { randomUUID } from 'node:crypto';
import type { BrokerConfig } from '../config/config-schema.js';
import { partitionIds } from '../domain/event-type/event-type.js';
import type { Logger } from '../observability/logger.js';
import { lockTtlFor, PeriodicRounds } from './periodic-rounds.js';
import { firstOffset, type StoredTimeline, type TimelineMap } from '../domain/storages/timeline.js';
import type { CompactionStore } from '../storage/compaction-store.js';
import type { EventTypeStore } from '../storage/event-type-store.js';
import type { RedisClient } from '../storage/redis/redis-connection.js';

/** Stream entries (one event each for compacted types) looked at per script call: bounds each call's time in Redis. */
export const COMPACTION_STEP_ENTRIES = 256;

/** Script steps between two renewals of the lock within one partition. */
const RENEW_EVERY_STEPS = 16;

/** What one node did to one event type in one round. */
export interface CompactionRound {
  readonly eventType: string;
  readonly partitions: number;
  /** Events removed (superseded, or deleted by a tombstone). */
  readonly deleted: number;
  /** Tombstones dropped because the round passed them. */
  readonly tombstonesDropped: number;
  /** Index fields dropped because retention removed their events (compact_and_delete). */
  readonly indexPruned: number;
}

/**
 * Log compaction (docs/concepts.md "Retention and compaction"; tombstones: docs/publishing.md "Deleting
 * events of a compacted event type"): every
 * `compaction.intervalMs`, for each event type with cleanup_policy `compact` or `compact_and_delete`,
 * the ONE node holding that event type's compaction lock (taken when free, renewed by its holder,
 * lasting {@link Compactor.lockTtlMs}) walks each partition from its oldest event up to the events
 * received within `compaction.lagMs` in bounded steps ({@link COMPACTION_STEP_ENTRIES} entries per
 * Lua call, so O(partition) per round), removing every event whose compaction key has a newer event in
 * that partition, or a tombstone after it. The latest event per key and partition survives; offsets of
 * survivors never change (removed offsets become gaps that readers skip). Retention of
 * `compact_and_delete` is the RetentionTrimmer's; afterwards this prunes index fields whose events it removed.
 * After a timeline switch (docs/concepts.md "Timelines and storages") each partition's closed timelines are compacted too, against
 * the compaction indexes of the later timelines (a key written or deleted later supersedes them).
 */
export class Compactor {
  private readonly owner = randomUUID();
  private readonly schedule: PeriodicRounds;

  constructor(
    private readonly redis: RedisClient,
    private readonly eventTypes: EventTypeStore,
    /** The node's compaction store: the per-event-type locks. */
    private readonly store: CompactionStore,
    private readonly config: BrokerConfig['compaction'],
    private readonly logger: Logger,
    /** The compaction store of a timeline's storage (each timeline has its own): the active timeline is compacted there. */
    private readonly dataStoreOf: (timeline: StoredTimeline) => Promise<CompactionStore> = () => Promise.resolve(store),
  ) {
    this.schedule = new PeriodicRounds(this.config.intervalMs, () => this.runOnce(), logger, 'compaction');
  }

  /** How long an event type's compaction lock lasts without renewal: three intervals, at least 5 s (ms). */
  get lockTtlMs(): number {
    return lockTtlFor(this.config.intervalMs);
  }

  /** Starts the periodic rounds (one at a time; a failed round is logged and retried next interval). */
  start(): void {
    this.schedule.start();
  }

  /**
   * One round over every compacted event type whose lock this node holds or gets.
   * @returns what was done per event type compacted by this node
   * @throws BrokerError 503 when Redis is unreachable
   */
  async runOnce(): Promise<CompactionRound[]> {
    const [seconds, micros] = await this.redis.time();
    const nowMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const cutoff = Math.floor((nowMs - this.config.lagMs) / 1000);
    const rounds: CompactionRound[] = [];
    for (const record of await this.eventTypes.list()) {
      if (record.cleanup_policy === 'delete') continue;
      if (!(await this.store.holdLock(record.name, this.owner, this.lockTtlMs))) continue;
      const stored = await this.eventTypes.get(record.name);
      if (!stored || stored.record.cleanup_policy === 'delete') continue;
      const policy = stored.record.cleanup_policy;
      const active = stored.timelines.active;
      const data = await this.dataStoreOf(active);
      let deleted = 0;
      let tombstonesDropped = 0;
      let indexPruned = 0;
      let partitions = 0;
      for (const p of partitionIds(stored.topology)) {
        // A round longer than the lock's lifetime must not overlap another node's: renew, or stop here.
        if (!(await this.store.holdLock(record.name, this.owner, this.lockTtlMs))) break;
        // Closed timelines first, while the active one's tombstones are still in its index.
        const closed = await this.compactClosedTimelines(stored.timelines, record.name, p, cutoff);
        if (closed === undefined) break;
        deleted += closed;
        const done = await this.compactPartition(data, record.name, active.order, p, cutoff, policy === 'compact');
        if (!done) break;
        deleted += done.deleted;
        tombstonesDropped += done.tombstonesDropped;
        if (policy === 'compact_and_delete') indexPruned += await data.pruneIndex(record.name, active.order, p);
        partitions++;
      }
      const round = { eventType: record.name, partitions, deleted, tombstonesDropped, indexPruned };
      this.logger.debug(round, 'compaction round');
      rounds.push(round);
    }
    return rounds;
  }

  /**
   * Compacts one partition up to `cutoff` in bounded steps.
   * @returns the totals, or undefined when the lock was lost meanwhile (the partition is left as it is)
   */
  private async compactPartition(data: CompactionStore, name: string, timeline: number, partition: string, cutoff: number, trimTimeIndex: boolean): Promise<{ deleted: number; tombstonesDropped: number } | undefined> {
    let from = 0;
    let deleted = 0;
    let tombstonesDropped = 0;
    for (let step = 1; ; step++) {
      const result = await data.compactStep(name, timeline, partition, cutoff, from, COMPACTION_STEP_ENTRIES, trimTimeIndex);
      deleted += result.deleted;
      tombstonesDropped += result.tombstonesDropped;
      if (result.done) return { deleted, tombstonesDropped };
      from = result.next;
      if (step % RENEW_EVERY_STEPS === 0 && !(await this.store.holdLock(name, this.owner, this.lockTtlMs))) return undefined;
    }
  }

  /**
   * Compacts partition `partition` on the event type's closed timelines that still hold data (a timeline
   * switch leaves them readable until retention cleans them up): an event there goes when a later timeline's compaction index knows its key (a newer event,
   * or a tombstone, which covers every earlier offset). Events received within the compaction lag stay.
   * The same bounded steps as the active timeline; each closed timeline is walked whole every round.
   * @returns events removed, or undefined when the lock was lost meanwhile
   */
  private async compactClosedTimelines(timelines: TimelineMap, name: string, partition: string, cutoff: number): Promise<number | undefined> {
    const p = Number(partition);
    const live = timelines.live(p);
    let deleted = 0;
    for (const [i, t] of live.entries()) {
      if (t === timelines.active) break;
      const later = live.slice(i + 1);
      const store = await this.dataStoreOf(t);
      let after = firstOffset(t, p) - 1;
      for (let step = 1; ; step++) {
        const { entries, last, more } = await store.keyedEntries(name, t.order, partition, after, cutoff, COMPACTION_STEP_ENTRIES);
        const keys = [...new Set(entries.map((e) => e.key))];
        const known = new Set<string>();
        for (const u of later) for (const key of await (await this.dataStoreOf(u)).knownKeys(name, u.order, partition, keys)) known.add(key);
        deleted += await store.removeEntries(name, t.order, partition, entries.filter((e) => known.has(e.key)).map((e) => e.id));
        after = last;
        if (!more) break;
        if (step % RENEW_EVERY_STEPS === 0 && !(await this.store.holdLock(name, this.owner, this.lockTtlMs))) return undefined;
      }
    }
    return deleted;
  }

  /** Stops the rounds; resolves when a running round finished. */
  async stop(): Promise<void> {
    await this.schedule.stop();
  }
}
