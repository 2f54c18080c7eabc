import type { EventType } from '../../domain/event-type/event-type.js';
import { addedPartitions, growthProblem, parsePartitionCountBody, subscriptionLimitProblems } from '../../domain/event-type/repartitioning.js';
import type { Subscription } from '../../domain/subscription/subscription.js';
import { brokerError, invalidInput } from '../../errors/catalog.js';
import { scriptError } from '../../storage/script-failures.js';
import type { EventTypeStore } from '../../storage/event-type-store.js';
import type { PartitionLogs } from '../../storage/partition-logs.js';
import { offsetField, type SubscriptionStateStore } from '../../storage/subscription-state-store.js';
import type { EventTypeCache } from './event-type-cache.js';

/** The caps repartitioning respects (config `eventTypes.maxPartitionCount`, `subscriptions.maxPartitions`). */
export interface RepartitioningLimits {
  /** Most partitions an event type may have. */
  readonly maxPartitionCount: number;
  /** Most partitions a subscription may have over all its event types. */
  readonly maxSubscriptionPartitions: number;
}

/** What a repartitioning did: the count before and after (equal when nothing changed). */
export interface RepartitionResult {
  readonly previous: number;
  readonly count: number;
}

/**
 * Repartitioning, `POST /event-types/{name}/partition-count` (docs/operations.md "Repartitioning"). The partition count only grows; events stay where they are, new
 * partitions start empty; hash partitioning maps over the new count afterwards.
 *
 * Order, so that no event published to a new partition can be skipped by a subscription:
 * 1. every initialized subscription of the event type gets offset -1 (before the first event) for the
 *    new partitions (`extendOffsets`; subscriptions never streamed keep their lazy `read_from`);
 * 2. the topology is grown atomically in Redis (grow-only check in Lua), and the new partitions are
 *    opened on the active timeline (an append to a partition never opened is refused: PARTITION_MISSING);
 * 3. the change is announced on the metadata channel: every node drops its cached event type, so
 *    publishing, low-level streams and subscription stats use the new count at once, and every node
 *    ends the subscription streams that were opened with the old count (`SubscriptionStreams`); their
 *    clients reconnect and get the new partitions too;
 * 4. step 1 again, for subscriptions first streamed while 2 ran.
 * Every step is idempotent. Repeating the same count changes nothing but announces again (repairing a
 * call that failed before step 3); partitions a failed call left without offsets start from their
 * beginning when the subscription is next streamed (`SubscriptionStreams.initialize`).
 */
export class Repartitioning {
  /** @param subscriptionsOf the subscriptions that read an event type */
  constructor(
    private readonly eventTypes: Pick<EventTypeStore, 'get' | 'growPartitions'>,
    private readonly cache: Pick<EventTypeCache, 'announce'>,
    private readonly state: Pick<SubscriptionStateStore, 'extendOffsets'>,
    private readonly logs: Pick<PartitionLogs, 'openPartitions'>,
    private readonly subscriptionsOf: (name: string) => Promise<readonly Subscription[]>,
    private readonly limits: RepartitioningLimits,
  ) {}

  /**
   * Sets the partition count of event type `name` from a `{"partition_count": N}` body.
   * @param requireAdmin throws (403) unless the caller administers the event type
   * @returns the count before and after
   * @throws BrokerError 404 (no such event type), 403 (from `requireAdmin`), 400 (body not an object),
   *   422 (count missing, not a positive integer, smaller than the current one, above the cap, or a
   *   subscription would exceed its partition cap), 503 (Redis)
   */
  async repartition(name: string, body: unknown, requireAdmin: (existing: EventType) => void): Promise<RepartitionResult> {
    const stored = await this.eventTypes.get(name);
    if (!stored) throw brokerError('EVENT_TYPE_NOT_FOUND', { name });
    requireAdmin(stored.record);
    const parsed = parsePartitionCountBody(body);
    if (!parsed.ok) throw invalidInput(parsed.status, parsed.details, parsed.errors);
    const count = parsed.count;
    const current = stored.topology.partitionCount;
    const problem = growthProblem(current, count, this.limits.maxPartitionCount);
    if (problem !== undefined) throw brokerError('UNPROCESSABLE', { reason: problem });

    const subscriptions = await this.subscriptionsOf(name);
    if (count > current) await this.checkSubscriptionLimits(name, count, subscriptions);
    const added = addedPartitions(current, count);
    await this.extendSubscriptions(name, added, subscriptions);
    const grown = await this.eventTypes.growPartitions(name, count);
    if (grown.outcome === 'NOT_FOUND') throw scriptError('growPartitions', 'NOT_FOUND', { name });
    if (grown.outcome === 'PARTITION_COUNT_SMALLER') throw scriptError('growPartitions', 'PARTITION_COUNT_SMALLER', { reason: growthProblem(grown.previous, count, this.limits.maxPartitionCount) ?? `partition_count can only grow: the event type has ${grown.previous} partitions` });
    const grownBy = addedPartitions(grown.previous, count);
    await this.logs.openPartitions(name, stored.timelines.active, grownBy);
    await this.cache.announce(name);
    // Subscriptions created or first streamed meanwhile (the new count is visible everywhere now).
    await this.extendSubscriptions(name, grownBy, await this.subscriptionsOf(name));
    return { previous: grown.previous, count };
  }

  /** @throws BrokerError 422 when a subscription of `name` would have more partitions than allowed */
  private async checkSubscriptionLimits(name: string, count: number, subscriptions: readonly Subscription[]): Promise<void> {
    const counts = new Map<string, number>([[name, count]]);
    for (const other of new Set(subscriptions.flatMap((s) => s.event_types))) {
      if (counts.has(other)) continue;
      counts.set(other, (await this.eventTypes.get(other))?.topology.partitionCount ?? 0);
    }
    const problems = subscriptionLimitProblems(
      subscriptions.map((s) => ({ id: s.id, partitionCounts: s.event_types.map((e) => counts.get(e) ?? 0) })),
      this.limits.maxSubscriptionPartitions,
    );
    if (problems.length > 0) throw brokerError('UNPROCESSABLE', { reason: problems.join('\n') });
  }

  /** Step 1: offset -1 for `added` partitions in every initialized subscription. @throws BrokerError 503 */
  private async extendSubscriptions(name: string, added: readonly string[], subscriptions: readonly Subscription[]): Promise<void> {
    if (added.length === 0) return;
    const offsets = new Map(added.map((p) => [offsetField(name, p), -1]));
    // One script per subscription, each in its own slot (`{sub:<id>}`); auto-pipelined per node.
    await Promise.all(subscriptions.map((s) => this.state.extendOffsets(s.id, offsets)));
  }
}

/** @throws BrokerError FEATURE_DISABLED (403) unless `enabled` (the feature `repartitioning`) */
export function requireRepartitioning(enabled: boolean): void {
  if (!enabled) throw brokerError('FEATURE_DISABLED', { operation: 'Repartitioning', feature: 'repartitioning' });
}
