/**
 * The rules of event types that a schema of the request body cannot say (docs/concepts.md "Event types",
 * "Schema versions"; docs/security.md "Authorization: what a subject may do"): fields that depend on the category or on each other, bounds that depend on the caller or on
 * the installation, field paths against the effective schema, and what an update may change. Each is a
 * small function returning 422 problems (or detail lines); the shape of the body (JSON types, required
 * fields, enums, patterns, sizes) is read by `event-type-input.ts`, which calls these. Pure: no I/O.
 */
import type { Category, CompatibilityMode, EventOwnerSelector, EventType, EventTypeStatistics, PartitionStrategy, CleanupPolicy } from './event-type.js';
import { lookupField } from '../schema/effective-schema.js';
import { Problems, type RuleProblem, type RuleResult } from './rule-problems.js';
import type { JsonObject } from '../schema/json-schema-walk.js';

/**
 * Installation limits used by the rules (docs/concepts.md "Event types": default retention 2 days, bounds 3 h .. 4 d
 * unless admin; partitions from `default_statistic` capped by an installation maximum). All values are
 * positive integers; retention values are milliseconds.
 */
export interface EventTypeLimits {
  /** Partitions of an event type without `default_statistic` (1 by default). */
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
 * fields that were absent or `null` are left out. `partition_key_fields` is `[]` unless the strategy is `hash`.
 */
export type EventTypeInput = Omit<EventType, 'schema' | 'created_at' | 'updated_at'> & {
  readonly schema: { readonly type: 'json_schema'; readonly schema: string };
};

/** Re-exported from `rule-problems.ts`, where the registries' rule helpers live. */
export type { RuleProblem, RuleResult };

/**
 * Category rules of `enrichment_strategies` (docs/concepts.md "Categories"): empty for category `undefined`, and
 * containing `metadata_enrichment` for `data` and `business`.
 * @param requested the strategies as sent (any case; unknown names are the caller's to report)
 */
export function enrichmentProblems(category: Category | undefined, requested: readonly string[]): RuleProblem[] {
  const p = new Problems();
  const field = 'enrichment_strategies';
  if (category === 'undefined' && requested.length > 0) p.rule(field, 'must be empty for category "undefined"');
  if ((category === 'data' || category === 'business') && !requested.some((item) => item.toLowerCase() === 'metadata_enrichment')) {
    p.rule(field, `must contain "metadata_enrichment" for category "${category}"`);
  }
  return p.list;
}

/** `partition_strategy` `user_defined` is not available for category `undefined`, whose events carry no `metadata` (docs/concepts.md "Categories"). */
export function partitionStrategyProblems(category: Category | undefined, strategy: PartitionStrategy | undefined): RuleProblem[] {
  const p = new Problems();
  if (strategy === 'user_defined' && category === 'undefined') p.rule('partition_strategy', '"user_defined" is not available for category "undefined"');
  return p.list;
}

/**
 * `partition_key_fields` goes with `hash` (docs/concepts.md "Partitions"): required and non-empty for `hash`, absent
 * (or empty) for the other strategies.
 * @param keyFields the well-formed paths, or undefined when absent or malformed
 * @param sent whether the body has `partition_key_fields` (not absent, not `null`)
 */
export function partitionKeyFieldsProblems(strategy: PartitionStrategy | undefined, keyFields: readonly string[] | undefined, sent: boolean): RuleProblem[] {
  const p = new Problems();
  const field = 'partition_key_fields';
  if (strategy === 'hash') {
    if (!sent) p.rule(field, 'must not be null when partition_strategy is "hash"');
    else if (keyFields !== undefined && keyFields.length === 0) p.rule(field, 'must not be empty when partition_strategy is "hash"');
  } else if (strategy !== undefined && keyFields !== undefined && keyFields.length > 0) {
    p.rule(field, `must be absent when partition_strategy is "${strategy}"; it is only used with "hash"`);
  }
  return p.list;
}

/** Compaction (`cleanup_policy` other than `delete`) is not available for category `undefined`, whose events carry no compaction key (docs/concepts.md "Retention and compaction"). */
export function cleanupPolicyProblems(category: Category | undefined, policy: CleanupPolicy | undefined): RuleProblem[] {
  const p = new Problems();
  if (policy !== undefined && policy !== 'delete' && category === 'undefined') p.rule('cleanup_policy', `"${policy}" is not available for category "undefined"`);
  return p.list;
}

/**
 * `options.retention_time` within the installation's bounds unless the caller is an administrator
 * (docs/concepts.md "Event types": 3 h .. 4 d by default).
 * @param retentionMs a positive integer of milliseconds
 */
export function retentionProblems(retentionMs: number, limits: EventTypeLimits, isAdmin: boolean): RuleProblem[] {
  const p = new Problems();
  if (!isAdmin && (retentionMs < limits.minRetentionTimeMs || retentionMs > limits.maxRetentionTimeMs)) {
    p.rule('options.retention_time', `must be between ${limits.minRetentionTimeMs} and ${limits.maxRetentionTimeMs} milliseconds`);
  }
  return p.list;
}

/**
 * Number of partitions of a new event type (docs/concepts.md "Partitions"):
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
 * Checks the field paths of an event type against its EFFECTIVE schema (partition_key_fields and
 * ordering_key_fields; docs/concepts.md "Partitions"), using {@link lookupField}:
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
 * The update rules of `PUT /event-types/{name}` (docs/concepts.md "Event types", "Schema
 * versions"; docs/security.md "Authorization: what a subject may do"), given the stored record and a body
 * already accepted by `parseEventTypeInput` (event-type-input.ts):
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
