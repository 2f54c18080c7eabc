/**
 * What the HTTP pipeline and the services report to the metrics (docs/metrics.md), as small interfaces so
 * that services never import prom-client and tests can leave them out (the `NO_*` no-ops). The
 * implementation is {@link BrokerMetrics} in `metrics.ts`. Every method here is called on a hot path
 * (once per request, batch or stream write, never per event) and must stay a few label lookups.
 */

/** Records one answered request: its status and the seconds until the answer went out (for a stream: until its headers did). */
export type RequestRecorder = (status: number, seconds: number) => void;

/**
 * Why a publish was refused before any of its events was looked at (label `reason` of
 * `broker_publish_refused_total`; docs/publishing.md "Refusals and deadlines"): `bytes_in_flight` — the
 * node's admission bound `http.publishMaxInFlightBytes`; `queue_delay` — its bound on the worker threads'
 * queue delay `http.publishMaxQueueDelayMs`; `deadline` — its deadline (`X-Timeout` or
 * `publish.defaultTimeoutMs`) passed before it was validated.
 */
export type PublishRefusalReason = 'bytes_in_flight' | 'queue_delay' | 'deadline';

/** Counts publishes refused before their work: `broker_publish_refused_total{reason}`. */
export interface PublishRefusalMeter {
  /** One publish was refused (503, nothing written). */
  publishRefused(reason: PublishRefusalReason): void;
}

/**
 * How a publish's quotas were checked (label `outcome` of `broker_publish_quota_checks_total`;
 * docs/publishing.md "Quotas"): `counted` — charged in Redis; `refused` — refused by Redis (429);
 * `refused_locally` — refused before validation, its quota known to be in debt; `fail_open` — Redis did
 * not answer within `publish.quotaTimeoutMs` and the publish went on unchecked; `node` — Redis had not
 * answered for longer than `publish.quotaFailOpenMs` and this node counted it alone.
 */
export type QuotaCheckOutcome = 'counted' | 'refused' | 'refused_locally' | 'fail_open' | 'node';

/** Counts the quota checks of publishes: `broker_publish_quota_checks_total{outcome}`. */
export interface QuotaCheckMeter {
  /** One publish a quota applies to was checked. */
  quotaCheck(outcome: QuotaCheckOutcome): void;
}

/**
 * Why a publish was refused for memory (label `reason` of `broker_publish_storage_full_total`;
 * docs/operations.md "Memory and retention"): `high_water_mark` — the node refused it, a master being at
 * or above `redisMemory.highWaterPercent` of its limit; `out_of_memory` — Redis refused the write itself.
 */
export type StorageFullReason = 'high_water_mark' | 'out_of_memory';

/** Counts publishes refused for memory: `broker_publish_storage_full_total{reason}`. */
export interface StorageFullMeter {
  /** One publish was refused in whole (507) or in part (207, some items `failed`) for memory. */
  publishStorageFull(reason: StorageFullReason): void;
}

/** HTTP request metrics by route pattern: `broker_http_request_duration_seconds`. */
export interface HttpMeter extends PublishRefusalMeter {
  /**
   * A recorder for one route, asked once when the route is registered.
   * @param pattern the route as registered (`/event-types/:name/events`), never a raw path: bounded label values
   */
  route(method: string, pattern: string): RequestRecorder;
}

/**
 * How a publish request ended (label `result` of `broker_publish_batches_total`): `submitted` 200,
 * `partially_failed` 207 (storage failed for some partitions), `rejected` 422 (events failed
 * validation; nothing written), `refused` any other 4xx (malformed body, forbidden, unknown event type,
 * too large), `failed` 5xx (storage unavailable, busy, bug; nothing written).
 */
export type PublishBatchResult = 'submitted' | 'partially_failed' | 'rejected' | 'refused' | 'failed';

/**
 * The events of one answered batch by outcome (label `result` of `broker_publish_events_total`):
 * `submitted` stored, `failed` not stored because storage failed (207), `invalid` failed validation,
 * size or partitioning (422), `aborted` valid but not written because another event of the batch was
 * invalid (422). `bytes`: serialized bytes of the batch's events when it was written (200/207), else 0.
 */
export interface PublishCounts {
  readonly submitted: number;
  readonly failed: number;
  readonly invalid: number;
  readonly aborted: number;
  readonly bytes: number;
}

/** Publishing metrics: batches and events by result, bytes, latency and batch size per event type. */
export interface PublishMeter extends PublishRefusalMeter {
  /**
   * One publish request was answered.
   * @param eventType the event type's name when it exists (the request got as far as looking it up);
   *   undefined otherwise, so names that clients make up never become label values
   * @param seconds from handing the body to the publisher until its outcome
   * @param counts the events of the batch by outcome; undefined when the request failed before they were known
   * @param traceId the id of the request's sampled trace (docs/tracing.md), kept as the exemplar of its latency bucket
   */
  batch(eventType: string | undefined, result: PublishBatchResult, seconds: number, counts?: PublishCounts, traceId?: string): void;
}

/** The kind of a stream (label `kind`): `low_level` (`GET /event-types/{name}/events`) or `subscription`. */
export type StreamKind = 'low_level' | 'subscription';

/** Metrics of the streams of one kind: `broker_active_streams`, `broker_streamed_events_total`, `broker_streamed_bytes_total`. */
export interface StreamMeter {
  /** A stream started sending. */
  opened(): void;
  /** A stream ended (once per `opened`). */
  closed(): void;
  /** Lines went to a client: `events` events in them (keep-alives carry none), `bytes` bytes on the wire (before HTTP chunking). */
  sent(events: number, bytes: number): void;
  /**
   * A batch with events is being sent: `seconds` since its first event was received (`metadata.received_at`;
   * `broker_delivery_latency_seconds`), and that event's `metadata.span_ctx.traceparent` when it has one (an exemplar when sampled).
   */
  delivered(seconds: number, traceparent?: string): void;
  /** True when {@link delivered} keeps exemplars (tracing is on): only then is the first event's `traceparent` worth looking for. */
  readonly exemplars?: boolean;
}

