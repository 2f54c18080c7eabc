import type { BrokerConfig } from '../config/config-schema.js';
import type { EventType } from '../domain/event-type.js';
import { brokerError, BrokerError } from '../errors/catalog.js';
import type { PartitionAppend, PartitionWrite } from '../storage/partition-store.js';
import type { PartitionLogs } from '../storage/partition-logs.js';
import { RedisWaitBudget } from '../storage/deadline.js';
import type { RedisClient } from '../storage/redis-connection.js';
import type { Logger } from '../observability/logger.js';
import { instantiateValidator, primeValidator } from '../domain/schema-compiler.js';
import { LRUCache } from 'lru-cache';
import type { BatchItemResponse } from '../domain/batch-item-response.js';
import type { PublishSpec } from '../domain/publish-spec.js';
import type { PublishTask, SchemaCost } from '../../workers/publish-protocol.js';
import { processBatch } from '../../workers/publish-batch.js';
import { eidsOfPayloads } from '../../workers/stored-texts.js';
import { compiledValidatorBytes, DEFAULT_MAIN_THREAD_VALIDATOR_BOUNDS, ValidatorCache, type ValidatorCacheBounds } from '../../workers/validator-cache.js';
import type { CachedEventType, EventTypeCache } from './event-type-cache.js';
import type { WorkerPool } from './worker-pool.js';

/**
 * Largest standalone validator code the main thread instantiates, in UTF-8 bytes (JavaScript text): its
 * one-time cost is parsing that code (about 0.03 ms per KB measured on the GitHub webhook schemas), and a
 * deterministic bound, unlike a compile time measured on a loaded machine.
 */
const MAIN_THREAD_MAX_CODE_BYTES = 64 * 1024;
/** Schema keys remembered as prepared (least recently used dropped first; as many as event types cached). */
const WARMED_KEYS_KEPT = 10_000;
/**
 * How long a schema whose standalone code a worker did not make in time (busy threads, not the schema)
 * stays off the main thread before a batch of it asks again, in ms.
 */
export const STANDALONE_RETRY_AFTER_MS = 60_000;

/** The answer to a publish request (docs/publishing.md "Answers"): 200 empty, or 422/207 with one item per event. */
export type PublishOutcome =
  | { readonly status: 200; readonly events: number; readonly bytes: number }
  | { readonly status: 422 | 207; readonly items: BatchItemResponse[]; readonly events: number; readonly bytes: number };

/** Who publishes and under which flow id (enrichment inputs), and the write authorization check. */
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
}

export interface PublishContext {
  readonly publishedBy: string;
  readonly flowId: string;
  /** Runs once the event type is known, before any event is looked at. @throws BrokerError 403 */
  readonly authorize?: (eventType: EventType) => void;
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
  /**
   * Validators for batches processed on the main thread (`publish.inlineMaxBytes`): instantiated from
   * standalone code a worker generated for a schema it measured as cheap, never compiled here.
   */
  private readonly validators: ValidatorCache;
  /**
   * Schema keys prepared in every worker thread (and on the main thread when cheap), dropped when the key
   * retires: a further prepare of them sends no task. Only a shortcut: a thread that lost a validator
   * (its LRU, or a replaced thread) compiles it again on demand.
   */
  private readonly warmed = new LRUCache<string, true>({ max: WARMED_KEYS_KEPT });
  /**
   * Schema keys whose standalone code was over {@link MAIN_THREAD_MAX_CODE_BYTES} (or could not be made):
   * never asked for again, or every batch of such a schema would cost a worker a compile. A key whose code
   * was not made in time is kept for {@link STANDALONE_RETRY_AFTER_MS} only.
   */
  private readonly workersOnly: LRUCache<string, true>;
  /** Per event type name, the schema key prepared for it last (retired when the name is deleted or changes schema). */
  private readonly preparedKeys = new LRUCache<string, string>({ max: WARMED_KEYS_KEPT });
  /** Schema keys whose standalone code is being made for the main thread (dropped when the key retires). */
  private readonly feeding = new Set<string>();
  /** Event types being prepared, whether a change came in meanwhile (prepare again once done), and whether this node serves them (`prepare`). */
  private readonly preparing = new Map<string, { again: boolean; serves: boolean; readonly done: Promise<void> }>();
  /** Batches between receipt and answer, awaited on shutdown even when their client went away. */
  private readonly inFlight = new Set<Promise<unknown>>();
  private readonly cache: EventTypeCache;
  private readonly pool: WorkerPool;
  private readonly logs: PartitionLogs;
  private readonly redis: RedisClient;
  private readonly config: BrokerConfig['publish'];
  private readonly redisTimeoutMs: number;
  private readonly compileTimeoutMs: number;
  private readonly logger: Logger;

