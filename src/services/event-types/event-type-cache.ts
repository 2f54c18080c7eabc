import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { onResubscribed, type RedisClient } from '../../storage/redis/redis-connection.js';
import { buildEffectiveSchema } from '../../domain/schema/effective-schema.js';
import type { JsonObject } from '../../domain/schema/json-schema-walk.js';
import type { Keys } from '../../storage/keys.js';
import type { EventTypeStore, StoredEventType } from '../../storage/event-type-store.js';
import type { Logger } from '../../observability/logger.js';
import { idempotencyWindowSeconds } from '../../domain/batch/idempotency.js';
import type { PublishSpec } from '../../domain/batch/publish-spec.js';

/** A cached event type with what publishing needs precomputed. */
export interface CachedEventType extends StoredEventType {
  readonly publishSpec: PublishSpec;
}

/**
 * Builds the worker's view of an event type: effective schema text and its content hash (the
 * worker's validator cache key), hash key paths made absolute (`data.` prefix for category data; the
 * compaction key `metadata.partition_compaction_key` for compacted event types).
 * @throws Error when the stored schema no longer builds (a registry bug)
 */
export function buildPublishSpec(stored: Pick<StoredEventType, 'record' | 'topology'>): PublishSpec {
  const { record, topology } = stored;
  const submitted = JSON.parse(record.schema.schema) as JsonObject;
  const effective = buildEffectiveSchema(submitted, record.category, record.cleanup_policy, record.compatibility_mode);
  if (!effective.ok) throw new Error(`stored schema of ${record.name} is invalid: ${effective.reason}`);
  const effectiveSchema = JSON.stringify(effective.schema);
  const prefix = record.category === 'data' ? ['data'] : [];
  return {
    name: record.name,
    category: record.category,
    enrich: record.enrichment_strategies.includes('metadata_enrichment'),
    partitionStrategy: record.partition_strategy,
    // Compacted event types hash the compaction key (as the reference service does): every event of
    // a key lands in one partition, so compaction keeps exactly one latest event per key.
    partitionKeyPaths: record.cleanup_policy !== 'delete' ? [['metadata', 'partition_compaction_key']] : (record.partition_key_fields ?? []).map((f) => [...prefix, ...f.split('.')]),
    partitionCount: topology.partitionCount,
    schemaVersion: record.schema.version,
    schemaKey: createHash('sha256').update(effectiveSchema).digest('base64url'),
    effectiveSchema,
    ...(record.event_owner_selector ? { ownerSelector: record.event_owner_selector } : {}),
    ...(record.cleanup_policy !== 'delete' ? { compacted: true } : {}),
    ...idempotencyOf(record),
  };
}

/**
 * The idempotency window of an event type (docs/publishing.md "Idempotent publishing"): its
 * `broker.io/idempotency-window-seconds` annotation for categories whose events carry `metadata.eid`
 * (business, data); none for category `undefined`.
 */
function idempotencyOf(record: StoredEventType['record']): { idempotencyWindowSeconds?: number } {
  const window = idempotencyWindowSeconds(record.annotations);
  return window === undefined || record.category === 'undefined' ? {} : { idempotencyWindowSeconds: window };
}

/**
 * How often a node compares the change notices it heard with the count announced (ms): a notice lost
 * on the way leaves a stale copy for at most two of these.
 */
const NOTICE_CHECK_INTERVAL_MS = 1000;

/** The last comparison of notices announced and heard (see {@link EventTypeCache.checkNotices}). */
interface NoticeCheck {
  readonly announced: number;
  readonly heard: number;
  /** Notices announced by then and not heard yet. */
  readonly owed: number;
}

/** Bounds of the event type cache (config `caches`). */
export interface EventTypeCacheBounds {
  /** Event types kept (least recently used dropped first). */
  readonly maxEntries: number;
  /** How long an entry is used before it is read again, in ms (notices drop it at once anyway). */
  readonly ttlMs: number;
}

