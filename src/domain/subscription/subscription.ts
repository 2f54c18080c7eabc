/**
 * The subscription record and the pure rules of its registry that need storage's view
 * (docs/concepts.md "Subscriptions"): the
 * subscription key, subscription ids, initial cursors against the partitions. The request bodies are read
 * in subscription-input.ts, which builds on this file (never the other way round).
 *
 * Pure: no I/O. Problems are 422 detail lines in the form `Field "name" ...`.
 */
import { Type, type Static } from '@sinclair/typebox';
import { EVENT_TYPE_NAME_PATTERN, MAX_EVENT_TYPE_NAME_LENGTH } from '../event-type/event-type-input.js';
import { parseOffset, type PartitionRange } from '../cursor/offsets.js';
import type { TimelineMap } from '../storages/timeline.js';
import { AttributeList, Closed, StringEnum, StringMap, Timestamp, type DeepReadonly } from '../json/wire-parts.js';
import { CONSUMER_STATUSES } from './consumer-status.js';

/** Where a new subscription starts reading (`read_from`, default `end`; docs/concepts.md "Subscriptions"). */
export const READ_FROM = ['begin', 'end', 'cursors'] as const;
/** One of {@link READ_FROM}. */
export type ReadFrom = (typeof READ_FROM)[number];

/**
 * A starting cursor of a subscription created with `read_from: cursors` (docs/concepts.md "Subscriptions").
 * `offset` is the last consumed offset in its normalized form: `begin`, or the full form
 * `001-<timeline>-<18 digits>` (docs/concepts.md "Offsets and cursors").
 */
export const InitialCursorSchema = Type.Object({ event_type: Type.String(), partition: Type.String(), offset: Type.String() }, Closed);
/** A starting cursor ({@link InitialCursorSchema}). */
export type InitialCursor = DeepReadonly<Static<typeof InitialCursorSchema>>;

/** A subscription's authorization section: `admins` and `readers` only, since nobody publishes to a subscription (docs/security.md "Authorization: what a subject may do"); stored as given. */
export const SubscriptionAuthorizationSchema = Type.Object({ admins: AttributeList, readers: AttributeList }, Closed);
/** A subscription's authorization section ({@link SubscriptionAuthorizationSchema}). */
export type SubscriptionAuthorization = DeepReadonly<Static<typeof SubscriptionAuthorizationSchema>>;

/** The fields of the subscription record; a listing item adds `status` to them (src/http/api/wire/subscriptions.ts). */
export const SUBSCRIPTION_FIELDS = {
  /** uuid v4, lower case (set by the service). */
  id: Type.String({ format: 'uuid' }),
  /** Part of the subscription key. */
  owning_application: Type.String(),
  /** Distinct event type names in the order first given; part of the subscription key as a set. */
  event_types: Type.Array(Type.String()),
  /** Part of the subscription key; `default` when not given. */
  consumer_group: Type.String(),
  /** Lower case; resolved lazily when the subscription is first streamed or its cursors first reset. */
  read_from: StringEnum(READ_FROM),
  /** One cursor per partition of every event type when `read_from` is `cursors`, else empty. */
  initial_cursors: Type.Array(InitialCursorSchema),
  /** A draft-04 JSON Schema an event must satisfy to be delivered (docs/consuming.md "Filters"); absent = every event. Fixed with the subscription. */
  filter: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: 'a draft-04 JSON Schema an event (metadata included) must satisfy to be delivered (docs/consuming.md "Filters"); fixed with the subscription. Events it does not match are passed over: the cursors move past them and commits cover them, while `unconsumed_events` and the consumer lag count every event not yet passed over, matching or not' })),
  authorization: Type.Optional(SubscriptionAuthorizationSchema),
  annotations: Type.Optional(StringMap('annotations; `broker.io/subscription-max-event-send-count` and `broker.io/unprocessable-event-policy` configure the dead-letter queue')),
  labels: Type.Optional(StringMap('labels')),
  /** RFC 3339 (set by the service). */
  created_at: Timestamp,
  /** RFC 3339 (set by the service; moves on every accepted update). */
  updated_at: Timestamp,
};