  constructor(options: PublisherOptions) {
    ({ cache: this.cache, pool: this.pool, logs: this.logs, redis: this.redis, config: this.config, redisTimeoutMs: this.redisTimeoutMs, compileTimeoutMs: this.compileTimeoutMs, logger: this.logger } = options);
    this.validators = new ValidatorCache(options.mainThreadValidators ?? DEFAULT_MAIN_THREAD_VALIDATOR_BOUNDS, false);
    const now = options.clock ?? (() => performance.now());
    this.workersOnly = new LRUCache({ max: WARMED_KEYS_KEPT, perf: { now }, ttlResolution: 0 });
  }

  /**
   * Gets an event type's validation ready before its first batch, so that batch does not wait for a
   * compilation: compiles its validator
   * in every worker thread and, when the workers measured it as cheap, instantiates on the main thread the
   * standalone code a worker generated for it. Called when an event type is created or changed (the
   * registry awaits it before answering) and when a change notice names one. A change arriving while it
   * runs makes it run once more. Never throws (failures are logged; the publish path compiles on demand
   * in a worker then).
   * @param serves this node made the change (the registry awaits this before answering): it keeps the
   *   event type in its cache, as its first batch would (the read is generation-checked, so a change
   *   notice arriving meanwhile wins). A node that only heard the notice reads without caching: it would
   *   serve that copy of an event type it never served until the next notice arrived.
   */
  prepare(name: string, serves = false): Promise<void> {
    const running = this.preparing.get(name);
    if (running) {
      running.again = true;
      running.serves ||= serves;
      return running.done;
    }
    const state: { again: boolean; serves: boolean; done: Promise<void> } = { again: false, serves, done: Promise.resolve() };
    state.done = (async () => {
      do {
        state.again = false;
        await this.prepareOnce(name, state.serves).catch((err: unknown) => {
          this.logger.warn({ err: (err as Error).message, eventType: name }, 'could not prepare the validator of an event type; its first batch compiles it');
        });
      } while (state.again);
    })().finally(() => this.preparing.delete(name));
    this.preparing.set(name, state);
    return state.done;
  }

  /**
   * Prepares the validators of event types that existed before this node started (this node
   * hears no change notice for them), one after the other so that publishes arriving meanwhile wait
   * behind at most one compile per worker thread. The node awaits it before listening for at most
   * `eventTypes.prepareAtStartMs` (src/app.ts) and lets the rest run while it serves; a batch that
   * arrives first for a type not prepared yet compiles on demand.
   * @param eventTypes the candidates (name and `updated_at`, ISO 8601); the most recently changed
   *   `limit` are prepared, newest first
   * @param limit what a worker thread's validator cache holds (`caches.workerValidatorEntries` and
   *   `caches.workerValidatorBytes`): preparing more would evict the first; it stops at either bound
   * @param stopped polled before each one: true once the node is stopping
   * @returns how many event types were prepared. Never throws (each failure is logged by {@link prepare}).
   */
  async prepareExisting(eventTypes: readonly { readonly name: string; readonly updated_at: string }[], limit: ValidatorCacheBounds, stopped: () => boolean): Promise<number> {
    const newestFirst = [...eventTypes].sort((a, b) => (a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : 0)).slice(0, limit.maxEntries);
    let prepared = 0;
    let bytes = 0;
    for (const { name } of newestFirst) {
      if (stopped()) break;
      // Read here for its schema's size, and again by `prepare` (which other callers use alone): one more
      // Redis read per event type, at start only.
      const eventType = await this.cache.read(name).catch(() => undefined);
      const length = eventType && eventType.publishSpec.category !== 'undefined' ? eventType.publishSpec.effectiveSchema.length : 0;
      if (length > 0 && bytes + compiledValidatorBytes(length) > limit.maxBytes) break;
      bytes += length > 0 ? compiledValidatorBytes(length) : 0;
      await this.prepare(name);
      prepared++;
    }
    return prepared;
  }

