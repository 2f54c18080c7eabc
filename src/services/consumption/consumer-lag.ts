import { consumptionModeOf } from '../../domain/subscription/consumption-mode.js';
import type { QueueStateStore } from '../../storage/queue-state-store.js';
import { partitionIds } from '../../domain/event-type/event-type.js';
import type { PartitionRange } from '../../domain/cursor/offsets.js';
import type { Subscription } from '../../domain/subscription/subscription.js';
import type { LagSnapshot, PartitionOffsetSample, SubscriptionLagSample } from '../../observability/meters.js';
import type { StoredEventType } from '../../storage/event-type-store.js';
import type { Keys } from '../../storage/keys.js';
import type { TimelineMap } from '../../domain/storages/timeline.js';
import type { PartitionLogs } from '../../storage/partition-logs.js';
import { storageError, type RedisClient } from '../../storage/redis/redis-connection.js';
import { offsetField, type SubscriptionStateStore } from '../../storage/subscription-state-store.js';
import type { SubscriptionStore } from '../../storage/subscription-store.js';

/** How far a committed offset is behind a partition. */
export interface PartitionLag {
  /** The last offset that counts as consumed: the committed one, or the one before the oldest retained event when retention removed events never consumed. */
  readonly consumedThrough: number;
  /** Events after `consumedThrough` up to the newest (`unconsumed_events`; never negative). */
  readonly unconsumed: number;
}

/** A partition of an event type with the event type's timelines. */
export interface TimelinePartition {
  readonly eventType: string;
  readonly timelines: TimelineMap;
  readonly partition: string;
}

/**
 * The lag of a committed offset on a partition (`unconsumed_events` of the stats, the lag gauges):
 * O(1) arithmetic on dense offsets (docs/concepts.md "Offsets and cursors").
 * @param committed the last consumed offset (-1 = nothing consumed yet)
 * @param range the partition's retained range (`newest` = oldest - 1 when it is empty)
 */
export function partitionLag(committed: number, range: PartitionRange): PartitionLag {
  const consumedThrough = Math.max(committed, range.oldest - 1);
  return { consumedThrough, unconsumed: Math.max(0, range.newest - consumedThrough) };
}

/**
 * `consumer_lag_seconds` (docs/consuming.md "Commits"; `broker_subscription_lag_seconds`): the
 * age in whole seconds of the oldest unconsumed event, from its `metadata.received_at`, against `nowMs`
 * (Redis's clock). 0 when nothing is unconsumed. One Redis read (the stream entry holding the event).
 * @returns undefined when the event carries no `metadata.received_at` (category `undefined`)
 * @throws BrokerError 503 when Redis fails
 */
export async function lagSeconds(partitions: Pick<PartitionLogs, 'read'>, p: TimelinePartition, lag: PartitionLag, nowMs: number): Promise<number | undefined> {
  if (lag.unconsumed === 0) return 0;
  return ageSeconds(await receivedAtAfter(partitions, p, lag.consumedThrough), nowMs);
}

/**
 * When the first event after offset `consumedThrough` was received: its `metadata.received_at` in ms,
 * NaN when it carries none, null when there is no such event (yet). An event's value never changes.
 * @throws BrokerError 503 when Redis fails
 */
export async function receivedAtAfter(partitions: Pick<PartitionLogs, 'read'>, p: TimelinePartition, consumedThrough: number): Promise<number | null> {
  const slice = await partitions.read(p.eventType, p.timelines, p.partition, consumedThrough, 1);
  const segment = slice.segments[0];
  if (segment === undefined) return null;
  const end = segment.data.indexOf(0x0a);
  const text = segment.data.subarray(0, end < 0 ? segment.data.length : end).toString();
  const match = /"received_at":"([^"]+)"/.exec(text);
  return match ? Date.parse(match[1] as string) : Number.NaN;
}

/** Whole seconds from `receivedAt` ({@link receivedAtAfter}) to `nowMs`: 0 for no event, undefined for an event without `received_at`. */
function ageSeconds(receivedAt: number | null, nowMs: number): number | undefined {
  if (receivedAt === null) return 0;
  return Number.isNaN(receivedAt) ? undefined : Math.max(0, Math.floor((nowMs - receivedAt) / 1000));
}

/**
 * Reads every subscription's consumer lag from Redis for `/metrics` (docs/metrics.md "Consumer lag"), with
 * the same arithmetic as `GET /subscriptions/{id}/stats` ({@link partitionLag}; {@link lagSeconds} is
 * {@link receivedAtAfter} and the age from it).
 *
 * Work is O(partitions) and the Redis round trips per read are bounded, whatever the number of
 * subscriptions: (1) event type names, subscription ids and `TIME`; (2) the subscription records (one
 * MGET per 500); (3) event types missing from the node's cache; (4) one HMGET per partition and one
 * HGETALL per subscription; (5) for each partition with unconsumed events, the stream entry holding
 * the oldest of them, unless the last read found it already (shared between subscriptions at the same
 * offset). Each step's commands are sent together (ioredis auto-pipelining: one round trip per Redis node).
 */
export class ConsumerLagReader {
  /** `metadata.received_at` (ms; NaN = none) of the oldest unconsumed events found by the last read, by partition and offset. */
  private receivedAt = new Map<string, number>();