/** The stored and served subscription record (docs/concepts.md "Subscriptions"), as its schema; closed: a field the node starts to send is declared here first. */
export const SubscriptionRecordSchema = Type.Object(SUBSCRIPTION_FIELDS, Closed);
/** The stored and served subscription record, derived from {@link SubscriptionRecordSchema}. */
export type Subscription = DeepReadonly<Static<typeof SubscriptionRecordSchema>>;

/** A subscription cursor as sent and served (docs/concepts.md "Offsets and cursors"; docs/consuming.md "Commits"). */
export const SubscriptionCursorSchema = Type.Object({
  partition: Type.String(),
  offset: Type.String(),
  event_type: Type.String(),
  cursor_token: Type.String({ description: 'served by the node; any string when committing' }),
});
/** A subscription cursor, derived from {@link SubscriptionCursorSchema}. */
export type SubscriptionCursor = DeepReadonly<Static<typeof SubscriptionCursorSchema>>;

/** The same without the token (cursor reset, docs/consuming.md "Commits"). */
export const SubscriptionCursorWithoutTokenSchema = Type.Object({ partition: Type.String(), offset: Type.String(), event_type: Type.String() });

/** Partition status of a subscription (`show_status=true`, stats). */
export const PartitionStateSchema = Type.Union([Type.Literal('unassigned'), Type.Literal('reassigning'), Type.Literal('assigned')]);
/** How a partition was assigned: by rebalancing (`auto`) or because a stream asked for it (`direct`). */
export const AssignmentTypeSchema = Type.Union([Type.Literal('auto'), Type.Literal('direct')]);

/** One partition of `GET /subscriptions/{id}/stats` (docs/consuming.md "Commits"; dead letters: "Dead letters"; expired events: "Events removed before they were read"). */
export const PartitionStatsSchema = Type.Object(
  {
    partition: Type.String(),
    state: PartitionStateSchema,
    unconsumed_events: Type.Optional(Type.Integer({ minimum: 0, description: 'events after the committed offset; with a filter, every such event, matching or not (docs/consuming.md "Filters")' })),
    consumer_lag_seconds: Type.Optional(Type.Integer({ minimum: 0 })),
    stream_id: Type.String(),
    assignment_type: AssignmentTypeSchema,
    failed_send_count: Type.Optional(Type.Integer({ minimum: 1, description: 'dead-letter queue: sends of its events that ended without a commit' })),
    dead_letter_search_until: Type.Optional(Type.String({ description: 'dead-letter queue: the last offset of the search window' })),
    expired_events: Type.Optional(Type.Integer({ minimum: 1, description: 'events of the partition that retention removed before the subscription read them (counted when its committed offset passed them); absent while there are none' })),
    in_flight_events: Type.Optional(Type.Integer({ minimum: 0, description: 'queue mode (docs/consuming.md "Queue mode"): events handed to streams and not acknowledged yet' })),
    redelivery_events: Type.Optional(Type.Integer({ minimum: 0, description: 'queue mode: events waiting to be handed out again (their batch timed out or was handed back)' })),
    undelivered_events: Type.Optional(Type.Integer({ minimum: 0, description: 'queue mode: events never handed out yet' })),
    consumer_status: Type.Optional(StringEnum(CONSUMER_STATUSES, { description: 'the consumer\'s state on the partition over the last `consumerStatus.windowMs` (docs/consuming.md "Consumer status"): `ok`, `lagging` (commits advance, the lag grows), `stalled` (events wait, commits stopped while a stream holds the partition), `stopped` (events wait, no stream); absent before the subscription was streamed' })),
    drain_seconds: Type.Optional(Type.Integer({ minimum: 0, description: 'seconds until the unconsumed events are consumed at the commit rate of the last `consumerStatus.windowMs`; absent when nothing was committed over it' })),
  },
  Closed,
);
/**
 * One partition of the stats, derived from {@link PartitionStatsSchema}; mutable, since the stats build
 * each entry field by field as they find its lag, dead letters and expired events.
 */
export type PartitionStats = Static<typeof PartitionStatsSchema>;

