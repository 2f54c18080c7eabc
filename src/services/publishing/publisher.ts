import type { BrokerConfig } from '../../config/config-schema.js';
import type { EventType } from '../../domain/event-type/event-type.js';
import { brokerError, BrokerError } from '../../errors/catalog.js';
import type { PartitionAppend, PartitionWrite } from '../../storage/partition-store.js';
import type { PartitionLogs } from '../../storage/partition-logs.js';
import { RedisWaitBudget, settleBy } from '../../util/deadline.js';
import type { StorageFullMeter } from '../../observability/meters.js';
import type { RedisClient } from '../../storage/redis/redis-connection.js';
import type { Logger } from '../../observability/logger.js';
import type { PublishTrace } from '../../observability/traces.js';
import type { BatchItemResponse } from '../../domain/batch/batch-item-response.js';
import type { PublishSpec } from '../../domain/batch/publish-spec.js';
import type { PublishTask } from '../../../workers/publish-protocol.js';
import { processBatch } from '../../../workers/publish-batch.js';
import { eidsOfPayloads } from '../../../workers/stored-texts.js';
import type { ValidatorCacheBounds } from '../../../workers/validator-cache.js';
import type { CachedEventType, EventTypeCache } from '../event-types/event-type-cache.js';
import { ValidatorPreparation } from '../validator-preparation.js';
import { PartitionWrites } from './partition-writes.js';
import type { WorkerPool } from '../worker-pool.js';

/** A batch the validation accepted: its partitions' payloads, ready to be written. */
type AcceptedBatch = Extract<Awaited<ReturnType<WorkerPool['publish']>>, { kind: 'accepted' }>;

/** The answer to a publish request (docs/publishing.md "Answers"): 200 empty, or 422/207 with one item per event. */
export type PublishOutcome =
  | { readonly status: 200; readonly events: number; readonly bytes: number }
  | { readonly status: 422 | 207; readonly items: BatchItemResponse[]; readonly events: number; readonly bytes: number };

/** What a {@link Publisher} works with. */
export interface PublisherOptions {
  readonly cache: EventTypeCache;
  readonly pool: WorkerPool;
  readonly logs: PartitionLogs;
  readonly redis: RedisClient;
  readonly config: BrokerConfig['publish'];
  /** `redis.commandTimeoutMs`: the time a publish may wait for Redis over all its Redis steps, so a stalled Redis fails the request in bounded time (docs/operations.md "Redis stalls"). */
  readonly redisTimeoutMs: number;
  /** `eventTypes.schemaCompileTimeoutMs`: how long preparing a validator may take in a worker, in ms. */
  readonly compileTimeoutMs: number;
  /** Validators kept on the main thread (`caches.mainThreadValidatorEntries` and `caches.mainThreadValidatorBytes`). */
  readonly mainThreadValidators?: ValidatorCacheBounds;
  readonly logger: Logger;
  /** Monotonic milliseconds for the retry delays (default `performance.now`; tests pass their own). */
  readonly clock?: () => number;
  /** Counts publishes refused in whole or in part for memory (`broker_publish_storage_full_total`). */
  readonly storageFullMeter?: StorageFullMeter;
}

/** Who publishes and under which flow id (enrichment inputs), and the write authorization check. */
export interface PublishContext {
  readonly publishedBy: string;
  readonly flowId: string;
  /** Runs once the event type is known, before any event is looked at. @throws BrokerError 403 */
  readonly authorize?: (eventType: EventType) => void;
  /**
   * The request's deadline in ms (`X-Timeout`; docs/publishing.md "Refusals and deadlines"), counted from
   * `startedAt`; undefined = `publish.defaultTimeoutMs`. Cut to `publish.maxTimeoutMs`.
   */
  readonly timeoutMs?: number;
  /** `performance.now()` when the request's deadline started counting (default: when {@link Publisher.publish} is called). */
  readonly startedAt?: number;
  /**
   * Told of work the answer no longer waits for (a batch still in a worker when the deadline passed), so
   * the request's admission stays held until it is done (RequestContext.holdUntil).
   */
  readonly holdUntil?: (work: Promise<unknown>) => void;
  /**
   * Runs once the batch is validated, with its event count, before anything is written (the publishing
   * quotas, docs/publishing.md "Quotas", charged in one call to Redis); the batch waits for it.
   * @throws BrokerError 429 to refuse it
   */
  readonly validated?: (events: number) => void | Promise<void>;
  /**
   * The trace of the request (docs/tracing.md), absent with tracing off: its context goes into the events
   * when sampled, and the validation and the writes are recorded as its spans when it records.
   */
  readonly trace?: PublishTrace;
}

/** A publish's deadline: when it passes (`performance.now()` ms), its length and where it came from (named in the 503). */
interface PublishDeadline {
  readonly at: number;
  readonly timeoutMs: number;
  readonly source: 'X-Timeout' | 'publish.defaultTimeoutMs';
}

