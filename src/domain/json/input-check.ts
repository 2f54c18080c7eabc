/**
 * Request input checked against its JSON Schema (docs/http-api.md "Requests"): the route table
 * declares every body, query, path parameter and header as a TypeBox schema, and this module compiles
 * those schemas with ajv and turns a failure into the problems the broker answers — one detail line per
 * failure in the `Field "<field>" ...` form of the reference service, with the JSON pointer of the value
 * and the status clients of the reference service expect: **400** for a value of the wrong JSON type or an enum the reference parses
 * (`x-status: 400` on the schema), **422** for every other broken rule (missing, empty, pattern, size).
 *
 * Conventions the schemas follow (docs/http-api.md "Requests"):
 * - Unknown properties are ignored (request schemas are open objects).
 * - `null` is the same as absent for a declared property (Jackson semantics of the reference): a
 *   declared property whose value is `null` is removed before checking, so a required one reads
 *   "must not be null" and an optional one takes its default.
 * - Enum values are accepted in any case: `x-any-case-enum` lists the lower-case values; the checked
 *   value is left as sent (normalizing is the reader's, e.g. `toLowerCase()`).
 *
 * Annotations read from a schema node (ajv knows them as keywords; the OpenAPI document carries them):
 * - `x-status` (400 | 422): the status of any failure of this node's own keywords;
 * - `x-messages` ({keyword: text}): the detail text (after `Field "<field>" `) for a keyword of this node,
 *   `{value}` standing for the value as JSON and `{allowed}` for an enum's values; `fraction` is the text
 *   for a number that is not an integer where one is required (422, while a non-number is 400);
 * - `x-map-value` (true): the node is the value schema of a map; details read `Field "<map>" value of key "<key>" …`;
 * - `x-limit` (text): what sets a `maxItems`/`maxProperties` bound, named in the detail.
 *
 * Pure: compiling is cached per schema object ({@link precompileInputs} compiles a route table's schemas
 * before the node listens); no I/O.
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { Static, TSchema } from '@sinclair/typebox';
import { isJsonObject } from '../schema/json-schema-walk.js';

/** The status a failed input check answers: 400 malformed, 422 a rule broken (docs/http-api.md "Errors"). */
export type InputStatus = 400 | 422;

/** One failure of an input check: its status, the JSON pointer of the value and the detail line. */
export interface InputProblem {
  readonly status: InputStatus;
  /** RFC 6901 pointer into the checked value (`/authorization/readers/0/value`; `` for the whole value). */
  readonly pointer: string;
  /** `Field "authorization.readers[0].value" must not be empty`. */
  readonly detail: string;
}

/** Outcome of {@link checkInput}: the value typed by its schema, or the problems (status 400 when any is malformed, else 422). */
export type InputResult<T> = { ok: true; value: T } | { ok: false; status: InputStatus; problems: InputProblem[] };

/** Where a checked value comes from; query, path and header values arrive as strings and are coerced. */
export type InputPart = 'body' | 'query' | 'path' | 'header';

/** Most problem lines one answer lists (a 100,000-item list of bad items answers 50 lines and a count). */
export const MAX_INPUT_PROBLEMS = 50;

/** Words for JSON types in "must be a …" details. */
const TYPE_WORDS: Readonly<Record<string, string>> = {
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'a boolean',
  object: 'an object',
  array: 'an array',
  null: 'null',
};

/**
 * The keywords request schemas add to JSON Schema (this module's header). They are OpenAPI specification
 * extensions in the served document; a JSON Schema tool that compiles the document strictly declares
 * them (e.g. `ajv.addVocabulary(INPUT_SCHEMA_EXTENSIONS)`).
 */
export const INPUT_SCHEMA_EXTENSIONS = ['x-status', 'x-messages', 'x-limit', 'x-map-value', 'x-any-case-enum'] as const;

function newAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, verbose: true, strict: true, allowUnionTypes: true, useDefaults: false });
  addFormats.default(ajv, { mode: 'fast', formats: ['uuid', 'date-time', 'uri'] });
  ajv.addKeyword({ keyword: 'x-status', schemaType: 'number' });
  ajv.addKeyword({ keyword: 'x-messages', schemaType: 'object' });
  ajv.addKeyword({ keyword: 'x-limit', schemaType: 'string' });
  ajv.addKeyword({ keyword: 'x-map-value', schemaType: 'boolean' });
  ajv.addKeyword({
    keyword: 'x-any-case-enum',
    type: 'string',
    schemaType: 'array',
    errors: false,
    validate: (allowed: readonly string[], data: string) => allowed.includes(data.toLowerCase()),
  });
  return ajv;
}

/**
 * One ajv for every part: query, path and header values are turned into numbers and booleans by
 * {@link coerceStrings} with a strict grammar first (ajv's own coercion would take `0x10`, `1e3` or ` 5`
 * as integers).
 */
const ajv = newAjv();
const compiled = new WeakMap<TSchema, ValidateFunction>();

function validatorOf(schema: TSchema): ValidateFunction {
  let validate = compiled.get(schema);
  if (validate === undefined) compiled.set(schema, (validate = ajv.compile(schema)));
  return validate;
}

/** A decimal integer as query strings write it (`-12`, `0`); nothing else is one. */
const INTEGER_TEXT = /^-?\d{1,15}$/;
/** A decimal number (`1.5`, `-2`, `3e2` is not one). */
const NUMBER_TEXT = /^-?\d{1,15}(\.\d{1,15})?$/;

/** The JSON types a schema (or any branch of its `anyOf`/`oneOf`) declares. */
function declaredTypes(schema: unknown): Set<string> {
  const out = new Set<string>();
  if (!isJsonObject(schema)) return out;
  const type = schema.type;
  if (typeof type === 'string') out.add(type);
  else if (Array.isArray(type)) for (const t of type) if (typeof t === 'string') out.add(t);
  for (const key of ['anyOf', 'oneOf']) {
    const branches = schema[key];
    if (Array.isArray(branches)) for (const branch of branches) for (const t of declaredTypes(branch)) out.add(t);
  }
  return out;
}

/**
 * Turns the string values of an object of query, path or header values into the declared numbers and
 * booleans, in place: `"10"` for an integer, `"1.5"` for a number, `"true"`/`"false"` for a boolean; any
 * other text stays a string and fails the schema as "must be an integer" (400).
 */
function coerceStrings(schema: TSchema, value: unknown): void {
  const properties: unknown = schema.properties;
  if (!isJsonObject(value) || !isJsonObject(properties)) return;
  for (const [name, text] of Object.entries(value)) {
    if (typeof text !== 'string') continue;
    const types = declaredTypes(properties[name]);
    if (types.has('string') && !types.has('integer') && !types.has('number') && !types.has('boolean')) continue;
    if (types.has('integer') && INTEGER_TEXT.test(text)) value[name] = Number(text);
    else if (types.has('number') && NUMBER_TEXT.test(text)) value[name] = Number(text);
    else if (types.has('boolean') && (text === 'true' || text === 'false')) value[name] = text === 'true';
  }
}

/**
 * Compiles schemas ahead of use (the node calls it with its route table before it listens, so no
 * request pays for a compile and a broken schema stops the start). @throws Error for an invalid schema
 */
export function precompileInputs(entries: readonly { readonly schema: TSchema; readonly part: InputPart }[]): void {
  for (const { schema } of entries) validatorOf(schema);
}

/**
 * Checks `value` against `schema` (docs/http-api.md "Requests"; the conventions of this module's header).
 * Query, path and header values (an object of strings) are coerced to the declared numbers and booleans
 * in place, with a strict grammar (decimal digits; `true`/`false`).
 * @param value a parsed JSON body, or an object of strings for the other parts; declared properties
 *   holding `null` are removed from it first (so pass a value the caller owns)
 * @returns the value typed `Static<S>`, or every problem (at most {@link MAX_INPUT_PROBLEMS} lines and one
 *   line counting the rest), status 400 when any is malformed, else 422
 */
export function checkInput<S extends TSchema>(schema: S, value: unknown, part: InputPart = 'body'): InputResult<Static<S>> {
  dropNullProperties(schema, value);
  if (part !== 'body') coerceStrings(schema, value);
  const validate = validatorOf(schema);
  if (validate(value)) return { ok: true, value: value as Static<S> };
  const problems = problemsOf(validate.errors ?? []);
  return { ok: false, status: problems.some((p) => p.status === 400) ? 400 : 422, problems };
}

