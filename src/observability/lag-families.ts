import { familyHeader, labelText, sampleValue, type ExpositionSink, type FamilyDeclaration } from './exposition.js';
import type { LagSnapshot } from './meters.js';

// The consumer lag families of `/metrics` (docs/metrics.md "Consumer lag"), written by the node itself
// from the lag snapshot read at scrape time.

/** A lag family: its declaration and label names. */
export interface LagFamily extends FamilyDeclaration {
  readonly labelNames: readonly string[];
}

const SUBSCRIPTION_PARTITION_LABELS = ['subscription_id', 'consumer_group', 'event_type', 'partition'] as const;

const LAG_EVENTS: LagFamily = { name: 'broker_subscription_lag_events', help: 'Unconsumed events of a subscription on a partition (newest offset minus committed offset), read from Redis at scrape time', type: 'gauge', labelNames: SUBSCRIPTION_PARTITION_LABELS };
const LAG_EVENTS_SUM: LagFamily = { name: 'broker_subscription_lag_events_sum', help: 'Unconsumed events of a subscription over the partitions of an event type', type: 'gauge', labelNames: ['subscription_id', 'consumer_group', 'event_type'] };
const LAG_SECONDS: LagFamily = { name: 'broker_subscription_lag_seconds', help: 'Age in seconds of the oldest unconsumed event of a subscription on a partition (by metadata.received_at; 0 when nothing is unconsumed)', type: 'gauge', labelNames: SUBSCRIPTION_PARTITION_LABELS };
const COMMITTED_OFFSET: LagFamily = { name: 'broker_subscription_committed_offset', help: 'Committed offset (last consumed event; -1 = none) of a subscription on a partition', type: 'gauge', labelNames: SUBSCRIPTION_PARTITION_LABELS };
const NEWEST_OFFSET: LagFamily = { name: 'broker_partition_newest_offset', help: 'Offset of the newest event of a partition (-1 before its first event)', type: 'gauge', labelNames: ['event_type', 'partition'] };

/** The lag families, in the order {@link writeLagFamilies} writes them. */
const IN_FLIGHT: LagFamily = { name: 'broker_subscription_in_flight_events', help: 'Queue-mode subscriptions: events of a partition handed to streams and not acknowledged', type: 'gauge', labelNames: SUBSCRIPTION_PARTITION_LABELS };
const REDELIVERY: LagFamily = { name: 'broker_subscription_redelivery_events', help: 'Queue-mode subscriptions: events of a partition waiting to be handed out again (timed out or handed back)', type: 'gauge', labelNames: SUBSCRIPTION_PARTITION_LABELS };

export const LAG_FAMILIES: readonly LagFamily[] = [LAG_EVENTS, LAG_EVENTS_SUM, LAG_SECONDS, COMMITTED_OFFSET, NEWEST_OFFSET, IN_FLIGHT, REDELIVERY];

/**
 * Appends the consumer lag families of one scrape to its text, straight from the snapshot (no series
 * kept between scrapes: a subscription or partition that is gone is simply not written). Without a
 * snapshot (the read failed) the families are written without samples.
 */
export function writeLagFamilies(out: ExpositionSink, snapshot: LagSnapshot | undefined): void {
  const subscriptions = snapshot?.subscriptions ?? [];
  const labels = subscriptions.map((s) => labelText(SUBSCRIPTION_PARTITION_LABELS, [s.subscriptionId, s.consumerGroup, s.eventType, s.partition]));
  out.push(familyHeader(LAG_EVENTS));
  subscriptions.forEach((s, i) => out.push(`${LAG_EVENTS.name}{${labels[i] as string}} ${sampleValue(s.unconsumedEvents)}\n`));
  out.push(familyHeader(LAG_EVENTS_SUM));
  const sums = new Map<string, { labels: string; sum: number }>();
  for (const s of subscriptions) {
    const key = `${s.subscriptionId}\n${s.eventType}`;
    const sum = sums.get(key);
    if (sum === undefined) sums.set(key, { labels: labelText(LAG_EVENTS_SUM.labelNames, [s.subscriptionId, s.consumerGroup, s.eventType]), sum: s.unconsumedEvents });
    else sum.sum += s.unconsumedEvents;
  }
  for (const { labels: text, sum } of sums.values()) out.push(`${LAG_EVENTS_SUM.name}{${text}} ${sampleValue(sum)}\n`);
  out.push(familyHeader(LAG_SECONDS));
  subscriptions.forEach((s, i) => {
    if (s.lagSeconds !== undefined) out.push(`${LAG_SECONDS.name}{${labels[i] as string}} ${sampleValue(s.lagSeconds)}\n`);
  });
  out.push(familyHeader(COMMITTED_OFFSET));
  subscriptions.forEach((s, i) => out.push(`${COMMITTED_OFFSET.name}{${labels[i] as string}} ${sampleValue(s.committed)}\n`));
  out.push(familyHeader(IN_FLIGHT));
  subscriptions.forEach((s, i) => {
    if (s.inFlightEvents !== undefined) out.push(`${IN_FLIGHT.name}{${labels[i] as string}} ${sampleValue(s.inFlightEvents)}\n`);
  });
  out.push(familyHeader(REDELIVERY));
  subscriptions.forEach((s, i) => {
    if (s.redeliveryEvents !== undefined) out.push(`${REDELIVERY.name}{${labels[i] as string}} ${sampleValue(s.redeliveryEvents)}\n`);
  });
  out.push(familyHeader(NEWEST_OFFSET));
  for (const p of snapshot?.partitions ?? []) out.push(`${NEWEST_OFFSET.name}{${labelText(NEWEST_OFFSET.labelNames, [p.eventType, p.partition])}} ${sampleValue(p.newest)}\n`);
}