/**
 * Publishing `POST /event-types/{name}/events` (docs/publishing.md; docs/architecture.md "Publish path"):
 * event type from the cache, the body to a worker (batches up to `publish.inlineMaxBytes` are processed
 * on the main thread when it holds the schema's validator: only schemas a worker measured as cheap, from
 * code a worker generated — the main thread never compiles a schema, so a costly one cannot stall it),
 * one `publishBatch` script per partition of the active timeline, then 200 / 207 / 422.
 * Nothing is written unless every event passed validation, size and partitioning.
 * While the event type switches timelines (docs/concepts.md "Timelines and storages") the old timeline's partitions refuse appends;
 * the batch waits for the new timeline (at most `publish.timelineSwitchWaitMs`) and writes there, or
 * is refused with 503 when nothing of it was written. A node still holding a deleted event type's copy
 * finds its partitions gone (PARTITION_MISSING) and answers 404: nothing of the batch stays (what was
 * appended before the deletion dropped a partition went with it).
 */
export class Publisher {
  /** Validators made ready before batches need them, on the main thread and in the workers. */
  private readonly preparation: ValidatorPreparation;
  /** Batches between receipt and answer, awaited on shutdown even when their client went away. */
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly cache: EventTypeCache;
  private readonly pool: WorkerPool;
  private readonly logs: PartitionLogs;
  private readonly redis: RedisClient;
  private readonly config: BrokerConfig['publish'];
  private readonly redisTimeoutMs: number;
  /** The writes of validated batches: to masters with room, across timeline switches. */
  private readonly partitionWrites: PartitionWrites;

  constructor(options: PublisherOptions) {
    ({ cache: this.cache, pool: this.pool, logs: this.logs, redis: this.redis, config: this.config, redisTimeoutMs: this.redisTimeoutMs } = options);
    this.partitionWrites = new PartitionWrites(this.cache, this.logs, this.config, options.storageFullMeter);
    this.preparation = new ValidatorPreparation(options);
  }

  /**
   * Gets an event type's validation ready before its first batch ({@link ValidatorPreparation.prepare}).
   * Never throws.
   * @param serves this node made the change: it keeps the event type in its cache
   */
  prepare(name: string, serves = false): Promise<void> {
    return this.preparation.prepare(name, serves);
  }

  /**
   * Prepares the validators of event types that existed before this node started
   * ({@link ValidatorPreparation.prepareExisting}). @returns how many were prepared; never throws
   */
  prepareExisting(eventTypes: readonly { readonly name: string; readonly updated_at: string }[], limit: ValidatorCacheBounds, stopped: () => boolean): Promise<number> {
    return this.preparation.prepareExisting(eventTypes, limit, stopped);
  }

  /** Drops a schema key's validators on the main thread and in every worker thread. Never throws. */
  retire(schemaKey: string): Promise<void> {
    return this.preparation.retire(schemaKey);
  }

  /** A new request's Redis budget: `redis.commandTimeoutMs`, plus `publish.replicaTimeoutMs` when replicas must confirm. */
  private budget(): RedisWaitBudget {
    return new RedisWaitBudget(this.redisTimeoutMs + (this.config.minReplicas > 0 ? this.config.replicaTimeoutMs : 0));
  }

  /**
   * @param body the request body (gunzipped); it is handed to a worker and must not be used afterwards
   * @throws BrokerError 404 unknown event type, 403 from `context.authorize`, 400 malformed body, 503 storage
   *   unreachable, node busy, or deadline passed before validation (PUBLISH_DEADLINE_EXCEEDED)
   */
  publish(name: string, body: Buffer, context: PublishContext): Promise<PublishOutcome> {
    const work = this.process(name, body, context);
    this.track(work);
    return work;
  }

  /** Keeps `work` in {@link inFlight} until it settles (awaited on shutdown). */
  private track(work: Promise<unknown>): void {
    const tracked = work.catch(() => undefined).finally(() => this.inFlight.delete(tracked));
    this.inFlight.add(tracked);
  }

  /** Drops what this node keeps about retired schema keys (their event types were deleted or changed). */
  forgetSchemas(schemaKeys: readonly string[]): void {
    this.preparation.forgetSchemas(schemaKeys);
  }

  /** Entries of the main thread's validator cache (`broker_cache_entries`). */
  get cacheSizes(): { readonly validators: number } {
    return { validators: this.preparation.validators.size };
  }

  /** Resolves once every batch accepted so far has been written or refused (graceful shutdown). */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /** The deadline of a request (`X-Timeout` cut to `publish.maxTimeoutMs`, else `publish.defaultTimeoutMs`). */
  private deadlineOf(context: PublishContext): PublishDeadline {
    const given = context.timeoutMs;
    const timeoutMs = given === undefined ? this.config.defaultTimeoutMs : Math.max(0, Math.min(given, this.config.maxTimeoutMs));
    return { at: (context.startedAt ?? performance.now()) + timeoutMs, timeoutMs, source: given === undefined ? 'publish.defaultTimeoutMs' : 'X-Timeout' };
  }

