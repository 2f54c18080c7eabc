import { familyHeader, labelText, sampleValue, type ExpositionSink, type FamilyDeclaration } from './exposition.js';
import type { LagSnapshot } from './meters.js';
import { CONSUMER_STATUSES, type ConsumerStatus } from '../domain/subscription/consumer-status.js';

// The consumer lag families of `/metrics` (docs/metrics.md "Consumer lag"), written by the node itself
// from the lag snapshot read at scrape time.

/** A lag family: its declaration and label names. */
export interface LagFamily extends FamilyDeclaration {
  readonly labelNames: readonly string[];
}

const SUBSCRIPTION_PARTITION_LABELS = ['subscription_id', 'consumer_group', 'event_type', 'partition'] as const;

const LAG_EVENTS: LagFamily = { name: 'broker_subscription_lag_events', help: 'Unconsumed events of a subscription on a partition (newest offset minus committed offset), read from Redis at scrape time', type: 'gauge', labelNames: SUBSCRIPTION_PARTITION_LABELS };
const LAG_EVENTS_SUM: LagFamily = { name: 'broker_subscription_event_type_lag_events', help: 'Unconsumed events of a subscription over the partitions of an event type', type: 'gauge', labelNames: ['subscription_id', 'consumer_group', 'event_type'] };
const LAG_SECONDS: LagFamily = { name: 'broker_subscription_lag_seconds', help: 'Age in seconds of the oldest unconsumed event of a subscription on a partition (by metadata.received_at; 0 when nothing is unconsumed)', type: 'gauge', labelNames: SUBSCRIPTION_PARTITION_LABELS };
const COMMITTED_OFFSET: LagFamily = { name: 'broker_subscription_committed_offset', help: 'Committed offset (last consumed event; -1 = none) of a subscription on a partition', type: 'gauge', labelNames: SUBSCRIPTION_PARTITION_LABELS };
const NEWEST_OFFSET: LagFamily = { name: 'broker_partition_newest_offset', help: 'Offset of the newest event of a partition (-1 before its first event)', type: 'gauge', labelNames: ['event_type', 'partition'] };

/** The lag families, in the order {@link writeLagFamilies} writes them. */
const IN_FLIGHT: LagFamily = { name: 'broker_subscription_in_flight_events', help: 'Queue-mode subscriptions: events of a partition handed to streams and not acknowledged', type: 'gauge', labelNames: SUBSCRIPTION_PARTITION_LABELS };
const REDELIVERY: LagFamily = { name: 'broker_subscription_redelivery_events', help: 'Queue-mode subscriptions: events of a partition waiting to be handed out again (timed out or handed back)', type: 'gauge', labelNames: SUBSCRIPTION_PARTITION_LABELS };

const CONSUMER_STATUS: LagFamily = { name: 'broker_subscription_consumer_status', help: 'Consumer status of a subscription on a partition over the last consumerStatus.windowMs: 1 for the status it has (ok, lagging, stalled, stopped), 0 for the others', type: 'gauge', labelNames: [...SUBSCRIPTION_PARTITION_LABELS, 'status'] };
const DRAIN_SECONDS: LagFamily = { name: 'broker_subscription_drain_seconds', help: 'Seconds until the unconsumed events of a subscription on a partition are consumed at its commit rate over the last consumerStatus.windowMs (absent when it committed nothing over it)', type: 'gauge', labelNames: SUBSCRIPTION_PARTITION_LABELS };

export const LAG_FAMILIES: readonly LagFamily[] = [LAG_EVENTS, LAG_EVENTS_SUM, LAG_SECONDS, COMMITTED_OFFSET, NEWEST_OFFSET, IN_FLIGHT, REDELIVERY, CONSUMER_STATUS, DRAIN_SECONDS];

/** The last consumer status of one subscription partition, as the status families write it. */
export interface ConsumerStatusSample {
  readonly subscriptionId: string;
  readonly consumerGroup: string;
  readonly eventType: string;
  readonly partition: string;
  readonly status: ConsumerStatus;
  readonly drainSeconds: number | undefined;
}

/**
 * Appends the consumer status families (docs/metrics.md "Consumer status"): one series per status value
 * of each partition (1 for its status, 0 for the others) and its drain time when it is known. Written
 * from the last evaluation, so a subscription that is gone has no series.
 */
export function writeConsumerStatusFamilies(out: ExpositionSink, samples: readonly ConsumerStatusSample[]): void {
  const labels = samples.map((s) => labelText(SUBSCRIPTION_PARTITION_LABELS, [s.subscriptionId, s.consumerGroup, s.eventType, s.partition]));
  out.push(familyHeader(CONSUMER_STATUS));
  samples.forEach((s, i) => {
    for (const status of CONSUMER_STATUSES) out.push(`${CONSUMER_STATUS.name}{${labels[i] as string},status="${status}"} ${status === s.status ? 1 : 0}\n`);
  });
  out.push(familyHeader(DRAIN_SECONDS));
  samples.forEach((s, i) => {
    if (s.drainSeconds !== undefined) out.push(`${DRAIN_SECONDS.name}{${labels[i] as string}} ${sampleValue(s.drainSeconds)}\n`);
  });
}

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
