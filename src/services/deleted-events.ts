import { planTombstones } from '../domain/storages/deleted-events.js';
import type { EventType } from '../domain/event-type/event-type.js';
import { brokerError, errorCatalog, invalidInput } from '../errors/catalog.js';
import { parseUntrustedJson } from '../domain/json/json-limits.js';
import type { StoredTimeline } from '../domain/storages/timeline.js';
import type { CompactionStore } from '../storage/compaction-store.js';
import type { RedisClient } from '../storage/redis/redis-connection.js';
import type { BatchItemResponse } from '../domain/batch/batch-item-response.js';
import type { EventTypeCache } from './event-types/event-type-cache.js';

/** The answer to a deleted-events request: 200 empty, or 422/207 with one BatchItemResponse per event (as publishing). */
export type DeleteOutcome = { readonly status: 200 } | { readonly status: 422 | 207; readonly items: BatchItemResponse[] };

/** 422 detail for an event type with cleanup_policy `delete`, which has no compaction to apply tombstones. */
export const NOT_COMPACTED_DETAIL = errorCatalog.EVENT_TYPE_NOT_COMPACTED.template;

/**
 * `POST /event-types/{name}/deleted-events` (docs/publishing.md "Deleting events of a compacted event
 * type"): tombstones for
 * the compaction keys of the given events, in the partitions key selection names (every partition under
 * `random`). Earlier events with those keys are removed at the partition's next compaction round
 * (services/compaction.ts); the tombstones take no offset, are never delivered, and are dropped once a
 * round passed them. Order of checks as for publishing: body (400), event type (404), write
 * authorization (403), then cleanup_policy (422) and each event (422 items).
 */
export class DeletedEvents {
  constructor(
    private readonly cache: EventTypeCache,
    private readonly store: CompactionStore,
    private readonly redis: RedisClient,
    /** The compaction store of a timeline's storage: tombstones go to the active timeline. */
    private readonly dataStoreOf: (timeline: StoredTimeline) => Promise<CompactionStore> = () => Promise.resolve(store),
  ) {}

  /**
   * @param body the request body (gunzipped)
   * @param authorize runs once the event type is known. @throws BrokerError 403
   * @throws BrokerError 400 malformed body, 404 unknown event type, 403 from `authorize`, 422 event type
   *   not compacted, 503 Redis not connected
   */
  async delete(name: string, body: Buffer, authorize: (eventType: EventType) => void): Promise<DeleteOutcome> {
    const parsed = parseUntrustedJson(body);
    if (!parsed.ok) throw brokerError('BAD_REQUEST', { reason: parsed.reason });
    const eventType = await this.cache.get(name);
    if (!eventType) throw brokerError('EVENT_TYPE_NOT_FOUND', { name });
    authorize(eventType.record);
    if (eventType.record.cleanup_policy === 'delete') throw brokerError('EVENT_TYPE_NOT_COMPACTED');
    const plan = planTombstones(parsed.value, eventType.publishSpec);
    if (plan.kind === 'malformed') throw invalidInput(400, plan.details, plan.errors);
    if (plan.kind === 'rejected') return { status: 422, items: plan.items };
    if (plan.partitions.size === 0) return { status: 200 };
    if (this.redis.status !== 'ready') {
      throw brokerError('STORAGE_UNAVAILABLE', { reason: 'not connected to Redis; nothing was written' });
    }
    const active = eventType.timelines.active;
    const data = await this.dataStoreOf(active);
    const targets = [...plan.partitions];
    const written = await Promise.allSettled(targets.map(([p, keys]) => data.markDeleted(name, active.order, String(p), [...keys])));
    const failed = new Map<number, string>();
    written.forEach((w, i) => {
      if (w.status === 'rejected') failed.set((targets[i] as [number, Set<string>])[0], `storage error: ${(w.reason as Error).message}`);
    });
    if (failed.size === 0) return { status: 200 };
    const items = plan.eids.map((eid, i): BatchItemResponse => {
      const reason = (plan.itemPartitions[i] ?? []).map((p) => failed.get(p)).find((r) => r !== undefined);
      return reason === undefined
        ? { eid, publishing_status: 'submitted', step: 'none', detail: '' }
        : { eid, publishing_status: 'failed', step: 'publishing', detail: reason };
    });
    return { status: 207, items };
  }
}