/**
 * Node-local cache of event types for the publish path (docs/architecture.md "The publishing route and the
 * event type cache"). Every change is announced on a
 * Redis channel; each node drops the entry at once. A generation counter per name keeps a fetch that
 * raced an invalidation from caching the stale value. Losing the subscription clears the whole cache.
 * Registry reads (`GET /event-types/...`) bypass the cache and read Redis.
 *
 * Nothing outlives its event type, so memory stays bounded as event types come and go: entries are bounded (lru-cache, size and age); a
 * change notice whose event type no longer exists drops its generation and tells `onDeleted` listeners
 * (metrics series); a dropped entry's validator key is handed to `onSchemaRetired` listeners (validator
 * caches) once the event type is found deleted or its effective schema changed.
 */
export class EventTypeCache {
  private readonly entries: LRUCache<string, CachedEventType>;
  private readonly generations = new Map<string, number>();
  private globalGeneration = 0;
  private readonly listeners = new Set<(name: string | undefined) => void>();
  private readonly deletedListeners = new Set<(name: string) => void>();
  private readonly retiredListeners = new Set<(schemaKey: string) => void>();
  /** Validator keys of dropped entries, until the event type is read again or found deleted. */
  private readonly retired = new Map<string, string>();
  /** Change notices heard since start. */
  private heard = 0;
  private lastCheck: NoticeCheck | undefined;
  private checkTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: EventTypeStore,
    private readonly redis: RedisClient,
    private readonly subscriber: RedisClient,
    private readonly keys: Keys,
    private readonly logger: Logger,
    bounds: EventTypeCacheBounds = { maxEntries: 10_000, ttlMs: 300_000 },
  ) {
    this.entries = new LRUCache({ max: bounds.maxEntries, ttl: bounds.ttlMs });
  }

  /**
   * Subscribes to change notices and starts comparing them with the count announced every
   * second ({@link checkNotices}); resolves once subscribed. @throws Error when Redis fails
   */
  async start(): Promise<void> {
    this.subscriber.on('message', (channel: string, name: string) => {
      if (channel !== this.keys.metadataChannel) return;
      this.heard++;
      this.invalidate(name);
      void this.checkDeleted(name);
    });
    onResubscribed(this.subscriber, () => this.invalidateAll());
    this.subscriber.on('close', () => this.invalidateAll());
    await this.subscriber.subscribe(this.keys.metadataChannel);
    await this.checkNotices();
    this.checkTimer = setInterval(() => void this.checkNotices(), NOTICE_CHECK_INTERVAL_MS);
    this.checkTimer.unref();
  }

  /** Stops comparing notices (shutdown). */
  stop(): void {
    clearInterval(this.checkTimer);
  }

  /** Entries, generations and retired validator keys held (`broker_cache_entries`). */
  get sizes(): { readonly entries: number; readonly generations: number; readonly retired: number } {
    return { entries: this.entries.size, generations: this.generations.size, retired: this.retired.size };
  }

  /** The event type, from cache or Redis; undefined when it does not exist. */
  async get(name: string): Promise<CachedEventType | undefined> {
    const cached = this.entries.get(name);
    if (cached) return cached;
    const generation = this.generationOf(name);
    const stored = await this.store.get(name);
    if (!stored) return undefined;
    const entry: CachedEventType = { ...stored, publishSpec: buildPublishSpec(stored) };
    if (generation === this.generationOf(name)) {
      this.entries.set(name, entry);
      const previous = this.retired.get(name);
      this.retired.delete(name);
      if (previous !== undefined && previous !== entry.publishSpec.schemaKey) this.retire(previous);
    }
    return entry;
  }

  /**
   * The event type as stored now, with its publish spec, read from Redis and not cached: preparing a
   * change's validators (`Publisher.prepare`) must not make a node cache event types it does not serve
   * (a cached copy is served until the next notice arrives). @returns undefined when it does not exist
   */
  async read(name: string): Promise<CachedEventType | undefined> {
    const stored = await this.store.get(name);
    return stored ? { ...stored, publishSpec: buildPublishSpec(stored) } : undefined;
  }

  /** The event type read from Redis again (the cached copy is dropped first): a publish that met a closed timeline. */
  async reload(name: string): Promise<CachedEventType | undefined> {
    this.invalidate(name);
    return this.get(name);
  }

  /**
   * Runs `listener` whenever an event type may have changed on any node: with its name, or undefined
   * when every entry was dropped (reconnect). Open streams re-check their consumer's read rights there.
   * @returns a function removing the listener
   */
  onChange(listener: (name: string | undefined) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Runs `listener` with the name of an event type found deleted after a change notice (on every node). */
  onDeleted(listener: (name: string) => void): void {
    this.deletedListeners.add(listener);
  }

  /** Runs `listener` with a validator key no cached event type uses any more (deleted, or its schema changed). */
  onSchemaRetired(listener: (schemaKey: string) => void): void {
    this.retiredListeners.add(listener);
  }

  /** Announces a change of `name` to every node (this one included), counting the notice in `metadataChanges`. */
  async announce(name: string): Promise<void> {
    this.invalidate(name);
    try {
      await this.redis.multi().incr(this.keys.metadataChanges).publish(this.keys.metadataChannel, name).exec();
    } catch (err) {
      this.logger.error({ err, eventType: name }, 'could not announce an event type change; other nodes keep their cached copy until they reconnect');
    }
  }

  /**
   * Compares the notices announced (`metadataChanges`) with those heard here. A notice reaches a node
   * after the count rose (on a cluster across the cluster bus), so one still missing at the next
   * comparison, a second later, was lost — the subscriber connection was replaced without a signal
   * (ioredis does so on a cluster), or Redis dropped it — and every cached event type is read again.
   * A count that went back (Redis flushed, or a failover lost writes) drops them too. A failed read is
   * left to the next comparison.
   */
  private async checkNotices(): Promise<void> {
    let announced: number;
    try {
      announced = Number((await this.redis.get(this.keys.metadataChanges)) ?? 0);
    } catch {
      return;
    }
    const heard = this.heard;
    const last = this.lastCheck;
    if (last === undefined || announced < last.announced) {
      if (last !== undefined) this.invalidateAll();
      this.lastCheck = { announced, heard, owed: 0 };
      return;
    }
    const heardSince = heard - last.heard;
    const lost = Math.max(0, last.owed - heardSince);
    if (lost > 0) {
      this.logger.warn({ lost }, 'event type change notices were lost on the way to this node; every cached event type is read again');
      this.invalidateAll();
    }
    this.lastCheck = { announced, heard, owed: Math.max(0, last.owed + (announced - last.announced) - heardSince - lost) };
  }

  private generationOf(name: string): string {
    return `${this.globalGeneration}:${this.generations.get(name) ?? 0}`;
  }

  private invalidate(name: string): void {
    const dropped = this.entries.get(name, { allowStale: true });
    this.entries.delete(name);
    if (dropped !== undefined) this.retired.set(name, dropped.publishSpec.schemaKey);
    this.generations.set(name, (this.generations.get(name) ?? 0) + 1);
    for (const listener of this.listeners) listener(name);
  }

  /** After a change notice: when `name` is gone, forget everything about it here. */
  private async checkDeleted(name: string): Promise<void> {
    try {
      if (await this.store.exists(name)) return;
    } catch (err) {
      this.logger.warn({ err: (err as Error).message, eventType: name }, 'could not check whether an event type was deleted; its in-memory entries stay until the next change notice');
      return;
    }
    // In-flight fetches of this name must not cache: a new global generation, as the per-name one goes.
    this.generations.delete(name);
    this.globalGeneration++;
    const schemaKey = this.retired.get(name);
    this.retired.delete(name);
    if (schemaKey !== undefined) this.retire(schemaKey);
    for (const listener of this.deletedListeners) listener(name);
  }

  private retire(schemaKey: string): void {
    for (const listener of this.retiredListeners) listener(schemaKey);
  }

  private invalidateAll(): void {
    this.entries.clear();
    this.globalGeneration++;
    for (const listener of this.listeners) listener(undefined);
  }
}
