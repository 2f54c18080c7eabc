import type { EventType, EventTypeSchema, EventTypeTopology } from '../domain/event-type/event-type.js';
import { timelineMapOf, type StoredTimeline, type TimelineMap } from '../domain/storages/timeline.js';
import type { Keys } from './keys.js';
import { storageError, type RedisClient } from './redis/redis-connection.js';
import type { Scripts } from './scripts.js';
import { failureOf } from './script-failures.js';

/**
 * An event type as stored: the served record, its topology, the revision used for compare-and-set,
 * its timelines (docs/concepts.md "Timelines and storages") and their JSON as stored (the compare value of {@link EventTypeStore.setTimelines}).
 */
export interface StoredEventType {
  readonly record: EventType;
  readonly topology: EventTypeTopology;
  readonly revision: string;
  readonly timelines: TimelineMap;
  readonly timelinesJson: string;
}

/** What {@link EventTypeStore.delete} removed: the partition count and the timelines whose data must go too. */
export interface DeletedEventType {
  readonly topology: EventTypeTopology;
  readonly timelines: TimelineMap;
}

/** Result codes of {@link EventTypeStore.setTimelines}: expected failures are values the caller maps, not exceptions. */
export type SetTimelinesOutcome = 'set' | 'NOT_FOUND' | 'VERSION_MOVED';

/** Result codes of {@link EventTypeStore.growPartitions}: expected failures are values the caller maps, not exceptions. */
export type GrowOutcome = 'grown' | 'unchanged' | 'PARTITION_COUNT_SMALLER' | 'NOT_FOUND';

/** Result codes of {@link EventTypeStore.update}: expected failures are values the caller maps, not exceptions. */
export type UpdateOutcome = 'updated' | 'NOT_FOUND' | 'VERSION_MOVED';

/**
 * Event type metadata in Redis, so any node can serve any event type (docs/architecture.md "A node"): one hash per event type (record, topology, revision),
 * a hash of schema versions, and the set of names. Every multi-key change is one Lua script.
 * Redis failures surface as `STORAGE_UNAVAILABLE` (503).
 */
