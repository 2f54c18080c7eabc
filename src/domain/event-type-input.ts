/**
 * Reading the JSON body of `POST /event-types` and `PUT /event-types/{name}` (spec "EventType",
 * "EventTypeStatistics", "EventOwnerSelector", "Annotations", "AuthorizationAttribute", "Authentication"
 * items 3-8 and the "Event type registry" endpoints; WIRE.md "Conventions" and "Event types"): JSON
 * types, required fields, enums, patterns and sizes, then the rules a schema cannot say
 * (event-type-rules.ts, annotation-rules.ts), into a normalized {@link EventTypeInput}.
 *
 * Pure: no I/O. Status convention (WIRE.md "Conventions"): a body that is not a JSON object, a value of the
 * wrong JSON type, or an invalid `category` / `compatibility_mode` / `cleanup_policy` is **400**; everything
 * else (missing required field, pattern, size, unknown strategy or schema type, cross-field rule) is
 * **422**. Every problem is collected, one detail line each, in the form `Field "name" ...`.
 */
import {
  CATEGORIES,
  CLEANUP_POLICIES,
  COMPATIBILITY_MODES,
  ENRICHMENT_STRATEGIES,
  PARTITION_STRATEGIES,
  type Category,
  type EnrichmentStrategy,
  type EventOwnerSelector,
  type EventTypeAuthorization,
  type EventTypeOptions,
  type EventTypeStatistics,
} from './event-type.js';
import { annotationProblems } from './annotation-rules.js';
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
import { absent, parseAttributeList, Problems, readObject, readString, withinCount } from './rule-problems.js';
import { isJsonObject, type JsonValue } from './json-schema-walk.js';

/** Pattern of event type names (spec "EventType"); the length bounds 1..255 come from WIRE.md. */
export const EVENT_TYPE_NAME_PATTERN = /^[a-zA-Z][-0-9a-zA-Z_]*(\.[0-9a-zA-Z][-0-9a-zA-Z_]*)*$/;
/** Longest accepted event type name (WIRE.md "Event types"). */
export const MAX_EVENT_TYPE_NAME_LENGTH = 255;
/** Most items in `enrichment_strategies`, `partition_key_fields` or `ordering_key_fields` (issue 13 §2.2). */
export const MAX_FIELD_LIST_ITEMS = 100;

const SCHEMA_TYPE_ALIASES = ['json_schema', 'json-schema'];

/** True for the schema types the registry accepts (`json_schema`, also written `json-schema`; any case). */
export function isSupportedSchemaType(type: string): boolean {
  return SCHEMA_TYPE_ALIASES.includes(type.toLowerCase());
}

/**
 * An enum value, matched case-insensitively and returned lower case. Absent → `fallback` (or a
 * "must not be null" problem when there is none); unknown → a problem of `invalidStatus`.
 */
function readEnum<T extends string>(
  value: JsonValue | undefined,
  field: string,
  allowed: readonly T[],
  p: Problems,
  invalidStatus: 400 | 422,
  fallback: T | undefined,
  what = 'value',
): T | undefined {
  if (absent(value)) {
    if (fallback === undefined) p.missing(field);
    return fallback;
  }
  if (typeof value !== 'string') {
    p.malformed(field, 'must be a string');
    return undefined;
  }
  const match = allowed.find((candidate) => candidate === value.toLowerCase());
  if (match === undefined) {
    const text = `has unknown ${what} "${value}"; allowed: ${allowed.join(', ')}`;
    if (invalidStatus === 400) p.malformed(field, text);
    else p.rule(field, text);
  }
  return match;
}

/** An array of at most {@link MAX_FIELD_LIST_ITEMS} strings (wrong types are 400, more items 422), or `undefined` when absent or malformed. */
function readStringArray(value: JsonValue | undefined, field: string, p: Problems): string[] | undefined {
  if (absent(value)) return undefined;
  if (!Array.isArray(value)) {
    p.malformed(field, 'must be an array of strings');
    return undefined;
  }
  if (!withinCount(value, field, MAX_FIELD_LIST_ITEMS, 'items per list', p)) return undefined;
  const out: string[] = [];
  let wellTyped = true;
  for (const [i, item] of value.entries()) {
    if (typeof item === 'string') out.push(item);
    else {
      p.malformed(`${field}[${i}]`, 'must be a string');
      wellTyped = false;
    }
  }
  return wellTyped ? out : undefined;
}

