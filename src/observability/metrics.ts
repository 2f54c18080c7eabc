import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { ExpositionBuffer, OPENMETRICS_CONTENT_TYPE, openMetricsText } from './exposition.js';
import { LATENCY_BUCKETS_SECONDS, PUBLISH_FAMILIES, PublishSeries, type OwnFamily } from './publish-families.js';
import { sampledTraceIdOf } from './traces.js';
import type { Logger } from './logger.js';
import { SubscriptionCounter } from './subscription-counter.js';
import { LAG_FAMILIES, writeConsumerStatusFamilies, writeLagFamilies, type ConsumerStatusSample } from './lag-families.js';
import { STORAGE_FAMILIES, writeStorageFamilies } from './storage-families.js';
import type {
  CommitResult,
  ConsumptionMeter,
  HttpMeter,
  LagSnapshot,
  PublishBatchResult,
  PublishCounts,
  PublishMeter,
  PublishRefusalReason,
  QuotaCheckMeter,
  QuotaCheckOutcome,
  RequestRecorder,
  StorageFullMeter,
  StorageFullReason,
  StorageSnapshot,
  StreamKind,
  StreamMeter,
  WorkerPoolLoad,
} from './meters.js';

/** A counter bound to one label set (prom-client's `counter.labels(...)`), kept by its caller. */
interface CounterChild {
  inc(value?: number): void;
}

/** A histogram bound to one label set (prom-client's `histogram.labels(...)`), kept by its caller. */
interface HistogramChild {
  observe(value: number): void;
}

/** Prefix of every metric of the broker (docs/metrics.md "The endpoint": every name starts with `broker_`). */
export const METRIC_PREFIX = 'broker_';

/** Families the node writes itself: publishing, delivery latency, consumer lag, Redis memory (names and label names, for {@link BrokerMetrics.families}). */
const OWN_FAMILIES: readonly OwnFamily[] = [...PUBLISH_FAMILIES, ...LAG_FAMILIES, ...STORAGE_FAMILIES];

/**
 * The metrics of one broker node (docs/metrics.md "Metric reference"), in a prom-client registry of its own (never
 * the global default registry, so several nodes in one process do not clash). Names carry the prefix
 * `broker_`, base units (seconds, bytes), `_total` on counters and `_seconds` on duration histograms;
 * partition labels appear only on gauges. Label values are bounded: route patterns, status codes,
 * names of existing event types, subscription ids.
 *
 * Most metrics are updated as things happen through the {@link HttpMeter}, {@link PublishMeter} and
 * {@link ConsumptionMeter} interfaces, with prom-client's label-bound children made once per label set
 * and kept (prom-client still hashes the labels per call, a few times per request; its cost:
 * docs/decisions/0017-metrics-exposition-written-by-the-node.md "Figures the code relies on").
 * The worker pool gauges and the consumer lag gauges are read when scraped ({@link scrape}), the latter
 * from Redis in O(partitions).
 *
 * The families with a series per event type (publishing) or per subscription and partition (consumer
 * lag) are not prom-client's: the node keeps their values in plain records and writes their text itself
 * (exposition.ts), the same text prom-client wrote (test/unit/exposition.test.ts). At 10,000 event types
 * and subscriptions they are most of a scrape's samples, and prom-client's per-sample objects and label
 * formatting made a steady scrape much slower than written this way (bench `catalog-scale`; the figures:
 * docs/decisions/0017-metrics-exposition-written-by-the-node.md "Figures the code relies on").
 */
export class BrokerMetrics implements HttpMeter, PublishMeter, ConsumptionMeter, StorageFullMeter, QuotaCheckMeter {
  /** prom-client's registry: every family but the publish and consumer lag ones ({@link scrape} writes all of them). */
  readonly registry = new Registry();

  private readonly httpDuration: Histogram;
  /** The publish families' series by event type and the delivery latency (publish-families.ts, not prom-client). */
  private readonly publishSeries = new PublishSeries();