export class EventTypeStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly scripts: Scripts,
    private readonly keys: Keys,
  ) {}

  /**
   * @param timelines the event type's first timeline (on the default storage)
   * @returns false when the name is taken (the script's ALREADY_EXISTS)
   */
  async create(record: EventType, topology: EventTypeTopology, timelines: readonly StoredTimeline[]): Promise<boolean> {
    const { name } = record;
    const created = await this.scripts
      .run('createEventType', [this.keys.eventTypeNames, this.keys.eventType(name), this.keys.eventTypeSchemas(name)], [
        name,
        JSON.stringify(record),
        JSON.stringify(topology),
        record.schema.version,
        JSON.stringify(record.schema),
        JSON.stringify(timelines),
      ])
      .catch(storageError);
    return failureOf(created, ['ALREADY_EXISTS']) === undefined;
  }

  /** @returns the stored event type, or undefined when there is none */
  async get(name: string): Promise<StoredEventType | undefined> {
    const [record, topology, revision, timelines] = await this.redis.hmget(this.keys.eventType(name), 'record', 'topology', 'revision', 'timelines').catch(storageError);
    if (record == null || topology == null || revision == null) return undefined;
    const parsed = JSON.parse(record) as EventType;
    return {
      record: parsed,
      topology: JSON.parse(topology) as EventTypeTopology,
      revision,
      timelines: timelineMapOf(timelines == null ? undefined : (JSON.parse(timelines) as StoredTimeline[]), parsed.created_at),
      timelinesJson: timelines ?? '',
    };
  }

  /** Whether the event type exists (one EXISTS). @throws BrokerError 503 */
  async exists(name: string): Promise<boolean> {
    return (await this.redis.exists(this.keys.eventType(name)).catch(storageError)) === 1;
  }

  /** Every event type's name, unsorted (one SMEMBERS). @throws BrokerError 503 */
  async names(): Promise<string[]> {
    return this.redis.smembers(this.keys.eventTypeNames).catch(storageError);
  }

  /** Every event type record, sorted by name. @throws BrokerError 503 */
  async list(): Promise<EventType[]> {
    return (await this.listStored()).map((stored) => JSON.parse(stored.toString('utf8')) as EventType);
  }

  /**
   * Every event type record as stored (the UTF-8 bytes of `JSON.stringify` of the record), sorted by
   * name: a listing can answer them without decoding, parsing and serializing each again.
   * @throws BrokerError 503
   */
  async listStored(): Promise<Buffer[]> {
    const names = (await this.redis.smembers(this.keys.eventTypeNames).catch(storageError)).sort();
    if (names.length === 0) return [];
    // All in the `{registry}` slot, so one pipeline is one node even in a cluster.
    const pipeline = this.redis.pipeline();
    for (const name of names) pipeline.hgetBuffer(this.keys.eventType(name), 'record');
    const results = (await pipeline.exec().catch(storageError)) ?? [];
    return results.flatMap(([err, value]) => (err === null && Buffer.isBuffer(value) ? [value] : []));
  }

  /**
   * Replaces the record if its revision is still `expectedRevision`, adding `newSchema` as a version.
   * @returns `VERSION_MOVED` when another writer changed it first (callers answer 409), `NOT_FOUND` when it is gone
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
    return failureOf(outcome, ['NOT_FOUND', 'VERSION_MOVED']) ?? 'updated';
  }

  /**
   * Grows the partition count of an event type (repartitioning), atomically checking that it only grows
   * (`growPartitions-1.lua`). Existing partitions keep their events; new ones start empty.
   * @param count the new number of partitions (integer >= 1)
   * @returns the outcome (`grown`, `unchanged` for the same count, `PARTITION_COUNT_SMALLER` refused, `NOT_FOUND`) and the count before
   * @throws BrokerError 503 when Redis fails
   */
  async growPartitions(name: string, count: number): Promise<{ outcome: GrowOutcome; previous: number }> {
    const reply = (await this.scripts.run('growPartitions', [this.keys.eventType(name)], [count]).catch(storageError)) as [number, number];
    const [code, previous] = reply;
    const outcome: GrowOutcome = failureOf(reply, ['NOT_FOUND', 'PARTITION_COUNT_SMALLER']) ?? (code === 1 ? 'grown' : 'unchanged');
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
   * Replaces the timelines of an event type if they are still `expectedJson` (as read), making
   * `activeOrder` the active timeline (`setTimelines-1.lua`), if the partition count is still `partitionCount`.
   * @returns `VERSION_MOVED` when another node changed them (or repartitioned) first, `NOT_FOUND` when the event type is gone
   * @throws BrokerError 503 when Redis fails
   */
  async setTimelines(name: string, expectedJson: string, timelines: readonly StoredTimeline[], activeOrder: number, partitionCount: number): Promise<SetTimelinesOutcome> {
    const outcome = await this.scripts.run('setTimelines', [this.keys.eventType(name)], [expectedJson, JSON.stringify(timelines), activeOrder, partitionCount]).catch(storageError);
    return failureOf(outcome, ['NOT_FOUND', 'VERSION_MOVED']) ?? 'set';
  }

  /**
   * Deletes the metadata (one script in the `{registry}` slot). The partitions' data live in the
   * timelines' storages; the caller removes them (`PartitionLogs.dropTimeline`).
   * @returns what was removed, or undefined when the event type did not exist
   * @throws BrokerError 503 when Redis fails
   */
  async delete(name: string): Promise<DeletedEventType | undefined> {
    const removed = await this.scripts
      .run('deleteEventType', [this.keys.eventTypeNames, this.keys.eventType(name), this.keys.eventTypeSchemas(name)], [name])
      .catch(storageError);
    if (failureOf(removed, ['NOT_FOUND'])) return undefined;
    const [topologyJson, timelinesJson] = removed as [string, string];
    const timelines = timelinesJson === '' ? undefined : (JSON.parse(timelinesJson) as StoredTimeline[]);
    return { topology: JSON.parse(topologyJson) as EventTypeTopology, timelines: timelineMapOf(timelines, new Date(0).toISOString()) };
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
