/**
 * Reading the JSON body of `POST /event-types` and `PUT /event-types/{name}` (docs/concepts.md "Event
 * types"; docs/security.md "Authorization: what a subject may do"; docs/http-api.md "Endpoints"): the shape
 * — JSON types, required fields, enums, patterns and sizes — is {@link EventTypeInputSchema}, checked by
 * ajv (src/domain/json/input-check.ts); the rules a schema cannot say (event-type-rules.ts,
 * annotation-rules.ts) then run on the typed value, which is normalized into an {@link EventTypeInput}.
 *
 * Pure: no I/O. Status convention (docs/http-api.md "Errors"): a body that is not a JSON object, a value of the
 * wrong JSON type, or an invalid `category` / `compatibility_mode` / `cleanup_policy` is **400**; everything
 * else (missing required field, pattern, size, unknown strategy or schema type, cross-field rule) is
 * **422**. Every problem is collected, one detail line each, in the form `Field "name" ...`.
 */
import { Type, type Static } from '@sinclair/typebox';
import {
  AUDIENCES,
  CATEGORIES,
  CLEANUP_POLICIES,
  COMPATIBILITY_MODES,
  ENRICHMENT_STRATEGIES,
  PARTITION_STRATEGIES,
  type Category,
  type CleanupPolicy,
  type CompatibilityMode,
  type EnrichmentStrategy,
  type EventTypeOptions,
  type PartitionStrategy,
} from './event-type.js';
import { annotationProblems, MAX_ANNOTATIONS } from './annotation-rules.js';
import { EVENT_TYPE_SERVICE_ANNOTATIONS, idempotencyAnnotationProblems } from '../batch/idempotency.js';
import {
  cleanupPolicyProblems,
  enrichmentProblems,
  partitionKeyFieldsProblems,
  partitionStrategyProblems,
  retentionProblems,
  type EventTypeInput,
  type EventTypeLimits,
  type RuleResult,
} from './event-type-rules.js';
import { checkBody, MAX_AUTHORIZATION_ATTRIBUTES, Problems } from './rule-problems.js';

/** Pattern of event type names (docs/concepts.md "Event types"); the length is bounded separately, 1..255. */
export const EVENT_TYPE_NAME_PATTERN = /^[a-zA-Z][-0-9a-zA-Z_]*(\.[0-9a-zA-Z][-0-9a-zA-Z_]*)*$/;
/** Longest accepted event type name (docs/concepts.md "Event types"). */
export const MAX_EVENT_TYPE_NAME_LENGTH = 255;
/** Most items in `enrichment_strategies`, `partition_key_fields` or `ordering_key_fields`, so a record's size stays bounded (docs/security.md "Hostile input"). */
export const MAX_FIELD_LIST_ITEMS = 100;

const SCHEMA_TYPE_ALIASES = ['json_schema', 'json-schema'];

/** A string enum accepted in any case (docs/http-api.md "Requests"); `status` 400 for the enums the reference parses. */
function AnyCaseEnum<const T extends readonly string[]>(values: T, options: { status?: 400; what?: string; description?: string } = {}) {
  return Type.Unsafe<T[number]>(
    Type.String({
      'x-any-case-enum': [...values],
      ...(options.status !== undefined ? { 'x-status': options.status } : {}),
      ...(options.what !== undefined ? { 'x-messages': { 'x-any-case-enum': `has unknown ${options.what} {value}; allowed: {allowed}` } } : {}),
      description: options.description ?? `one of ${values.join(', ')} (any case)`,
    }),
  );
}

/** A list of at most {@link MAX_FIELD_LIST_ITEMS} items. */
const ListBounds = { maxItems: MAX_FIELD_LIST_ITEMS, 'x-limit': 'items per list', 'x-messages': { type: 'must be an array of strings' } };