/** An integer ≥ `min` (non-numbers are 400, other failures 422), or `undefined`. */
function readInteger(value: JsonValue | undefined, field: string, p: Problems, min: number): number | undefined {
  if (absent(value)) {
    p.missing(field);
    return undefined;
  }
  if (typeof value !== 'number') {
    p.malformed(field, 'must be an integer');
    return undefined;
  }
  if (!Number.isSafeInteger(value) || value < min) {
    p.rule(field, `must be an integer of at least ${min}`);
    return undefined;
  }
  return value;
}

/** The event type name: 1..{@link MAX_EVENT_TYPE_NAME_LENGTH} characters matching {@link EVENT_TYPE_NAME_PATTERN} (422 otherwise), or `undefined`. */
function parseName(value: JsonValue | undefined, p: Problems): string | undefined {
  const name = readString(value, 'name', p, { required: true, nonEmpty: false });
  if (name === undefined) return undefined;
  let ok = true;
  if (name.length < 1 || name.length > MAX_EVENT_TYPE_NAME_LENGTH) {
    p.rule('name', `must be between 1 and ${MAX_EVENT_TYPE_NAME_LENGTH} characters long`);
    ok = false;
  }
  if (name.length > 0 && !EVENT_TYPE_NAME_PATTERN.test(name)) {
    p.rule('name', `must match the pattern ${EVENT_TYPE_NAME_PATTERN.source}`);
    ok = false;
  }
  return ok ? name : undefined;
}

function parseEnrichment(value: JsonValue | undefined, category: Category | undefined, p: Problems): EnrichmentStrategy[] | undefined {
  const field = 'enrichment_strategies';
  const raw = absent(value) ? [] : readStringArray(value, field, p);
  if (raw === undefined) return undefined;
  const strategies: EnrichmentStrategy[] = [];
  let ok = true;
  for (const item of raw) {
    const match = ENRICHMENT_STRATEGIES.find((candidate) => candidate === item.toLowerCase());
    if (match === undefined) {
      p.rule(field, `has unknown enrichment strategy "${item}"; allowed: ${ENRICHMENT_STRATEGIES.join(', ')}`);
      ok = false;
    } else if (strategies.includes(match)) {
      p.rule(field, `must not contain "${match}" more than once`);
      ok = false;
    } else strategies.push(match);
  }
  const ruleProblems = enrichmentProblems(category, raw);
  p.addAll(ruleProblems);
  return ok && ruleProblems.length === 0 ? strategies : undefined;
}

/** Dot-separated field paths: each non-empty, without empty segments. */
function parseFieldPaths(value: JsonValue | undefined, field: string, p: Problems): string[] | undefined {
  const paths = readStringArray(value, field, p);
  if (paths === undefined) return undefined;
  let ok = true;
  for (const [i, path] of paths.entries()) {
    if (path.length === 0) {
      p.rule(`${field}[${i}]`, 'must not be empty');
      ok = false;
    } else if (path.split('.').some((segment) => segment.length === 0)) {
      p.rule(`${field}[${i}]`, `must be a dot-separated path without empty segments, got "${path}"`);
      ok = false;
    }
  }
  return ok ? paths : undefined;
}

function parseSchema(value: JsonValue | undefined, p: Problems): { type: 'json_schema'; schema: string } | undefined {
  const object = readObject(value, 'schema', p, true);
  if (object === undefined) return undefined;
  const type = readString(object.type, 'schema.type', p, { required: true, nonEmpty: false });
  const schema = readString(object.schema, 'schema.schema', p, { required: true, nonEmpty: false });
  if (type !== undefined && !isSupportedSchemaType(type)) {
    p.rule('schema.type', `schema type "${type}" is not supported; the supported type is "json_schema" (JSON Schema draft 04)`);
    return undefined;
  }
  if (type === undefined || schema === undefined) return undefined;
  return { type: 'json_schema', schema };
}

