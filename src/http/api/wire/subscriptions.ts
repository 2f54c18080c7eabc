/** Wire schemas of subscriptions, their cursors, stats and streams (docs/consuming.md). */
import { Type, type Static } from '@sinclair/typebox';
import { AssignmentTypeSchema, PartitionStateSchema, PartitionStatsSchema, SUBSCRIPTION_FIELDS, SubscriptionCursorSchema, type SubscriptionRecordSchema } from '../../../domain/subscription/subscription.js';
import { StreamCloseReasonSchema } from '../../../domain/stream/stream-close-reason.js';
import { EventSchema } from './event-types.js';
import { Closed, PageLinksSchema } from './common.js';

/**
 * A subscription cursor (docs/consuming.md "Commits"), the same without the token (cursor reset) and one
 * partition of the stats: declared in src/domain/subscription/subscription.ts, whose `SubscriptionCursor` and
 * `PartitionStats` types are derived from them.
 */
export { SubscriptionCursorSchema, SubscriptionCursorWithoutTokenSchema, PartitionStatsSchema } from '../../../domain/subscription/subscription.js';

/**
 * The subscription record as served (docs/consuming.md "Subscriptions"), its authorization section and
 * initial cursors: declared with the record in src/domain/subscription/subscription.ts, whose `Subscription` type is
 * derived from them.
 */
export { InitialCursorSchema, SubscriptionAuthorizationSchema, SubscriptionRecordSchema } from '../../../domain/subscription/subscription.js';
/** The subscription record as the wire carries it (src/domain/subscription/subscription.ts `Subscription`, made mutable). */
export type SubscriptionRecord = Static<typeof SubscriptionRecordSchema>;

/** The bodies of `POST /subscriptions` and `PUT /subscriptions/{id}`: the schemas the node checks them against (src/domain/subscription/subscription-input.ts). */
export { SubscriptionInputSchema, SubscriptionUpdateSchema } from '../../../domain/subscription/subscription-input.js';

/** One event type's partition status in a listing with `show_status=true`. */
export const SubscriptionEventTypeStatusSchema = Type.Object(
  {
    event_type: Type.String(),
    partitions: Type.Array(Type.Object({ partition: Type.String(), state: PartitionStateSchema, stream_id: Type.String(), assignment_type: AssignmentTypeSchema }, Closed)),
  },
  Closed,
);

/** A listing item: the record, with `status` when asked for. */
export const SubscriptionListItemSchema = Type.Object({ ...SUBSCRIPTION_FIELDS, status: Type.Optional(Type.Array(SubscriptionEventTypeStatusSchema)) }, Closed);

/** `GET /subscriptions`. */
export const SubscriptionListSchema = Type.Object({ items: Type.Array(SubscriptionListItemSchema), _links: PageLinksSchema }, Closed);

/** `GET /subscriptions/{id}/stats`. */
export const SubscriptionStatsSchema = Type.Object(
  { items: Type.Array(Type.Object({ event_type: Type.String(), partitions: Type.Array(PartitionStatsSchema) }, Closed)) },
  Closed,
);

/**
 * `GET /subscriptions/{id}/scaling` answer (docs/operations.md "Autoscaling consumers"): one subscription's
 * lag and how many consumers it can use, flat so that an autoscaler reading one JSON field (KEDA's
 * `metrics-api` trigger) finds each figure at the top level.
 */
export const SubscriptionScalingSchema = Type.Object(
  {
    subscription_id: Type.String(),
    consumption_mode: Type.Union([Type.Literal('stream'), Type.Literal('queue')], { description: '`stream`: one stream per partition; `queue`: any number of streams share every partition' }),
    partitions: Type.Integer({ minimum: 0, description: 'partitions of the subscription over its event types' }),
    max_consumers: Type.Optional(Type.Integer({ minimum: 0, description: 'stream mode: the most streams that get partitions (one per partition; more streams sit idle); absent in queue mode, where any number of streams share the work' })),
    streams: Type.Integer({ minimum: 0, description: 'live streams of the subscription now' }),
    unconsumed_events: Type.Integer({ minimum: 0, description: 'unconsumed events over every partition (0 before the subscription was first streamed)' }),
    consumer_lag_seconds: Type.Integer({ minimum: 0, description: 'age of the oldest unconsumed event over every partition (0 when nothing waits or it cannot be told)' }),
    drain_seconds: Type.Optional(Type.Integer({ minimum: 0, description: 'the longest time to drain of a partition at its recent commit rate; absent when no partition with unconsumed events has a rate' })),
    not_ok_partitions: Type.Integer({ minimum: 0, description: 'partitions whose `consumer_status` is not `ok` (docs/consuming.md "Consumer status")' }),
  },
  Closed,
);

/** `GET /subscriptions/{id}/cursors` answer (commit and reset bodies: `SubscriptionCursorsInputSchema`, src/domain/cursor/cursor-input.ts). */
export const SubscriptionCursorsSchema = Type.Object({ items: Type.Array(SubscriptionCursorSchema) });

/** 200 answer of a commit: a result per cursor sent (docs/consuming.md "Commits"). */
export const CursorCommitResultsSchema = Type.Object(
  { items: Type.Array(Type.Object({ cursor: SubscriptionCursorSchema, result: Type.Union([Type.Literal('committed'), Type.Literal('outdated')]) }, Closed)) },
  Closed,
);

/** Stream parameters of a subscription stream as a `POST` body: declared and checked in src/domain/stream/stream-parameters.ts. */
export { StreamParametersBodySchema } from '../../../domain/stream/stream-parameters.js';

/** One line of a stream, subscription or low-level (docs/consuming.md "Subscription streams", "Low-level streams"). */
export const StreamBatchSchema = Type.Object({
  cursor: Type.Object({ partition: Type.String(), offset: Type.String(), event_type: Type.Optional(Type.String()), cursor_token: Type.Optional(Type.String()) }),
  events: Type.Optional(Type.Array(EventSchema)),
  info: Type.Optional(
    Type.Object(
      {
        debug: Type.Optional(Type.String({ description: 'why the stream starts (the first batch of a subscription stream) or ends (the last batch), in words' })),
        stream_close_reason: Type.Optional(StreamCloseReasonSchema),
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
