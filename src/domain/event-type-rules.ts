/**
 * Validation of the JSON body of `POST /event-types` and `PUT /event-types/{name}` (spec "EventType",
 * "EventTypeStatistics", "EventOwnerSelector", "Annotations", "AuthorizationAttribute", "Authentication"
 * items 3-8 and the "Event type registry" endpoints; WIRE.md "Conventions" and "Event types").
 *
 * Pure: no I/O. Status convention (WIRE.md "Conventions"): a body that is not a JSON object, a value of the
 * wrong JSON type, or an invalid `category` / `compatibility_mode` / `cleanup_policy` is **400**; everything
 * else (missing required field, pattern, size, unknown strategy or schema type, cross-field rule) is
 * **422**. Every problem is collected, one detail line each, in the form `Field "name" ...`.
 */
import { Buffer } from 'node:buffer';
import {
  CATEGORIES,
  CLEANUP_POLICIES,
  COMPATIBILITY_MODES,
  ENRICHMENT_STRATEGIES,
  PARTITION_STRATEGIES,
  type Category,
  type CompatibilityMode,
  type EnrichmentStrategy,
  type EventOwnerSelector,
  type EventType,
  type EventTypeAuthorization,
  type EventTypeOptions,
  type EventTypeStatistics,
} from './event-type.js';
import { lookupField } from './effective-schema.js';
import { absent, parseAttributeList, Problems, readObject, readString, withinCount, type RuleProblem, type RuleResult } from './rule-problems.js';
import { isJsonObject, type JsonObject, type JsonValue } from './json-schema-walk.js';

/**
 * Installation limits used by the rules (WIRE.md "Event types": default retention 2 days, bounds 3 h .. 4 d
 * unless admin; partitions from `default_statistic` capped by an installation maximum). All values are
 * positive integers; retention values are milliseconds.
 */
export interface EventTypeLimits {
  /** Partitions of an event type without `default_statistic` (spec "Limits": 1 by default). */
  defaultPartitionCount: number;
  /** Cap on the partitions `default_statistic` may ask for. */
  maxPartitionCount: number;
  /** `options.retention_time` when not given. */
  defaultRetentionTimeMs: number;
  /** Smallest `options.retention_time` accepted from non-admins. */
  minRetentionTimeMs: number;
  /** Largest `options.retention_time` accepted from non-admins. */
  maxRetentionTimeMs: number;
}

/**
 * A validated, normalized event type body: every {@link EventType} field except the service-set ones
 * (`schema.version`, `schema.created_at`, `created_at`, `updated_at`). Enum values are lower case,
 * defaults are applied (`enrichment_strategies []`, `partition_strategy random`, `compatibility_mode
 * forward`, `cleanup_policy delete`, `options.retention_time` = the installation default) and optional
 * fields that were absent or `null` are left out. `partition_key_fields` is present only for `hash`.
 */
export type EventTypeInput = Omit<EventType, 'schema' | 'created_at' | 'updated_at'> & {
  readonly schema: { readonly type: 'json_schema'; readonly schema: string };
};

/** Re-exported from `rule-problems.ts`, where the registries' rule helpers live. */
export type { RuleProblem, RuleResult };

/** Pattern of event type names (spec "EventType"); the length bounds 1..255 come from WIRE.md. */
export const EVENT_TYPE_NAME_PATTERN = /^[a-zA-Z][-0-9a-zA-Z_]*(\.[0-9a-zA-Z][-0-9a-zA-Z_]*)*$/;
/** Longest accepted event type name (WIRE.md "Event types"). */
export const MAX_EVENT_TYPE_NAME_LENGTH = 255;
/** Annotation key prefix reserved for the service (spec "Annotations"). */
export const RESERVED_ANNOTATION_PREFIX = 'broker.io';
/** Largest annotation value in UTF-8 bytes (spec "Annotations", "Limits"). */
export const MAX_ANNOTATION_VALUE_BYTES = 1000;
/** Longest label value in characters (Kubernetes label values; the spec does not show labels' rules). */
export const MAX_LABEL_VALUE_LENGTH = 63;
/**
 * Most entries in one `annotations` or `labels` map of an event type or subscription (issue 13 §2.2;
 * the spec sets none). 100 annotations of up to 1000 bytes fit in a control-plane body many times.
 */
