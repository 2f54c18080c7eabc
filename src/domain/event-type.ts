/**
 * The event type record as stored in Redis and served on the wire (docs/concepts.md "Event
 * types"). Wire names stay snake_case. Input validation lives in `event-type-input.ts` (the
 * body's shape) and `event-type-rules.ts` (the rules a schema cannot say).
 */

export const CATEGORIES = ['undefined', 'data', 'business'] as const;
export type Category = (typeof CATEGORIES)[number];

export const PARTITION_STRATEGIES = ['random', 'hash', 'user_defined'] as const;
export type PartitionStrategy = (typeof PARTITION_STRATEGIES)[number];

export const ENRICHMENT_STRATEGIES = ['metadata_enrichment'] as const;
export type EnrichmentStrategy = (typeof ENRICHMENT_STRATEGIES)[number];

export const COMPATIBILITY_MODES = ['compatible', 'forward', 'none'] as const;
export type CompatibilityMode = (typeof COMPATIBILITY_MODES)[number];

export const CLEANUP_POLICIES = ['delete', 'compact', 'compact_and_delete'] as const;
export type CleanupPolicy = (typeof CLEANUP_POLICIES)[number];

/**
 * Who the events of an event type are meant for (docs/concepts.md "Event types"), from the narrowest
 * (one component) to the widest (anyone). Informational: the broker stores and serves it, access is
 * decided by `authorization` alone.
 */
export const AUDIENCES = ['component-internal', 'business-unit-internal', 'company-internal', 'external-partner', 'external-public'] as const;
export type Audience = (typeof AUDIENCES)[number];

/** `schema` of an event type; `schema` is the JSON Schema (draft-04) as an escaped JSON string. */
export interface EventTypeSchema {
  readonly type: 'json_schema';
  readonly schema: string;
  /** Semantic version, `1.0.0` first (set by the service). */
  readonly version: string;
  /** RFC 3339 (set by the service). */
  readonly created_at: string;
}

/** `default_statistic` (docs/concepts.md "Partitions"): all ≥ 1; partitions = max(read, write parallelism), capped. */
export interface EventTypeStatistics {
  readonly messages_per_minute: number;
  readonly message_size: number;
  readonly read_parallelism: number;
  readonly write_parallelism: number;
}

/** `options` of an event type: retention_time in ms, default 2 days (docs/concepts.md "Event types"). */
export interface EventTypeOptions {
  /** Retention in milliseconds. */
  readonly retention_time: number;
}

/** One attribute of an authorization list (docs/security.md "Authorization: what a subject may do"); `*`/`*` is the wildcard. */
export interface AuthorizationAttribute {
  readonly data_type: string;
  readonly value: string;
}

/** An event type's authorization section (docs/security.md "Authorization: what a subject may do"): once set, an update cannot remove it. */
export interface EventTypeAuthorization {
  readonly admins: readonly AuthorizationAttribute[];
  readonly readers: readonly AuthorizationAttribute[];
  readonly writers: readonly AuthorizationAttribute[];
}

/** Per-event owner (docs/security.md "Authorization: what a subject may do"): `path` into the event or a `static` value; immutable once set. */
export interface EventOwnerSelector {
  readonly type: 'path' | 'static';
  readonly name: string;
  readonly value: string;
}

/** The stored and served event type record. */
export interface EventType {
  readonly name: string;
  readonly owning_application: string;
  readonly category: Category;
  readonly enrichment_strategies: readonly EnrichmentStrategy[];
  readonly partition_strategy: PartitionStrategy;
  /**
   * The key fields of `hash`; `[]` for the other strategies. Records stored before it was always written
   * lack it ({@link StoredEventTypeRecord}); {@link servedEventType} adds `[]` when serving them.
   */
  readonly partition_key_fields: readonly string[];
  readonly compatibility_mode: CompatibilityMode;
  readonly schema: EventTypeSchema;
  readonly cleanup_policy: CleanupPolicy;
  readonly default_statistic?: EventTypeStatistics;
  readonly options: EventTypeOptions;
  readonly authorization?: EventTypeAuthorization;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly labels?: Readonly<Record<string, string>>;
  readonly ordering_key_fields?: readonly string[];
  /** Who the events are meant for; absent when not given. */
  readonly audience?: Audience;
  readonly event_owner_selector?: EventOwnerSelector;
  /** RFC 3339 (set by the service). */
  readonly created_at: string;
  /** RFC 3339 (set by the service). */
  readonly updated_at: string;
}

/** A record as Redis may hold it: written before `partition_key_fields` was always stored, it may lack it. */
export type StoredEventTypeRecord = Omit<EventType, 'partition_key_fields'> & { readonly partition_key_fields?: readonly string[] };

/**
 * The record as served (docs/concepts.md "Event types"): `partition_key_fields` is always there, `[]`
 * unless the strategy is `hash`, so a record read and sent back compares equal to the stored one. Records
 * written since it is always stored come back with the same fields in the same order; older ones get
 * `[]` after `partition_strategy`.
 */
export function servedEventType(record: StoredEventTypeRecord): EventType {
  const { name, owning_application, category, enrichment_strategies, partition_strategy, partition_key_fields = [], ...rest } = record;
  return { name, owning_application, category, enrichment_strategies, partition_strategy, partition_key_fields, ...rest };
}

/** Internal facts stored beside the record and never served: the partition count and active timeline. */
export interface EventTypeTopology {
  /** Partition ids are "0" .. String(partitionCount - 1). */
  readonly partitionCount: number;
  /** Active timeline (1 until timelines are built). */
  readonly timeline: number;
}

/** Partition ids of a topology, in order. */
export function partitionIds(topology: EventTypeTopology): string[] {
  return Array.from({ length: topology.partitionCount }, (_, i) => String(i));
}
