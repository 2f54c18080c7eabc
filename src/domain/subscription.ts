/**
 * The subscription record and the pure rules of its registry (spec "Subscription", the "Subscriptions"
 * endpoints, "Annotations", "Limits", "Errors"; WIRE.md "Conventions", "Subscriptions").
 *
 * Pure: no I/O. Status convention (WIRE.md "Conventions", as for event types): a body that is not a JSON
 * object, a value of the wrong JSON type or an invalid `read_from` is **400**; a missing required field, an
 * empty value, a repeated event type, a bad annotation or label, a malformed or unusable initial cursor or
 * a change of an immutable field is **422**. Every problem is collected, one detail line each, in the form
 * `Field "name" ...`.
 */
import type { AuthorizationAttribute } from './event-type.js';
import { annotationProblems } from './annotation-rules.js';
import { EVENT_TYPE_NAME_PATTERN, MAX_EVENT_TYPE_NAME_LENGTH } from './event-type-input.js';
import { deadLetterAnnotationProblems, SUBSCRIPTION_SERVICE_ANNOTATIONS } from './dead-letter.js';
import { absent, parseAttributeList, Problems, readString, withinCount, type RuleResult } from './rule-problems.js';
import { isJsonObject, type JsonObject, type JsonValue } from './json-schema-walk.js';
import { formatOffset, parseOffset, type PartitionRange } from './offsets.js';
import type { TimelineMap } from './timeline.js';

/** Where a new subscription starts reading (spec "Subscription" `read_from`; default `end`). */
export const READ_FROM = ['begin', 'end', 'cursors'] as const;
/** One of {@link READ_FROM}. */
export type ReadFrom = (typeof READ_FROM)[number];

/** The consumer group of a subscription created without one (spec "Subscription"). */
export const DEFAULT_CONSUMER_GROUP = 'default';

/**
 * A starting cursor of a subscription created with `read_from: cursors` (WIRE.md "Subscriptions").
 * `offset` is the last consumed offset in its normalized form: `begin`, or the full form
 * `001-<timeline>-<18 digits>` (WIRE.md "Offsets and cursors").
 */
export interface InitialCursor {
  readonly event_type: string;
  readonly partition: string;
  readonly offset: string;
}

/** A subscription's authorization section (spec "Subscription": `admins` and `readers` only); stored as given. */
export interface SubscriptionAuthorization {
  readonly admins: readonly AuthorizationAttribute[];
  readonly readers: readonly AuthorizationAttribute[];
}

/** The stored and served subscription record (spec "Subscription"; WIRE.md "Subscriptions" → Record). */
export interface Subscription {
  /** uuid v4, lower case (set by the service). */
  readonly id: string;
  /** Part of the subscription key. */
  readonly owning_application: string;
  /** Distinct event type names in the order first given; part of the subscription key as a set. */
  readonly event_types: readonly string[];
  /** Part of the subscription key; `default` when not given. */
  readonly consumer_group: string;
  /** Lower case; resolved lazily when the subscription is first streamed or its cursors first reset. */
  readonly read_from: ReadFrom;
  /** One cursor per partition of every event type when `read_from` is `cursors`, else empty. */
  readonly initial_cursors: readonly InitialCursor[];
  readonly authorization?: SubscriptionAuthorization;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly labels?: Readonly<Record<string, string>>;
  /** RFC 3339 (set by the service). */
  readonly created_at: string;
  /** RFC 3339 (set by the service; moves on every accepted update). */
  readonly updated_at: string;
}

/**
 * A validated, normalized subscription body: every {@link Subscription} field except the service-set ones.
 * Defaults are applied (`consumer_group default`, `read_from end`); `initial_cursors` is empty unless
 * `read_from` is `cursors`; optional fields that were absent or `null` are left out.
 */
export type SubscriptionInput = Omit<Subscription, 'id' | 'created_at' | 'updated_at'>;

/**
 * Installation limits the subscription rules apply before any storage is read (issue 13 §2.2).
 * `maxPartitions` is config `subscriptions.maxPartitions`: every event type has at least one partition,
 * so a subscription can never have more event types, nor more initial cursors, than that.
 */
