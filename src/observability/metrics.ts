import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** A counter bound to one label set (prom-client's `counter.labels(...)`), kept by its caller. */
interface CounterChild {
  inc(value?: number): void;
}

/** A histogram bound to one label set (prom-client's `histogram.labels(...)`), kept by its caller. */
interface HistogramChild {
  observe(value: number): void;
}
import type { Logger } from './logger.js';
import type {
  CommitResult,
  ConsumptionMeter,
  HttpMeter,
  LagSnapshot,
  PublishBatchResult,
  PublishCounts,
  PublishMeter,
  RequestRecorder,
  StreamKind,
  StreamMeter,
  WorkerPoolLoad,
} from './meters.js';

/** Prefix of every metric of the broker (DESIGN.md §8; STYLE.md "Naming"). */
export const METRIC_PREFIX = 'broker_';

/** Buckets of the latency histograms, seconds: 0.5 ms to 10 s. */
const LATENCY_BUCKETS_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Buckets of the batch size histogram, events. */
const BATCH_SIZE_BUCKETS_EVENTS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000];

const SUBSCRIPTION_PARTITION_LABELS = ['subscription_id', 'consumer_group', 'event_type', 'partition'] as const;
type SubscriptionPartitionLabel = (typeof SUBSCRIPTION_PARTITION_LABELS)[number];

/** The children of the publish metrics for one event type, made once (label lookups off the hot path). */
interface EventTypeMeters {
  readonly batches: Map<PublishBatchResult, CounterChild>;
  readonly submitted: CounterChild;
  readonly failed: CounterChild;
  readonly invalid: CounterChild;
  readonly aborted: CounterChild;
  readonly bytes: CounterChild;
  readonly duration: HistogramChild;
  readonly size: HistogramChild;
}

/**
 * The metrics of one broker node (DESIGN.md §8; issue 5 §1), in a prom-client registry of its own (never
 * the global default registry, so several nodes in one process do not clash). Names carry the prefix
 * `broker_`, base units (seconds, bytes), `_total` on counters and `_seconds` on duration histograms;
 * partition labels appear only on gauges. Label values are bounded: route patterns, status codes,
 * names of existing event types, subscription ids.
 *
 * Most metrics are updated as things happen through the {@link HttpMeter}, {@link PublishMeter} and
 * {@link ConsumptionMeter} interfaces, with prom-client's label-bound children made once per label set
 * and kept (prom-client still hashes the labels per call: about 0.4 µs per update, a few per request).
 * The worker pool gauges and the consumer lag gauges are read when scraped ({@link scrape}), the latter
 * from Redis in O(partitions).
 */
export class BrokerMetrics implements HttpMeter, PublishMeter, ConsumptionMeter {
  /** The registry `GET /metrics` serializes. */
  readonly registry = new Registry();

  private readonly httpDuration: Histogram;
  private readonly publishBatches: Counter;
  private readonly publishEvents: Counter;
  private readonly publishBytes: Counter;
  private readonly publishDuration: Histogram;
  private readonly publishBatchSize: Histogram;
  private readonly eventTypeMeters = new Map<string, EventTypeMeters>();

  private readonly streamMeters: Record<StreamKind, StreamMeter>;
  private readonly commitCounters: Record<CommitResult, CounterChild>;
  private readonly rebalances: Counter;
  private readonly deadLetters: Counter<'subscription_id' | 'event_type'>;
  /** Event types with a dead-letter series, per subscription (their series go with the subscription). */
  private readonly deadLetterSeries = new Map<string, Set<string>>();

  private readonly poolThreads: Gauge;
  private readonly poolQueueDepth: Gauge;
  private readonly poolUtilization: Gauge;
  private readonly poolCompleted: Counter;
  private workerPool: (() => WorkerPoolLoad) | undefined;
  private poolCompletedSeen = 0;

