import { familyHeader, HistogramValues, labelText, type ExpositionSink, type FamilyDeclaration } from './exposition.js';
import type { PublishBatchResult, PublishCounts, StreamKind } from './meters.js';

// The publishing families of `/metrics` (docs/metrics.md "Metric reference") and the delivery latency, written
// by the node itself rather than through prom-client: with one series per event type they are most of a
// large catalog's samples (docs/decisions/0017-metrics-exposition-written-by-the-node.md).

/** Buckets of the latency histograms, seconds: 0.5 ms to 10 s. */
export const LATENCY_BUCKETS_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Buckets of the batch size histogram, events. */
export const BATCH_SIZE_BUCKETS_EVENTS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000];

/** A metric family the node writes itself (exposition.ts) instead of through prom-client: its declaration and label names. */
export interface OwnFamily extends FamilyDeclaration {
  readonly labelNames: readonly string[];
}

const PUBLISH_BATCHES: OwnFamily = { name: 'broker_publish_batches_total', help: 'Publish requests by event type and result (submitted 200, partially_failed 207, rejected 422, refused other 4xx, failed 5xx); event_type is empty when the event type was not found', type: 'counter', labelNames: ['event_type', 'result'] };
const PUBLISH_EVENTS: OwnFamily = { name: 'broker_publish_events_total', help: 'Published events by event type and result (submitted, failed = storage failed, invalid = failed validation, aborted = not written because another event of the batch was invalid)', type: 'counter', labelNames: ['event_type', 'result'] };
const PUBLISH_BYTES: OwnFamily = { name: 'broker_publish_bytes_total', help: 'Serialized bytes of the events of written batches (200 and 207), by event type', type: 'counter', labelNames: ['event_type'] };
const PUBLISH_DURATION: OwnFamily = { name: 'broker_publish_duration_seconds', help: 'Seconds to process a publish request (validate, enrich, partition, write) by event type', type: 'histogram', labelNames: ['event_type'] };
const PUBLISH_BATCH_SIZE: OwnFamily = { name: 'broker_publish_batch_size_events', help: 'Events per publish request, by event type', type: 'histogram', labelNames: ['event_type'] };
const DELIVERY_LATENCY: OwnFamily = {
  name: 'broker_delivery_latency_seconds',
  help: 'Seconds from the receipt of the first event of a batch sent to a stream client (its metadata.received_at) until the batch is sent, by stream kind (low_level, subscription); categories with metadata only',
  type: 'histogram',
  labelNames: ['kind'],
};

/** The families {@link PublishSeries.write} writes, in that order. */
export const PUBLISH_FAMILIES: readonly OwnFamily[] = [PUBLISH_BATCHES, PUBLISH_EVENTS, PUBLISH_BYTES, PUBLISH_DURATION, PUBLISH_BATCH_SIZE, DELIVERY_LATENCY];

/** Results of `broker_publish_events_total`, in the order they are written. */
const EVENT_RESULTS = ['submitted', 'failed', 'invalid', 'aborted'] as const;

/**
 * The publish series of one event type ('' = not found), made on its first batch. As with prom-client's
 * children, a series exists once it was incremented: a counter at 0 and a histogram with no observation
 * are not written.
 */
interface EventTypePublishSeries {
  /** `event_type="…"`, escaped once. */
  readonly labels: string;
  readonly batches: Map<PublishBatchResult, number>;
  readonly events: Record<(typeof EVENT_RESULTS)[number], number>;
  bytes: number;
  readonly duration: HistogramValues;
  readonly size: HistogramValues;
}

/**
 * The values of the publishing families, one series per event type that published ('' for publishes
 * to an event type not found), and of the delivery latency per stream kind; written into a scrape by
 * {@link write}. A deleted event type's series go with {@link forget}.
 */
