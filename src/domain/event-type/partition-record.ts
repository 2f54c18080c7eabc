/**
 * A partition as `GET /event-types/{name}/partitions`, `…/partitions/{partition}` and
 * `POST /event-types/{name}/cursors-lag` serve it (docs/concepts.md "Partitions", "Offsets and cursors";
 * docs/consuming.md "Cursor tools"): the schema the OpenAPI document shows (src/http/api/wire/event-types.ts
 * re-exports it) and the type derived from it.
 */
import { Type, type Static } from '@sinclair/typebox';
import { Closed, type DeepReadonly } from '../json/wire-parts.js';

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

/** A partition record (docs/consuming.md "Cursor tools"), derived from {@link PartitionSchema}; offsets as served. */
export type PartitionRecord = DeepReadonly<Static<typeof PartitionSchema>>;
