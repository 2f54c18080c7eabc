/**
 * Reading the JSON body of `POST /subscriptions` and `PUT /subscriptions/{id}` (docs/concepts.md "Subscriptions";
 * docs/http-api.md "Endpoints"): the shape — JSON types, required fields, the `read_from` enum, event type names, list
 * and map sizes — is {@link subscriptionInputSchema} (and {@link subscriptionUpdateSchema}), checked by ajv
 * (src/domain/json/input-check.ts); the rules a schema cannot say (distinct event types and attributes, offsets
 * of a valid form, annotation keys and values, the dead-letter annotations, what an update may change)
 * then run on the typed value, which is normalized into a `SubscriptionInput` (subscription.ts). Whether
 * the event types exist and the initial cursors fit their partitions is decided with storage
 * (`initialCursorProblems` of subscription.ts).
 *
 * Pure: no I/O. Status convention (docs/http-api.md "Errors", as for event types): a body that is not a JSON
 * object, a value of the wrong JSON type or an invalid `read_from` is **400**; a missing required field, an
 * empty value, a list or map over its bound, a repeated event type, a bad annotation or label, a malformed
 * initial cursor offset or a change of an immutable field is **422**. Every problem is collected, one
 * detail line each, in the form `Field "name" ...`; a body of the wrong shape is answered with its shape
 * problems only.
 */
import { Type, type Static } from '@sinclair/typebox';
import type { AuthorizationAttribute } from '../event-type/event-type.js';
import { annotationProblems } from '../event-type/annotation-rules.js';
import { AttributeListInput, duplicateAttributeProblems, EVENT_TYPE_NAME_PATTERN, MAX_EVENT_TYPE_NAME_LENGTH, StringMapInput } from '../event-type/event-type-input.js';
import { deadLetterAnnotationProblems, SUBSCRIPTION_SERVICE_ANNOTATIONS } from './dead-letter.js';
import { CONSUMPTION_MODE_ANNOTATION, consumptionModeOf, consumptionModeProblems } from './consumption-mode.js';
import { checkBody, Problems, type RuleResult } from '../event-type/rule-problems.js';
import { formatOffset, parseOffset } from '../cursor/offsets.js';
import { canonicalJson } from '../json/canonical-json.js';
import { READ_FROM, type InitialCursor, type Subscription, type SubscriptionAuthorization, type SubscriptionInput } from './subscription.js';

export { READ_FROM, type ReadFrom } from './subscription.js';

/** The consumer group of a subscription created without one (docs/concepts.md "Subscriptions"). */
export const DEFAULT_CONSUMER_GROUP = 'default';

/**
 * Installation limits the subscription rules apply before any storage is read, so an oversized body
 * costs no Redis work.
 * `maxPartitions` is config `subscriptions.maxPartitions`: every event type has at least one partition,
 * so a subscription can never have more event types, nor more initial cursors, than that.
 */
export interface SubscriptionLimits {
  readonly maxPartitions: number;
}

/** The limits of the default configuration (`subscriptions.maxPartitions` 100), for callers without a config. */
export const DEFAULT_SUBSCRIPTION_LIMITS: SubscriptionLimits = { maxPartitions: 100 };

/** A non-empty string (`must not be empty`, 422). */
const NonEmpty = (description?: string) => Type.String({ minLength: 1, ...(description !== undefined ? { description } : {}) });

/** What the `maxItems` of `event_types` and `initial_cursors` come from (named in the detail of a longer list). */
const EVENT_TYPES_LIMIT = 'subscriptions.maxPartitions: every event type has at least one partition';
const CURSORS_LIMIT = 'subscriptions.maxPartitions: one cursor per partition';

/** Options of both body schemas: a body that is not an object is 400 `Request body must be a JSON object`. */
const BODY = { 'x-messages': { type: 'must be a JSON object' } };

/**
 * The fields of a subscription body with the list bounds of `maxPartitions` (config
 * `subscriptions.maxPartitions`); {@link createSchema} makes the key fields required and the others
 * optional, {@link updateSchema} makes all optional (absent = stored).
 */