export const MAX_ANNOTATIONS = 100;
/** Most items in `enrichment_strategies`, `partition_key_fields` or `ordering_key_fields` (issue 13 §2.2). */
export const MAX_FIELD_LIST_ITEMS = 100;

const MAX_KEY_NAME_LENGTH = 63;
const MAX_KEY_PREFIX_LENGTH = 253;
const MAX_DNS_LABEL_LENGTH = 63;
const KEY_NAME_PATTERN = /^[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const DNS_LABEL_PATTERN = /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE_PATTERN = /^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;
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

/** An object, or `undefined` when absent (reported when required) or of another type (400). */
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
  if (category === 'undefined' && raw.length > 0) {
    p.rule(field, 'must be empty for category "undefined"');
    ok = false;
  }
  if ((category === 'data' || category === 'business') && !strategies.includes('metadata_enrichment')) {
    p.rule(field, `must contain "metadata_enrichment" for category "${category}"`);
    ok = false;
  }
  return ok ? strategies : undefined;
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
  if (!isAdmin && (raw < limits.minRetentionTimeMs || raw > limits.maxRetentionTimeMs)) {
    p.rule(field, `must be between ${limits.minRetentionTimeMs} and ${limits.maxRetentionTimeMs} milliseconds`);
    return undefined;
  }
  return { retention_time: raw };
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

/** Problems of one annotation or label key (spec "Annotations"); `serviceKeys` may use the reserved prefix. */
function keyProblems(key: string, field: string, p: Problems, serviceKeys: ReadonlySet<string>): void {
  const at = `Field "${field}" key ${JSON.stringify(key)}`;
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (name.length === 0 || name.length > MAX_KEY_NAME_LENGTH) {
    p.line(422, `${at} must have a name of 1 to ${MAX_KEY_NAME_LENGTH} characters`);
  } else if (!KEY_NAME_PATTERN.test(name)) {
    p.line(422, `${at} must have a name that begins and ends with an alphanumeric character and contains only alphanumerics, "-", "_" and "."`);
  }
  if (prefix === undefined) return;
  if (prefix.length === 0 || prefix.length > MAX_KEY_PREFIX_LENGTH) {
    p.line(422, `${at} must have a prefix of 1 to ${MAX_KEY_PREFIX_LENGTH} characters`);
  } else if (!prefix.split('.').every((label) => label.length <= MAX_DNS_LABEL_LENGTH && DNS_LABEL_PATTERN.test(label))) {
    p.line(422, `${at} must have a prefix that is a DNS subdomain (lower-case RFC 1123 labels separated by dots)`);
  } else if (prefix === RESERVED_ANNOTATION_PREFIX && !serviceKeys.has(key)) {
    p.line(422, `${at} uses the prefix "${RESERVED_ANNOTATION_PREFIX}/", which is reserved for the service`);
  }
}

/**
 * Every problem of an `annotations` or `labels` map (spec "Annotations"; labels follow the same key syntax,
 * and their values follow Kubernetes label values). `null`/absent is fine. A non-object map or a non-string
 * value is 400; more than {@link MAX_ANNOTATIONS} entries is one 422 (the entries are then not looked at); a bad key (name ≤ 63 characters, alphanumeric at both ends, `-_.` inside; optional prefix
 * that is a lower-case DNS subdomain ≤ 253 characters, not the reserved `broker.io`), an annotation value
 * over 1000 UTF-8 bytes, or a label value over 63 characters or not alphanumeric at both ends is 422.
 * @param serviceKeys keys under the reserved prefix that this resource may carry (the service's own
 *   annotations, e.g. the dead-letter settings of subscriptions); their values are the caller's to check
 */
export function annotationProblems(map: unknown, field: 'annotations' | 'labels', serviceKeys: ReadonlySet<string> = new Set()): RuleProblem[] {
  const p = new Problems();
  if (map === undefined || map === null) return p.list;
  if (!isJsonObject(map)) {
    p.malformed(field, 'must be an object of string values');
    return p.list;
  }
  const entries = Object.entries(map);
  if (entries.length > MAX_ANNOTATIONS) {
    p.rule(field, `has ${entries.length} entries; at most ${MAX_ANNOTATIONS} are allowed (entries per map)`);
    return p.list;
  }
  for (const [key, value] of entries) {
    keyProblems(key, field, p, serviceKeys);
    const at = `Field "${field}" value of key ${JSON.stringify(key)}`;
    if (typeof value !== 'string') {
      p.line(400, `${at} must be a string`);
    } else if (field === 'annotations') {
      if (Buffer.byteLength(value, 'utf8') > MAX_ANNOTATION_VALUE_BYTES) p.line(422, `${at} must be at most ${MAX_ANNOTATION_VALUE_BYTES} bytes (UTF-8)`);
    } else if (value.length > MAX_LABEL_VALUE_LENGTH) {
      p.line(422, `${at} must be at most ${MAX_LABEL_VALUE_LENGTH} characters`);
    } else if (!LABEL_VALUE_PATTERN.test(value)) {
      p.line(422, `${at} must be empty or begin and end with an alphanumeric character and contain only alphanumerics, "-", "_" and "."`);
    }
  }
  return p.list;
}

/**
 * Validates an `annotations` or `labels` map (spec "Annotations"): the detail lines of
 * {@link annotationProblems}, empty when the map is fine or absent. Callers that need the 400/422
 * distinction use {@link annotationProblems}.
 */
export function validateAnnotations(map: unknown, field: 'annotations' | 'labels'): string[] {
  return annotationProblems(map, field).map((problem) => problem.detail);
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
 * text itself and field paths against the schema are checked elsewhere (see {@link checkFieldsAgainstSchema}).
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
  if (partitionStrategy === 'user_defined' && category === 'undefined') {
    p.rule('partition_strategy', '"user_defined" is not available for category "undefined"');
  }
  const keyFields = parseFieldPaths(body.partition_key_fields, 'partition_key_fields', p);
  if (partitionStrategy === 'hash') {
    if (absent(body.partition_key_fields)) p.rule('partition_key_fields', 'must not be null when partition_strategy is "hash"');
    else if (keyFields !== undefined && keyFields.length === 0) p.rule('partition_key_fields', 'must not be empty when partition_strategy is "hash"');
  } else if (partitionStrategy !== undefined && keyFields !== undefined && keyFields.length > 0) {
    p.rule('partition_key_fields', `must be absent when partition_strategy is "${partitionStrategy}"; it is only used with "hash"`);
  }
  const compatibilityMode = readEnum(body.compatibility_mode, 'compatibility_mode', COMPATIBILITY_MODES, p, 400, 'forward');
  const schema = parseSchema(body.schema, p);
  const cleanupPolicy = readEnum(body.cleanup_policy, 'cleanup_policy', CLEANUP_POLICIES, p, 400, 'delete');
  if (cleanupPolicy !== undefined && cleanupPolicy !== 'delete' && category === 'undefined') {
    p.rule('cleanup_policy', `"${cleanupPolicy}" is not available for category "undefined"`);
  }
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

/**
 * Number of partitions of a new event type (WIRE.md "Event types"; spec "Limits", "EventType" rule 4):
 * max(read_parallelism, write_parallelism) of `default_statistic`, at least 1, capped by
 * `limits.maxPartitionCount`; without a statistic, `limits.defaultPartitionCount`.
 */
export function partitionCountOf(input: EventTypeInput, limits: EventTypeLimits): number {
  const statistic = input.default_statistic;
  if (statistic === undefined) return limits.defaultPartitionCount;
  const wanted = Math.max(statistic.read_parallelism, statistic.write_parallelism, 1);
  return Math.max(1, Math.min(wanted, limits.maxPartitionCount));
}

/**
 * Checks the field paths of an event type against its EFFECTIVE schema (spec "EventType": partition_key_fields
 * and ordering_key_fields), using {@link lookupField}:
 * - each `partition_key_fields` entry must be declared and required at every step; for category `data`
 *   the path is relative to `data` (looked up as `data.<path>`), otherwise over the whole event;
 * - each `ordering_key_fields` entry must be declared, over the whole event (metadata included).
 * @param effectiveSchema the result of `buildEffectiveSchema` for this input
 * @returns 422 detail lines; empty when every path is fine
 */
export function checkFieldsAgainstSchema(input: EventTypeInput, effectiveSchema: JsonObject): string[] {
  const details: string[] = [];
  for (const path of input.partition_key_fields ?? []) {
    const found = lookupField(effectiveSchema, input.category === 'data' ? `data.${path}` : path);
    const where = input.category === 'data' ? ' (relative to "data")' : '';
    if (!found.declared) details.push(`Field "partition_key_fields" entry "${path}" is not declared in the schema${where}`);
    else if (!found.required) details.push(`Field "partition_key_fields" entry "${path}" must be a required field of the schema${where}`);
  }
  for (const path of input.ordering_key_fields ?? []) {
    if (!lookupField(effectiveSchema, path).declared) details.push(`Field "ordering_key_fields" entry "${path}" is not declared in the schema`);
  }
  return details;
}

const STRICTNESS: Readonly<Record<CompatibilityMode, number>> = { none: 0, forward: 1, compatible: 2 };

function sameStrings(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  const left = a ?? [];
  const right = b ?? [];
  return left.length === right.length && left.every((item, i) => item === right[i]);
}

function sameStatistic(a: EventTypeStatistics, b: EventTypeStatistics): boolean {
  return (
    a.messages_per_minute === b.messages_per_minute &&
    a.message_size === b.message_size &&
    a.read_parallelism === b.read_parallelism &&
    a.write_parallelism === b.write_parallelism
  );
}

function sameSelector(a: EventOwnerSelector, b: EventOwnerSelector): boolean {
  return a.type === b.type && a.name === b.name && a.value === b.value;
}

/**
 * The update rules of `PUT /event-types/{name}` (spec "EventType" field rules, "Compatibility modes",
 * "Authentication" item 8, the registry table; WIRE.md "Event types"), given the stored record and a body
 * already accepted by {@link parseEventTypeInput}:
 * - `name` and `category` cannot change; `owning_application`, `enrichment_strategies` (within the category
 *   rules), `options`, annotations, labels and `ordering_key_fields` may;
 * - `partition_strategy` may change only away from `random`; `partition_key_fields` only together with it;
 * - `cleanup_policy` may stay or go from `delete` to `compact_and_delete`;
 * - `default_statistic`, when present in `next`, must equal the stored one (the caller keeps the stored one
 *   when `next` has none);
 * - `compatibility_mode` may only become stricter (none → forward → compatible) unless `isAdmin`;
 * - `authorization` and `event_owner_selector`, once set, cannot be removed; the selector cannot change.
 * @param isAdmin whether the caller is an administrator of the event type (or of the service)
 * @returns 422 detail lines; empty when the update is allowed
 */
export function checkUpdate(existing: EventType, next: EventTypeInput, isAdmin: boolean): string[] {
  const details: string[] = [];
  if (next.name !== existing.name) details.push('Changing the event type name is not allowed');
  if (next.category !== existing.category) details.push(`Field "category" cannot be changed (from "${existing.category}" to "${next.category}")`);
  const strategyChanged = next.partition_strategy !== existing.partition_strategy;
  if (strategyChanged && existing.partition_strategy !== 'random') {
    details.push(`Field "partition_strategy" can only be changed from "random", not from "${existing.partition_strategy}"`);
  }
  if (!strategyChanged && !sameStrings(existing.partition_key_fields, next.partition_key_fields)) {
    details.push('Field "partition_key_fields" can only be changed together with partition_strategy');
  }
  if (next.cleanup_policy !== existing.cleanup_policy && !(existing.cleanup_policy === 'delete' && next.cleanup_policy === 'compact_and_delete')) {
    details.push(`Field "cleanup_policy" can only be changed from "delete" to "compact_and_delete", not from "${existing.cleanup_policy}" to "${next.cleanup_policy}"`);
  }
  if (next.default_statistic !== undefined && (existing.default_statistic === undefined || !sameStatistic(existing.default_statistic, next.default_statistic))) {
    details.push('Field "default_statistic" cannot be changed');
  }
  if (!isAdmin && STRICTNESS[next.compatibility_mode] < STRICTNESS[existing.compatibility_mode]) {
    details.push(`Field "compatibility_mode" can only become stricter (none, forward, compatible), not change from "${existing.compatibility_mode}" to "${next.compatibility_mode}"`);
  }
  if (existing.authorization !== undefined && next.authorization === undefined) details.push('Field "authorization" cannot be removed once set');
  if (existing.event_owner_selector !== undefined) {
    if (next.event_owner_selector === undefined) details.push('Field "event_owner_selector" cannot be removed once set');
    else if (!sameSelector(existing.event_owner_selector, next.event_owner_selector)) details.push('Field "event_owner_selector" cannot be changed once set');
  }
  return details;
}