/** Dot-separated field paths into the event: each non-empty, without empty segments. */
const FieldPaths = (description: string) =>
  Type.Array(
    Type.String({ minLength: 1, pattern: '^[^.]+(\\.[^.]+)*$', 'x-messages': { pattern: 'must be a dot-separated path without empty segments, got {value}' } }),
    { ...ListBounds, description },
  );

/** An integer of at least 1 (`default_statistic`). */
const PositiveCount = Type.Integer({ minimum: 1, 'x-messages': { minimum: 'must be an integer of at least 1', fraction: 'must be an integer of at least 1' } });

/** An authorization list (docs/security.md "Authorization: what a subject may do"): 1..{@link MAX_AUTHORIZATION_ATTRIBUTES} attributes of non-empty strings; distinct attributes are a rule ({@link duplicateAttributeProblems}). */
export const AttributeListInput = Type.Array(
  Type.Object({ data_type: Type.String({ minLength: 1 }), value: Type.String({ minLength: 1 }) }),
  {
    minItems: 1,
    maxItems: MAX_AUTHORIZATION_ATTRIBUTES,
    'x-limit': 'attributes per authorization list',
    'x-messages': { minItems: 'must contain at least one attribute', type: 'must be an array of authorization attributes' },
  },
);

/** An `annotations` or `labels` map: string values, at most {@link MAX_ANNOTATIONS} entries; key syntax and value sizes are rules (annotation-rules.ts). */
export const StringMapInput = (description: string) =>
  Type.Record(Type.String(), Type.String({ 'x-map-value': true }), {
    maxProperties: MAX_ANNOTATIONS,
    'x-limit': 'entries per map',
    'x-messages': { type: 'must be an object of string values' },
    description,
  });

/**
 * The body of `POST /event-types` and `PUT /event-types/{name}` as JSON Schema (docs/concepts.md
 * "Event types"): what the request must look like. The route table declares it and the OpenAPI document
 * shows it; {@link parseEventTypeInput} checks it.
 */
export const EventTypeInputSchema = Type.Object(
  {
    name: Type.String({
      minLength: 1,
      maxLength: MAX_EVENT_TYPE_NAME_LENGTH,
      pattern: EVENT_TYPE_NAME_PATTERN.source,
      'x-messages': { minLength: `must be between 1 and ${MAX_EVENT_TYPE_NAME_LENGTH} characters long`, maxLength: `must be between 1 and ${MAX_EVENT_TYPE_NAME_LENGTH} characters long` },
    }),
    owning_application: Type.String({ minLength: 1 }),
    category: AnyCaseEnum(CATEGORIES, { status: 400 }),
    enrichment_strategies: Type.Optional(Type.Array(AnyCaseEnum(ENRICHMENT_STRATEGIES, { what: 'enrichment strategy' }), { ...ListBounds, description: 'default []' })),
    partition_strategy: Type.Optional(AnyCaseEnum(PARTITION_STRATEGIES, { what: 'partition strategy', description: 'default random' })),
    partition_key_fields: Type.Optional(FieldPaths('the fields whose values decide the partition (required exactly for hash)')),
    compatibility_mode: Type.Optional(AnyCaseEnum(COMPATIBILITY_MODES, { status: 400, description: 'default forward' })),
    schema: Type.Object({
      type: Type.String({
        'x-any-case-enum': SCHEMA_TYPE_ALIASES,
        'x-messages': { 'x-any-case-enum': 'schema type {value} is not supported; the supported type is "json_schema" (JSON Schema draft 04)' },
      }),
      schema: Type.String({ description: 'the JSON Schema (draft-04) of the events, as JSON text' }),
    }),
    cleanup_policy: Type.Optional(AnyCaseEnum(CLEANUP_POLICIES, { status: 400, description: 'default delete' })),
    default_statistic: Type.Optional(
      Type.Object({ messages_per_minute: PositiveCount, message_size: PositiveCount, read_parallelism: PositiveCount, write_parallelism: PositiveCount }),
    ),
    options: Type.Optional(
      Type.Object({
        retention_time: Type.Optional(
          Type.Integer({
            minimum: 1,
            description: 'milliseconds (default: config eventTypes.defaultRetentionTimeMs)',
            'x-messages': { type: 'must be an integer (milliseconds)', minimum: 'must be a positive integer (milliseconds)', fraction: 'must be a positive integer (milliseconds)' },
          }),
        ),
      }),
    ),
    authorization: Type.Optional(Type.Object({ admins: AttributeListInput, readers: AttributeListInput, writers: AttributeListInput })),
    annotations: Type.Optional(StringMapInput('annotations; keys under `broker.io/` are the service\'s')),
    labels: Type.Optional(StringMapInput('labels')),
    ordering_key_fields: Type.Optional(FieldPaths('the fields that order events of a partition')),
    audience: Type.Optional(AnyCaseEnum(AUDIENCES, { what: 'audience', description: `who the events are meant for: one of ${AUDIENCES.join(', ')} (any case); optional, may change on update` })),
    event_owner_selector: Type.Optional(
      Type.Object({ type: AnyCaseEnum(['path', 'static'] as const), name: Type.String({ minLength: 1 }), value: Type.String({ minLength: 1 }) }),
    ),
  },
  { 'x-messages': { type: 'must be a JSON object' } },
);
/** A body that passed {@link EventTypeInputSchema}. */
export type EventTypeInputBody = Static<typeof EventTypeInputSchema>;

