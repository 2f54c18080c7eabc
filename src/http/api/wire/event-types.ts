/** Wire schemas of event types, schemas, partitions, cursors, batch items and events (docs/concepts.md, docs/publishing.md). */
import { Type, type Static } from '@sinclair/typebox';
import { BatchItemResponseSchema } from '../../../domain/batch/batch-item-response.js';
import type { EventTypeRecordSchema } from '../../../domain/event-type/event-type.js';
import { Closed } from './common.js';

/**
 * The event type record as served (docs/concepts.md "Event types") and its parts: declared with the
 * record in src/domain/event-type/event-type.ts, whose `EventType` type is derived from them.
 */
export { EventTypeAuthorizationSchema, EventTypeSchemaSchema, EventTypeStatisticsSchema, EventOwnerSelectorSchema, EventTypeRecordSchema } from '../../../domain/event-type/event-type.js';
/** The event type record as the wire carries it (src/domain/event-type/event-type.ts `EventType`, made mutable). */
export type EventTypeRecord = Static<typeof EventTypeRecordSchema>;

/**
 * An event type as sent to `POST /event-types` and `PUT /event-types/{name}`: declared and checked in
 * `src/domain/event-type/event-type-input.ts` (the rules a schema cannot say run after it).
 */
export { EventTypeInputSchema } from '../../../domain/event-type/event-type-input.js';

/**
 * Result of `POST /event-types/{name}/schemas/{version}/compatibility-check` (docs/publishing.md "Schema
 * versions"): declared in src/domain/event-type/event-type.ts, whose `CompatibilityCheck` type is derived from it.
 */
export { CompatibilityCheckSchema } from '../../../domain/event-type/event-type.js';

/** A partition (docs/concepts.md "Partitions", "Offsets and cursors"): declared in src/domain/event-type/partition-record.ts, whose `PartitionRecord` type is derived from it. */
export { PartitionSchema } from '../../../domain/event-type/partition-record.js';

/** A cursor (docs/concepts.md "Offsets and cursors"). */
export const CursorSchema = Type.Object({ partition: Type.String(), offset: Type.String({ description: '`begin`, or an offset as served (docs/concepts.md "Offsets and cursors")' }) });

/**
 * A cursor and how many events to move it (`POST /event-types/{name}/shifted-cursors`), and a cursor
 * distance query (docs/consuming.md "Cursor tools"): request items, declared and checked in src/domain/cursor/cursor-input.ts.
 */
export { ShiftedCursorInputSchema as ShiftedCursorSchema, CursorDistanceQueryInputSchema as CursorDistanceQuerySchema } from '../../../domain/cursor/cursor-input.js';

/** A cursor distance answer (docs/consuming.md "Cursor tools"). */
export const CursorDistanceResultSchema = Type.Object({ initial_cursor: CursorSchema, final_cursor: CursorSchema, distance: Type.Integer() }, Closed);


/** One item of a 207 or 422 publishing answer (docs/publishing.md "Answers"): declared in src/domain/batch/batch-item-response.ts, whose `BatchItemResponse` type is derived from it. */
export { BatchItemResponseSchema };
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