export interface SubscriptionLimits {
  readonly maxPartitions: number;
}

/** The limits of the default configuration (`subscriptions.maxPartitions` 100), for callers without a config. */
export const DEFAULT_SUBSCRIPTION_LIMITS: SubscriptionLimits = { maxPartitions: 100 };

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

/** Whether `name` can be an event type name (spec "EventType" pattern, WIRE.md length 1..255). */
export function isEventTypeName(name: string): boolean {
  return name.length >= 1 && name.length <= MAX_EVENT_TYPE_NAME_LENGTH && EVENT_TYPE_NAME_PATTERN.test(name);
}

/**
 * The subscription key (spec "Subscriptions" POST: owning_application, event_types in any order,
 * consumer_group) as canonical JSON: `["<owning_application>",["<sorted event types>"...],"<consumer_group>"]`.
 * Equal keys mean the same subscription.
 */
export function subscriptionKey(input: Pick<SubscriptionInput, 'owning_application' | 'event_types' | 'consumer_group'>): string {
  return JSON.stringify([input.owning_application, [...new Set(input.event_types)].sort(), input.consumer_group]);
}

function parseEventTypes(value: JsonValue | undefined, limits: SubscriptionLimits, p: Problems): string[] | undefined {
  const field = 'event_types';
  if (absent(value)) {
    p.missing(field);
    return undefined;
  }
  if (!Array.isArray(value)) {
    p.malformed(field, 'must be an array of strings');
    return undefined;
  }
  if (value.length === 0) {
    p.rule(field, 'must contain at least one event type');
    return undefined;
  }
  if (!withinCount(value, field, limits.maxPartitions, 'subscriptions.maxPartitions: every event type has at least one partition', p)) return undefined;
  const names: string[] = [];
  const seen = new Set<string>();
  let ok = true;
  for (const [i, item] of value.entries()) {
    if (typeof item !== 'string') {
      p.malformed(`${field}[${i}]`, 'must be a string');
      ok = false;
    } else if (!isEventTypeName(item)) {
      p.rule(`${field}[${i}]`, `is not a valid event type name: ${JSON.stringify(item)}`);
      ok = false;
    } else if (seen.has(item)) {
      p.rule(field, `must not contain "${item}" more than once`);
      ok = false;
    } else {
      seen.add(item);
      names.push(item);
    }
  }
  return ok ? names : undefined;
}

function parseReadFrom(value: JsonValue | undefined, p: Problems): ReadFrom | undefined {
  if (absent(value)) return 'end';
  if (typeof value !== 'string') {
    p.malformed('read_from', 'must be a string');
    return undefined;
  }
  const match = READ_FROM.find((candidate) => candidate === value.toLowerCase());
  if (match === undefined) p.malformed('read_from', `has unknown value "${value}"; allowed: ${READ_FROM.join(', ')}`);
  return match;
}

/** Shape of `initial_cursors`; offsets are checked for form here and normalized, their ranges later. */
function parseInitialCursors(value: JsonValue | undefined, limits: SubscriptionLimits, p: Problems): InitialCursor[] | undefined {
  const field = 'initial_cursors';
  if (absent(value)) return [];
  if (!Array.isArray(value)) {
    p.malformed(field, 'must be an array of cursors');
    return undefined;
  }
  if (!withinCount(value, field, limits.maxPartitions, 'subscriptions.maxPartitions: one cursor per partition', p)) return undefined;
  const cursors: InitialCursor[] = [];
  let ok = true;
  for (const [i, item] of value.entries()) {
    const at = `${field}[${i}]`;
    if (!isJsonObject(item)) {
      p.malformed(at, 'must be an object with event_type, partition and offset');
      ok = false;
      continue;
    }
    const eventType = readString(item.event_type, `${at}.event_type`, p, { required: true, nonEmpty: true });
    const partition = readString(item.partition, `${at}.partition`, p, { required: true, nonEmpty: true });
    const offset = readString(item.offset, `${at}.offset`, p, { required: true, nonEmpty: true });
    if (eventType === undefined || partition === undefined || offset === undefined) {
      ok = false;
      continue;
    }
    const parsed = parseOffset(offset);
    if (parsed === undefined) {
      p.rule(`${at}.offset`, `is not a valid offset: ${JSON.stringify(offset)}`);
      ok = false;
      continue;
    }
    const normalized = parsed.kind === 'begin' ? 'begin' : formatOffset(parsed.position.timeline, parsed.position.offset);
    cursors.push({ event_type: eventType, partition, offset: normalized });
  }
  return ok ? cursors : undefined;
}

