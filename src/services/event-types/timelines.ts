import { randomUUID } from 'node:crypto';
import { partitionIds } from '../../domain/event-type/event-type.js';
import type { EventType } from '../../domain/event-type/event-type.js';
import { checkBody } from '../../domain/event-type/rule-problems.js';
import { firstOffset, TimelineInputSchema, timelineView, type StoredTimeline, type TimelineView } from '../../domain/storages/timeline.js';
import { brokerError, invalidInput } from '../../errors/catalog.js';
import { scriptError } from '../../storage/script-failures.js';
import type { Logger } from '../../observability/logger.js';
import type { EventTypeStore, StoredEventType } from '../../storage/event-type-store.js';
import type { PartitionLogs } from '../../storage/partition-logs.js';
import type { StorageStore } from '../../storage/storage-store.js';
import type { EventTypeCache } from './event-type-cache.js';

/** Highest timeline order: offsets carry it as 4 hex digits. */
export const MAX_TIMELINE_ORDER = 0xffff;

/** What a clean-up round did for one event type. */
export interface CleanUpResult {
  readonly eventType: string;
  /** Orders of the timelines whose data were deleted. */
  readonly cleanedUp: number[];
}

/**
 * Timelines, `GET/POST /event-types/{name}/timelines` (docs/concepts.md "Timelines and storages";
 * docs/operations.md "Storages and timelines").
 *
 * A switch moves publishing of an event type to a storage without moving data:
 * 1. every partition of the active timeline is closed in its storage (field `closed` in its meta,
 *    atomically with appends): from then on appends to it fail on every node and publishers wait
 *    (`publish.timelineSwitchWaitMs`, then 503), whichever cached copy of the event type they hold;
 *    closing reports each partition's last offset; when reads wait for replicas (docs/operations.md
 *    "Durability"), the closed partitions are then confirmed as they are, so their last events lie below
 *    the high watermark before readers learn where the timeline ends (no later append can confirm them;
 *    replicas that do not confirm fail the switch with 503, publishing still blocked);
 * 2. each partition of the new timeline is prepared in the target storage to continue at that offset + 1
 *    (offsets stay one dense sequence per partition, see `domain/storages/timeline.ts`);
 * 3. the timelines are replaced in the registry by compare-and-set (the old one with its last offsets,
 *    `latest_position`, the new one active), then announced: publishers retry there and readers continue
 *    there once they reach the old timeline's end.
 * Every step is idempotent; a switch interrupted after step 1 blocks publishing until a timeline is
 * created again (which completes it). Closed timelines are cleaned up (data deleted, `cleaned_up_at`
 * set) once the retention time passed since the switch that closed them; event types with cleanup
 * policy `compact` keep theirs (they may hold the latest event of a key).
 */
export class Timelines {
  constructor(
    private readonly eventTypes: Pick<EventTypeStore, 'get' | 'list' | 'setTimelines'>,
    private readonly cache: Pick<EventTypeCache, 'announce'>,
    private readonly logs: PartitionLogs,
    private readonly storages: Pick<StorageStore, 'get'>,
    private readonly logger: Logger,
  ) {}

  /**
   * The timelines of an event type, oldest first.
   * @throws BrokerError 404 unknown event type, 503
   */
  async list(name: string): Promise<TimelineView[]> {
    const stored = await this.load(name);
    return Promise.all(stored.timelines.all.map(async (t) => timelineView(name, await this.keyPrefixOf(t.storageId), t)));
  }

