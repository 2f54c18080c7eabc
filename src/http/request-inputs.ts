/**
 * The path parameters, query and headers of a request checked against its route's schemas (issue 16
 * §1.1; the route table, src/http/api/route-table.ts): compiled before the node listens, checked by the
 * pipeline before the handler runs, each value coerced from its string to the declared type. A value
 * that breaks its schema is answered 400 (a wrong type) or 422 (a broken rule) with one `Field "<name>"`
 * line per problem and the JSON pointer of each in the problem's `errors` (`in`: `path`, `query` or
 * `header`). Bodies are checked where they are read (`checkBody` of src/domain/event-type-input.ts and
 * the other readers), as publishing bodies are never parsed on the main thread.
 */
import type { Static, TObject } from '@sinclair/typebox';
import { checkInput, precompileInputs, type InputPart } from '../domain/input-check.js';
import { invalidInput } from '../errors/catalog.js';
import { ROUTES } from './api/route-table.js';
import { routeKey, type RouteSpec } from './api/route-model.js';

/** The schemas of a route's request parts (from its {@link RouteSpec}). */
export interface RouteInputs {
  readonly params?: TObject;
  /** Registered parameter name (`:id`) → the table's name (`{subscription_id}`), where they differ. */
  readonly paramNames?: Readonly<Record<string, string>>;
  readonly query?: TObject;
  readonly headers?: TObject;
}

/** A request's parts after their check: values of the declared types (absent parts are empty objects); path parameters under the table's names. */
export interface CheckedInputs {
  readonly params: Readonly<Record<string, unknown>>;
  readonly query: Readonly<Record<string, unknown>>;
  readonly headers: Readonly<Record<string, unknown>>;
}

/**
 * The schemas of the route registered as `method path` (`:param` form), compiled now; none for a route
 * the table does not describe (the node then refuses to start when it registers the API document:
 * `missingRoutes`, src/http/routes/api-docs.ts).
 * @throws Error when a schema does not compile
 */
export function routeInputs(method: string, path: string, table: readonly RouteSpec[] = ROUTES): RouteInputs {
  const key = routeKey(method, path);
  const spec = table.find((r) => routeKey(r.method, r.path) === key);
  if (spec === undefined) return {};
  const registered = [...path.matchAll(/:([A-Za-z_]+)|\*/g)].map((m) => m[1] ?? '*');
  const documented = [...spec.path.matchAll(/\{([A-Za-z_]+)\}/g)].map((m) => m[1] ?? '');
  const paramNames: Record<string, string> = {};
  registered.forEach((name, i) => {
    const table = documented[i];
    if (table !== undefined && table !== name) paramNames[name] = table;
  });
  // A `*` registration's rest of the path is no path parameter of the engine: its handler reads the path.
  // Parameters that are plain strings cannot break their schema (the engine gives every one as a string):
  // not checked, so publishing pays nothing for its `{name}`.
  const checkParams = spec.params !== undefined && !path.includes('*') && !onlyPlainStrings(spec.params);
  const inputs: RouteInputs = {
    ...(spec.params && checkParams ? { params: spec.params } : {}),
    ...(Object.keys(paramNames).length > 0 ? { paramNames } : {}),
    ...(spec.query ? { query: spec.query } : {}),
    ...(spec.headers ? { headers: spec.headers } : {}),
  };
  const parts: { schema: TObject; part: InputPart }[] = [];
  if (inputs.params) parts.push({ schema: inputs.params, part: 'path' });
  if (inputs.query) parts.push({ schema: inputs.query, part: 'query' });
  if (inputs.headers) parts.push({ schema: inputs.headers, part: 'header' });
  precompileInputs(parts);
  return inputs;
}

const EMPTY: Readonly<Record<string, unknown>> = Object.freeze({});

/** Keywords that say nothing about a value (documentation only). */
const ANNOTATIONS = new Set(['type', 'description', 'title', 'examples', 'default', 'deprecated']);

/** Whether every property of `schema` is a required string without any constraint. */
function onlyPlainStrings(schema: TObject): boolean {
  const required = new Set(schema.required ?? []);
  return Object.entries(schema.properties).every(([name, property]) => required.has(name) && property.type === 'string' && Object.keys(property).every((k) => ANNOTATIONS.has(k)));
}

/**
 * Checks a request's path parameters, query (the first value of each name) and the headers its route
 * declares (matched case-insensitively) against `inputs`.
 * @throws BrokerError 400 BAD_REQUEST or 422 UNPROCESSABLE naming each failing value
 */
export function checkRequestInputs(inputs: RouteInputs, params: Readonly<Record<string, string>>, query: URLSearchParams, headers: Readonly<Record<string, string>>): CheckedInputs {
  return {
    params: inputs.params ? checkPart(inputs.params, { ...renamed(params, inputs.paramNames) }, 'path') : renamed(params, inputs.paramNames),
    query: inputs.query ? checkPart(inputs.query, firstValues(inputs.query, query), 'query') : EMPTY,
    headers: inputs.headers ? checkPart(inputs.headers, declaredHeaders(inputs.headers, headers), 'header') : EMPTY,
  };
}

/**
 * A checked part typed by its schema: `checked` is the pipeline's value for that part, checked again
 * against `schema` (the route's own, so it passes; a cached compiled check of a small object), which
 * gives it the schema's static type. @throws BrokerError 400/422 when `schema` is not the route's and the value breaks it
 */
export function inputOf<S extends TObject>(schema: S, checked: Readonly<Record<string, unknown>>, part: 'path' | 'query' | 'header'): Static<S> {
  return checkPart(schema, { ...checked }, part);
}

function checkPart<S extends TObject>(schema: S, value: Record<string, unknown>, part: 'path' | 'query' | 'header'): Static<S> {
  const result = checkInput(schema, value, part);
  if (result.ok) return result.value;
  throw invalidInput(result.status, result.problems.map((p) => p.detail), result.problems, part);
}

/** The path parameters under the table's names (a `*` registration is the table's last parameter). */
function renamed(params: Readonly<Record<string, string>>, names: Readonly<Record<string, string>> | undefined): Readonly<Record<string, unknown>> {
  if (names === undefined) return params;
  const out: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(params)) out[names?.[name] ?? name] = value;
  return out;
}

/**
 * The declared query parameters: every value of one declared as an array (`event_type=a&event_type=b`),
 * the first value of the others; undeclared ones are ignored (WIRE.md "Conventions").
 */
function firstValues(schema: TObject, query: URLSearchParams): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, property] of Object.entries(schema.properties)) {
    if (property.type === 'array') {
      const values = query.getAll(name);
      if (values.length > 0) out[name] = values;
      continue;
    }
    const value = query.get(name);
    if (value !== null) out[name] = value;
  }
  return out;
}

/** The declared headers by their declared names (requests carry them lower case). */
function declaredHeaders(schema: TObject, headers: Readonly<Record<string, string>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(schema.properties)) {
    const value = headers[name.toLowerCase()];
    if (value !== undefined) out[name] = value;
  }
  return out;
}