  /**
   * Processes one batch within its deadline (docs/publishing.md "Refusals and deadlines"): passed before
   * the batch is validated — 503 PUBLISH_DEADLINE_EXCEEDED, nothing written (a batch still in a worker
   * then is left to finish there, unwritten, with the request's admission held until it does); passed
   * after validation but before the partition writes start — 207, every item `aborted`. Partition writes
   * are sent together and only while the deadline has not passed; once sent, each is awaited (within the
   * Redis budget) so the answer tells each item's true state: no partition is written after an answer
   * said it was not.
   */
  private async process(name: string, body: Buffer, context: PublishContext): Promise<PublishOutcome> {
    const deadline = this.deadlineOf(context);
    // One turn of the event loop first: an event type change another node announced before this request
    // arrived (its notice is already on the subscriber socket) is applied to the cache before it is read.
    await new Promise<void>((resolve) => setImmediate(resolve));
    // Every request waits for Redis at most its own budget, whatever other requests wait for.
    const budget = this.budget();
    const eventType = await budget.wait(beforeDeadline(this.cache.get(name), deadline), () => {
      throw notAnsweredInTime(budget);
    });
    if (!eventType) throw brokerError('EVENT_TYPE_NOT_FOUND', { name });
    context.authorize?.(eventType.record);
    if (this.redis.status !== 'ready') {
      throw brokerError('STORAGE_UNAVAILABLE', { reason: 'not connected to Redis; nothing was written' });
    }
    const trace = context.trace;
    // Every master of the storage above its high-water mark (always so on a full standalone Redis): refused
    // before any work on the events, since none of them could be written (docs/operations.md "Memory and retention").
    const full = this.logs.storageFull(eventType.timelines);
    if (full !== undefined) throw this.partitionWrites.refusedForMemory(full, 'high_water_mark');
    const task: PublishTask & { readonly spec: PublishSpec } = {
      kind: 'publish',
      body: ownedBytes(body),
      spec: eventType.publishSpec,
      maxEventBytes: this.config.maxEventBytes,
      receivedAt: new Date().toISOString(),
      publishedBy: context.publishedBy,
      flowId: context.flowId,
      ...(trace?.spanCtx === undefined ? {} : { spanCtx: trace.spanCtx }),
      ...(trace?.recording === true ? { traced: true as const } : {}),
      ...(this.config.storedCompression ? { storedCompressionMinBytes: this.config.storedCompressionMinBytes } : {}),
    };
    // A small batch costs less to validate than to hand to a thread and back (docs/architecture.md
    // "Inline or worker"): it runs here, bounded by its size, but only when this thread holds the
    // validator — made from a worker's code for a schema the worker found cheap; until then, and for
    // every other schema, validation runs in a worker.
    const spec = eventType.publishSpec;
    const validators = this.preparation.validators;
    const inline = body.byteLength <= this.config.inlineMaxBytes && (spec.category === 'undefined' || validators.has(spec.schemaKey));
    if (performance.now() >= deadline.at) throw deadlineExceeded(deadline);
    let result: Awaited<ReturnType<WorkerPool['publish']>>;
    /** A recorded trace: when the batch went to the pool (its `validate` span tells the wait for a thread apart). */
    let queuedAtMs: number | undefined;
    if (inline) {
      const startMs = task.traced === true ? performance.timeOrigin + performance.now() : 0;
      result = processBatch(task, validators);
      if (task.traced === true) result = { ...result, timing: { startMs, endMs: performance.timeOrigin + performance.now() } };
    } else {
      if (task.traced === true) queuedAtMs = performance.timeOrigin + performance.now();
      const validated = this.pool.publish(task, this.config.workerTaskTimeoutMs);
      result = await settleBy(validated, deadline.at, () => {
        // The batch stays in its worker: nothing of it is written, and the request's admission is held
        // until the worker is done with it, so work no answer waits for still counts (and is drained).
        const leftover = validated.catch(() => undefined);
        context.holdUntil?.(leftover);
        this.track(leftover);
        throw deadlineExceeded(deadline);
      });
    }
    if (!inline && result.kind !== 'malformed' && result.schemaCost !== undefined) void this.preparation.feedMainThread(spec, result.schemaCost);
    if (trace !== undefined && result.timing !== undefined) {
      const counted = result.kind === 'accepted' ? result.itemPartitions.length : result.kind === 'rejected' ? result.items.length : 0;
      trace.validated({ thread: inline ? 'main' : 'worker', ...result.timing, ...(queuedAtMs === undefined ? {} : { queuedAtMs }) }, counted);
    }
    if (trace !== undefined && result.kind === 'accepted' && result.links !== undefined) trace.link(result.links);
    if (result.kind === 'malformed') throw brokerError('BAD_REQUEST', { reason: result.detail });
    if (result.kind === 'rejected') return { status: 422, items: result.items, events: result.items.length, bytes: 0 };
    const events = result.itemPartitions.length;
    await context.validated?.(events);
    if (result.partitions.length === 0) return { status: 200, events, bytes: 0 };

    return this.append(eventType, result, events, budget, deadline, trace);
  }