  private async prepareOnce(name: string, serves: boolean): Promise<void> {
    const eventType = serves ? await this.cache.get(name) : await this.cache.read(name);
    // This node may never have cached the event type, so the cache retires nothing for it: what was
    // prepared for the name goes when it is deleted or its schema changes, so memory stays bounded.
    const previous = this.preparedKeys.get(name);
    if (previous !== undefined && previous !== eventType?.publishSpec.schemaKey) {
      this.preparedKeys.delete(name);
      await this.retire(previous);
    }
    if (!eventType || eventType.publishSpec.category === 'undefined') return;
    const spec = eventType.publishSpec;
    this.preparedKeys.set(name, spec.schemaKey);
    // A node hears of each change twice (its own announce, then the notice), and event types may share
    // a schema: a key prepared already sends no task.
    if (this.warmed.has(spec.schemaKey)) return;
    const cost = await this.pool.warm(spec, this.compileTimeoutMs);
    // A delete or schema change that raced the warm-up may have retired the key before the workers
    // compiled it: nothing may outlive its event type, so drop it again then.
    if ((await this.cache.read(name))?.publishSpec.schemaKey !== spec.schemaKey) {
      await this.retire(spec.schemaKey);
      return;
    }
    // Workers report a cost only for a schema within the main thread's budget (`INLINE_MAX_APPLICATIONS_PER_VALUE`).
    if (cost !== undefined) await this.feedMainThread(spec, cost);
    this.warmed.set(spec.schemaKey, true);
  }

  /**
   * Drops a schema key's validators on the main thread and in every worker thread (its event type was
   * deleted or its schema changed), so they do not keep memory. Never throws.
   */
  async retire(schemaKey: string): Promise<void> {
    this.forgetSchemas([schemaKey]);
    await this.pool.forgetSchemas([schemaKey]);
  }

  /** Instantiates a cheap schema's validator on the main thread from code a worker generates; logs and gives up on failure. */
  private async feedMainThread(spec: PublishSpec, cost: SchemaCost): Promise<void> {
    const key = spec.schemaKey;
    if (this.validators.has(key) || this.feeding.has(key) || this.workersOnly.has(key)) return;
    this.feeding.add(key);
    try {
      const made = await this.pool.standaloneCode(spec.effectiveSchema, this.compileTimeoutMs);
      if (!made.ok) {
        this.workersOnly.set(key, true, made.transient ? { ttl: STANDALONE_RETRY_AFTER_MS } : {});
        const retry = made.transient ? { retryInMs: STANDALONE_RETRY_AFTER_MS } : {};
        this.logger.warn({ eventType: spec.name, reason: made.reason, ...retry }, 'no main-thread validator for a cheap schema; its small batches go to the workers');
        return;
      }
      if (Buffer.byteLength(made.code) > MAIN_THREAD_MAX_CODE_BYTES) {
        this.workersOnly.set(key, true);
        return;
      }
      // A key retired meanwhile (the event type changed or was deleted) is not kept.
      if (!this.feeding.has(key)) return;
      this.validators.set(key, { validate: primeValidator(instantiateValidator(made.code), made.primingInstance), cost }, made.code.length);
    } catch (err) {
      this.workersOnly.set(key, true);
      this.logger.warn({ err: (err as Error).message, eventType: spec.name }, 'no main-thread validator for a cheap schema; its small batches go to the workers');
    } finally {
      this.feeding.delete(key);
    }
  }

