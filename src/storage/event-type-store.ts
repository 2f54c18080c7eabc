import { partitionIds, type EventType, type EventTypeSchema, type EventTypeTopology } from '../domain/event-type.js';
import type { Keys } from './keys.js';
import { storageError, type RedisClient } from './redis-connection.js';
import type { Scripts } from './scripts.js';

/** An event type as stored: the served record, its topology, and the revision used for compare-and-set. */
export interface StoredEventType {
  readonly record: EventType;
  readonly topology: EventTypeTopology;
  readonly revision: string;
}

/** Result codes of {@link EventTypeStore.growPartitions} (STYLE.md habit 3). */
export type GrowOutcome = 'grown' | 'unchanged' | 'smaller' | 'not_found';

/** Result codes of {@link EventTypeStore.update} (STYLE.md habit 3). */
export type UpdateOutcome = 'updated' | 'not_found' | 'conflict';

/**
 * Event type metadata in Redis (DESIGN.md §1): one hash per event type (record, topology, revision),
 * a hash of schema versions, and the set of names. Every multi-key change is one Lua script.
 * Redis failures surface as `STORAGE_UNAVAILABLE` (503).
 */
export class EventTypeStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly scripts: Scripts,
    private readonly keys: Keys,
  ) {}

  /** @returns false when the name is taken */
  async create(record: EventType, topology: EventTypeTopology): Promise<boolean> {
    const { name } = record;
    const created = await this.scripts
      .run('createEventType', [this.keys.eventTypeNames, this.keys.eventType(name), this.keys.eventTypeSchemas(name)], [
        name,
        JSON.stringify(record),
        JSON.stringify(topology),
        record.schema.version,
        JSON.stringify(record.schema),
      ])
      .catch(storageError);
    return created === 1;
  }

  /** @returns the stored event type, or undefined when there is none */
  async get(name: string): Promise<StoredEventType | undefined> {
    const [record, topology, revision] = await this.redis.hmget(this.keys.eventType(name), 'record', 'topology', 'revision').catch(storageError);
    if (record == null || topology == null || revision == null) return undefined;
    return { record: JSON.parse(record) as EventType, topology: JSON.parse(topology) as EventTypeTopology, revision };
  }

  /** Every event type record, sorted by name. */
  async list(): Promise<EventType[]> {
    const names = (await this.redis.smembers(this.keys.eventTypeNames).catch(storageError)).sort();
    if (names.length === 0) return [];
    // All in the `{registry}` slot, so one pipeline is one node even in a cluster.
    const pipeline = this.redis.pipeline();
    for (const name of names) pipeline.hget(this.keys.eventType(name), 'record');
    const results = (await pipeline.exec().catch(storageError)) ?? [];
    return results.flatMap(([err, value]) => (err === null && typeof value === 'string' ? [JSON.parse(value) as EventType] : []));
  }

  /**
   * Replaces the record if its revision is still `expectedRevision`, adding `newSchema` as a version.
   * @returns `conflict` when another writer changed it first (callers answer 409)
   */
  async update(record: EventType, expectedRevision: string, newSchema: EventTypeSchema | undefined): Promise<UpdateOutcome> {
    const outcome = await this.scripts
      .run('updateEventType', [this.keys.eventType(record.name), this.keys.eventTypeSchemas(record.name)], [
        expectedRevision,
        JSON.stringify(record),
        newSchema ? newSchema.version : '',
        newSchema ? JSON.stringify(newSchema) : '',
      ])
      .catch(storageError);
    return outcome === 1 ? 'updated' : outcome === 0 ? 'not_found' : 'conflict';
  }

  /**
   * Grows the partition count of an event type (repartitioning), atomically checking that it only grows
   * (`growPartitions-1.lua`). Existing partitions keep their events; new ones start empty.
   * @param count the new number of partitions (integer >= 1)
   * @returns the outcome (`grown`, `unchanged` for the same count, `smaller` refused, `not_found`) and the count before
   * @throws BrokerError 503 when Redis fails
   */
  async growPartitions(name: string, count: number): Promise<{ outcome: GrowOutcome; previous: number }> {
    const [code, previous] = (await this.scripts.run('growPartitions', [this.keys.eventType(name)], [count]).catch(storageError)) as [number, number];
    const outcome: GrowOutcome = code === 1 ? 'grown' : code === 0 ? 'unchanged' : code === -1 ? 'smaller' : 'not_found';
    return { outcome, previous: Number(previous) };
  }

  /** All schema versions of an event type, newest first. */
  async schemas(name: string): Promise<EventTypeSchema[]> {
    const values = await this.redis.hvals(this.keys.eventTypeSchemas(name)).catch(storageError);
    return values.map((v) => JSON.parse(v) as EventTypeSchema).sort((a, b) => compareVersions(b.version, a.version));
  }

  /** One schema version, or undefined. */
  async schema(name: string, version: string): Promise<EventTypeSchema | undefined> {
    const value = await this.redis.hget(this.keys.eventTypeSchemas(name), version).catch(storageError);
    return value === null ? undefined : (JSON.parse(value) as EventTypeSchema);
  }

  /**
   * Deletes the metadata, then each partition's log, counters, time index and compaction index and
   * tombstones (one `DEL` per partition:
   * its keys share a slot, partitions do not; auto-pipelining sends them in one round trip per node).
   * @returns false when the event type did not exist
   */
  async delete(name: string): Promise<boolean> {
    const topologyJson = await this.scripts
      .run('deleteEventType', [this.keys.eventTypeNames, this.keys.eventType(name), this.keys.eventTypeSchemas(name)], [name])
      .catch(storageError);
    if (typeof topologyJson !== 'string') return false;
    const topology = JSON.parse(topologyJson) as EventTypeTopology;
    await Promise.all(
      partitionIds(topology).map((p) =>
        this.redis.del(
          this.keys.partitionLog(name, topology.timeline, p),
          this.keys.partitionMeta(name, topology.timeline, p),
          this.keys.partitionTimeIndex(name, topology.timeline, p),
          this.keys.partitionCompactionIndex(name, topology.timeline, p),
          this.keys.partitionTombstones(name, topology.timeline, p),
        ),
      ),
    ).catch(storageError);
    return true;
  }
}

/** Orders `MAJOR.MINOR.PATCH` strings numerically. */
export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}