function subscriptionFields(maxPartitions: number) {
  return {
    owning_application: NonEmpty(),
    event_types: Type.Array(
      Type.String({
        maxLength: MAX_EVENT_TYPE_NAME_LENGTH,
        pattern: EVENT_TYPE_NAME_PATTERN.source,
        'x-messages': { maxLength: 'is not a valid event type name: {value}', pattern: 'is not a valid event type name: {value}' },
      }),
      {
        minItems: 1,
        maxItems: maxPartitions,
        'x-limit': EVENT_TYPES_LIMIT,
        'x-messages': { type: 'must be an array of strings', minItems: 'must contain at least one event type' },
        description: `distinct event type names; at most subscriptions.maxPartitions (here ${maxPartitions})`,
      },
    ),
    consumer_group: NonEmpty(`default "${DEFAULT_CONSUMER_GROUP}"`),
    read_from: Type.Unsafe<string>(Type.String({ 'x-any-case-enum': [...READ_FROM], 'x-status': 400, description: `one of ${READ_FROM.join(', ')} (any case; default end)` })),
    initial_cursors: Type.Array(
      Type.Object(
        { event_type: NonEmpty(), partition: NonEmpty(), offset: NonEmpty('`BEGIN`, a bare number or the full form 001-<timeline>-<18 digits>') },
        { 'x-messages': { type: 'must be an object with event_type, partition and offset' } },
      ),
      { maxItems: maxPartitions, 'x-limit': CURSORS_LIMIT, 'x-messages': { type: 'must be an array of cursors' }, description: 'one per partition of every event type, used with read_from cursors' },
    ),
    authorization: Type.Object({ admins: AttributeListInput, readers: AttributeListInput }, { 'x-messages': { type: 'must be an object with admins and readers' } }),
    annotations: StringMapInput(`annotations; under \`broker.io/\` only ${[...SUBSCRIPTION_SERVICE_ANNOTATIONS].map((k) => `\`${k}\``).join(', ')} (the dead-letter queue; the consumption mode \`stream\` or \`queue\`, fixed at creation)`),
    labels: StringMapInput('labels'),
    filter: Type.Record(Type.String(), Type.Unknown(), {
      'x-messages': { type: 'must be a JSON object: a draft-04 JSON Schema' },
      description: 'a draft-04 JSON Schema an event (metadata included) must satisfy to be delivered; checked as an event type\'s schema; fixed with the subscription (docs/consuming.md "Filters")',
    }),
  };
}

/** The body of `POST /subscriptions` with the list bounds of `maxPartitions`: `owning_application` and `event_types` required. */
function createSchema(maxPartitions: number) {
  const f = subscriptionFields(maxPartitions);
  return Type.Object(
    {
      owning_application: f.owning_application,
      event_types: f.event_types,
      consumer_group: Type.Optional(f.consumer_group),
      read_from: Type.Optional(f.read_from),
      initial_cursors: Type.Optional(f.initial_cursors),
      authorization: Type.Optional(f.authorization),
      annotations: Type.Optional(f.annotations),
      labels: Type.Optional(f.labels),
      filter: Type.Optional(f.filter),
    },
    BODY,
  );
}

/** The body of `PUT /subscriptions/{id}` with the list bounds of `maxPartitions`: every field optional; `id` may be sent back (another value is a change). */
function updateSchema(maxPartitions: number) {
  const id = Type.Unknown({ description: 'the subscription\'s own id, or absent; another value is refused (422)' });
  return Type.Partial(Type.Object({ id, ...subscriptionFields(maxPartitions) }), BODY);
}

/** A body that passed the `POST /subscriptions` schema. */
export type SubscriptionInputBody = Static<ReturnType<typeof createSchema>>;
/** A body that passed the `PUT /subscriptions/{id}` schema. */
export type SubscriptionUpdateBody = Static<ReturnType<typeof updateSchema>>;

const createSchemas = new Map<number, ReturnType<typeof createSchema>>();
const updateSchemas = new Map<number, ReturnType<typeof updateSchema>>();

/**
 * The schema of a `POST /subscriptions` body for an installation whose `subscriptions.maxPartitions` is
 * `maxPartitions` (one object per value, so ajv compiles it once).
 */