  /** A new request's Redis budget: `redis.commandTimeoutMs`, plus `publish.replicaTimeoutMs` when replicas must confirm. */
  private budget(): RedisWaitBudget {
    return new RedisWaitBudget(this.redisTimeoutMs + (this.config.minReplicas > 0 ? this.config.replicaTimeoutMs : 0));
  }

  /**
   * @param body the request body (gunzipped); it is handed to a worker and must not be used afterwards
   * @throws BrokerError 404 unknown event type, 403 from `context.authorize`, 400 malformed body, 503 storage unreachable or node busy
   */
  publish(name: string, body: Buffer, context: PublishContext): Promise<PublishOutcome> {
    const work = this.process(name, body, context);
    const tracked = work.catch(() => undefined).finally(() => this.inFlight.delete(tracked));
    this.inFlight.add(tracked);
    return work;
  }

  /** Drops what this node keeps about retired schema keys (their event types were deleted or changed). */
  forgetSchemas(schemaKeys: readonly string[]): void {
    this.validators.forget(schemaKeys);
    for (const key of schemaKeys) {
      this.feeding.delete(key);
      this.warmed.delete(key);
      this.workersOnly.delete(key);
    }
  }

  /** Entries of the main thread's validator cache (`broker_cache_entries`). */
  get cacheSizes(): { readonly validators: number } {
    return { validators: this.validators.size };
  }

  /** Resolves once every batch accepted so far has been written or refused (graceful shutdown). */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  private async process(name: string, body: Buffer, context: PublishContext): Promise<PublishOutcome> {
    // One turn of the event loop first: an event type change another node announced before this request
    // arrived (its notice is already on the subscriber socket) is applied to the cache before it is read.
    await new Promise<void>((resolve) => setImmediate(resolve));
    // Every request waits for Redis at most its own budget, whatever other requests wait for.
    const budget = this.budget();
    const eventType = await budget.wait(this.cache.get(name), () => {
      throw notAnsweredInTime(budget);
    });
    if (!eventType) throw brokerError('EVENT_TYPE_NOT_FOUND', { name });
    context.authorize?.(eventType.record);
    if (this.redis.status !== 'ready') {
      throw brokerError('STORAGE_UNAVAILABLE', { reason: 'not connected to Redis; nothing was written' });
    }
    const task: PublishTask & { readonly spec: PublishSpec } = {
      kind: 'publish',
      body: ownedBytes(body),
      spec: eventType.publishSpec,
      maxEventBytes: this.config.maxEventBytes,
      receivedAt: new Date().toISOString(),
      publishedBy: context.publishedBy,
      flowId: context.flowId,
    };
    // A small batch costs less to validate than to hand to a thread and back (docs/architecture.md
    // "Inline or worker"): it runs here, bounded by its size, but only when this thread holds the
    // validator — made from a worker's code for a schema the worker found cheap; until then, and for
    // every other schema, validation runs in a worker.
    const spec = eventType.publishSpec;
    const inline = body.byteLength <= this.config.inlineMaxBytes && (spec.category === 'undefined' || this.validators.has(spec.schemaKey));
    const result = inline ? processBatch(task, this.validators) : await this.pool.publish(task, this.config.workerTaskTimeoutMs);
    if (!inline && result.kind !== 'malformed' && result.schemaCost !== undefined) void this.feedMainThread(spec, result.schemaCost);
    if (result.kind === 'malformed') throw brokerError('BAD_REQUEST', { reason: result.detail });
    if (result.kind === 'rejected') return { status: 422, items: result.items, events: result.items.length, bytes: 0 };
    const events = result.itemPartitions.length;
    if (result.partitions.length === 0) return { status: 200, events, bytes: 0 };

    const appends = result.partitions.map((p): PartitionAppend => ({ partition: String(p.partition), count: p.count, data: p.data, ...(p.compactionKeys ? { compactionKeys: p.compactionKeys } : {}) }));
    if (budget.remainingMs <= 0) throw notAnsweredInTime(budget);
    const writes = await this.write(eventType, appends, budget);
    if (writes.every((w) => !w.ok && w.closed === true)) {
      throw brokerError('TIMELINE_SWITCHING', { name });
    }
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

  /**
   * Appends to the active timeline; partitions refused because a timeline switch closed them are
   * written again on the next timeline once this node sees it (polling the registry every 20 ms, at
   * most `publish.timelineSwitchWaitMs`); partitions refused as never opened go to {@link writeMissing}.
   * Every Redis step waits within `budget`: a partition not acknowledged in time is failed `timed out`.
   * @throws BrokerError 404 when the event type was deleted (only then)
   */
  private async write(eventType: CachedEventType, appends: readonly PartitionAppend[], budget: RedisWaitBudget): Promise<PartitionWrite[]> {
    const name = eventType.record.name;
    const writes = await budget.within((deadlineAt) => this.logs.append(name, eventType.timelines, appends, deadlineAt));
    if (writes.some((w) => !w.ok && w.missing === true)) await this.writeMissing(eventType, appends, writes, budget);
    if (!writes.some((w) => !w.ok && w.closed === true)) return writes;
    const deadline = Date.now() + this.config.timelineSwitchWaitMs;
    let closedOrder = eventType.timelines.active.order;
    while (Date.now() < deadline) {
      const current = await budget.wait(this.cache.reload(name).catch(() => undefined), () => undefined);
      if (current === undefined) break;
      if (current.timelines.active.order === closedOrder) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        continue;
      }
      const retry = appends.filter((_, i) => { const w = writes[i]; return w !== undefined && !w.ok && w.closed === true; });
      const again = await budget.within((deadlineAt) => this.logs.append(name, current.timelines, retry, deadlineAt));
      let j = 0;
      writes.forEach((w, i) => {
        if (!w.ok && w.closed === true) writes[i] = again[j++] as PartitionWrite;
      });
      if (!writes.some((w) => !w.ok && w.closed === true)) return writes;
      closedOrder = current.timelines.active.order;
    }
    return writes;
  }