  /**
   * Writes a validated batch's partitions, unless the Redis budget or the deadline passed first: 200 when
   * every partition was written, 207 with one item per event when some were not (or the deadline passed
   * before the writes were sent: every item `aborted`).
   */
  private async append(eventType: CachedEventType, result: AcceptedBatch, events: number, budget: RedisWaitBudget, deadline: PublishDeadline, trace: PublishTrace | undefined): Promise<PublishOutcome> {
    const spec = eventType.publishSpec;
    const window = spec.idempotencyWindowSeconds;
    const maxEids = this.config.idempotencyMaxEidsPerPartition;
    const appends = result.partitions.map(
      (p): PartitionAppend => ({
        partition: String(p.partition),
        count: p.count,
        data: p.data,
        ...(p.compressed === true ? { compressed: true } : {}),
        ...(p.compactionKeys ? { compactionKeys: p.compactionKeys } : {}),
        ...(window !== undefined && p.eidKeys ? { idempotency: { eidKeys: p.eidKeys, windowSeconds: window, maxEids } } : {}),
      }),
    );
    if (budget.remainingMs <= 0) throw notAnsweredInTime(budget);
    if (performance.now() >= deadline.at) return abortedAtDeadline(result.partitions, result.itemPartitions, deadline);
    const appended = trace?.appending(appends.length);
    let writes: PartitionWrite[];
    try {
      writes = await this.partitionWrites.writeWithRoom(eventType, appends, budget, deadline.at);
    } catch (err) {
      appended?.(appends.length);
      throw err;
    }
    appended?.(writes.filter((w) => !w.ok).length);
    const failed = new Map<number, string>();
    writes.forEach((w, i) => {
      if (!w.ok) failed.set((result.partitions[i] as { partition: number }).partition, w.reason);
    });
    if (failed.size === 0) return { status: 200, events, bytes: result.bytes };
    const items = eidsOfPayloads(result.partitions, result.itemPartitions).map((eid, i): BatchItemResponse => {
      const reason = failed.get(result.itemPartitions[i] as number);
      return reason === undefined
        ? { eid, publishing_status: 'submitted', step: 'none', detail: '' }
        : { eid, publishing_status: 'failed', step: 'publishing', detail: reason };
    });
    return { status: 207, items, events, bytes: result.bytes };
  }
}

/** `work`'s value, or a rejection with PUBLISH_DEADLINE_EXCEEDED once the deadline passed first. */
function beforeDeadline<T>(work: Promise<T>, deadline: PublishDeadline): Promise<T> {
  return settleBy(work, deadline.at, () => {
    throw deadlineExceeded(deadline);
  });
}

/** 503 for a publish whose deadline passed before its batch was validated (nothing written). */
function deadlineExceeded(deadline: PublishDeadline): BrokerError {
  return brokerError('PUBLISH_DEADLINE_EXCEEDED', { timeoutMs: Math.round(deadline.timeoutMs), source: deadline.source });
}

/** 207 for a validated batch whose deadline passed before its writes started: every item `aborted`, nothing written. */
function abortedAtDeadline(partitions: Parameters<typeof eidsOfPayloads>[0], itemPartitions: Parameters<typeof eidsOfPayloads>[1], deadline: PublishDeadline): PublishOutcome {
  const detail = `the deadline of ${Math.round(deadline.timeoutMs)} ms (${deadline.source}) passed before the batch was written; nothing was written`;
  const items = eidsOfPayloads(partitions, itemPartitions).map((eid): BatchItemResponse => ({ eid, publishing_status: 'aborted', step: 'publishing', detail }));
  return { status: 207, items, events: items.length, bytes: 0 };
}

/** 503 for a publish whose Redis budget ran out before anything was sent to be written. */
function notAnsweredInTime(budget: RedisWaitBudget): BrokerError {
  return brokerError('STORAGE_UNAVAILABLE', { reason: `Redis did not answer within ${budget.budgetMs} ms; nothing was written` });
}

/** The body as bytes that own their whole ArrayBuffer, so they can be transferred to a worker. */
function ownedBytes(body: Buffer): Uint8Array {
  if (body.byteOffset === 0 && body.byteLength === body.buffer.byteLength) return body;
  return new Uint8Array(body);
}