/**
 * A validated, normalized subscription body: every {@link Subscription} field except the service-set ones.
 * Defaults are applied (`consumer_group default`, `read_from end`); `initial_cursors` is empty unless
 * `read_from` is `cursors`; optional fields that were absent or `null` are left out.
 */
export type SubscriptionInput = Omit<Subscription, 'id' | 'created_at' | 'updated_at'>;

/** The partitions of one event type as a subscription sees them: its timelines and the range per partition id. */
export interface EventTypePartitions {
  readonly timelines: TimelineMap;
  readonly ranges: ReadonlyMap<string, PartitionRange>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Whether `id` can name a subscription (a lower-case uuid, as the service issues them). Others are 404 before any key is built. */
export function isSubscriptionId(id: string): boolean {
  return UUID.test(id);
}

/** Whether `name` can be an event type name (its pattern and length 1..255; docs/concepts.md "Event types"). */
export function isEventTypeName(name: string): boolean {
  return name.length >= 1 && name.length <= MAX_EVENT_TYPE_NAME_LENGTH && EVENT_TYPE_NAME_PATTERN.test(name);
}

/**
 * The subscription key (owning_application, event_types in any order, consumer_group; a create with an
 * existing key answers the existing subscription, docs/concepts.md "Subscriptions") as canonical JSON: `["<owning_application>",["<sorted event types>"...],"<consumer_group>"]`.
 * Equal keys mean the same subscription.
 */
export function subscriptionKey(input: Pick<SubscriptionInput, 'owning_application' | 'event_types' | 'consumer_group'>): string {
  return JSON.stringify([input.owning_application, [...new Set(input.event_types)].sort(), input.consumer_group]);
}

/**
 * Checks the initial cursors of a subscription with `read_from: cursors` against the partitions of its
 * event types as they are now (docs/concepts.md "Subscriptions": exactly one initial cursor per partition;
 * docs/concepts.md "Offsets and cursors": unknown partition, expired offset or one beyond the newest is
 * invalid).
 * @param input a body accepted by {@link parseSubscriptionInput}
 * @param partitions every event type of `input.event_types` with its active timeline and partition ranges
 * @returns 422 detail lines; empty when the cursors are fine or `read_from` is not `cursors`
 */
export function initialCursorProblems(input: SubscriptionInput, partitions: ReadonlyMap<string, EventTypePartitions>): string[] {
  if (input.read_from !== 'cursors') return [];
  const field = 'initial_cursors';
  if (input.initial_cursors.length === 0) return [`Field "${field}" must not be empty when read_from is "cursors"`];
  const details: string[] = [];
  const seen = new Set<string>();
  for (const [i, cursor] of input.initial_cursors.entries()) {
    const at = `Field "${field}[${i}]"`;
    const eventType = partitions.get(cursor.event_type);
    if (eventType === undefined || !input.event_types.includes(cursor.event_type)) {
      details.push(`${at} names event type "${cursor.event_type}", which is not one of event_types`);
      continue;
    }
    const range = eventType.ranges.get(cursor.partition);
    if (range === undefined) {
      details.push(`${at} names partition "${cursor.partition}", which event type "${cursor.event_type}" does not have`);
      continue;
    }
    const key = JSON.stringify([cursor.event_type, cursor.partition]);
    if (seen.has(key)) {
      details.push(`${at} repeats the cursor for partition "${cursor.partition}" of event type "${cursor.event_type}"`);
      continue;
    }
    seen.add(key);
    const parsed = parseOffset(cursor.offset);
    const resolved = parsed === undefined ? { ok: false as const, reason: 'offset is malformed' } : eventType.timelines.resolve(parsed, cursor.partition, range);
    if (!resolved.ok) details.push(`${at} offset "${cursor.offset}" of partition "${cursor.partition}" of event type "${cursor.event_type}" is invalid: ${resolved.reason}`);
  }
  for (const name of input.event_types) {
    for (const partition of partitions.get(name)?.ranges.keys() ?? []) {
      if (!seen.has(JSON.stringify([name, partition]))) details.push(`Field "${field}" has no cursor for partition "${partition}" of event type "${name}"`);
    }
  }
  return details;
}