  /**
   * Creates a timeline on storage `storage_id` and makes it active (the switch above).
   * @param body `{"storage_id": string}` ({@link TimelineInputSchema})
   * @param authorize runs once the event type is known. @throws BrokerError 403
   * @returns the new timeline
   * @throws BrokerError 400 (body not an object), 404 (event type), 403, 422 (storage_id missing or not
   *   a registered storage; too many timelines), 409 (another switch of this event type won), 503 (also:
   *   the replicas did not confirm the closed timeline's last events)
   */
  async create(name: string, body: unknown, authorize: (eventType: EventType) => void): Promise<TimelineView> {
    const checked = checkBody(TimelineInputSchema, body);
    // A malformed body is answered first; a broken field once the event type is known and the caller may switch it.
    if (!checked.ok && checked.status === 400) throw invalidInput(checked.status, checked.details, checked.errors);
    const stored = await this.load(name);
    authorize(stored.record);
    if (!checked.ok) throw invalidInput(checked.status, checked.details, checked.errors);
    const storageId = checked.value.storage_id;
    const storage = await this.storages.get(storageId);
    if (!storage) throw brokerError('UNKNOWN_STORAGE', { id: storageId });
    const active = stored.timelines.active;
    if (active.order >= MAX_TIMELINE_ORDER) throw brokerError('TOO_MANY_TIMELINES', { name, limit: MAX_TIMELINE_ORDER });

    const target = await this.logs.storage(storageId);
    const source = await this.logs.storageOf(active);
    const ids = partitionIds(stored.topology);
    const started = performance.now();
    // 1. Close the active timeline's partitions: publishing of this event type is blocked from here on.
    const lastOffsets = await Promise.all(ids.map((p) => source.partitions.close(name, active.order, p)));
    await this.logs.confirmPartitions(name, active, ids.filter((p, i) => (lastOffsets[i] as number) >= firstOffset(active, Number(p))));
    const now = new Date().toISOString();
    const next: StoredTimeline = { id: randomUUID(), order: active.order + 1, storageId, createdAt: now, switchedAt: now, firstOffsets: lastOffsets.map((last) => last + 1) };
    // 2. The new timeline's partitions continue the offsets.
    await Promise.all(ids.map((p, i) => target.partitions.open(name, next, p, (lastOffsets[i] as number) + 1)));
    // 3. Switch in the registry, then tell every node.
    const closed: StoredTimeline = { ...active, lastOffsets };
    const timelines = [...stored.timelines.all.slice(0, -1), closed, next];
    const outcome = await this.eventTypes.setTimelines(name, stored.timelinesJson, timelines, next.order, stored.topology.partitionCount);
    if (outcome !== 'set') throw scriptError('setTimelines', outcome, { name });
    await this.cache.announce(name);
    this.logger.info({ eventType: name, from: active.order, to: next.order, storage: storageId, partitions: ids.length, blockedMs: Math.round(performance.now() - started) }, 'timeline switched');
    return timelineView(name, storage.redis_configuration.key_prefix, next);
  }

  /**
   * Deletes the data of closed timelines whose events are all past the retention time (their successor
   * became active more than `retention_time` ago) and records `cleaned_up_at`. The caller holds the
   * event type's retention lock.
   * @param nowMs the current time (Redis's clock)
   * @returns the orders cleaned up (empty when none were due)
   * @throws BrokerError 503
   */
  async cleanUp(stored: StoredEventType, nowMs: number): Promise<number[]> {
    if (stored.record.cleanup_policy === 'compact') return [];
    const retentionMs = stored.record.options.retention_time;
    const due = stored.timelines.all.filter((t, i) => {
      const successor = stored.timelines.all[i + 1];
      return t.cleanedUpAt === undefined && successor !== undefined && Date.parse(successor.switchedAt) + retentionMs <= nowMs;
    });
    if (due.length === 0) return [];
    const name = stored.record.name;
    for (const t of due) await this.logs.dropTimeline(name, t, t.lastOffsets?.length ?? stored.topology.partitionCount);
    const cleanedUpAt = new Date(nowMs).toISOString();
    const timelines = stored.timelines.all.map((t) => (due.includes(t) ? { ...t, cleanedUpAt } : t));
    const outcome = await this.eventTypes.setTimelines(name, stored.timelinesJson, timelines, stored.timelines.active.order, stored.topology.partitionCount);
    if (outcome !== 'set') return [];
    await this.cache.announce(name);
    const orders = due.map((t) => t.order);
    this.logger.info({ eventType: name, timelines: orders }, 'closed timelines cleaned up');
    return orders;
  }

  /**
   * The event types with a timeline (not cleaned up) on storage `storageId` (a storage in use cannot be deleted).
   * @throws BrokerError 503
   */
  async usersOf(storageId: string): Promise<string[]> {
    const users: string[] = [];
    for (const record of await this.eventTypes.list()) {
      const stored = await this.eventTypes.get(record.name);
      if (stored?.timelines.all.some((t) => t.storageId === storageId && t.cleanedUpAt === undefined)) users.push(record.name);
    }
    return users;
  }

  private async load(name: string): Promise<StoredEventType> {
    const stored = await this.eventTypes.get(name);
    if (!stored) throw brokerError('EVENT_TYPE_NOT_FOUND', { name });
    return stored;
  }

  private async keyPrefixOf(storageId: string): Promise<string> {
    return (await this.storages.get(storageId))?.redis_configuration.key_prefix ?? '';
  }
}
