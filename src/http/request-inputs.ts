/**
 * The path parameters, query and headers of a request checked against its route's schemas (the route's
 * declaration, src/http/api/route-model.ts): compiled when the route is registered, before the node
 * listens, checked by the pipeline before the handler runs, each value coerced from its string to the
 * declared type. A value that breaks its schema is answered 400 (a wrong type) or 422 (a broken rule)
 * with one `Field "<name>"` line per problem and the JSON pointer of each in the problem's `errors`
 * (`in`: `path`, `query` or `header`; docs/http-api.md). Bodies are checked where they are read
 * (`checkBody` of src/domain/event-type/event-type-input.ts and the other readers), as publishing bodies are never
 * parsed on the main thread.
 */
import type { Static, TObject } from '@sinclair/typebox';
import { checkInput, precompileInputs, type InputPart } from '../domain/json/input-check.js';
import { invalidInput } from '../errors/catalog.js';
import type { RouteSpec } from './api/route-model.js';

/** The schemas of a route's request parts that the pipeline checks (from its {@link RouteSpec}). */
export interface RouteInputs {
  readonly params?: TObject;
  readonly query?: TObject;
  readonly headers?: TObject;
}

/** A request's parts after their check: values of the declared types (absent parts are empty objects). */
export interface CheckedInputs {
  readonly params: Readonly<Record<string, unknown>>;
  readonly query: Readonly<Record<string, unknown>>;
  readonly headers: Readonly<Record<string, unknown>>;
}

/**
 * The schemas of `spec`'s request parts, compiled now.
 * @throws Error when a schema does not compile
 */
export function routeInputs(spec: Pick<RouteSpec, 'params' | 'query' | 'headers' | 'restOfPath'>): RouteInputs {
  // A rest-of-path parameter is no path parameter of the engine: its handler reads the path.
  // Parameters that are plain strings cannot break their schema (the engine gives every one as a string):
  // not checked, so publishing pays nothing for its `{name}`.
  const checkParams = spec.params !== undefined && spec.restOfPath !== true && !onlyPlainStrings(spec.params);
  const inputs: RouteInputs = {
    ...(spec.params && checkParams ? { params: spec.params } : {}),
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
    params: inputs.params ? checkPart(inputs.params, { ...params }, 'path') : params,
    query: inputs.query ? checkPart(inputs.query, firstValues(inputs.query, query), 'query') : EMPTY,
    headers: inputs.headers ? checkPart(inputs.headers, declaredHeaders(inputs.headers, headers), 'header') : EMPTY,
  };
}

function checkPart<S extends TObject>(schema: S, value: Record<string, unknown>, part: 'path' | 'query' | 'header'): Static<S> {
  const result = checkInput(schema, value, part);
  if (result.ok) return result.value;
  throw invalidInput(result.status, result.problems.map((p) => p.detail), result.problems, part);
}

/**
 * The declared query parameters: every value of one declared as an array (`event_type=a&event_type=b`),
 * the first value of the others; undeclared ones are ignored (docs/http-api.md).
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