export class PublishSeries {
  private readonly byEventType = new Map<string, EventTypePublishSeries>();
  /** `broker_delivery_latency_seconds` per stream kind. */
  readonly deliveryLatency: Record<StreamKind, HistogramValues> = { low_level: new HistogramValues(LATENCY_BUCKETS_SECONDS), subscription: new HistogramValues(LATENCY_BUCKETS_SECONDS) };

  /**
   * Counts one answered publish request: its result, and for a found event type its duration (seconds,
   * with a trace id as exemplar when given) and, with `counts`, its events by result and bytes.
   */
  batch(eventType: string | undefined, result: PublishBatchResult, seconds: number, counts: PublishCounts | undefined, exemplar: string | undefined): void {
    const m = this.seriesOf(eventType ?? '');
    m.batches.set(result, (m.batches.get(result) ?? 0) + 1);
    if (eventType === undefined) return;
    m.duration.observe(seconds, exemplar);
    if (counts === undefined) return;
    m.size.observe(counts.submitted + counts.failed + counts.invalid + counts.aborted);
    for (const r of EVENT_RESULTS) if (counts[r] > 0) m.events[r] += counts[r];
    if (counts.bytes > 0) m.bytes += counts.bytes;
  }

  /** Mean serialized bytes per submitted event of an event type on this node; undefined before any. */
  bytesPerEvent(eventType: string): number | undefined {
    const m = this.byEventType.get(eventType);
    return m === undefined || m.events.submitted === 0 || m.bytes === 0 ? undefined : m.bytes / m.events.submitted;
  }

  /** The event types with series ('' included). */
  eventTypes(): IterableIterator<string> {
    return this.byEventType.keys();
  }

  /** Drops an event type's series. */
  forget(eventType: string): void {
    this.byEventType.delete(eventType);
  }

  /** Appends the publish families and the delivery latency to a scrape's text. */
  write(out: ExpositionSink): void {
    const series = [...this.byEventType.values()];
    out.push(familyHeader(PUBLISH_BATCHES));
    for (const m of series) for (const [result, n] of m.batches) out.push(`${PUBLISH_BATCHES.name}{${m.labels},result="${result}"} ${n}\n`);
    out.push(familyHeader(PUBLISH_EVENTS));
    for (const m of series) {
      for (const r of EVENT_RESULTS) if (m.events[r] > 0) out.push(`${PUBLISH_EVENTS.name}{${m.labels},result="${r}"} ${m.events[r]}\n`);
    }
    out.push(familyHeader(PUBLISH_BYTES));
    for (const m of series) if (m.bytes > 0) out.push(`${PUBLISH_BYTES.name}{${m.labels}} ${m.bytes}\n`);
    out.push(familyHeader(PUBLISH_DURATION));
    for (const m of series) if (m.duration.count > 0) m.duration.write(out, PUBLISH_DURATION.name, m.labels);
    out.push(familyHeader(PUBLISH_BATCH_SIZE));
    for (const m of series) if (m.size.count > 0) m.size.write(out, PUBLISH_BATCH_SIZE.name, m.labels);
    out.push(familyHeader(DELIVERY_LATENCY));
    for (const kind of ['low_level', 'subscription'] as const) {
      const values = this.deliveryLatency[kind];
      if (values.count > 0) values.write(out, DELIVERY_LATENCY.name, labelText(['kind'], [kind]));
    }
  }

  /** An event type's series, made on its first batch. */
  private seriesOf(eventType: string): EventTypePublishSeries {
    let m = this.byEventType.get(eventType);
    if (m === undefined) {
      m = {
        labels: labelText(['event_type'], [eventType]),
        batches: new Map(),
        events: { submitted: 0, failed: 0, invalid: 0, aborted: 0 },
        bytes: 0,
        duration: new HistogramValues(LATENCY_BUCKETS_SECONDS),
        size: new HistogramValues(BATCH_SIZE_BUCKETS_EVENTS),
      };
      this.byEventType.set(eventType, m);
    }
    return m;
  }
}