  private readonly streamMeters: Record<StreamKind, StreamMeter>;
  private readonly commitCounters: Record<CommitResult, CounterChild>;
  private readonly rebalances: Counter;
  private readonly deadLetters: SubscriptionCounter;
  private readonly expiredEvents: SubscriptionCounter;

  private readonly publishRefusals: Record<PublishRefusalReason, CounterChild>;
  private readonly storageFullRefusals: Record<StorageFullReason, CounterChild>;
  private readonly quotaChecks: Record<QuotaCheckOutcome, CounterChild>;
  private storageSource: (() => StorageSnapshot) | undefined;
  private publishAdmission: (() => { readonly bytes: number; readonly requests: number }) | undefined;

  private readonly poolThreads: Gauge;
  private readonly poolQueueDepth: Gauge;
  private readonly poolQueueDelay: Gauge;
  private readonly poolUtilization: Gauge;
  private readonly poolCompleted: Counter;
  private workerPool: (() => WorkerPoolLoad) | undefined;
  private poolCompletedSeen = 0;

  private readonly lagCollectSeconds: Gauge;
  private readonly lagCollectErrors: Counter;
  private lagSource: { read: () => Promise<LagSnapshot>; logger: Logger } | undefined;
  private consumerStatusSource: (() => readonly ConsumerStatusSample[]) | undefined;
  private readonly cacheEntries: Gauge<'cache'>;
  private cacheSizes: (() => Readonly<Record<string, number>>) | undefined;

  /** The scrapes under way, by format: concurrent scrapes of a format share one (each reads the consumer lag from Redis). */
  private readonly scraping = new Map<boolean, Promise<Buffer>>();

  /** Whether the latency histograms keep trace ids as exemplars and `/metrics` answers OpenMetrics when asked (tracing is on; docs/tracing.md). */
  readonly exemplars: boolean;

