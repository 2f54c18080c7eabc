import { createHash } from 'node:crypto';
import { onResubscribed, type RedisClient } from '../storage/redis-connection.js';
import { buildEffectiveSchema } from '../domain/effective-schema.js';
import type { JsonObject } from '../domain/json-schema-walk.js';
import type { Keys } from '../storage/keys.js';
import type { EventTypeStore, StoredEventType } from '../storage/event-type-store.js';
import type { Logger } from '../observability/logger.js';
import type { PublishSpec } from '../../workers/publish-protocol.js';

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
    // Compacted event types hash the compaction key (issue 6 §1.1, as the reference does): every event of
    // a key lands in one partition, so compaction keeps exactly one latest event per key.
    partitionKeyPaths: record.cleanup_policy !== 'delete' ? [['metadata', 'partition_compaction_key']] : (record.partition_key_fields ?? []).map((f) => [...prefix, ...f.split('.')]),
    partitionCount: topology.partitionCount,
    schemaVersion: record.schema.version,
    schemaKey: createHash('sha256').update(effectiveSchema).digest('base64url'),
    effectiveSchema,
    ...(record.event_owner_selector ? { ownerSelector: record.event_owner_selector } : {}),
    ...(record.cleanup_policy !== 'delete' ? { compacted: true } : {}),
  };
}

/**
 * Node-local cache of event types for the publish path (DESIGN.md §5). Every change is announced on a
 * Redis channel; each node drops the entry at once. A generation counter per name keeps a fetch that
 * raced an invalidation from caching the stale value. Losing the subscription clears the whole cache.
 * Registry reads (`GET /event-types/...`) bypass the cache and read Redis.
 */
export class EventTypeCache {
  private readonly entries = new Map<string, CachedEventType>();
  private readonly generations = new Map<string, number>();
  private globalGeneration = 0;
  private readonly listeners = new Set<(name: string | undefined) => void>();

  constructor(
    private readonly store: EventTypeStore,
    private readonly redis: RedisClient,
    private readonly subscriber: RedisClient,
    private readonly keys: Keys,
    private readonly logger: Logger,
  ) {}

  /** Subscribes to change notices; resolves once subscribed. */
  async start(): Promise<void> {
    this.subscriber.on('message', (channel: string, name: string) => {
      if (channel === this.keys.metadataChannel) this.invalidate(name);
    });
    onResubscribed(this.subscriber, () => this.invalidateAll());
    this.subscriber.on('close', () => this.invalidateAll());
    await this.subscriber.subscribe(this.keys.metadataChannel);
  }

  /** The event type, from cache or Redis; undefined when it does not exist. */
  async get(name: string): Promise<CachedEventType | undefined> {
    const cached = this.entries.get(name);
    if (cached) return cached;
    const generation = this.generationOf(name);
    const stored = await this.store.get(name);
    if (!stored) return undefined;
    const entry: CachedEventType = { ...stored, publishSpec: buildPublishSpec(stored) };
    if (generation === this.generationOf(name)) this.entries.set(name, entry);
    return entry;
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

  /** Announces a change of `name` to every node (this one included). */
  async announce(name: string): Promise<void> {
    this.invalidate(name);
    try {
      await this.redis.publish(this.keys.metadataChannel, name);
    } catch (err) {
      this.logger.error({ err, eventType: name }, 'could not announce an event type change; other nodes keep their cached copy until they reconnect');
    }
  }

  private generationOf(name: string): string {
    return `${this.globalGeneration}:${this.generations.get(name) ?? 0}`;
  }

  private invalidate(name: string): void {
    this.entries.delete(name);
    this.generations.set(name, (this.generations.get(name) ?? 0) + 1);
    for (const listener of this.listeners) listener(name);
  }

  private invalidateAll(): void {
    this.entries.clear();
    this.globalGeneration++;
    for (const listener of this.listeners) listener(undefined);
  }
}