function parseStatistic(value: JsonValue | undefined, p: Problems): EventTypeStatistics | undefined {
  const object = readObject(value, 'default_statistic', p, false);
  if (object === undefined) return undefined;
  const messagesPerMinute = readInteger(object.messages_per_minute, 'default_statistic.messages_per_minute', p, 1);
  const messageSize = readInteger(object.message_size, 'default_statistic.message_size', p, 1);
  const readParallelism = readInteger(object.read_parallelism, 'default_statistic.read_parallelism', p, 1);
  const writeParallelism = readInteger(object.write_parallelism, 'default_statistic.write_parallelism', p, 1);
  if (messagesPerMinute === undefined || messageSize === undefined || readParallelism === undefined || writeParallelism === undefined) return undefined;
  return { messages_per_minute: messagesPerMinute, message_size: messageSize, read_parallelism: readParallelism, write_parallelism: writeParallelism };
}

function parseOptions(value: JsonValue | undefined, limits: EventTypeLimits, isAdmin: boolean, p: Problems): EventTypeOptions | undefined {
  const fallback = { retention_time: limits.defaultRetentionTimeMs };
  if (absent(value)) return fallback;
  const object = readObject(value, 'options', p, false);
  if (object === undefined) return undefined;
  const raw = object.retention_time;
  if (absent(raw)) return fallback;
  const field = 'options.retention_time';
  if (typeof raw !== 'number') {
    p.malformed(field, 'must be an integer (milliseconds)');
    return undefined;
  }
  if (!Number.isSafeInteger(raw) || raw < 1) {
    p.rule(field, 'must be a positive integer (milliseconds)');
    return undefined;
  }
  const ruleProblems = retentionProblems(raw, limits, isAdmin);
  p.addAll(ruleProblems);
  return ruleProblems.length === 0 ? { retention_time: raw } : undefined;
}

function parseAuthorization(value: JsonValue | undefined, p: Problems): EventTypeAuthorization | undefined {
  const object = readObject(value, 'authorization', p, false);
  if (object === undefined) return undefined;
  const admins = parseAttributeList(object.admins, 'authorization.admins', p);
  const readers = parseAttributeList(object.readers, 'authorization.readers', p);
  const writers = parseAttributeList(object.writers, 'authorization.writers', p);
  if (admins === undefined || readers === undefined || writers === undefined) return undefined;
  return { admins, readers, writers };
}

function parseOwnerSelector(value: JsonValue | undefined, p: Problems): EventOwnerSelector | undefined {
  const object = readObject(value, 'event_owner_selector', p, false);
  if (object === undefined) return undefined;
  const type = readEnum(object.type, 'event_owner_selector.type', ['path', 'static'] as const, p, 422, undefined);
  const name = readString(object.name, 'event_owner_selector.name', p, { required: true, nonEmpty: true });
  const selectorValue = readString(object.value, 'event_owner_selector.value', p, { required: true, nonEmpty: true });
  if (type === undefined || name === undefined || selectorValue === undefined) return undefined;
  return { type, name, value: selectorValue };
}

function parseStringMap(value: JsonValue | undefined, field: 'annotations' | 'labels', p: Problems): Record<string, string> | undefined {
  if (absent(value)) return undefined;
  const problems = annotationProblems(value, field);
  p.addAll(problems);
  if (problems.length > 0 || !isJsonObject(value)) return undefined;
  const out: Record<string, string> = {};
  for (const [key, item] of Object.entries(value)) if (typeof item === 'string') out[key] = item;
  return out;
}

