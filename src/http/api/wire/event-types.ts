/** Wire schemas of event types, schemas, partitions, cursors, batch items and events (docs/concepts.md, docs/publishing.md). */
import { Type, type Static } from '@sinclair/typebox';
import { AUDIENCES, CATEGORIES, CLEANUP_POLICIES, COMPATIBILITY_MODES, ENRICHMENT_STRATEGIES, PARTITION_STRATEGIES } from '../../../domain/event-type.js';
import { Closed, StringEnum, Timestamp, StringMap, AttributeList } from './common.js';

/** An event type's authorization (docs/security.md "Authorization: what a subject may do"). */
export const EventTypeAuthorizationSchema = Type.Object({ admins: AttributeList, readers: AttributeList, writers: AttributeList }, { ...Closed, description: 'who may change (admins), read and write the event type' });

/** `schema` of an event type (docs/concepts.md "Schema versions"): the JSON Schema (draft-04) as text. */
export const EventTypeSchemaSchema = Type.Object(
  {
    type: Type.Literal('json_schema'),
    schema: Type.String({ description: 'the JSON Schema (draft-04) of the events, as JSON text' }),
    version: Type.String({ pattern: '^\\d+\\.\\d+\\.\\d+$', description: 'semantic version, 1.0.0 first (set by the service)' }),
    created_at: Timestamp,
  },
  Closed,
);

/** `default_statistic` (docs/concepts.md "Partitions"). */
export const EventTypeStatisticsSchema = Type.Object(
  {
    messages_per_minute: Type.Integer({ minimum: 1 }),
    message_size: Type.Integer({ minimum: 1 }),
    read_parallelism: Type.Integer({ minimum: 1 }),
    write_parallelism: Type.Integer({ minimum: 1 }),
  },
  Closed,
);

/** Per-event owner (docs/consuming.md "Per-event authorization"). */
export const EventOwnerSelectorSchema = Type.Object({ type: Type.Union([Type.Literal('path'), Type.Literal('static')]), name: Type.String(), value: Type.String() }, Closed);

/** The event type record as served (docs/concepts.md "Event types"). */
export const EventTypeRecordSchema = Type.Object(
  {
    name: Type.String({ pattern: '^[a-zA-Z][-0-9a-zA-Z_]*(\\.[0-9a-zA-Z][-0-9a-zA-Z_]*)*$', maxLength: 255 }),
    owning_application: Type.String(),
    category: StringEnum(CATEGORIES),
    enrichment_strategies: Type.Array(StringEnum(ENRICHMENT_STRATEGIES)),
    partition_strategy: StringEnum(PARTITION_STRATEGIES),
    partition_key_fields: Type.Array(Type.String(), { description: 'the key fields of `hash`; `[]` for the other strategies' }),
    compatibility_mode: StringEnum(COMPATIBILITY_MODES),
    schema: EventTypeSchemaSchema,
    cleanup_policy: StringEnum(CLEANUP_POLICIES),
    default_statistic: Type.Optional(EventTypeStatisticsSchema),
    options: Type.Object({ retention_time: Type.Integer({ minimum: 0, description: 'retention in milliseconds' }) }, Closed),
    authorization: Type.Optional(EventTypeAuthorizationSchema),
    annotations: Type.Optional(StringMap('annotations; keys under `broker.io/` are the service\'s (see the document\'s description)')),
    labels: Type.Optional(StringMap('labels')),
    ordering_key_fields: Type.Optional(Type.Array(Type.String())),
    audience: Type.Optional(StringEnum(AUDIENCES, { description: 'who the events are meant for; absent when not given' })),
    event_owner_selector: Type.Optional(EventOwnerSelectorSchema),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  Closed,
);
/** The event type record as the wire carries it (compare src/domain/event-type.ts `EventType`). */
export type EventTypeRecord = Static<typeof EventTypeRecordSchema>;

/**
 * An event type as sent to `POST /event-types` and `PUT /event-types/{name}`: declared and checked in
 * `src/domain/event-type-input.ts` (the rules a schema cannot say run after it).
 */
export { EventTypeInputSchema } from '../../../domain/event-type-input.js';

/** Result of `POST /event-types/{name}/schemas/{version}/compatibility-check` (docs/publishing.md "Schema versions"). */
export const CompatibilityCheckSchema = Type.Object(
  {
    compatible: Type.Boolean(),
    compatibility_mode: StringEnum(COMPATIBILITY_MODES),
    validated_against_version: Type.String(),
    error: Type.Optional(Type.String({ description: 'why it is not compatible; absent when compatible' })),
  },
  Closed,
);


/** A partition (docs/concepts.md "Partitions", "Offsets and cursors"). */
export const PartitionSchema = Type.Object(
  {
    partition: Type.String(),
    oldest_available_offset: Type.String(),
    newest_available_offset: Type.String(),
    unconsumed_events: Type.Optional(Type.Integer({ minimum: 0, description: 'events after the given cursor or consumed_offset' })),
  },
  Closed,
);

/** A cursor (docs/concepts.md "Offsets and cursors"). */
export const CursorSchema = Type.Object({ partition: Type.String(), offset: Type.String({ description: '`begin`, or an offset as served (docs/concepts.md "Offsets and cursors")' }) });

/**
 * A cursor and how many events to move it (`POST /event-types/{name}/shifted-cursors`), and a cursor
 * distance query (docs/consuming.md "Cursor tools"): request items, declared and checked in src/domain/cursor-input.ts.
 */
export { ShiftedCursorInputSchema as ShiftedCursorSchema, CursorDistanceQueryInputSchema as CursorDistanceQuerySchema } from '../../../domain/cursor-input.js';

/** A cursor distance answer (docs/consuming.md "Cursor tools"). */
export const CursorDistanceResultSchema = Type.Object({ initial_cursor: CursorSchema, final_cursor: CursorSchema, distance: Type.Integer() }, Closed);


/** One item of a 207 or 422 publishing answer (docs/publishing.md "Answers"). */
export const BatchItemResponseSchema = Type.Object(
  {
    eid: Type.String({ description: '`metadata.eid` of the event, `""` when it had none' }),
    publishing_status: Type.Union([Type.Literal('submitted'), Type.Literal('failed'), Type.Literal('aborted')]),
    step: Type.Union([Type.Literal('none'), Type.Literal('validating'), Type.Literal('partitioning'), Type.Literal('enriching'), Type.Literal('publishing')]),
    detail: Type.String(),
  },
  Closed,
);
/** A batch item as the wire carries it (compare src/domain/batch-item-response.ts `BatchItemResponse`). */
export type BatchItem = Static<typeof BatchItemResponseSchema>;
/** The body of a 207 or 422 answer: one item per event, in input order. */
export const BatchItemResponsesSchema = Type.Array(BatchItemResponseSchema);

/**
 * An event (docs/publishing.md): a JSON object whose fields the event type's schema gives. Events of
 * category `business` and `data` carry `metadata` (`eid` uuid, `occurred_at` RFC 3339, and for
 * partition strategy `user_defined` its `partition`), which the node enriches (`received_at`,
 * `event_type`, `version`, `partition`, `published_by`, `flow_id`); those of category `undefined` are
 * free-form.
 */
export const EventSchema = Type.Object({}, { description: 'an event: a JSON object, checked against the event type schema (business and data events carry `metadata`)' });