  /**
   * Partitions that refused the append as never opened or opened for another timeline id
   * (PARTITION_MISSING): the event type is read from Redis again. Gone — it was deleted and this node
   * still held its copy — the batch is answered 404 (appending would have created keys no event type
   * owns; whatever of it was written went with the deletion). Created again under the same name since
   * (another first timeline id; its partitions record that id and refuse the batch), the batch was
   * validated and partitioned for the deleted one: 404 as well, so the producer sends it again to the new
   * one. Still the same event type — created before partitions were opened, or a publish that came before
   * its creation opened them — the partitions are opened on the active timeline and written again.
   * Replaces the entries of `writes` it wrote (in place); a Redis failure leaves them failed.
   * @param eventType the copy the batch was processed with
   * @throws BrokerError 404 when that event type no longer exists
   */
  private async writeMissing(eventType: CachedEventType, appends: readonly PartitionAppend[], writes: PartitionWrite[], budget: RedisWaitBudget): Promise<void> {
    const name = eventType.record.name;
    const current = await budget.wait(
      this.cache.reload(name).then((reloaded) => reloaded ?? null, () => undefined),
      () => undefined,
    );
    if (current === undefined) return; // Redis did not answer: the partitions stay failed
    if (current === null || current.timelines.all[0]?.id !== eventType.timelines.all[0]?.id) throw brokerError('EVENT_TYPE_NOT_FOUND', { name });
    const missing = writes.flatMap((w, i) => (!w.ok && w.missing === true ? [i] : []));
    const retry = missing.map((i) => appends[i] as PartitionAppend);
    const opened = await budget.wait(
      this.logs.openPartitions(name, current.timelines.active, retry.map((a) => a.partition)).then(() => true, () => false),
      () => false,
    );
    if (!opened) return;
    const again = await budget.within((deadlineAt) => this.logs.append(name, current.timelines, retry, deadlineAt));
    missing.forEach((i, j) => {
      writes[i] = again[j] as PartitionWrite;
    });
  }
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