function parseAuthorization(value: JsonValue | undefined, p: Problems): SubscriptionAuthorization | undefined {
  if (absent(value)) return undefined;
  if (!isJsonObject(value)) {
    p.malformed('authorization', 'must be an object with admins and readers');
    return undefined;
  }
  const admins = parseAttributeList(value.admins, 'authorization.admins', p);
  const readers = parseAttributeList(value.readers, 'authorization.readers', p);
  if (admins === undefined || readers === undefined) return undefined;
  return { admins, readers };
}

/**
 * Annotations or labels through the shared rules ({@link annotationProblems}); a subscription's
 * annotations may carry the service's dead-letter settings (issue 14 §3), checked here (422).
 */
function parseStringMap(value: JsonValue | undefined, field: 'annotations' | 'labels', p: Problems): Record<string, string> | undefined {
  if (absent(value)) return undefined;
  const problems = annotationProblems(value, field, field === 'annotations' ? SUBSCRIPTION_SERVICE_ANNOTATIONS : new Set());
  p.list.push(...problems);
  if (problems.length > 0 || !isJsonObject(value)) return undefined;
  const out: Record<string, string> = {};
  for (const [key, item] of Object.entries(value)) if (typeof item === 'string') out[key] = item;
  if (field === 'annotations') for (const line of deadLetterAnnotationProblems(out)) p.line(422, line);
  return out;
}

function parseFields(body: JsonObject, limits: SubscriptionLimits, p: Problems): SubscriptionInput | undefined {
  const owningApplication = readString(body.owning_application, 'owning_application', p, { required: true, nonEmpty: true });
  const eventTypes = parseEventTypes(body.event_types, limits, p);
  const consumerGroup = absent(body.consumer_group) ? DEFAULT_CONSUMER_GROUP : readString(body.consumer_group, 'consumer_group', p, { required: true, nonEmpty: true });
  const readFrom = parseReadFrom(body.read_from, p);
  const cursors = parseInitialCursors(body.initial_cursors, limits, p);
  const authorization = parseAuthorization(body.authorization, p);
  const annotations = parseStringMap(body.annotations, 'annotations', p);
  const labels = parseStringMap(body.labels, 'labels', p);
  if (owningApplication === undefined || eventTypes === undefined || consumerGroup === undefined || readFrom === undefined || cursors === undefined) return undefined;
  return {
    owning_application: owningApplication,
    event_types: eventTypes,
    consumer_group: consumerGroup,
    read_from: readFrom,
    initial_cursors: readFrom === 'cursors' ? cursors : [],
    ...(authorization !== undefined ? { authorization } : {}),
    ...(annotations !== undefined ? { annotations } : {}),
    ...(labels !== undefined ? { labels } : {}),
  };
}

/**
 * Validates and normalizes the body of `POST /subscriptions` (spec "Subscription", "Annotations";
 * WIRE.md "Conventions", "Subscriptions"). Unknown properties (including service-set ones such as `id`)
 * are ignored.
 *
 * Checks: `owning_application` a non-empty string (required); `event_types` a non-empty array of at most
 * `limits.maxPartitions` distinct valid event type names (required); `consumer_group` a non-empty string (default `default`); `read_from`
 * one of `begin`, `end`, `cursors` in any case (default `end`); `initial_cursors` an array of
 * at most `limits.maxPartitions` `{event_type, partition, offset}` strings whose offsets have a valid form (`BEGIN`, a bare number or the
 * full form; kept only for `read_from: cursors`, normalized); `authorization` an object with non-empty
 * `admins` and `readers` lists of at most 100 `{data_type, value}` non-empty strings; annotations and
 * labels by the event type rules (at most 100 entries each). Every count limit is checked before the items
 * of its list, so an oversized list costs one detail line and no storage lookup (issue 13 §2.2). Whether the event types exist and whether the cursors fit their partitions is decided
 * with storage ({@link resolveInitialCursors}).
 *
 * @param body the parsed JSON request body
 * @param limits installation limits (config `subscriptions.maxPartitions`)
 * @returns the normalized input, or status 400 (not an object, wrong JSON type, invalid `read_from`) or 422
 *   (any other problem) with every detail line
 */