export function subscriptionInputSchema(maxPartitions: number): ReturnType<typeof createSchema> {
  let schema = createSchemas.get(maxPartitions);
  if (schema === undefined) createSchemas.set(maxPartitions, (schema = createSchema(maxPartitions)));
  return schema;
}

/** The schema of a `PUT /subscriptions/{id}` body, as {@link subscriptionInputSchema}. */
export function subscriptionUpdateSchema(maxPartitions: number): ReturnType<typeof updateSchema> {
  let schema = updateSchemas.get(maxPartitions);
  if (schema === undefined) updateSchemas.set(maxPartitions, (schema = updateSchema(maxPartitions)));
  return schema;
}

/**
 * The body of `POST /subscriptions` as JSON Schema (docs/http-api.md "Endpoints"), with
 * the lists bounded by the default `subscriptions.maxPartitions` (100; a node checks the bound of its
 * config). The route table declares it and the OpenAPI document shows it.
 */
export const SubscriptionInputSchema = subscriptionInputSchema(DEFAULT_SUBSCRIPTION_LIMITS.maxPartitions);
/** The body of `PUT /subscriptions/{id}` as JSON Schema, as {@link SubscriptionInputSchema}. */
export const SubscriptionUpdateSchema = subscriptionUpdateSchema(DEFAULT_SUBSCRIPTION_LIMITS.maxPartitions);

/** A subscription body of the right shape, read-only: a checked `POST` body, or a `PUT` body merged with the stored record. */
type SubscriptionFields = Readonly<{
  owning_application: string;
  event_types: readonly string[];
  consumer_group?: string | undefined;
  read_from?: string | undefined;
  initial_cursors?: readonly InitialCursor[] | undefined;
  authorization?: SubscriptionAuthorization | undefined;
  annotations?: Readonly<Record<string, string>> | undefined;
  labels?: Readonly<Record<string, string>> | undefined;
  filter?: Readonly<Record<string, unknown>> | undefined;
}>;

/** Each event type at most once (422). */
function repeatedEventTypeProblems(eventTypes: readonly string[], p: Problems): void {
  const seen = new Set<string>();
  for (const name of eventTypes) {
    if (seen.has(name)) p.rule('event_types', `must not contain "${name}" more than once`);
    seen.add(name);
  }
}

/** The cursors with their offsets normalized (`begin` or the full form); an offset of no valid form is 422. */
function normalizedCursors(cursors: readonly InitialCursor[], p: Problems): InitialCursor[] {
  return cursors.map(({ event_type: eventType, partition, offset }, i) => {
    const parsed = parseOffset(offset);
    if (parsed === undefined) p.rule(`initial_cursors[${i}].offset`, `is not a valid offset: ${JSON.stringify(offset)}`);
    const normalized = parsed === undefined || parsed.kind === 'begin' ? 'begin' : formatOffset(parsed.position.timeline, parsed.position.offset);
    return { event_type: eventType, partition, offset: normalized };
  });
}

/** Annotations and labels by the shared rules ({@link annotationProblems}), then the dead-letter annotations of a subscription (docs/consuming.md "Dead letters"). */
function mapProblems(annotations: Readonly<Record<string, string>> | undefined, labels: Readonly<Record<string, string>> | undefined, p: Problems): void {
  const annotationList = annotationProblems(annotations, 'annotations', SUBSCRIPTION_SERVICE_ANNOTATIONS);
  p.addAll(annotationList);
  if (annotations !== undefined && annotationList.length === 0) for (const line of deadLetterAnnotationProblems(annotations)) p.line(422, line);
  p.addAll(annotationProblems(labels, 'labels'));
}

/** Only `data_type` and `value` of each attribute are kept. */
const attributes = (list: readonly AuthorizationAttribute[]): AuthorizationAttribute[] => list.map(({ data_type: dataType, value }) => ({ data_type: dataType, value }));

/** The fields of the subscription key and where it starts reading. */
type KeyFields = Pick<SubscriptionInput, 'owning_application' | 'event_types' | 'consumer_group' | 'read_from' | 'initial_cursors' | 'filter'>;