/**
 * Distinct attributes (docs/security.md "Authorization: what a subject may do"): each `{data_type, value}` at most once in a list.
 * @returns the 422 problems, one per repeated attribute
 */
export function duplicateAttributeProblems(list: readonly { data_type: string; value: string }[], field: string, p: Problems): void {
  const seen = new Set<string>();
  for (const { data_type: dataType, value } of list) {
    const key = JSON.stringify([dataType, value]);
    if (seen.has(key)) p.rule(field, `must not contain the attribute {data_type: "${dataType}", value: "${value}"} more than once`);
    seen.add(key);
  }
}

/** Lower case of an any-case enum value checked by its schema. */
function lower<T extends string>(allowed: readonly T[], value: string): T {
  const match = allowed.find((candidate) => candidate === value.toLowerCase());
  if (match === undefined) throw new Error(`"${value}" passed the schema but is not one of ${allowed.join(', ')}`);
  return match;
}

/**
 * Validates and normalizes the body of `POST /event-types` or `PUT /event-types/{name}` (docs/concepts.md
 * "Event types"; docs/http-api.md "Endpoints").
 *
 * First the shape, {@link EventTypeInputSchema}: types, required fields, the name pattern and length
 * (1..255), enum values (any case), list and map sizes, `default_statistic` (four integers ≥ 1),
 * `options.retention_time` (a positive integer), the schema type (`json_schema`/`json-schema`). A body
 * that breaks it is answered with those problems only. Then the rules: the category rules of
 * `enrichment_strategies` (and no strategy twice), `partition_strategy` (`user_defined` not for
 * `undefined`) and `cleanup_policy` (compaction not for `undefined`), `partition_key_fields` (non-empty
 * exactly for `hash`; `[]` for another strategy counts as absent, as served records carry it), the
 * retention bounds (unless `isAdmin`), distinct authorization attributes, annotation and label keys and
 * values; `audience` is one of {@link AUDIENCES} (any case; another value is 422). The schema text
 * itself and field paths against the schema are checked elsewhere (`checkFieldsAgainstSchema` of event-type-rules.ts).
 *
 * @param body the parsed JSON request body (declared properties holding `null` are removed from it)
 * @param limits installation defaults and bounds
 * @param isAdmin whether the caller is a service administrator (lifts the retention bounds)
 * @returns the normalized input, or status 400 (a non-object body, a wrong JSON type, or an invalid
 *   `category`/`compatibility_mode`/`cleanup_policy`) or 422 (any other problem) with every detail line
 */