/** The detail text of a check's problems: one line each (the `detail` of the answer). */
export function inputDetail(problems: readonly InputProblem[]): string {
  return problems.map((p) => p.detail).join('\n');
}

/** The problems of ajv errors, deduplicated, in order, capped at {@link MAX_INPUT_PROBLEMS}. */
function problemsOf(errors: readonly ErrorObject[]): InputProblem[] {
  const out: InputProblem[] = [];
  const seen = new Set<string>();
  let dropped = 0;
  // A list or map over its size bound is one line: what its entries break is not listed, so a huge list costs one line.
  const oversized = errors.filter((e) => e.keyword === 'maxItems' || e.keyword === 'maxProperties').map((e) => `${e.instancePath}/`);
  for (const error of errors) {
    if (oversized.some((prefix) => error.instancePath.startsWith(prefix))) continue;
    const problem = problemOf(error);
    if (problem === undefined || seen.has(problem.detail)) continue;
    seen.add(problem.detail);
    if (out.length < MAX_INPUT_PROBLEMS) out.push(problem);
    else dropped++;
  }
  if (dropped > 0) out.push({ status: out.some((p) => p.status === 400) ? 400 : 422, pointer: '', detail: `... and ${dropped} more problems` });
  return out;
}

/** One ajv error as a problem; undefined for errors that only repeat another (the `if` of a failed `then`). */
function problemOf(error: ErrorObject): InputProblem | undefined {
  const node: Record<string, unknown> = isJsonObject(error.parentSchema) ? error.parentSchema : {};
  let pointer = error.instancePath;
  const params: Record<string, unknown> = error.params;
  if (error.keyword === 'required') pointer = `${pointer}/${escapePointer(String(params.missingProperty))}`;
  if (error.keyword === 'if') return undefined;
  const messages = isJsonObject(node['x-messages']) ? node['x-messages'] : {};
  // A number that is not an integer breaks a rule (422); a value that is not a number is malformed (400).
  const fraction = error.keyword === 'type' && params.type === 'integer' && typeof error.data === 'number';
  const custom = fraction ? (messages.fraction ?? 'must be an integer') : messages[error.keyword];
  // A `required` failure's text lives on the missing property's schema when it has one.
  const requiredText = error.keyword === 'required' ? missingPropertyMessage(node, String(params.missingProperty)) : undefined;
  const text = typeof custom === 'string' ? fillMessage(custom, error) : (requiredText ?? defaultText(error, node));
  const fixed = node['x-status'];
  const status: InputStatus = fixed === 400 || fixed === 422 ? fixed : error.keyword === 'type' && !fraction ? 400 : 422;
  // A map's value names its map and key: `Field "labels" value of key "team" must be a string`.
  if (node['x-map-value'] === true && pointer !== '') {
    const cut = pointer.lastIndexOf('/');
    const key = pointer.slice(cut + 1).replace(/~1/g, '/').replace(/~0/g, '~');
    return { status, pointer, detail: `Field "${fieldOf(pointer.slice(0, cut))}" value of key ${JSON.stringify(key)} ${text}` };
  }
  const field = fieldOf(pointer);
  return { status, pointer, detail: field === '' ? `Request body ${text}` : `Field "${field}" ${text}` };
}

/** An `x-messages` text with `{value}` (the value as JSON) and `{allowed}` (an enum's values) filled in. */
function fillMessage(template: string, error: ErrorObject): string {
  const allowed = Array.isArray(error.schema) ? error.schema.map(String).join(', ') : '';
  return template.replace(/\{value\}/g, JSON.stringify(error.data) ?? '').replace(/\{allowed\}/g, allowed);
}

function missingPropertyMessage(parent: Record<string, unknown>, property: string): string | undefined {
  const properties = parent.properties;
  if (!isJsonObject(properties)) return undefined;
  const schema = properties[property];
  if (!isJsonObject(schema)) return undefined;
  const messages = schema['x-messages'];
  if (!isJsonObject(messages)) return undefined;
  const text = messages.required;
  return typeof text === 'string' ? text : undefined;
}