/**
 * Validates and normalizes the body of `POST /event-types` or `PUT /event-types/{name}` (spec "EventType"
 * and its sub-records, "Authentication" items 3-8; WIRE.md "Conventions", "Event types").
 *
 * Checks types, required fields, the name pattern and length (1..255), enum values (case-insensitive),
 * the category rules of `enrichment_strategies`, `partition_strategy` (`user_defined` not for `undefined`)
 * and `cleanup_policy` (compaction not for `undefined`), `partition_key_fields` (non-empty exactly for
 * `hash`), the schema type (`json_schema`/`json-schema` only), `default_statistic` (four integers ≥ 1),
 * `options.retention_time` (within the limits unless `isAdmin`), `authorization` (three non-empty lists of
 * distinct attributes), annotations, labels, `ordering_key_fields` and `event_owner_selector`. The schema
 * text itself and field paths against the schema are checked elsewhere (`checkFieldsAgainstSchema` of
 * event-type-rules.ts, which also holds the cross-field rules called here).
 *
 * @param body the parsed JSON request body
 * @param limits installation defaults and bounds
 * @param isAdmin whether the caller is a service administrator (lifts the retention bounds)
 * @returns the normalized input, or status 400 (a non-object body, a wrong JSON type, or an invalid
 *   `category`/`compatibility_mode`/`cleanup_policy`) or 422 (any other problem) with every detail line
 */
export function parseEventTypeInput(body: unknown, limits: EventTypeLimits, isAdmin: boolean): RuleResult<EventTypeInput> {
  if (!isJsonObject(body)) return { ok: false, status: 400, details: ['Request body must be a JSON object'] };
  const p = new Problems();

  const name = parseName(body.name, p);
  const owningApplication = readString(body.owning_application, 'owning_application', p, { required: true, nonEmpty: true });
  const category = readEnum(body.category, 'category', CATEGORIES, p, 400, undefined);
  const enrichment = parseEnrichment(body.enrichment_strategies, category, p);
  const partitionStrategy = readEnum(body.partition_strategy, 'partition_strategy', PARTITION_STRATEGIES, p, 422, 'random', 'partition strategy');
  p.addAll(partitionStrategyProblems(category, partitionStrategy));
  const keyFields = parseFieldPaths(body.partition_key_fields, 'partition_key_fields', p);
  p.addAll(partitionKeyFieldsProblems(partitionStrategy, keyFields, !absent(body.partition_key_fields)));
  const compatibilityMode = readEnum(body.compatibility_mode, 'compatibility_mode', COMPATIBILITY_MODES, p, 400, 'forward');
  const schema = parseSchema(body.schema, p);
  const cleanupPolicy = readEnum(body.cleanup_policy, 'cleanup_policy', CLEANUP_POLICIES, p, 400, 'delete');
  p.addAll(cleanupPolicyProblems(category, cleanupPolicy));
  const statistic = parseStatistic(body.default_statistic, p);
  const options = parseOptions(body.options, limits, isAdmin, p);
  const authorization = parseAuthorization(body.authorization, p);
  const annotations = parseStringMap(body.annotations, 'annotations', p);
  const labels = parseStringMap(body.labels, 'labels', p);
  const orderingKeyFields = parseFieldPaths(body.ordering_key_fields, 'ordering_key_fields', p);
  const ownerSelector = parseOwnerSelector(body.event_owner_selector, p);

  if (
    p.list.length > 0 ||
    name === undefined ||
    owningApplication === undefined ||
    category === undefined ||
    enrichment === undefined ||
    partitionStrategy === undefined ||
    compatibilityMode === undefined ||
    schema === undefined ||
    cleanupPolicy === undefined ||
    options === undefined
  ) {
    const details = p.list.map((problem) => problem.detail);
    return { ok: false, status: p.list.some((problem) => problem.status === 400) ? 400 : 422, details: details.length > 0 ? details : ['The event type is invalid'] };
  }
  return {
    ok: true,
    value: {
      name,
      owning_application: owningApplication,
      category,
      enrichment_strategies: enrichment,
      partition_strategy: partitionStrategy,
      ...(partitionStrategy === 'hash' && keyFields !== undefined ? { partition_key_fields: keyFields } : {}),
      compatibility_mode: compatibilityMode,
      schema,
      cleanup_policy: cleanupPolicy,
      ...(statistic !== undefined ? { default_statistic: statistic } : {}),
      options,
      ...(authorization !== undefined ? { authorization } : {}),
      ...(annotations !== undefined ? { annotations } : {}),
      ...(labels !== undefined ? { labels } : {}),
      ...(orderingKeyFields !== undefined ? { ordering_key_fields: orderingKeyFields } : {}),
      ...(ownerSelector !== undefined ? { event_owner_selector: ownerSelector } : {}),
    },
  };
}
