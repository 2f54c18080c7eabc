/**
 * Shared input-rule helpers of the registries (WIRE.md "Conventions"): problems are collected with the
 * status they call for (400 malformed JSON type, 422 broken rule) and one `Field "<field>" ...` detail
 * line each. Pure: no I/O.
 */
import type { AuthorizationAttribute } from './event-type.js';
import { isJsonObject, type JsonObject, type JsonValue } from './json-schema-walk.js';
import type { Static, TSchema } from '@sinclair/typebox';
import { checkInput, type InputProblem } from './input-check.js';

/**
 * Outcome of a rule check: the validated value, or the HTTP status (400 when any problem is of the
 * malformed kind, else 422) with one detail line per problem; `errors` holds the JSON pointer of each
 * when the problems come from a schema check (src/domain/input-check.ts).
 */
export type RuleResult<T> = { ok: true; value: T } | { ok: false; status: 400 | 422; details: string[]; errors?: readonly InputProblem[] };

/** One problem found by a rule: the status it calls for (400 malformed, 422 rule broken) and its detail line. */
export interface RuleProblem {
  readonly status: 400 | 422;
  readonly detail: string;
}

/** Collector of problems; `detail` lines are prefixed with `Field "<field>"`. */
export class Problems {
  readonly list: RuleProblem[] = [];

  /** A malformed value (wrong JSON type, invalid parsed enum): 400. */
  malformed(field: string, text: string): void {
    this.list.push({ status: 400, detail: `Field "${field}" ${text}` });
  }

  /** A broken rule: 422. */
  rule(field: string, text: string): void {
    this.list.push({ status: 422, detail: `Field "${field}" ${text}` });
  }

  /** A line that does not follow the `Field "x" ...` shape (for example about a map key). */
  line(status: 400 | 422, detail: string): void {
    this.list.push({ status, detail });
  }

  missing(field: string): void {
    this.rule(field, 'must not be null');
  }

  addAll(problems: readonly RuleProblem[]): void {
    this.list.push(...problems);
  }

  /** The value when nothing was found, else 400 (any malformed problem) or 422 with every detail line (`fallback` when there is none). */
  result<T>(value: T | undefined, fallback: string): RuleResult<T> {
    if (this.list.length === 0 && value !== undefined) return { ok: true, value };
    const details = this.list.map((problem) => problem.detail);
    return { ok: false, status: this.list.some((problem) => problem.status === 400) ? 400 : 422, details: details.length > 0 ? details : [fallback] };
  }
}

/**
 * Most attributes in one authorization list: `admins`, `readers` or `writers` of an event type, a
 * subscription or the administrators (issue 13 §2.2). Every request of a subject walks such a list, so
 * an unbounded one slows every publish and stream of the resource; 100 leaves room for any team
 * structure (a team or service attribute stands for many subjects).
 */
export const MAX_AUTHORIZATION_ATTRIBUTES = 100;

/**
 * Refuses a list longer than `max` with one 422 problem naming the limit, before any item is looked at
 * (so a list of 100,000 items costs one line, not 100,000): `Field "event_types" has 100000 items; at
 * most 100 are allowed (subscriptions.maxPartitions)`.
 * @param limit what sets `max`: a config key or a constant's meaning, named in the detail
 * @returns true when the list is within the limit
 */
export function withinCount(list: readonly unknown[], field: string, max: number, limit: string, p: Problems): boolean {
  if (list.length <= max) return true;
  p.rule(field, `has ${list.length} items; at most ${max} are allowed (${limit})`);
  return false;
}

/** `null` and absence are the same for optional fields (Jackson semantics of the reference service). */
export function absent(value: JsonValue | undefined): value is null | undefined {
  return value === undefined || value === null;
}

/** A JSON string, or `undefined` (after reporting) when absent or of another type. */
export function readString(value: JsonValue | undefined, field: string, p: Problems, opts: { required: boolean; nonEmpty: boolean }): string | undefined {
  if (absent(value)) {
    if (opts.required) p.missing(field);
    return undefined;
  }
  if (typeof value !== 'string') {
    p.malformed(field, 'must be a string');
    return undefined;
  }
  if (opts.nonEmpty && value.length === 0) {
    p.rule(field, 'must not be empty');
    return undefined;
  }
  return value;
}

/** A JSON object, or `undefined` (after reporting) when absent or of another type. */
export function readObject(value: JsonValue | undefined, field: string, p: Problems, required: boolean): JsonObject | undefined {
  if (absent(value)) {
    if (required) p.missing(field);
    return undefined;
  }
  if (!isJsonObject(value)) {
    p.malformed(field, 'must be an object');
    return undefined;
  }
  return value;
}

/**
 * An authorization attribute list (spec "AuthorizationAttribute"): a non-empty array of at most
 * {@link MAX_AUTHORIZATION_ATTRIBUTES} `{data_type, value}` with non-empty strings, each attribute at
 * most once (422), wrong JSON types 400.
 */
export function parseAttributeList(value: JsonValue | undefined, field: string, p: Problems): AuthorizationAttribute[] | undefined {
  if (absent(value)) {
    p.missing(field);
    return undefined;
  }
  if (!Array.isArray(value)) {
    p.malformed(field, 'must be an array of authorization attributes');
    return undefined;
  }
  if (value.length === 0) {
    p.rule(field, 'must contain at least one attribute');
    return undefined;
  }
  if (!withinCount(value, field, MAX_AUTHORIZATION_ATTRIBUTES, 'attributes per authorization list', p)) return undefined;
  const attributes: AuthorizationAttribute[] = [];
  const seen = new Set<string>();
  let ok = true;
  for (const [i, item] of value.entries()) {
    const at = `${field}[${i}]`;
    const object = readObject(item, at, p, true);
    if (object === undefined) {
      ok = false;
      continue;
    }
    const dataType = readString(object.data_type, `${at}.data_type`, p, { required: true, nonEmpty: true });
    const attributeValue = readString(object.value, `${at}.value`, p, { required: true, nonEmpty: true });
    if (dataType === undefined || attributeValue === undefined) {
      ok = false;
      continue;
    }
    const key = JSON.stringify([dataType, attributeValue]);
    if (seen.has(key)) {
      p.rule(field, `must not contain the attribute {data_type: "${dataType}", value: "${attributeValue}"} more than once`);
      ok = false;
      continue;
    }
    seen.add(key);
    attributes.push({ data_type: dataType, value: attributeValue });
  }
  return ok ? attributes : undefined;
}


/**
 * Checks a request body against its schema (src/domain/input-check.ts; issue 16 §1.1): the value typed
 * by the schema, or the failure as a RuleResult (400 when any problem is malformed, else 422), with
 * one detail line and the JSON pointer (`errors`) of each problem.
 * @param body the parsed JSON body; declared properties holding `null` are removed from it
 */
export function checkBody<S extends TSchema>(schema: S, body: unknown): RuleResult<Static<S>> {
  const checked = checkInput(schema, body);
  if (checked.ok) return checked;
  return { ok: false, status: checked.status, details: checked.problems.map((p) => p.detail), errors: checked.problems };
}