export function parseSubscriptionInput(body: unknown, limits: SubscriptionLimits = DEFAULT_SUBSCRIPTION_LIMITS): RuleResult<SubscriptionInput> {
  if (!isJsonObject(body)) return { ok: false, status: 400, details: ['Request body must be a JSON object'] };
  const p = new Problems();
  return p.result(parseFields(body, limits, p), 'The subscription is invalid');
}

/**
 * Checks the initial cursors of a subscription with `read_from: cursors` against the partitions of its
 * event types as they are now (WIRE.md "Subscriptions": exactly one initial cursor per partition;
 * "Offsets and cursors": unknown partition, expired offset or one beyond the newest is invalid).
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

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  const left = new Set(a);
  const right = new Set(b);
  return left.size === right.size && [...left].every((item) => right.has(item));
}

/** Fields a `PUT /subscriptions/{id}` body may carry, in record order. */
const INPUT_FIELDS = ['owning_application', 'event_types', 'consumer_group', 'read_from', 'initial_cursors', 'authorization', 'annotations', 'labels'] as const;

/**
 * Validates the body of `PUT /subscriptions/{id}` against the stored record (spec "Subscriptions": only
 * authorization can be updated, all else is immutable; WIRE.md "Subscriptions": authorization, annotations
 * and labels may change, other changes are 422). Fields absent from the body (or `null`) keep their stored
 * value, so a partial body changes only what it names; `authorization` thus cannot be removed, and
 * annotations or labels are cleared with `{}`. `created_at` and `updated_at` in the body are ignored; an
 * `id` other than the stored one is a change.
 * @param existing the stored record
 * @param body the parsed JSON request body
 * @param limits installation limits, as for {@link parseSubscriptionInput}
 * @returns the new input (same immutable fields, new mutable ones), or 400 (shape, as for
 *   {@link parseSubscriptionInput}) or 422 (rules, or a changed immutable field: one line per field)
 */
export function parseSubscriptionUpdate(existing: Subscription, body: unknown, limits: SubscriptionLimits = DEFAULT_SUBSCRIPTION_LIMITS): RuleResult<SubscriptionInput> {
  if (!isJsonObject(body)) return { ok: false, status: 400, details: ['Request body must be a JSON object'] };
  const merged: JsonObject = {};
  for (const field of INPUT_FIELDS) {
    const given = body[field];
    const stored = existing[field] as JsonValue | undefined;
    const value = absent(given) ? stored : given;
    if (value !== undefined) merged[field] = value;
  }
  const p = new Problems();
  const next = parseFields(merged, limits, p);
  if (next === undefined) return p.result<SubscriptionInput>(undefined, 'The subscription is invalid');
  if (!absent(body.id) && body.id !== existing.id) p.rule('id', 'cannot be changed');
  if (next.owning_application !== existing.owning_application) p.rule('owning_application', 'cannot be changed');
  if (!sameSet(next.event_types, existing.event_types)) p.rule('event_types', 'cannot be changed');
  if (next.consumer_group !== existing.consumer_group) p.rule('consumer_group', 'cannot be changed');
  const cursorText = (cursors: readonly InitialCursor[]) => cursors.map((c) => JSON.stringify([c.event_type, c.partition, c.offset]));
  if (next.read_from !== existing.read_from) p.rule('read_from', 'cannot be changed');
  else if (next.initial_cursors.length !== existing.initial_cursors.length || !sameSet(cursorText(next.initial_cursors), cursorText(existing.initial_cursors))) {
    p.rule('initial_cursors', 'cannot be changed');
  }
  return p.result(next, 'The subscription update is invalid');
}
