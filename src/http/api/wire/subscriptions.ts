/** Wire schemas of subscriptions, their cursors, stats and streams (docs/consuming.md). */
import { Type, type Static } from '@sinclair/typebox';
import { SUBSCRIPTION_FIELDS, type SubscriptionRecordSchema } from '../../../domain/subscription.js';
import { EventSchema } from './event-types.js';
import { Closed, PageLinksSchema } from './common.js';

/** A subscription cursor (docs/consuming.md "Commits"). */
export const SubscriptionCursorSchema = Type.Object({
  partition: Type.String(),
  offset: Type.String(),
  event_type: Type.String(),
  cursor_token: Type.String({ description: 'served by the node; any string when committing' }),
});
/** The same without the token (cursor reset, docs/consuming.md "Commits"). */
export const SubscriptionCursorWithoutTokenSchema = Type.Object({ partition: Type.String(), offset: Type.String(), event_type: Type.String() });

/**
 * The subscription record as served (docs/consuming.md "Subscriptions"), its authorization section and
 * initial cursors: declared with the record in src/domain/subscription.ts, whose `Subscription` type is
 * derived from them.
 */
export { InitialCursorSchema, SubscriptionAuthorizationSchema, SubscriptionRecordSchema } from '../../../domain/subscription.js';
/** The subscription record as the wire carries it (src/domain/subscription.ts `Subscription`, made mutable). */
export type SubscriptionRecord = Static<typeof SubscriptionRecordSchema>;

/** The bodies of `POST /subscriptions` and `PUT /subscriptions/{id}`: the schemas the node checks them against (src/domain/subscription-input.ts). */
export { SubscriptionInputSchema, SubscriptionUpdateSchema } from '../../../domain/subscription-input.js';

/** Partition status of a subscription (`show_status=true`, stats). */
const PartitionState = Type.Union([Type.Literal('unassigned'), Type.Literal('reassigning'), Type.Literal('assigned')]);
const AssignmentType = Type.Union([Type.Literal('auto'), Type.Literal('direct')]);

/** One event type's partition status in a listing with `show_status=true`. */
export const SubscriptionEventTypeStatusSchema = Type.Object(
  {
    event_type: Type.String(),
    partitions: Type.Array(Type.Object({ partition: Type.String(), state: PartitionState, stream_id: Type.String(), assignment_type: AssignmentType }, Closed)),
  },
  Closed,
);

/** A listing item: the record, with `status` when asked for. */
export const SubscriptionListItemSchema = Type.Object({ ...SUBSCRIPTION_FIELDS, status: Type.Optional(Type.Array(SubscriptionEventTypeStatusSchema)) }, Closed);

/** `GET /subscriptions`. */
export const SubscriptionListSchema = Type.Object({ items: Type.Array(SubscriptionListItemSchema), _links: PageLinksSchema }, Closed);

/** One partition of `GET /subscriptions/{id}/stats` (docs/consuming.md). */
export const PartitionStatsSchema = Type.Object(
  {
    partition: Type.String(),
    state: PartitionState,
    unconsumed_events: Type.Optional(Type.Integer({ minimum: 0 })),
    consumer_lag_seconds: Type.Optional(Type.Integer({ minimum: 0 })),
    stream_id: Type.String(),
    assignment_type: AssignmentType,
    failed_send_count: Type.Optional(Type.Integer({ minimum: 1, description: 'dead-letter queue: sends of its events that ended without a commit' })),
    dead_letter_search_until: Type.Optional(Type.String({ description: 'dead-letter queue: the last offset of the search window' })),
    expired_events: Type.Optional(Type.Integer({ minimum: 1, description: 'events of the partition that retention removed before the subscription read them (counted when its committed offset passed them); absent while there are none' })),
  },
  Closed,
);

/** `GET /subscriptions/{id}/stats`. */
export const SubscriptionStatsSchema = Type.Object(
  { items: Type.Array(Type.Object({ event_type: Type.String(), partitions: Type.Array(PartitionStatsSchema) }, Closed)) },
  Closed,
);

/** `GET /subscriptions/{id}/cursors` answer (commit and reset bodies: `SubscriptionCursorsInputSchema`, src/domain/cursor-input.ts). */
export const SubscriptionCursorsSchema = Type.Object({ items: Type.Array(SubscriptionCursorSchema) });

/** 200 answer of a commit: a result per cursor sent (docs/consuming.md "Commits"). */
export const CursorCommitResultsSchema = Type.Object(
  { items: Type.Array(Type.Object({ cursor: SubscriptionCursorSchema, result: Type.Union([Type.Literal('committed'), Type.Literal('outdated')]) }, Closed)) },
  Closed,
);

/** Stream parameters of a subscription stream as a `POST` body: declared and checked in src/domain/stream-parameters.ts. */
export { StreamParametersBodySchema } from '../../../domain/stream-parameters.js';

/** One line of a stream, subscription or low-level (docs/consuming.md "Subscription streams", "Low-level streams"). */
export const StreamBatchSchema = Type.Object({
  cursor: Type.Object({ partition: Type.String(), offset: Type.String(), event_type: Type.Optional(Type.String()), cursor_token: Type.Optional(Type.String()) }),
  events: Type.Optional(Type.Array(EventSchema)),
  info: Type.Optional(
    Type.Object(
      {
        debug: Type.Optional(Type.String({ description: 'why the stream starts (the first batch) or ends (the last batch)' })),
        stream_id: Type.Optional(Type.String({ description: 'the stream id, on the first event of a server-sent-event subscription stream' })),
        expired_events: Type.Optional(
          Type.Integer({
            minimum: 1,
            description:
              'subscription streams: on the first batch of a partition after its cursor passed events that retention removed before they were read, how many; the stream continued at the oldest event kept',
          }),
        ),
      },
      { description: 'information about the stream, on the first batch, the last one, or a batch with news; fields may be added' },
    ),
  ),
});