  /**
   * @param eventTypes the node's event type cache (topology of each event type)
   */
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly subscriptions: Pick<SubscriptionStore, 'idsNewestFirst' | 'getMany'>,
    private readonly eventTypes: { get(name: string): Promise<StoredEventType | undefined> },
    private readonly partitions: Pick<PartitionLogs, 'ranges' | 'read'>,
    private readonly state: Pick<SubscriptionStateStore, 'offsets'>,
    /** The batches of queue-mode subscriptions: their events in flight and waiting to be handed out again. */
    private readonly queue?: Pick<QueueStateStore, 'partitions'>,
  ) {}

  /**
   * Newest offsets of every partition of every event type, and per subscription and partition the
   * committed offset, unconsumed events and lag in seconds. Subscriptions never streamed (no committed
   * offsets yet) and event types that no longer exist are left out, as in the stats.
   * @param ages false: leave out the lag in seconds (`lagSeconds` undefined), and with it step (5)'s reads
   *   of stream entries, and the event types no subscription reads (their newest offsets): the consumer
   *   status needs only the subscriptions' counts, so its rounds cost nothing without subscriptions
   * @throws BrokerError 503 when Redis fails
   */
  async read(ages = true): Promise<LagSnapshot> {
    const [names, ids, time] = await Promise.all([
      ages ? this.redis.smembers(this.keys.eventTypeNames).catch(storageError) : Promise.resolve([]),
      this.subscriptions.idsNewestFirst(0),
      this.redis.time().catch(storageError),
    ]);
    const nowMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
    const records: Subscription[] = await this.subscriptions.getMany(ids);
    const wanted = new Set(names);
    for (const r of records) for (const name of r.event_types) wanted.add(name);
    const stored = await Promise.all([...wanted].map(async (name) => [name, await this.eventTypes.get(name)] as const));

    const eventTypes = new Map<string, { timelines: TimelineMap; ranges: Map<string, PartitionRange> }>();
    const [, offsets] = await Promise.all([
      Promise.all(
        stored.map(async ([name, eventType]) => {
          if (eventType === undefined) return;
          const ids = partitionIds(eventType.topology);
          const ranges = await this.partitions.ranges(name, eventType.timelines, ids);
          eventTypes.set(name, { timelines: eventType.timelines, ranges: new Map(ids.map((p, i) => [p, ranges[i] ?? { oldest: 0, newest: -1 }])) });
        }),
      ),
      Promise.all(records.map((r) => this.state.offsets(r.id))),
    ]);
    const queued = await Promise.all(records.map(async (r) => (this.queue !== undefined && consumptionModeOf(r.annotations) === 'queue' ? this.queue.partitions(r.id) : undefined)));

    const partitions: PartitionOffsetSample[] = [];
    for (const [eventType, { ranges }] of [...eventTypes].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      for (const [partition, range] of ranges) partitions.push({ eventType, partition, newest: range.newest });
    }

    // Partitions with unconsumed events: when was the oldest of them received? Looked up once per
    // (partition, offset) and remembered until the next read (an event's received_at never changes),
    // so a consumer that did not move costs no read.
    const lookups = new Map<string, Promise<number | null>>();
    const rows: { sample: Omit<SubscriptionLagSample, 'lagSeconds'>; oldest: string | undefined }[] = [];
    records.forEach((record, i) => {
      const committedOffsets = offsets[i] ?? new Map<string, number>();
      for (const name of record.event_types) {
        const eventType = eventTypes.get(name);
        if (eventType === undefined) continue;
        for (const [partition, range] of eventType.ranges) {
          const committed = committedOffsets.get(offsetField(name, partition));
          if (committed === undefined) continue;
          const lag = partitionLag(committed, range);
          const oldest = lag.unconsumed === 0 || !ages ? undefined : `${name}\n${partition}\n${lag.consumedThrough}`;
          if (oldest !== undefined && !lookups.has(oldest)) {
            const known = this.receivedAt.get(oldest);
            const lookup = known !== undefined ? Promise.resolve(known) : receivedAtAfter(this.partitions, { eventType: name, timelines: eventType.timelines, partition }, lag.consumedThrough);
            // Awaited below; a rejection must not surface as unhandled before that.
            void lookup.catch(() => undefined);
            lookups.set(oldest, lookup);
          }
          const queue = queued[i]?.get(offsetField(name, partition));
          const inQueue = queued[i] === undefined ? {} : { inFlightEvents: queue?.inFlight ?? 0, redeliveryEvents: queue?.waiting ?? 0 };
          rows.push({ sample: { subscriptionId: record.id, consumerGroup: record.consumer_group, eventType: name, partition, committed, unconsumedEvents: lag.unconsumed, ...inQueue }, oldest });
        }
      }
    });
    const keys = [...lookups.keys()];
    const values = await Promise.all(lookups.values());
    const receivedAt = new Map<string, number>();
    keys.forEach((key, i) => {
      const value = values[i];
      if (value !== null && value !== undefined) receivedAt.set(key, value);
    });
    if (ages) this.receivedAt = receivedAt;
    return {
      partitions,
      eventTypes: [...eventTypes.keys()],
      subscriptionIds: records.map((r) => r.id),
      subscriptions: rows.map((r) => ({ ...r.sample, lagSeconds: !ages ? undefined : r.oldest === undefined ? 0 : ageSeconds(receivedAt.get(r.oldest) ?? null, nowMs) })),
    };
  }
}