export function parseEventTypeInput(body: unknown, limits: EventTypeLimits, isAdmin: boolean): RuleResult<EventTypeInput> {
  const checked = checkBody(EventTypeInputSchema, body);
  if (!checked.ok) return checked;
  const input = checked.value;
  const p = new Problems();

  const category: Category = lower(CATEGORIES, input.category);
  const requested = input.enrichment_strategies ?? [];
  const enrichment: EnrichmentStrategy[] = [];
  for (const item of requested) {
    const match = lower(ENRICHMENT_STRATEGIES, item);
    if (enrichment.includes(match)) p.rule('enrichment_strategies', `must not contain "${match}" more than once`);
    else enrichment.push(match);
  }
  p.addAll(enrichmentProblems(category, requested));
  const partitionStrategy: PartitionStrategy = lower(PARTITION_STRATEGIES, input.partition_strategy ?? 'random');
  p.addAll(partitionStrategyProblems(category, partitionStrategy));
  const keyFields = input.partition_key_fields;
  p.addAll(partitionKeyFieldsProblems(partitionStrategy, keyFields, keyFields !== undefined));
  const compatibilityMode: CompatibilityMode = lower(COMPATIBILITY_MODES, input.compatibility_mode ?? 'forward');
  const cleanupPolicy: CleanupPolicy = lower(CLEANUP_POLICIES, input.cleanup_policy ?? 'delete');
  p.addAll(cleanupPolicyProblems(category, cleanupPolicy));
  const retention = input.options?.retention_time;
  if (retention !== undefined) p.addAll(retentionProblems(retention, limits, isAdmin));
  const options: EventTypeOptions = { retention_time: retention ?? limits.defaultRetentionTimeMs };
  const authorization = input.authorization;
  if (authorization !== undefined) {
    duplicateAttributeProblems(authorization.admins, 'authorization.admins', p);
    duplicateAttributeProblems(authorization.readers, 'authorization.readers', p);
    duplicateAttributeProblems(authorization.writers, 'authorization.writers', p);
  }
  if (input.annotations !== undefined) {
    const annotationList = annotationProblems(input.annotations, 'annotations', EVENT_TYPE_SERVICE_ANNOTATIONS);
    p.addAll(annotationList);
    if (annotationList.length === 0) for (const line of idempotencyAnnotationProblems(input.annotations, category)) p.line(422, line);
  }
  if (input.labels !== undefined) p.addAll(annotationProblems(input.labels, 'labels'));
  const selector = input.event_owner_selector;

  if (p.list.length > 0) return p.result<EventTypeInput>(undefined, 'The event type is invalid');
  return {
    ok: true,
    value: {
      name: input.name,
      owning_application: input.owning_application,
      category,
      enrichment_strategies: enrichment,
      partition_strategy: partitionStrategy,
      partition_key_fields: partitionStrategy === 'hash' && keyFields !== undefined ? keyFields : [],
      compatibility_mode: compatibilityMode,
      schema: { type: 'json_schema', schema: input.schema.schema },
      cleanup_policy: cleanupPolicy,
      ...(input.default_statistic !== undefined ? { default_statistic: input.default_statistic } : {}),
      options,
      ...(authorization !== undefined ? { authorization } : {}),
      ...(input.annotations !== undefined ? { annotations: input.annotations } : {}),
      ...(input.labels !== undefined ? { labels: input.labels } : {}),
      ...(input.ordering_key_fields !== undefined ? { ordering_key_fields: input.ordering_key_fields } : {}),
      ...(input.audience !== undefined ? { audience: lower(AUDIENCES, input.audience) } : {}),
      ...(selector !== undefined ? { event_owner_selector: { type: lower(['path', 'static'] as const, selector.type), name: selector.name, value: selector.value } } : {}),
    },
  };
}
