import RE2 from 're2';
import type { ErrorObject } from 'ajv';
import { isJsonObject, walkSchema, type JsonObject, type JsonValue } from './json-schema-walk.js';
import { createSchemaCompiler, type SchemaCompiler } from './schema-compiler.js';
import { keywordBoundProblem, type SchemaCostLimits } from './schema-cost.js';

/**
 * Admission checks for a submitted event type schema (docs/concepts.md "Schema versions": an
 * invalid schema is rejected, the root must be an object schema and remote `$ref` URLs are rejected). The schema is untrusted input, so the checks run cheapest and most
 * protective first: size before parsing, an iterative depth check before any recursive walk, a
 * subschema count before per-subschema work, and only then ajv's meta-schema validation and RE2.
 */

/** Deepest nesting of arrays/objects accepted in a schema document (the root object is level 1). */
export const MAX_SCHEMA_DEPTH = 64;
/** Most subschemas (the root included) a schema may have. */
export const MAX_SUBSCHEMAS = 10_000;

/** Options of {@link guardSchema}. */
export interface SchemaGuardOptions {
  /** Largest accepted schema text, in UTF-8 bytes. */
  readonly maxSchemaBytes: number;
  /** `enum` and `uniqueItems` bounds (default: `SCHEMA_COST_LIMITS` of src/domain/schema/schema-cost.ts). */
  readonly costLimits?: SchemaCostLimits;
}

/** Result of {@link guardSchema}: the parsed schema, or why it is refused (a 422 problem detail). */
export type SchemaGuardResult = { ok: true; schema: JsonObject } | { ok: false; reason: string };

/** A subschema of the document with its JSON pointer (`#`, `#/properties/a`, ...). */
interface Subschema {
  readonly node: JsonObject;
  readonly pointer: string;
}

/**
 * Parses and checks a submitted schema (`schema.schema` of an EventType, an escaped JSON string).
 *
 * Refuses, with a human-readable reason naming the JSON pointer of the problem, when:
 * - the text is longer than `options.maxSchemaBytes` UTF-8 bytes (checked before parsing);
 * - it is not valid JSON, or not a JSON object;
 * - the document nests deeper than {@link MAX_SCHEMA_DEPTH} levels (checked iteratively);
 * - it has more than {@link MAX_SUBSCHEMAS} subschemas;
 * - an `enum` lists more values, or a `uniqueItems` array of non-scalar items may hold more items, than
 *   the budget of src/domain/schema/schema-cost.ts allows (checked before the meta-schema, whose own
 *   `uniqueItems` over `enum` compares every pair);
 * - `$schema` names anything but draft-04, or the schema does not validate against the draft-04
 *   meta-schema (the first ajv error is reported, e.g. `#/type must be equal to one of ...`);
 * - the root `type`, if present, is not exactly `"object"`;
 * - a `$ref` is not local (`#` or `#/...`), or an `id` is an absolute URI (a scheme or `://`);
 * - a `pattern` or a `patternProperties` key cannot be compiled by RE2 (lookarounds, backreferences).
 *
 * Pure: no I/O; never throws. Its cost grows with the text (the meta-schema check most), so the broker
 * runs it in a worker under `eventTypes.schemaCompileTimeoutMs`, never on the main thread, so a costly schema cannot stall
 * every request the node serves.
 */
