/**
 * The event type record as stored in Redis and served on the wire (docs/concepts.md "Event
 * types"). Wire names stay snake_case. Input validation lives in `event-type-input.ts` (the
 * body's shape) and `event-type-rules.ts` (the rules a schema cannot say). The record's types are
 * derived from its TypeBox schemas (`Static<>`), which the OpenAPI document shows
 * (src/http/api/wire/event-types.ts re-exports them).
 */
import { Type, type Static } from '@sinclair/typebox';
import { AttributeList, AuthorizationAttributeSchema, Closed, StringEnum, StringMap, Timestamp, type DeepReadonly } from '../json/wire-parts.js';

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

/** `schema` of an event type (docs/concepts.md "Schema versions"): the JSON Schema (draft-04) as text. */
export const EventTypeSchemaSchema = Type.Object(
  {
    type: Type.Literal('json_schema'),
    /** The JSON Schema (draft-04) as an escaped JSON string. */
    schema: Type.String({ description: 'the JSON Schema (draft-04) of the events, as JSON text' }),
    /** Semantic version, `1.0.0` first (set by the service). */
    version: Type.String({ pattern: '^\\d+\\.\\d+\\.\\d+$', description: 'semantic version, 1.0.0 first (set by the service)' }),
    /** RFC 3339 (set by the service). */
    created_at: Timestamp,
  },
  Closed,
);
/** `schema` of an event type, derived from {@link EventTypeSchemaSchema}. */
export type EventTypeSchema = DeepReadonly<Static<typeof EventTypeSchemaSchema>>;

/**
 * The answer of `POST /event-types/{name}/schemas/{version}/compatibility-check` (docs/publishing.md
 * "Schema versions"): whether the schema could become the event type's next version under its mode.
 * `validated_against_version` is the stored version the schema was compared with (`latest` resolved);
 * `error` says why it is not compatible (the 422 detail a schema update would get), absent when compatible.
 */
export const CompatibilityCheckSchema = Type.Object(
  {
    compatible: Type.Boolean(),
    compatibility_mode: StringEnum(COMPATIBILITY_MODES),
    validated_against_version: Type.String(),
    error: Type.Optional(Type.String({ description: 'why it is not compatible; absent when compatible' })),
  },
  Closed,
);
/** The answer of a compatibility check, derived from {@link CompatibilityCheckSchema}. */
export type CompatibilityCheck = DeepReadonly<Static<typeof CompatibilityCheckSchema>>;

/** `default_statistic` (docs/concepts.md "Partitions"): all ≥ 1; partitions = max(read, write parallelism), capped. */
export const EventTypeStatisticsSchema = Type.Object(
  {
    messages_per_minute: Type.Integer({ minimum: 1 }),
    message_size: Type.Integer({ minimum: 1 }),
    read_parallelism: Type.Integer({ minimum: 1 }),
    write_parallelism: Type.Integer({ minimum: 1 }),
  },
  Closed,
);
/** `default_statistic`, derived from {@link EventTypeStatisticsSchema}. */
export type EventTypeStatistics = DeepReadonly<Static<typeof EventTypeStatisticsSchema>>;

/** `options` of an event type: `retention_time` in milliseconds (default `eventTypes.defaultRetentionTimeMs`). */
const EventTypeOptionsSchema = Type.Object({ retention_time: Type.Integer({ minimum: 0, description: 'retention in milliseconds' }) }, Closed);
/** `options` of an event type, derived from its schema. */
export type EventTypeOptions = DeepReadonly<Static<typeof EventTypeOptionsSchema>>;

/** One attribute of an authorization list (docs/security.md); `*`/`*` is the wildcard. */
export type AuthorizationAttribute = DeepReadonly<Static<typeof AuthorizationAttributeSchema>>;

/** An event type's authorization section (docs/security.md "Authorization: what a subject may do"): stored, not removable. */
export const EventTypeAuthorizationSchema = Type.Object({ admins: AttributeList, readers: AttributeList, writers: AttributeList }, { ...Closed, description: 'who may change (admins), read and write the event type' });
/** An event type's authorization section, derived from {@link EventTypeAuthorizationSchema}. */
export type EventTypeAuthorization = DeepReadonly<Static<typeof EventTypeAuthorizationSchema>>;

/** Per-event owner (docs/consuming.md "Per-event authorization"): `path` into the event or a `static` value; immutable once set. */
export const EventOwnerSelectorSchema = Type.Object({ type: Type.Union([Type.Literal('path'), Type.Literal('static')]), name: Type.String(), value: Type.String() }, Closed);
/** Per-event owner, derived from {@link EventOwnerSelectorSchema}. */
export type EventOwnerSelector = DeepReadonly<Static<typeof EventOwnerSelectorSchema>>;

/**
 * The stored and served event type record (docs/concepts.md "Event types"), as its schema; closed: a
 * field the node starts to send is declared here first.
 */
export const EventTypeRecordSchema = Type.Object(
  {
    name: Type.String({ pattern: '^[a-zA-Z][-0-9a-zA-Z_]*(\\.[0-9a-zA-Z][-0-9a-zA-Z_]*)*$', maxLength: 255 }),
    owning_application: Type.String(),
    category: StringEnum(CATEGORIES),
    enrichment_strategies: Type.Array(StringEnum(ENRICHMENT_STRATEGIES)),
    partition_strategy: StringEnum(PARTITION_STRATEGIES),
    /**
     * The key fields of `hash`; `[]` for the other strategies. Records stored before it was always written
     * lack it ({@link StoredEventTypeRecord}); {@link servedEventType} adds `[]` when serving them.
     */
    partition_key_fields: Type.Array(Type.String(), { description: 'the key fields of `hash`; `[]` for the other strategies' }),
    compatibility_mode: StringEnum(COMPATIBILITY_MODES),
    schema: EventTypeSchemaSchema,
    cleanup_policy: StringEnum(CLEANUP_POLICIES),
    default_statistic: Type.Optional(EventTypeStatisticsSchema),
    options: EventTypeOptionsSchema,
    authorization: Type.Optional(EventTypeAuthorizationSchema),
    annotations: Type.Optional(StringMap('annotations; keys under `broker.io/` are the service\'s (see the document\'s description)')),
    labels: Type.Optional(StringMap('labels')),
    ordering_key_fields: Type.Optional(Type.Array(Type.String())),
    audience: Type.Optional(StringEnum(AUDIENCES, { description: 'who the events are meant for; absent when not given' })),
    event_owner_selector: Type.Optional(EventOwnerSelectorSchema),
    /** RFC 3339 (set by the service). */
    created_at: Timestamp,
    /** RFC 3339 (set by the service). */
    updated_at: Timestamp,
  },
  Closed,
);
/** The stored and served event type record, derived from {@link EventTypeRecordSchema}. */
export type EventType = DeepReadonly<Static<typeof EventTypeRecordSchema>>;

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