  private readonly lagEvents: Gauge<SubscriptionPartitionLabel>;
  private readonly lagEventsSum: Gauge<'subscription_id' | 'consumer_group' | 'event_type'>;
  private readonly lagSeconds: Gauge<SubscriptionPartitionLabel>;
  private readonly committedOffset: Gauge<SubscriptionPartitionLabel>;
  private readonly newestOffset: Gauge<'event_type' | 'partition'>;
  private readonly lagCollectSeconds: Gauge;
  private readonly lagCollectErrors: Counter;
  private lagSource: { read: () => Promise<LagSnapshot>; logger: Logger } | undefined;
  private readonly cacheEntries: Gauge<'cache'>;
  private cacheSizes: (() => Readonly<Record<string, number>>) | undefined;

  /** The scrape under way: concurrent scrapes share it (the lag gauges are reset and refilled by each). */
  private scraping: Promise<string> | undefined;

  constructor() {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: METRIC_PREFIX });

    this.httpDuration = new Histogram({ name: 'broker_http_request_duration_seconds', help: 'HTTP requests by method, route pattern and status: seconds until the answer went out (for streams: until the stream started)', labelNames: ['method', 'route', 'status'], buckets: [...LATENCY_BUCKETS_SECONDS], registers });

    this.publishBatches = new Counter({ name: 'broker_publish_batches_total', help: 'Publish requests by event type and result (submitted 200, partially_failed 207, rejected 422, refused other 4xx, failed 5xx); event_type is empty when the event type was not found', labelNames: ['event_type', 'result'], registers });
    this.publishEvents = new Counter({ name: 'broker_publish_events_total', help: 'Published events by event type and result (submitted, failed = storage failed, invalid = failed validation, aborted = not written because another event of the batch was invalid)', labelNames: ['event_type', 'result'], registers });
    this.publishBytes = new Counter({ name: 'broker_publish_bytes_total', help: 'Serialized bytes of the events of written batches (200 and 207), by event type', labelNames: ['event_type'], registers });
    this.publishDuration = new Histogram({ name: 'broker_publish_duration_seconds', help: 'Seconds to process a publish request (validate, enrich, partition, write) by event type', labelNames: ['event_type'], buckets: [...LATENCY_BUCKETS_SECONDS], registers });
    this.publishBatchSize = new Histogram({ name: 'broker_publish_batch_size_events', help: 'Events per publish request, by event type', labelNames: ['event_type'], buckets: [...BATCH_SIZE_BUCKETS_EVENTS], registers });

    const activeStreams = new Gauge({ name: 'broker_active_streams', help: 'Streams sending on this node, by kind (low_level, subscription)', labelNames: ['kind'], registers });
    const streamedEvents = new Counter({ name: 'broker_streamed_events_total', help: 'Events sent to stream clients, by kind', labelNames: ['kind'], registers });
    const streamedBytes = new Counter({ name: 'broker_streamed_bytes_total', help: 'Bytes of batch lines (events, cursors, keep-alives) sent to stream clients, by kind', labelNames: ['kind'], registers });
    const streamMeter = (kind: StreamKind): StreamMeter => {
      const active = activeStreams.labels(kind);
      const events = streamedEvents.labels(kind);
      const bytes = streamedBytes.labels(kind);
      active.set(0);
      return {
        opened: () => active.inc(),
        closed: () => active.dec(),
        sent: (n, size) => {
          if (n > 0) events.inc(n);
          bytes.inc(size);
        },
      };
    };
    this.streamMeters = { low_level: streamMeter('low_level'), subscription: streamMeter('subscription') };

    const commits = new Counter({ name: 'broker_subscription_commits_total', help: 'Committed cursors by result (committed, outdated = not newer than the stored one, refused = the stream does not hold the partition or its session is gone)', labelNames: ['result'], registers });
    this.commitCounters = { committed: commits.labels('committed'), outdated: commits.labels('outdated'), refused: commits.labels('refused') };
    this.deadLetters = new Counter({ name: 'broker_dead_letters_total', help: 'Events a subscription stream skipped after they reached the subscription-max-event-send-count in a single-event batch (dead-letter queue), by subscription and event type', labelNames: ['subscription_id', 'event_type'], registers });
    this.rebalances = new Counter({ name: 'broker_subscription_rebalances_total', help: 'Changes of a subscription partition assignment written by this node (sessions joining, leaving, expiring)', registers });

    this.poolThreads = new Gauge({ name: 'broker_worker_pool_threads', help: 'Validation worker threads', registers });
    this.poolQueueDepth = new Gauge({ name: 'broker_worker_pool_queue_depth', help: 'Publish and compile tasks waiting for a worker thread', registers });
    this.poolUtilization = new Gauge({
      name: 'broker_worker_pool_utilization_ratio',
      help: "Piscina's utilisation of the worker pool (0..1): task run time so far divided by pool lifetime times threads",
      registers,
    });
    this.poolCompleted = new Counter({ name: 'broker_worker_pool_tasks_completed_total', help: 'Tasks the worker pool completed', registers });

    this.lagEvents = new Gauge({
      name: 'broker_subscription_lag_events',
      help: 'Unconsumed events of a subscription on a partition (newest offset minus committed offset), read from Redis at scrape time',
      labelNames: SUBSCRIPTION_PARTITION_LABELS,
      registers,
    });
    this.lagEventsSum = new Gauge({
      name: 'broker_subscription_lag_events_sum',
      help: 'Unconsumed events of a subscription over the partitions of an event type',
      labelNames: ['subscription_id', 'consumer_group', 'event_type'],
      registers,
    });
    this.lagSeconds = new Gauge({
      name: 'broker_subscription_lag_seconds',
      help: 'Age in seconds of the oldest unconsumed event of a subscription on a partition (by metadata.received_at; 0 when nothing is unconsumed)',
      labelNames: SUBSCRIPTION_PARTITION_LABELS,
      registers,
    });
    this.committedOffset = new Gauge({
      name: 'broker_subscription_committed_offset',
      help: 'Committed offset (last consumed event; -1 = none) of a subscription on a partition',
      labelNames: SUBSCRIPTION_PARTITION_LABELS,
      registers,
    });
    this.newestOffset = new Gauge({
      name: 'broker_partition_newest_offset',
      help: 'Offset of the newest event of a partition (-1 before its first event)',
      labelNames: ['event_type', 'partition'],
      registers,
    });
    this.lagCollectSeconds = new Gauge({ name: 'broker_subscription_lag_collect_seconds', help: 'Seconds the last scrape took to read the consumer lag from Redis', registers });
    this.cacheEntries = new Gauge({ name: 'broker_cache_entries', help: 'Entries held by each in-memory cache of the node (event types, their generations, retired schema keys, validators on the main thread and in the worker threads as they last reported, proven-cheap schema keys), read at scrape', labelNames: ['cache'], registers });
    this.lagCollectErrors = new Counter({ name: 'broker_subscription_lag_collect_errors_total', help: 'Scrapes whose consumer lag could not be read from Redis (the lag gauges are then absent)', registers });
  }

  /** Content-Type of {@link scrape}'s text (Prometheus text format 0.0.4). */
  get contentType(): string {
    return this.registry.contentType;
  }

  // ---- HttpMeter ----

  route(method: string, pattern: string): RequestRecorder {
    const byStatus = new Map<number, HistogramChild>();
    return (status, seconds) => {
      let child = byStatus.get(status);
      if (child === undefined) {
        child = this.httpDuration.labels(method, pattern, String(status));
        byStatus.set(status, child);
      }
      child.observe(seconds);
    };
  }

  // ---- PublishMeter ----

  batch(eventType: string | undefined, result: PublishBatchResult, seconds: number, counts?: PublishCounts): void {
    const m = this.metersOf(eventType ?? '');
    let batches = m.batches.get(result);
    if (batches === undefined) {
      batches = this.publishBatches.labels(eventType ?? '', result);
      m.batches.set(result, batches);
    }
    batches.inc();
    if (eventType === undefined) return;
    m.duration.observe(seconds);
    if (counts === undefined) return;
    m.size.observe(counts.submitted + counts.failed + counts.invalid + counts.aborted);
    if (counts.submitted > 0) m.submitted.inc(counts.submitted);
    if (counts.failed > 0) m.failed.inc(counts.failed);
    if (counts.invalid > 0) m.invalid.inc(counts.invalid);
    if (counts.aborted > 0) m.aborted.inc(counts.aborted);
    if (counts.bytes > 0) m.bytes.inc(counts.bytes);
  }

  /** The publish children of an event type ('' = not found), made on its first batch. */
  private metersOf(eventType: string): EventTypeMeters {
    let m = this.eventTypeMeters.get(eventType);
    if (m === undefined) {
      m = {
        batches: new Map(),
        submitted: this.publishEvents.labels(eventType, 'submitted'),
        failed: this.publishEvents.labels(eventType, 'failed'),
        invalid: this.publishEvents.labels(eventType, 'invalid'),
        aborted: this.publishEvents.labels(eventType, 'aborted'),
        bytes: this.publishBytes.labels(eventType),
        duration: this.publishDuration.labels(eventType),
        size: this.publishBatchSize.labels(eventType),
      };
      this.eventTypeMeters.set(eventType, m);
    }
    return m;
  }

  // ---- ConsumptionMeter ----

  stream(kind: StreamKind): StreamMeter {
    return this.streamMeters[kind];
  }

  commits(result: CommitResult, cursors: number): void {
    if (cursors > 0) this.commitCounters[result].inc(cursors);
  }

  rebalanced(): void {
    this.rebalances.inc();
  }

  deadLettered(subscriptionId: string, eventType: string): void {
    this.deadLetters.labels(subscriptionId, eventType).inc();
    let eventTypes = this.deadLetterSeries.get(subscriptionId);
    if (!eventTypes) this.deadLetterSeries.set(subscriptionId, (eventTypes = new Set()));
    eventTypes.add(eventType);
  }

  /** The event type was deleted: its publish and dead-letter series go (issue 15 §1.1). */
  forgetEventType(eventType: string): void {
    const m = this.eventTypeMeters.get(eventType);
    if (m !== undefined) {
      for (const result of m.batches.keys()) this.publishBatches.remove(eventType, result);
      for (const result of ['submitted', 'failed', 'invalid', 'aborted']) this.publishEvents.remove(eventType, result);
      this.publishBytes.remove(eventType);
      this.publishDuration.remove(eventType);
      this.publishBatchSize.remove(eventType);
      this.eventTypeMeters.delete(eventType);
    }
    for (const [subscriptionId, eventTypes] of this.deadLetterSeries) {
      if (!eventTypes.delete(eventType)) continue;
      this.deadLetters.remove(subscriptionId, eventType);
      if (eventTypes.size === 0) this.deadLetterSeries.delete(subscriptionId);
    }
  }

  /** Reads the sizes of the node's in-memory caches at every scrape (`broker_cache_entries{cache}`). */
  observeCaches(sizes: () => Readonly<Record<string, number>>): void {
    this.cacheSizes = sizes;
  }

  forgetSubscription(subscriptionId: string): void {
    for (const eventType of this.deadLetterSeries.get(subscriptionId) ?? []) this.deadLetters.remove(subscriptionId, eventType);
    this.deadLetterSeries.delete(subscriptionId);
  }

  // ---- read at scrape time ----

  /** Reads the worker pool's queue depth, utilisation and threads at every scrape. */
  observeWorkerPool(load: () => WorkerPoolLoad): void {
    this.workerPool = load;
  }

  /**
   * Reads the consumer lag at every scrape (`ConsumerLagReader`, O(partitions), a bounded number of Redis
   * round trips). When it fails (Redis unreachable), the scrape still answers: the lag gauges are absent,
   * `broker_subscription_lag_collect_errors_total` counts it and `logger` warns.
   */
  observeLag(read: () => Promise<LagSnapshot>, logger: Logger): void {
    this.lagSource = { read, logger };
  }

  /**
   * Refreshes the gauges read at scrape time and serializes the registry (Prometheus text format).
   * Concurrent calls share one scrape.
   */
  scrape(): Promise<string> {
    this.scraping ??= this.collect().finally(() => (this.scraping = undefined));
    return this.scraping;
  }

  private async collect(): Promise<string> {
    this.readWorkerPool();
    this.cacheEntries.reset();
    for (const [cache, size] of Object.entries(this.cacheSizes?.() ?? {})) this.cacheEntries.labels(cache).set(size);
    await this.readLag();
    return this.registry.metrics();
  }

  private readWorkerPool(): void {
    if (this.workerPool === undefined) return;
    const load = this.workerPool();
    this.poolThreads.set(load.threads);
    this.poolQueueDepth.set(load.queueSize);
    this.poolUtilization.set(load.utilization);
    if (load.completed > this.poolCompletedSeen) this.poolCompleted.inc(load.completed - this.poolCompletedSeen);
    this.poolCompletedSeen = load.completed;
  }

  /**
   * Safety net for the deletion notices: series of event types and subscriptions that no longer exist
   * go (a node that missed a notice, or a subscription deleted through another node).
   */
  private dropSeriesOfDeleted(snapshot: LagSnapshot): void {
    const eventTypes = new Set(snapshot.eventTypes);
    for (const name of [...this.eventTypeMeters.keys()]) if (name !== '' && !eventTypes.has(name)) this.forgetEventType(name);
    const subscriptions = new Set(snapshot.subscriptionIds);
    for (const id of [...this.deadLetterSeries.keys()]) if (!subscriptions.has(id)) this.forgetSubscription(id);
  }

  private async readLag(): Promise<void> {
    const source = this.lagSource;
    if (source === undefined) return;
    const started = performance.now();
    let snapshot: LagSnapshot | undefined;
    try {
      snapshot = await source.read();
    } catch (err) {
      this.lagCollectErrors.inc();
      source.logger.warn({ err: (err as Error).message }, 'cannot read the consumer lag for /metrics; the lag gauges are left out of this scrape');
    }
    this.lagCollectSeconds.set((performance.now() - started) / 1000);
    this.lagEvents.reset();
    this.lagEventsSum.reset();
    this.lagSeconds.reset();
    this.committedOffset.reset();
    this.newestOffset.reset();
    if (snapshot === undefined) return;
    this.dropSeriesOfDeleted(snapshot);
    for (const p of snapshot.partitions) this.newestOffset.labels(p.eventType, p.partition).set(p.newest);
    const sums = new Map<string, { labels: [string, string, string]; sum: number }>();
    for (const s of snapshot.subscriptions) {
      const labels = [s.subscriptionId, s.consumerGroup, s.eventType, s.partition] as const;
      this.lagEvents.labels(...labels).set(s.unconsumedEvents);
      this.committedOffset.labels(...labels).set(s.committed);
      if (s.lagSeconds !== undefined) this.lagSeconds.labels(...labels).set(s.lagSeconds);
      const key = `${s.subscriptionId}\n${s.eventType}`;
      const sum = sums.get(key);
      if (sum === undefined) sums.set(key, { labels: [s.subscriptionId, s.consumerGroup, s.eventType], sum: s.unconsumedEvents });
      else sum.sum += s.unconsumedEvents;
    }
    for (const { labels, sum } of sums.values()) this.lagEventsSum.labels(...labels).set(sum);
  }
}