export function guardSchema(text: string, options: SchemaGuardOptions): SchemaGuardResult {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > options.maxSchemaBytes) return refuse(`the schema is ${bytes} bytes long, more than the limit of ${options.maxSchemaBytes} bytes`);
  const parsed = parseJson(text);
  if (!parsed.ok) return parsed;
  const schema = parsed.value;
  if (!isJsonObject(schema)) return refuse(`the schema must be a JSON object, not ${describeJsonType(schema)}`);
  const tooDeep = findNestingBeyond(schema, MAX_SCHEMA_DEPTH);
  if (tooDeep !== undefined) return refuse(`${tooDeep}: the schema nests deeper than ${MAX_SCHEMA_DEPTH} levels`);
  const subschemas = collectSubschemas(schema);
  if (subschemas.length > MAX_SUBSCHEMAS) return refuse(`the schema has ${subschemas.length} subschemas, more than the limit of ${MAX_SUBSCHEMAS}`);
  const problem =
    keywordBoundProblem(schema, options.costLimits) ??
    checkMetaSchema(schema) ??
    checkRootType(schema) ??
    firstProblem(subschemas, checkReference) ??
    firstProblem(subschemas, checkId) ??
    firstProblem(subschemas, checkPatterns) ??
    firstProblem(subschemas, checkInheritedNames);
  return problem === undefined ? { ok: true, schema } : refuse(problem);
}

function refuse(reason: string): { ok: false; reason: string } {
  return { ok: false, reason };
}

