import type { Subject } from '../../../auth/subject.js';
import type { EventType } from '../../../domain/event-type/event-type.js';
import type { AccessControl } from '../../access-control.js';
import { parseOffset, type PartitionRange } from '../../../domain/cursor/offsets.js';
import type { PartitionLogs } from '../../../storage/partition-logs.js';
import { offsetField, type SubscriptionStateStore } from '../../../storage/subscription-state-store.js';
import type { ResolvedSubscription, SubscriptionPartition } from './session-types.js';

/**
 * Partition ranges of a subscription's partitions, by offsets field (`offsetField`): one pipelined read
 * per event type; a partition the read did not return counts as empty (`oldest` 0, `newest` -1).
 * @throws BrokerError 503 when Redis fails
 */
export async function partitionRanges(logs: Pick<PartitionLogs, 'ranges'>, partitions: readonly SubscriptionPartition[]): Promise<Map<string, PartitionRange>> {
  const byEventType = new Map<string, SubscriptionPartition[]>();
  for (const p of partitions) byEventType.set(p.eventType, [...(byEventType.get(p.eventType) ?? []), p]);
  const out = new Map<string, PartitionRange>();
  await Promise.all(
    [...byEventType.values()].map(async (list) => {
      const first = list[0] as SubscriptionPartition;
      const ranges = await logs.ranges(first.eventType, first.timelines, list.map((p) => p.partition));
      list.forEach((p, i) => out.set(offsetField(p.eventType, p.partition), ranges[i] ?? { oldest: 0, newest: -1 }));
    }),
  );
  return out;
}

/**
 * Lazy `read_from` (docs/concepts.md "Subscriptions"): partitions without a committed offset get one now —
 * `end` = the newest offset at this moment, `begin` = before the oldest, `cursors` = the initial
 * cursor (before the oldest if it expired meanwhile). Partitions missing from an initialized subscription
 * were added by repartitioning: they start from their beginning. Racing nodes keep the first value.
 * @throws BrokerError 503 when Redis fails
 */
export async function initializeOffsets(state: Pick<SubscriptionStateStore, 'offsets' | 'initOffsets'>, logs: Pick<PartitionLogs, 'ranges'>, subscription: ResolvedSubscription): Promise<void> {
  const { record } = subscription;
  const existing = await state.offsets(record.id);
  const missing = subscription.partitions.filter((p) => !existing.has(offsetField(p.eventType, p.partition)));
  if (missing.length === 0) return;
  const ranges = await partitionRanges(logs, missing);
  const initial = new Map<string, number>();
  const readFrom = existing.size > 0 ? 'begin' : record.read_from;
  for (const p of missing) {
    const field = offsetField(p.eventType, p.partition);
    const range = ranges.get(field) as PartitionRange;
    let offset = readFrom === 'begin' ? range.oldest - 1 : range.newest;
    if (readFrom === 'cursors') {
      const cursor = record.initial_cursors.find((c) => c.event_type === p.eventType && c.partition === p.partition);
      const parsed = cursor ? parseOffset(cursor.offset) : { kind: 'begin' as const };
      const resolved = parsed ? p.timelines.resolve(parsed, p.partition, range) : undefined;
      offset = resolved?.ok ? resolved.offset : range.oldest - 1;
    }
    initial.set(field, offset);
  }
  await state.initOffsets(record.id, initial);
}

/** Per event type with an owner selector, the test of which events `subject` may read (docs/consuming.md "Per-event authorization"). */
export function eventFilters(access: AccessControl, subject: Subject, eventTypes: readonly EventType[]): Map<string, (event: string) => boolean> {
  const filters = new Map<string, (event: string) => boolean>();
  for (const eventType of eventTypes) {
    const filter = access.eventFilter(subject, eventType);
    if (filter) filters.set(eventType.name, filter);
  }
  return filters;
}