/** Result of one committed cursor (label `result` of `broker_subscription_commits_total`). */
export type CommitResult = 'committed' | 'outdated' | 'refused';

/** Consumption metrics: streams of each kind, commits and rebalances. */
export interface ConsumptionMeter {
  /** The meter of one stream kind (the same object on every call). */
  stream(kind: StreamKind): StreamMeter;
  /**
   * Cursors of a commit request: `committed` advanced, `outdated` not newer than the stored one,
   * `refused` the whole commit was refused by the fence (the session is gone, or the stream does not hold the partition).
   */
  commits(result: CommitResult, cursors: number): void;
  /** A subscription's partition assignment changed (a session joined, left or expired). */
  rebalanced(): void;
  /** A subscription stream skipped a poison event of `eventType` (docs/consuming.md "Dead letters"). */
  deadLettered(subscriptionId: string, eventType: string): void;
  /**
   * A subscription's committed offset passed `count` events of `eventType` that retention removed
   * before the subscription read them (`broker_subscription_expired_events_total`).
   */
  expiredPassed(subscriptionId: string, eventType: string, count: number): void;
  /** The subscription was deleted: its series go. */
  forgetSubscription(subscriptionId: string): void;
}

/** Piscina's view of the validation pool, read at scrape time. */
export interface WorkerPoolLoad {
  /** Worker threads running. */
  readonly threads: number;
  /** Tasks waiting for a free thread. */
  readonly queueSize: number;
  /** How long the oldest of them has waited, ms (0 when none waits). */
  readonly queueDelayMs: number;
  /** Piscina's utilisation (0..1): run time of the tasks so far ÷ (pool lifetime × threads). */
  readonly utilization: number;
  /** Tasks completed since the pool started. */
  readonly completed: number;
}

/** The newest offset of one partition (`broker_partition_newest_offset`; -1 before its first event). */
export interface PartitionOffsetSample {
  readonly eventType: string;
  readonly partition: string;
  readonly newest: number;
}

/** A subscription's position on one partition (the lag gauges). */
export interface SubscriptionLagSample {
  readonly subscriptionId: string;
  readonly consumerGroup: string;
  readonly eventType: string;
  readonly partition: string;
  /** The committed offset (last consumed; -1 = nothing yet). */
  readonly committed: number;
  /** Events after the committed offset (or after the oldest retained one), as `unconsumed_events` in the stats. */
  readonly unconsumedEvents: number;
  /** Age in seconds of the oldest unconsumed event, as `consumer_lag_seconds`; undefined when it cannot be told. */
  readonly lagSeconds: number | undefined;
  /** Queue mode only: events handed to streams and not acknowledged (`in_flight_events` in the stats). */
  readonly inFlightEvents?: number;
  /** Queue mode only: of those, events waiting to be handed out again (`redelivery_events`). */
  readonly redeliveryEvents?: number;
}

/** Everything the lag gauges show, read from Redis at one scrape. */
export interface LagSnapshot {
  readonly partitions: readonly PartitionOffsetSample[];
  readonly subscriptions: readonly SubscriptionLagSample[];
  /** Every event type that exists (series of others are dropped). */
  readonly eventTypes: readonly string[];
  /** Every subscription that exists (series of others are dropped). */
  readonly subscriptionIds: readonly string[];
}

/** One Redis master's memory as the node last read it (docs/metrics.md "Redis memory"). */
export interface MasterMemorySample {
  /** The storage (Redis deployment) id: `default` for the node's own. */
  readonly storage: string;
  /** The master's address (`host:port` or a unix socket path). */
  readonly master: string;
  readonly usedBytes: number;
  /** `maxmemory`, or the machine's memory when it has none; 0 when unknown. */
  readonly limitBytes: number;
  /** The high-water mark (Infinity when the limit is unknown). */
  readonly markBytes: number;
  /** Projected seconds until the mark at the last minute's net rate (0: at or above it; Infinity: not growing). */
  readonly secondsToMark: number;
}

/** The Redis bytes one event type holds, as last measured (`MEMORY USAGE` of its partitions' keys). */
export interface EventTypeStorageSample {
  readonly eventType: string;
  readonly bytes: number;
  /** Net bytes per second, summed over its partitions (each between its last two measurements; negative when it shrinks). */
  readonly growthBytesPerSecond: number;
}

/** What the Redis memory families show, read from the node's state at a scrape (no Redis round trip). */
export interface StorageSnapshot {
  readonly masters: readonly MasterMemorySample[];
  readonly eventTypes: readonly EventTypeStorageSample[];
  /** Redis bytes per byte of event JSON over the event types measured; undefined before anything was measured. */
  readonly redisBytesPerJsonByte: number | undefined;
}

const NOOP = (): void => undefined;

/** A stream meter that records nothing. */
export const NO_STREAM_METER: StreamMeter = { opened: NOOP, closed: NOOP, sent: NOOP, delivered: NOOP };

/** A consumption meter that records nothing (services built without metrics, e.g. in tests). */
export const NO_CONSUMPTION_METER: ConsumptionMeter = { stream: () => NO_STREAM_METER, commits: NOOP, rebalanced: NOOP, deadLettered: NOOP, expiredPassed: NOOP, forgetSubscription: NOOP };
