/** Wire schemas of event types, schemas, partitions, cursors, batch items and events (docs/concepts.md, docs/publishing.md). */
import { Type, type Static } from '@sinclair/typebox';
import { COMPATIBILITY_MODES, type EventTypeRecordSchema } from '../../../domain/event-type.js';
import { Closed, StringEnum } from './common.js';

/**
 * The event type record as served (docs/concepts.md "Event types") and its parts: declared with the
 * record in src/domain/event-type.ts, whose `EventType` type is derived from them.
 */
export { EventTypeAuthorizationSchema, EventTypeSchemaSchema, EventTypeStatisticsSchema, EventOwnerSelectorSchema, EventTypeRecordSchema } from '../../../domain/event-type.js';
/** The event type record as the wire carries it (src/domain/event-type.ts `EventType`, made mutable). */
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