/**
 * The rules of the key fields on a body of the right shape, and those fields normalized: distinct event
 * types, initial cursor offsets of a valid form (normalized; kept only for `read_from: cursors`), the defaults.
 */
function keyFields(body: SubscriptionFields, p: Problems): KeyFields {
  repeatedEventTypeProblems(body.event_types, p);
  const readFrom = READ_FROM.find((candidate) => candidate === (body.read_from ?? 'end').toLowerCase()) ?? 'end';
  const cursors = normalizedCursors(body.initial_cursors ?? [], p);
  return {
    owning_application: body.owning_application,
    event_types: [...body.event_types],
    consumer_group: body.consumer_group ?? DEFAULT_CONSUMER_GROUP,
    read_from: readFrom,
    initial_cursors: readFrom === 'cursors' ? cursors : [],
    ...(body.filter !== undefined ? { filter: body.filter } : {}),
  };
}

/** The rules of the fields an update may change, and those fields (absent ones left out): distinct attributes, annotations (the consumption mode's with the filter) and labels. */
function mutableFields(body: SubscriptionFields, p: Problems): Pick<SubscriptionInput, 'authorization' | 'annotations' | 'labels'> {
  const authorization = body.authorization;
  if (authorization !== undefined) {
    duplicateAttributeProblems(authorization.admins, 'authorization.admins', p);
    duplicateAttributeProblems(authorization.readers, 'authorization.readers', p);
  }
  mapProblems(body.annotations, body.labels, p);
  for (const line of consumptionModeProblems(body.annotations, body.filter !== undefined)) p.line(422, line);
  return {
    ...(authorization !== undefined ? { authorization: { admins: attributes(authorization.admins), readers: attributes(authorization.readers) } } : {}),
    ...(body.annotations !== undefined ? { annotations: { ...body.annotations } } : {}),
    ...(body.labels !== undefined ? { labels: { ...body.labels } } : {}),
  };
}

/**
 * Validates and normalizes the body of `POST /subscriptions` (docs/concepts.md "Subscriptions";
 * docs/http-api.md "Endpoints"). Unknown properties (including service-set ones such as `id`)
 * are ignored.
 *
 * First the shape ({@link subscriptionInputSchema} of `limits.maxPartitions`): `owning_application` a
 * non-empty string (required); `event_types` 1..`limits.maxPartitions` valid event type names (required);
 * `consumer_group` a non-empty string (default `default`); `read_from` one of `begin`, `end`, `cursors` in
 * any case (default `end`); `initial_cursors` at most `limits.maxPartitions` `{event_type, partition,
 * offset}` of non-empty strings; `authorization` an object with `admins` and `readers` lists of 1..100
 * `{data_type, value}` non-empty strings; annotations and labels maps of at most 100 string values. A
 * list over its bound is one detail line whatever its items, and a body of the wrong
 * shape is answered with its shape problems only. Then the rules ({@link keyFields}, {@link mutableFields}). Whether the event
 * types exist and whether the cursors fit their partitions is decided with storage
 * (`initialCursorProblems` of subscription.ts).
 *
 * @param body the parsed JSON request body (declared properties holding `null` are removed from it)
 * @param limits installation limits (config `subscriptions.maxPartitions`)
 * @returns the normalized input, or status 400 (not an object, wrong JSON type, invalid `read_from`) or 422
 *   (any other problem) with every detail line (and, for shape problems, their JSON pointers)
 */
export function parseSubscriptionInput(body: unknown, limits: SubscriptionLimits = DEFAULT_SUBSCRIPTION_LIMITS): RuleResult<SubscriptionInput> {
  const checked = checkBody(subscriptionInputSchema(limits.maxPartitions), body);
  if (!checked.ok) return checked;
  const p = new Problems();
  const input: SubscriptionInput = { ...keyFields(checked.value, p), ...mutableFields(checked.value, p) };
  return p.result(input, 'The subscription is invalid');
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  const left = new Set(a);
  const right = new Set(b);
  return left.size === right.size && [...left].every((item) => right.has(item));
}

/**
 * What an update may change (authorization, annotations and labels; docs/consuming.md
 * "Subscriptions"): one 422 line per changed immutable field — `id`, `owning_application`, the set of
 * `event_types`, `consumer_group`, `read_from`, (same `read_from`) the set of normalized `initial_cursors`, and `filter`
 * (compared as canonical JSON).
 */