function parseJson(text: string): { ok: true; value: JsonValue } | { ok: false; reason: string } {
  try {
    return { ok: true, value: JSON.parse(text) as JsonValue };
  } catch (error) {
    return refuse(`the schema is not valid JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
}

function describeJsonType(value: JsonValue): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

/** One open container of the depth check: its remaining children and where it is. */
interface OpenContainer {
  readonly children: Iterator<[string, JsonValue]>;
  readonly pointer: string;
}

/**
 * Pointer of the first array/object nested deeper than `maxDepth` (the root is level 1), or
 * undefined. Iterative with one frame per open container, so memory is bounded by `maxDepth` and a
 * hostile 100,000-level document cannot overflow the call stack.
 */
function findNestingBeyond(root: JsonValue, maxDepth: number): string | undefined {
  const open: OpenContainer[] = [{ children: childrenOf(root), pointer: '#' }];
  for (let top = open.at(-1); top !== undefined; top = open.at(-1)) {
    const next = top.children.next();
    if (next.done === true) {
      open.pop();
      continue;
    }
    const [key, value] = next.value;
    if (typeof value !== 'object' || value === null) continue;
    const pointer = `${top.pointer}/${escapePointerSegment(key)}`;
    if (open.length + 1 > maxDepth) return pointer;
    open.push({ children: childrenOf(value), pointer });
  }
  return undefined;
}

function* childrenOf(value: JsonValue): Generator<[string, JsonValue]> {
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) yield [String(index), item];
  } else if (isJsonObject(value)) {
    yield* Object.entries(value);
  }
}

/** Every subschema with its pointer (recursive, so only after the depth check). */
function collectSubschemas(schema: JsonObject): Subschema[] {
  const subschemas: Subschema[] = [];
  walkSchema(schema, (node, pointer) => subschemas.push({ node, pointer }));
  return subschemas;
}

function firstProblem(subschemas: readonly Subschema[], check: (subschema: Subschema) => string | undefined): string | undefined {
  for (const subschema of subschemas) {
    const problem = check(subschema);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/** The `$schema` values naming draft-04 (the only dialect the broker speaks). */
const DRAFT_04_URIS: ReadonlySet<JsonValue> = new Set(['http://json-schema.org/draft-04/schema#', 'http://json-schema.org/draft-04/schema']);

let metaSchemaValidator: SchemaCompiler | undefined;

/** ajv's draft-04 instance, created once (it compiles the meta-schema on first use). */
function metaSchemaCompiler(): SchemaCompiler {
  metaSchemaValidator ??= createSchemaCompiler();
  return metaSchemaValidator;
}

/** Validates against the draft-04 meta-schema; the first error with its location, or undefined. */
function checkMetaSchema(schema: JsonObject): string | undefined {
  if (schema.$schema !== undefined && !DRAFT_04_URIS.has(schema.$schema)) {
    return `#/$schema: only JSON Schema draft-04 ("http://json-schema.org/draft-04/schema#") is supported, got ${JSON.stringify(schema.$schema)}`;
  }
  const ajv = metaSchemaCompiler();
  try {
    if (ajv.validateSchema(schema) === true) return undefined;
  } catch (error) {
    return `the schema cannot be checked against the draft-04 meta-schema: ${error instanceof Error ? error.message : String(error)}`;
  }
  return `the schema is not valid JSON Schema draft-04: ${describeMetaSchemaError(ajv.errors?.[0])}`;
}

function describeMetaSchemaError(error: ErrorObject | undefined): string {
  if (error === undefined) return 'it does not match the meta-schema';
  const where = '#' + error.instancePath;
  const message = error.message ?? 'is invalid';
  const allowed: unknown = error.keyword === 'enum' ? error.params.allowedValues : undefined;
  return Array.isArray(allowed) ? `${where} ${message}: ${allowed.map((v) => JSON.stringify(v)).join(', ')}` : `${where} ${message}`;
}

/** The root must be an object schema: `type`, when present, is exactly `"object"`. */
function checkRootType(schema: JsonObject): string | undefined {
  if (schema.type === undefined || schema.type === 'object') return undefined;
  return `#/type: the root of the schema must be an object schema (type "object"), got ${JSON.stringify(schema.type)}`;
}

/** `$ref` must be local: `#` or a pointer `#/...` into the same document. */
function checkReference({ node, pointer }: Subschema): string | undefined {
  const ref = node.$ref;
  if (ref === undefined) return undefined;
  if (typeof ref !== 'string') return `${pointer}/$ref: "$ref" must be a string`;
  if (ref === '#' || ref.startsWith('#/')) return undefined;
  return `${pointer}/$ref: only local references ("#" or "#/...") are allowed, got ${JSON.stringify(ref)}`;
}

/** A URL scheme (RFC 3986 `scheme ":"`) at the start of a string. */
const URI_SCHEME = /^[a-z][a-z0-9+.-]*:/i;

/** `id` must not move the resolution base to an absolute URI. */
function checkId({ node, pointer }: Subschema): string | undefined {
  const id = node.id;
  if (typeof id !== 'string' || !(URI_SCHEME.test(id) || id.includes('://'))) return undefined;
  return `${pointer}/id: "id" must not be an absolute URI (it changes the resolution base), got ${JSON.stringify(id)}`;
}

/** `pattern` and `patternProperties` keys must compile on RE2 (no lookarounds, no backreferences). */
function checkPatterns({ node, pointer }: Subschema): string | undefined {
  if (typeof node.pattern === 'string') {
    const problem = re2Problem(node.pattern);
    if (problem !== undefined) return `${pointer}/pattern: ${problem}`;
  }
  if (isJsonObject(node.patternProperties)) {
    for (const key of Object.keys(node.patternProperties)) {
      const problem = re2Problem(key);
      if (problem !== undefined) return `${pointer}/patternProperties/${escapePointerSegment(key)}: ${problem}`;
    }
  }
  return undefined;
}

/**
 * Field names that every JavaScript object inherits (`constructor`, `toString`, `__proto__`, ...) are
 * refused in `properties` and `required`: the validator reads fields as plain properties (ajv's
 * `ownProperties` option would fix it but cost a third of the publish throughput on large schemas), so
 * such a field would count as present when absent.
 */
function checkInheritedNames({ node, pointer }: Subschema): string | undefined {
  const names = [...(isJsonObject(node.properties) ? Object.keys(node.properties) : []), ...(Array.isArray(node.required) ? node.required.filter((n): n is string => typeof n === 'string') : [])];
  const inherited = names.find((name) => name in Object.prototype);
  if (inherited === undefined) return undefined;
  return `${pointer}: the field name ${JSON.stringify(inherited)} is not supported: every JavaScript object inherits a member of that name, so the broker could not tell whether an event has it`;
}

function re2Problem(pattern: string): string | undefined {
  try {
    new RE2(pattern, 'u');
    return undefined;
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    return `the regular expression ${JSON.stringify(pattern)} is not supported (RE2 syntax only: no lookarounds or backreferences): ${why}`;
  }
}

/** RFC 6901 escaping of one pointer segment. */
function escapePointerSegment(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}