/** The detail text of an error when its schema node gives none. */
function defaultText(error: ErrorObject, node: Record<string, unknown>): string {
  const params: Record<string, unknown> = error.params;
  const limit = typeof node['x-limit'] === 'string' ? ` (${node['x-limit']})` : '';
  const data = error.data;
  switch (error.keyword) {
    case 'required':
      return 'must not be null';
    case 'type': {
      const types = String(params.type).split(',');
      return `must be ${types.map((t) => TYPE_WORDS[t] ?? t).join(' or ')}`;
    }
    case 'minLength':
      return params.limit === 1 ? 'must not be empty' : `must be at least ${String(params.limit)} characters long`;
    case 'maxLength':
      return `must be at most ${String(params.limit)} characters long`;
    case 'pattern':
      return `must match the pattern ${String(params.pattern)}`;
    case 'format':
      return `must be ${params.format === 'uuid' ? 'a uuid' : `a valid ${String(params.format)}`}`;
    case 'enum':
    case 'const':
    case 'x-any-case-enum': {
      const allowed = error.keyword === 'const' ? [params.allowedValue] : Array.isArray(error.schema) ? error.schema : [];
      return `has unknown value ${JSON.stringify(data)}; allowed: ${allowed.map(String).join(', ')}`;
    }
    case 'minItems':
      return params.limit === 1 ? 'must not be empty' : `must have at least ${String(params.limit)} items`;
    case 'maxItems':
      return `has ${Array.isArray(data) ? data.length : '?'} items; at most ${String(params.limit)} are allowed${limit}`;
    case 'maxProperties':
      return `has ${isJsonObject(data) ? Object.keys(data).length : '?'} entries; at most ${String(params.limit)} are allowed${limit}`;
    case 'minProperties':
      return params.limit === 1 ? 'must not be empty' : `must have at least ${String(params.limit)} entries`;
    case 'minimum':
      return `must be at least ${String(params.limit)}`;
    case 'maximum':
      return `must be at most ${String(params.limit)}`;
    case 'exclusiveMinimum':
      return `must be greater than ${String(params.limit)}`;
    case 'exclusiveMaximum':
      return `must be less than ${String(params.limit)}`;
    case 'uniqueItems':
      return `must not contain the same item more than once (items ${String(params.j)} and ${String(params.i)})`;
    case 'additionalProperties':
      return `must not have the field "${String(params.additionalProperty)}"`;
    default:
      return error.message ?? `breaks the schema keyword ${error.keyword}`;
  }
}

/** `/authorization/readers/0/value` → `authorization.readers[0].value` (the reference's field notation); `/0/offset` → `[0].offset`. */
export function fieldOf(pointer: string): string {
  if (pointer === '') return '';
  let out = '';
  for (const raw of pointer.slice(1).split('/')) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (/^\d+$/.test(segment)) out += `[${segment}]`;
    else out += out === '' ? segment : `.${segment}`;
  }
  return out;
}

function escapePointer(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

/**
 * Removes, in place, every property declared in `schema` (and in the object schemas of its declared
 * properties and array items, recursively) whose value is `null`: null and absent are the same for a
 * declared field (docs/http-api.md "Requests"; Jackson semantics of the reference service). Undeclared properties stay as sent.
 */
export function dropNullProperties(schema: TSchema, value: unknown): void {
  if (Array.isArray(value)) {
    const items: unknown = schema.items;
    if (isJsonObject(items)) for (const item of value) dropNullProperties(items as TSchema, item);
    return;
  }
  if (!isJsonObject(value)) return;
  const properties: unknown = schema.properties;
  if (isJsonObject(properties)) {
    for (const [name, sub] of Object.entries(properties)) {
      if (!Object.hasOwn(value, name)) continue;
      if (value[name] === null) delete value[name];
      else if (isJsonObject(sub)) dropNullProperties(sub as TSchema, value[name]);
    }
  }
  const additional: unknown = schema.additionalProperties ?? (isJsonObject(schema.patternProperties) ? Object.values(schema.patternProperties)[0] : undefined);
  if (isJsonObject(additional)) for (const key of Object.keys(value)) if (!isJsonObject(properties) || !Object.hasOwn(properties, key)) dropNullProperties(additional as TSchema, value[key]);
}