function immutableFieldProblems(existing: Subscription, next: SubscriptionInput, sentId: unknown, p: Problems): void {
  if (sentId !== undefined && sentId !== existing.id) p.rule('id', 'cannot be changed');
  if (next.owning_application !== existing.owning_application) p.rule('owning_application', 'cannot be changed');
  if (!sameSet(next.event_types, existing.event_types)) p.rule('event_types', 'cannot be changed');
  if (next.consumer_group !== existing.consumer_group) p.rule('consumer_group', 'cannot be changed');
  const cursorText = (cursors: readonly InitialCursor[]) => cursors.map((c) => JSON.stringify([c.event_type, c.partition, c.offset]));
  if (next.read_from !== existing.read_from) p.rule('read_from', 'cannot be changed');
  else if (next.initial_cursors.length !== existing.initial_cursors.length || !sameSet(cursorText(next.initial_cursors), cursorText(existing.initial_cursors))) {
    p.rule('initial_cursors', 'cannot be changed');
  }
  if (filterText(next.filter) !== filterText(existing.filter)) p.rule('filter', 'cannot be changed');
  if (consumptionModeOf(next.annotations) !== consumptionModeOf(existing.annotations)) p.line(422, `Annotation "${CONSUMPTION_MODE_ANNOTATION}" cannot be changed`);
}

/**
 * A subscription's filter as canonical JSON (docs/consuming.md "Filters"), so filters that differ only in key
 * order compare equal; undefined when it has none.
 */
export function filterText(filter: Readonly<Record<string, unknown>> | undefined): string | undefined {
  return filter === undefined ? undefined : canonicalJson(JSON.stringify(filter));
}

/**
 * Validates the body of `PUT /subscriptions/{id}` against the stored record (docs/consuming.md
 * "Subscriptions": authorization, annotations and labels may change, other changes are 422). The body's shape is {@link subscriptionUpdateSchema}
 * (the create body's fields, all optional). Fields absent from the body (or `null`) keep their stored
 * value, so a partial body changes only what it names; `authorization` thus cannot be removed, and
 * annotations or labels are cleared with `{}`. `created_at` and `updated_at` in the body are ignored; an
 * `id` other than the stored one is a change. The merged subscription then goes through the rules of
 * {@link parseSubscriptionInput}, and only when those pass is it compared with the stored one.
 * @param existing the stored record
 * @param body the parsed JSON request body (declared properties holding `null` are removed from it)
 * @param limits installation limits, as for {@link parseSubscriptionInput}
 * @returns the new input (same immutable fields, new mutable ones), or 400 (shape, as for
 *   {@link parseSubscriptionInput}) or 422 (rules, or a changed immutable field: one line per field)
 */
export function parseSubscriptionUpdate(existing: Subscription, body: unknown, limits: SubscriptionLimits = DEFAULT_SUBSCRIPTION_LIMITS): RuleResult<SubscriptionInput> {
  const checked = checkBody(subscriptionUpdateSchema(limits.maxPartitions), body);
  if (!checked.ok) return checked;
  const sent = checked.value;
  const merged: SubscriptionFields = {
    owning_application: sent.owning_application ?? existing.owning_application,
    event_types: sent.event_types ?? existing.event_types,
    consumer_group: sent.consumer_group ?? existing.consumer_group,
    read_from: sent.read_from ?? existing.read_from,
    initial_cursors: sent.initial_cursors ?? existing.initial_cursors,
    authorization: sent.authorization ?? existing.authorization,
    annotations: sent.annotations ?? existing.annotations,
    labels: sent.labels ?? existing.labels,
    filter: sent.filter ?? existing.filter,
  };
  const p = new Problems();
  const key = keyFields(merged, p);
  const keyValid = p.list.length === 0;
  const next: SubscriptionInput = { ...key, ...mutableFields(merged, p) };
  // As long as the key fields are valid, every changed one is named, beside other problems.
  if (keyValid) immutableFieldProblems(existing, next, sent.id, p);
  return p.result(next, 'The subscription update is invalid');
}