  /** @param options `exemplars`: keep exemplars (a node with tracing on) */
  constructor(options: { readonly exemplars?: boolean } = {}) {
    this.exemplars = options.exemplars === true;
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: METRIC_PREFIX });
    // prom-client's counts of active handles, requests and resources are gauges named `_total`, which
    // Prometheus's conventions (and `promtool check metrics`) keep for counters; the same counts by type
    // remain (`broker_nodejs_active_handles` and the others, summed with `sum()`).
    for (const name of ['active_handles_total', 'active_requests_total', 'active_resources_total']) this.registry.removeSingleMetric(`${METRIC_PREFIX}nodejs_${name}`);

    this.httpDuration = new Histogram({ name: 'broker_http_request_duration_seconds', help: 'HTTP requests by method, route pattern and status: seconds until the answer went out (for streams: until the stream started)', labelNames: ['method', 'route', 'status'], buckets: [...LATENCY_BUCKETS_SECONDS], registers });

    const activeStreams = new Gauge({ name: 'broker_active_streams', help: 'Streams sending on this node, by kind (low_level, subscription)', labelNames: ['kind'], registers });
    const streamedEvents = new Counter({ name: 'broker_streamed_events_total', help: 'Events sent to stream clients, by kind', labelNames: ['kind'], registers });
    const streamedBytes = new Counter({ name: 'broker_streamed_bytes_total', help: 'Bytes of batch lines (events, cursors, keep-alives) sent to stream clients, by kind', labelNames: ['kind'], registers });
    const streamMeter = (kind: StreamKind): StreamMeter => {
      const active = activeStreams.labels(kind);
      const events = streamedEvents.labels(kind);
      const bytes = streamedBytes.labels(kind);
      const delivery = this.publishSeries.deliveryLatency[kind];
      active.set(0);
      return {
        opened: () => active.inc(),
        closed: () => active.dec(),
        sent: (n, size) => {
          if (n > 0) events.inc(n);
          bytes.inc(size);
        },
        // An event received on another node by a clock a little ahead would make a negative age.
        delivered: (seconds, traceparent) => delivery.observe(Math.max(0, seconds), this.exemplars && traceparent !== undefined ? sampledTraceIdOf(traceparent) : undefined),
        exemplars: this.exemplars,
      };
    };
    this.streamMeters = { low_level: streamMeter('low_level'), subscription: streamMeter('subscription') };

    const commits = new Counter({ name: 'broker_subscription_commits_total', help: 'Committed cursors by result (committed, outdated = not newer than the stored one, refused = the stream does not hold the partition or its session is gone)', labelNames: ['result'], registers });
    this.commitCounters = { committed: commits.labels('committed'), outdated: commits.labels('outdated'), refused: commits.labels('refused') };
    this.deadLetters = new SubscriptionCounter('broker_dead_letters_total', 'Events a subscription stream skipped after they reached the subscription-max-event-send-count in a single-event batch (dead-letter queue), by subscription and event type', registers);
    this.expiredEvents = new SubscriptionCounter('broker_subscription_expired_events_total', 'Events that retention removed before a subscription read them, counted when the subscription\'s committed offset passed them on this node, by subscription and event type', registers);
    this.rebalances = new Counter({ name: 'broker_subscription_rebalances_total', help: 'Changes of a subscription partition assignment written by this node (sessions joining, leaving, expiring)', registers });

    const refused = new Counter({ name: 'broker_publish_refused_total', help: 'Publishes refused with 503 before their events were looked at, nothing written, by reason: bytes_in_flight (http.publishMaxInFlightBytes), queue_delay (http.publishMaxQueueDelayMs), deadline (X-Timeout or publish.defaultTimeoutMs passed before validation)', labelNames: ['reason'], registers });
    this.publishRefusals = { bytes_in_flight: refused.labels('bytes_in_flight'), queue_delay: refused.labels('queue_delay'), deadline: refused.labels('deadline') };
    const storageFull = new Counter({ name: 'broker_publish_storage_full_total', help: 'Publishes refused for memory, in whole (507) or in part (207 on a Redis Cluster, the items on full masters failed), by reason: high_water_mark (a master at or above redisMemory.highWaterPercent of its limit), out_of_memory (Redis refused the write itself)', labelNames: ['reason'], registers });
    this.storageFullRefusals = { high_water_mark: storageFull.labels('high_water_mark'), out_of_memory: storageFull.labels('out_of_memory') };
    const quotaChecks = new Counter({ name: 'broker_publish_quota_checks_total', help: 'Quota checks of publishes a publishing quota applies to, by outcome: counted (charged in Redis), refused (429 from Redis), refused_locally (429 before validation, the quota known to be in debt), fail_open (Redis did not answer within publish.quotaTimeoutMs: admitted unchecked), node (Redis had not answered for longer than publish.quotaFailOpenMs: counted by this node alone)', labelNames: ['outcome'], registers });
    this.quotaChecks = { counted: quotaChecks.labels('counted'), refused: quotaChecks.labels('refused'), refused_locally: quotaChecks.labels('refused_locally'), fail_open: quotaChecks.labels('fail_open'), node: quotaChecks.labels('node') };
    const admission = (): { readonly bytes: number; readonly requests: number } => this.publishAdmission?.() ?? { bytes: 0, requests: 0 };
    new Gauge({ name: 'broker_publish_bytes_in_flight', help: 'Bytes of publish bodies admitted and not yet answered (bounded by http.publishMaxInFlightBytes), read at scrape', registers, collect() { this.set(admission().bytes); } });
    new Gauge({ name: 'broker_publish_requests_in_flight', help: 'Publish requests admitted and not yet answered, read at scrape', registers, collect() { this.set(admission().requests); } });
    this.poolThreads = new Gauge({ name: 'broker_worker_pool_threads', help: 'Validation worker threads', registers });
    this.poolQueueDepth = new Gauge({ name: 'broker_worker_pool_queue_depth', help: 'Publish and compile tasks waiting for a worker thread', registers });
    this.poolQueueDelay = new Gauge({ name: 'broker_worker_pool_queue_delay_seconds', help: 'Seconds the oldest task waiting for a worker thread has waited (0 when none waits; publish admission holds it to http.publishMaxQueueDelayMs)', registers });
    this.poolUtilization = new Gauge({
      name: 'broker_worker_pool_utilization_ratio',
      help: "Piscina's utilisation of the worker pool (0..1): task run time so far divided by pool lifetime times threads",
      registers,
    });
    this.poolCompleted = new Counter({ name: 'broker_worker_pool_tasks_completed_total', help: 'Tasks the worker pool completed', registers });

    this.lagCollectSeconds = new Gauge({ name: 'broker_subscription_lag_collect_seconds', help: 'Seconds the last scrape took to read the consumer lag from Redis', registers });
    this.cacheEntries = new Gauge({ name: 'broker_cache_entries', help: 'Entries held by each in-memory cache of the node (event types, their generations, retired schema keys, validators on the main thread and in the worker threads as they last reported, proven-cheap schema keys), read at scrape', labelNames: ['cache'], registers });
    this.lagCollectErrors = new Counter({ name: 'broker_subscription_lag_collect_errors_total', help: 'Scrapes whose consumer lag could not be read from Redis (the lag gauges are then absent)', registers });
  }

  /** Content-Type of {@link scrape}'s text in the format asked for. */
  contentTypeOf(openMetrics: boolean): string {
    return openMetrics ? OPENMETRICS_CONTENT_TYPE : this.registry.contentType;
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

  publishRefused(reason: PublishRefusalReason): void {
    this.publishRefusals[reason].inc();
  }

  // ---- QuotaCheckMeter ----

  quotaCheck(outcome: QuotaCheckOutcome): void {
    this.quotaChecks[outcome].inc();
  }

  // ---- StorageFullMeter ----

  publishStorageFull(reason: StorageFullReason): void {
    this.storageFullRefusals[reason].inc();
  }

  /**
   * Mean bytes of the events this node wrote to an event type (serialized JSON as stored, enriched),
   * from its publish series: the JSON side of the Redis-bytes-per-JSON-byte ratio. Undefined before its
   * first written event.
   */
  publishedBytesPerEvent(eventType: string): number | undefined {
    return this.publishSeries.bytesPerEvent(eventType);
  }

  batch(eventType: string | undefined, result: PublishBatchResult, seconds: number, counts?: PublishCounts, traceId?: string): void {
    this.publishSeries.batch(eventType, result, seconds, counts, this.exemplars ? traceId : undefined);
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
    this.deadLetters.inc(subscriptionId, eventType);
  }

  expiredPassed(subscriptionId: string, eventType: string, count: number): void {
    this.expiredEvents.inc(subscriptionId, eventType, count);
  }

  /** The event type was deleted: its publish, dead-letter and expired-events series go (nothing outlives what it describes). */
  forgetEventType(eventType: string): void {
    this.publishSeries.forget(eventType);
    this.deadLetters.forgetEventType(eventType);
    this.expiredEvents.forgetEventType(eventType);
  }

  /** Reads the sizes of the node's in-memory caches at every scrape (`broker_cache_entries{cache}`). */
  observeCaches(sizes: () => Readonly<Record<string, number>>): void {
    this.cacheSizes = sizes;
  }

  forgetSubscription(subscriptionId: string): void {
    this.deadLetters.forgetSubscription(subscriptionId);
    this.expiredEvents.forgetSubscription(subscriptionId);
  }

  // ---- read at scrape time ----

  /** Reads the node's publish admission at each scrape (`broker_publish_bytes_in_flight`, `broker_publish_requests_in_flight`). */
  observePublishAdmission(read: () => { readonly bytes: number; readonly requests: number }): void {
    this.publishAdmission = read;
  }

  /** Reads the Redis memory of the masters and event types at every scrape (docs/metrics.md "Redis memory"; no Redis round trip). */
  observeStorage(read: () => StorageSnapshot): void {
    this.storageSource = read;
  }

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

  /** Reads the last consumer status of every subscription partition at every scrape (docs/metrics.md "Consumer status"; from memory, no Redis round trip). */
  observeConsumerStatus(read: () => readonly ConsumerStatusSample[]): void {
    this.consumerStatusSource = read;
  }

  /**
   * Refreshes the gauges read at scrape time and writes every family: the registry's, then the publish,
   * delivery and consumer lag families. Concurrent calls for one format share one scrape. Never rejects
   * for Redis: when the lag cannot be read, its families are written without samples.
   * @param openMetrics OpenMetrics 1.0 with the histograms' exemplars (only a node with {@link exemplars}
   *   is asked for it) instead of Prometheus text format 0.0.4
   * @returns the text, UTF-8 encoded (37 MB at 10,000 event types and subscriptions: it is encoded as it is
   *   written, {@link ExpositionBuffer})
   */
  scrape(openMetrics = false): Promise<Buffer> {
    let scraping = this.scraping.get(openMetrics);
    if (scraping === undefined) {
      scraping = this.collect(openMetrics).finally(() => this.scraping.delete(openMetrics));
      this.scraping.set(openMetrics, scraping);
    }
    return scraping;
  }

  private async collect(openMetrics: boolean): Promise<Buffer> {
    this.readWorkerPool();
    this.cacheEntries.reset();
    for (const [cache, size] of Object.entries(this.cacheSizes?.() ?? {})) this.cacheEntries.labels(cache).set(size);
    const lag = await this.readLag();
    const out = new ExpositionBuffer(openMetrics);
    const registryText = await this.registry.metrics();
    out.push(openMetrics ? openMetricsText(registryText) : registryText);
    this.publishSeries.write(out);
    writeLagFamilies(out, lag);
    writeConsumerStatusFamilies(out, this.consumerStatusSource?.() ?? []);
    writeStorageFamilies(out, this.storageSource?.());
    if (openMetrics) out.push('# EOF\n');
    return out.toBuffer();
  }

  /**
   * Every metric family this node serves with its label names: prom-client's and those the node writes
   * itself (without histograms' `le`). For checking dashboards and alerts against what is served.
   * @returns family name → label names
   */
  families(): Map<string, readonly string[]> {
    const families = new Map<string, readonly string[]>();
    for (const metric of this.registry.getMetricsAsArray()) {
      const { name, labelNames } = metric as unknown as { name: string; labelNames?: string[] };
      families.set(name, labelNames ?? []);
    }
    for (const family of OWN_FAMILIES) families.set(family.name, family.labelNames);
    return families;
  }

  private readWorkerPool(): void {
    if (this.workerPool === undefined) return;
    const load = this.workerPool();
    this.poolThreads.set(load.threads);
    this.poolQueueDepth.set(load.queueSize);
    this.poolQueueDelay.set(load.queueDelayMs / 1000);
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
    for (const name of [...this.publishSeries.eventTypes()]) if (name !== '' && !eventTypes.has(name)) this.forgetEventType(name);
    const subscriptions = new Set(snapshot.subscriptionIds);
    for (const id of new Set([...this.deadLetters.subscriptions(), ...this.expiredEvents.subscriptions()])) if (!subscriptions.has(id)) this.forgetSubscription(id);
  }

  /** Reads the consumer lag for a scrape. @returns undefined when no source is set or the read failed (counted and logged) */
  private async readLag(): Promise<LagSnapshot | undefined> {
    const source = this.lagSource;
    if (source === undefined) return undefined;
    const started = performance.now();
    let snapshot: LagSnapshot | undefined;
    try {
      snapshot = await source.read();
    } catch (err) {
      this.lagCollectErrors.inc();
      source.logger.warn({ err: (err as Error).message }, 'cannot read the consumer lag for /metrics; the lag gauges are left out of this scrape');
    }
    this.lagCollectSeconds.set((performance.now() - started) / 1000);
    if (snapshot !== undefined) this.dropSeriesOfDeleted(snapshot);
    return snapshot;
  }
}

/** The histogram buckets, also for tests that compare with prom-client's exposition. */
export { BATCH_SIZE_BUCKETS_EVENTS, LATENCY_BUCKETS_SECONDS } from './publish-families.js';
