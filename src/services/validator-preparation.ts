/**
 * Validation made ready before a batch needs it (docs/architecture.md "3.2 The publishing route and the
 * event type cache" and "3.3 Inline or worker"): an event type's validator compiled in every worker
 * thread when it is created or changed, and on the main thread a validator instantiated from standalone
 * code a worker generated for a schema it measured as cheap — the main thread never compiles a schema,
 * so a costly one cannot stall it. What is kept per schema key is dropped when the key retires.
 */
import { LRUCache } from 'lru-cache';
import type { Logger } from '../observability/logger.js';
import { instantiateValidator, primeValidator } from '../domain/schema/schema-compiler.js';
import type { PublishSpec } from '../domain/batch/publish-spec.js';
import type { SchemaCost } from '../../workers/publish-protocol.js';
import { compiledValidatorBytes, DEFAULT_MAIN_THREAD_VALIDATOR_BOUNDS, ValidatorCache, type ValidatorCacheBounds } from '../../workers/validator-cache.js';
import type { EventTypeCache } from './event-types/event-type-cache.js';
import type { WorkerPool } from './worker-pool.js';

/**
 * Largest standalone validator code the main thread instantiates, in UTF-8 bytes (JavaScript text): its
 * one-time cost is parsing that code (its measured cost: docs/decisions/0019-validators-prepared-before-the-first-batch.md,
 * "Figures the code relies on"), and a deterministic bound, unlike a compile time measured on a loaded machine.
 */
const MAIN_THREAD_MAX_CODE_BYTES = 64 * 1024;
/** Schema keys remembered as prepared (least recently used dropped first; as many as event types cached). */
const WARMED_KEYS_KEPT = 10_000;
/**
 * How long a schema whose standalone code a worker did not make in time (busy threads, not the schema)
 * stays off the main thread before a batch of it asks again, in ms.
 */
export const STANDALONE_RETRY_AFTER_MS = 60_000;

/** What a {@link ValidatorPreparation} works with. */
export interface ValidatorPreparationOptions {
  readonly cache: EventTypeCache;
  readonly pool: WorkerPool;
  /** `eventTypes.schemaCompileTimeoutMs`: how long preparing a validator may take in a worker, in ms. */
  readonly compileTimeoutMs: number;
  /** Validators kept on the main thread (`caches.mainThreadValidatorEntries` and `caches.mainThreadValidatorBytes`). */
  readonly mainThreadValidators?: ValidatorCacheBounds;
  readonly logger: Logger;
  /** Monotonic milliseconds for the retry delays (default `performance.now`; tests pass their own). */
  readonly clock?: () => number;
}

/** Prepares validators in the worker threads and on the main thread, and forgets them when their schema key retires. */
export class ValidatorPreparation {
  /**
   * Validators for batches processed on the main thread (`publish.inlineMaxBytes`): instantiated from
   * standalone code a worker generated for a schema it measured as cheap, never compiled here.
   */
  readonly validators: ValidatorCache;
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
  private readonly cache: EventTypeCache;
  private readonly pool: WorkerPool;
  private readonly compileTimeoutMs: number;
  private readonly logger: Logger;

  constructor(options: ValidatorPreparationOptions) {
    ({ cache: this.cache, pool: this.pool, compileTimeoutMs: this.compileTimeoutMs, logger: this.logger } = options);
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

  /**
   * Instantiates a cheap schema's validator on the main thread from code a worker generates (after a
   * worker measured its cost); logs and gives up on failure. Never throws.
   */
  async feedMainThread(spec: PublishSpec, cost: SchemaCost): Promise<void> {
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

  /** Drops what this node keeps about retired schema keys (their event types were deleted or changed). */
  forgetSchemas(schemaKeys: readonly string[]): void {
    this.validators.forget(schemaKeys);
    for (const key of schemaKeys) {
      this.feeding.delete(key);
      this.warmed.delete(key);
      this.workersOnly.delete(key);
    }
  }
}
