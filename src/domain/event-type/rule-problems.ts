/**
 * Shared input-rule helpers (docs/http-api.md "Requests"): the check of a body against its schema
 * ({@link checkBody}) and the collector of what the rules after it find, each problem with the status it
 * calls for (400 malformed, 422 broken rule) and one `Field "<field>" ...` detail line. Pure: no I/O.
 */
import type { Static, TSchema } from '@sinclair/typebox';
import { checkInput, type InputProblem } from '../json/input-check.js';

/**
 * Outcome of a rule check: the validated value, or the HTTP status (400 when any problem is of the
 * malformed kind, else 422) with one detail line per problem; `errors` holds the JSON pointer of each
 * when the problems come from a schema check (src/domain/json/input-check.ts).
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
 * subscription or the administrators. Every request of a subject walks such a list, so
 * an unbounded one slows every publish and stream of the resource; 100 leaves room for any team
 * structure (a team or service attribute stands for many subjects).
 */
export const MAX_AUTHORIZATION_ATTRIBUTES = 100;

/**
 * Checks a request body against its schema (src/domain/json/input-check.ts): the value typed
 * by the schema, or the failure as a RuleResult (400 when any problem is malformed, else 422), with
 * one detail line and the JSON pointer (`errors`) of each problem.
 * @param body the parsed JSON body; declared properties holding `null` are removed from it
 */
export function checkBody<S extends TSchema>(schema: S, body: unknown): RuleResult<Static<S>> {
  const checked = checkInput(schema, body);
  if (checked.ok) return checked;
  return { ok: false, status: checked.status, details: checked.problems.map((p) => p.detail), errors: checked.problems };
}
