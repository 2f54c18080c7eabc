import { isJsonObject, resolveLocalRef, type JsonObject, type JsonValue } from './json-schema-walk.js';

/**
 * Bounds of a priming instance: its size does not depend on the schema's `$ref` fan-out or on
 * `minItems`/`minLength` a user declared (a schema of a few KB could otherwise describe values of
 * any size).
 */
export interface PrimingLimits {
  /** Most JSON values (objects, arrays and scalars, each counted once) in the instance. */
  readonly maxValues: number;
  /** Deepest nesting of the instance (the root is depth 0); deeper positions get `null`. */
  readonly maxDepth: number;
  /** Longest string made for `minLength`, in characters. */
  readonly maxStringLength: number;
}

/**
 * The default bounds: 5,000 values is about 8× the largest GitHub webhook payload's shape; validating
 * such an instance takes a few ms on a validator's first run and well under 1 ms afterwards.
 */
export const PRIMING_LIMITS: PrimingLimits = { maxValues: 5_000, maxDepth: 32, maxStringLength: 64 };

/**
 * Strings that pass the `format` checks of ajv-formats' fast mode (src/domain/schema/schema-compiler.ts), so
 * that a priming instance goes on past a formatted field (the validator stops at the first error).
 */
export const FORMAT_SAMPLES: Readonly<Record<string, string>> = {
  'date-time': '2026-01-01T00:00:00Z',
  'iso-date-time': '2026-01-01T00:00:00Z',
  date: '2026-01-01',
  time: '00:00:00Z',
  'iso-time': '00:00:00Z',
  duration: 'P1D',
  uri: 'https://example.com/',
  url: 'https://example.com/',
  'uri-reference': 'https://example.com/',
  'uri-template': 'https://example.com/{id}',
  email: 'user@example.com',
  hostname: 'example.com',
  ipv4: '192.0.2.1',
  ipv6: '2001:db8::1',
  uuid: '00000000-0000-4000-8000-000000000000',
  regex: 'a',
  'json-pointer': '/a',
  'relative-json-pointer': '0',
  byte: 'YQ==',
};

/**
 * A JSON value shaped like the values `schema` describes, to run a newly compiled validator over most
 * of its code before an event type's first batch (a validator's first run over real
 * values costs 10–50× its later runs, docs/decisions/0019-validators-prepared-before-the-first-batch.md
 * "Figures the code relies on" — and one run over a value of the same shape takes that cost away).
 *
 * Deterministic; valid where the schema allows it simply, not always (patterns and numeric bounds
 * other than minimum/maximum are not honoured, `oneOf`/`anyOf` take their first branch, `allOf`
 * merges its objects' properties): priming needs the value to reach deep, and the validator runs
 * until its first error. `$ref` must be local (`#...`); one that does not resolve gives `null`.
 * Bounded by `limits` whatever the schema (exponential `$ref` fan-out, recursion, huge `minItems`).
 * @param schema an effective schema (src/domain/schema/effective-schema.ts), parsed
 * @returns the instance (`null` when nothing could be made)
 */
export function primingInstance(schema: JsonObject, limits: PrimingLimits = PRIMING_LIMITS): JsonValue {
  return new PrimingWriter(schema, limits).value([schema], 0);
}

/** Writes one priming instance, counting its values against the limits. */
class PrimingWriter {
  private values = 0;

  constructor(
    private readonly root: JsonObject,
    private readonly limits: PrimingLimits,
  ) {}

  /**
   * The value for one position of the instance, which all of `schemas` apply to (a property's schemas
   * from every `allOf` part and chosen branch of its parent, say): their keywords together decide it.
   */
  value(schemas: readonly JsonObject[], depth: number): JsonValue {
    if (depth > this.limits.maxDepth || this.values >= this.limits.maxValues) return null;
    const parts = this.applied(schemas);
    this.values++;
    const enumValue = agreedEnumValue(parts);
    if (enumValue !== undefined) return structuredClone(enumValue);
    // Earlier parts win a keyword both declare (a property's own `type` over an `allOf` part's).
    const keywords = Object.assign({}, ...[...parts].reverse()) as JsonObject;
    switch (agreedType(parts) ?? typeOf(keywords)) {
      case 'object':
        return this.object(parts, depth);
      case 'array':
        return this.array(parts, depth);
      case 'string':
        return stringFor(keywords, this.limits.maxStringLength);
      case 'integer':
        return Math.ceil(numberFor(keywords));
      case 'number':
        return numberFor(keywords);
      case 'boolean':
        return true;
      default:
        return null;
    }
  }

  /**
   * The subschemas applying to a value given some that do: `$ref`s followed, `allOf` parts added, and
   * the first branch of each `oneOf`/`anyOf` (recursively; at most `maxValues` in all, so a fan-out of
   * `allOf`s stays bounded too).
   */
  private applied(schemas: readonly JsonObject[]): JsonObject[] {
    const parts = new Set<JsonObject>();
    const pending = [...schemas];
    for (let i = 0; i < pending.length && parts.size < this.limits.maxValues; i++) {
      const node = this.followRefs(pending[i] as JsonObject);
      if (node === undefined || parts.has(node)) continue;
      parts.add(node);
      if (Array.isArray(node.allOf)) pending.push(...node.allOf.filter(isJsonObject));
      const branch = firstSubschema(node.oneOf) ?? firstSubschema(node.anyOf);
      if (branch) pending.push(branch);
    }
    return [...parts];
  }

  private object(parts: readonly JsonObject[], depth: number): JsonObject {
    const propertySchemas = new Map<string, JsonObject[]>();
    const required = new Set<string>();
    for (const part of parts) {
      if (isJsonObject(part.properties)) {
        for (const [name, sub] of Object.entries(part.properties)) if (isJsonObject(sub)) propertySchemas.set(name, [...(propertySchemas.get(name) ?? []), sub]);
      }
      if (Array.isArray(part.required)) for (const name of part.required) if (typeof name === 'string') required.add(name);
    }
    // Required names no part gives a property schema for take `additionalProperties`' shape.
    const additional = parts.map((part) => part.additionalProperties).filter(isJsonObject);
    for (const name of required) if (!propertySchemas.has(name)) propertySchemas.set(name, additional);
    const out: JsonObject = {};
    for (const [name, subschemas] of propertySchemas) {
      if (this.values >= this.limits.maxValues) break;
      out[name] = this.value(subschemas, depth + 1);
    }
    return out;
  }

  private array(parts: readonly JsonObject[], depth: number): JsonValue[] {
    const tuple = parts.find((part) => Array.isArray(part.items))?.items;
    if (Array.isArray(tuple)) return tuple.filter(isJsonObject).map((item) => this.value([item], depth + 1));
    if (parts.some((part) => part.maxItems === 0)) return [];
    // One item reaches the item schema's code; more would only repeat it (and break `uniqueItems`).
    const items = parts.map((part) => part.items).filter(isJsonObject);
    return items.length > 0 ? [this.value(items, depth + 1)] : [];
  }

  /** Follows `$ref` chains (a `$ref` node's siblings are ignored, as draft-04 says); undefined when one does not resolve or they loop. */
  private followRefs(schema: JsonObject): JsonObject | undefined {
    let node = schema;
    for (let hops = 0; typeof node.$ref === 'string'; hops++) {
      if (hops > this.limits.maxDepth) return undefined;
      const resolved = resolveLocalRef(this.root, node.$ref);
      if (!resolved.ok) return undefined;
      node = resolved.schema;
    }
    return node;
  }
}

/**
 * The first value of the parts' shortest `enum` that every other `enum` lists and every declared `type`
 * allows (else that enum's first value); undefined when no part has an `enum`.
 */
function agreedEnumValue(parts: readonly JsonObject[]): JsonValue | undefined {
  const enums = parts.map((part) => part.enum).filter((e): e is JsonValue[] => Array.isArray(e) && e.length > 0);
  if (enums.length === 0) return undefined;
  const [shortest, ...others] = [...enums].sort((a, b) => a.length - b.length) as [JsonValue[], ...JsonValue[][]];
  const texts = others.map((list) => new Set(list.map((v) => JSON.stringify(v))));
  const typeLists = parts.map((part) => declaredTypes(part)).filter((types) => types.length > 0);
  const agreed = (v: JsonValue): boolean => texts.every((set) => set.has(JSON.stringify(v))) && typeLists.every((types) => types.some((type) => hasType(v, type)));
  const index = shortest.findIndex(agreed);
  return shortest[Math.max(index, 0)];
}

/** Whether a value is of a JSON Schema type. */
function hasType(value: JsonValue, type: string): boolean {
  if (type === 'null') return value === null;
  if (type === 'array') return Array.isArray(value);
  if (type === 'object') return isJsonObject(value);
  if (type === 'integer') return Number.isInteger(value);
  return typeof value === type;
}

/** The first type (not `null` when another is allowed) that every part declaring `type` allows; undefined when none declares one. */
function agreedType(parts: readonly JsonObject[]): string | undefined {
  const lists = parts.map((part) => declaredTypes(part)).filter((types) => types.length > 0);
  const [first, ...others] = lists;
  if (first === undefined) return undefined;
  const agreed = first.filter((type) => others.every((types) => types.includes(type) || (type === 'integer' && types.includes('number'))));
  const candidates = agreed.length > 0 ? agreed : first;
  return candidates.find((type) => type !== 'null') ?? candidates[0];
}

function declaredTypes(node: JsonObject): string[] {
  return Array.isArray(node.type) ? node.type.filter((t): t is string => typeof t === 'string') : typeof node.type === 'string' ? [node.type] : [];
}

function firstSubschema(list: JsonValue | undefined): JsonObject | undefined {
  return Array.isArray(list) ? list.find(isJsonObject) : undefined;
}

/** The type to make for a subschema: its first declared non-null type, else what its keywords imply. */
function typeOf(node: JsonObject): string | undefined {
  const declared = declaredTypes(node);
  const chosen = declared.find((t) => t !== 'null') ?? declared[0];
  if (chosen !== undefined) return chosen;
  if (isJsonObject(node.properties) || Array.isArray(node.required) || node.additionalProperties !== undefined) return 'object';
  if (node.items !== undefined) return 'array';
  if (typeof node.format === 'string' || node.minLength !== undefined || node.pattern !== undefined) return 'string';
  if (node.minimum !== undefined || node.maximum !== undefined) return 'number';
  return undefined;
}

function stringFor(node: JsonObject, maxLength: number): string {
  const formatted = typeof node.format === 'string' ? FORMAT_SAMPLES[node.format] : undefined;
  if (formatted !== undefined) return formatted;
  const minLength = typeof node.minLength === 'number' ? Math.min(Math.max(node.minLength, 1), maxLength) : 1;
  return 'a'.repeat(minLength);
}

/** `minimum` (past it when exclusive), else a negative `maximum` (below it when exclusive), else 0. */
function numberFor(node: JsonObject): number {
  if (typeof node.minimum === 'number') return node.minimum + (node.exclusiveMinimum === true ? 1 : 0);
  if (typeof node.maximum === 'number' && node.maximum < 0) return node.maximum - (node.exclusiveMaximum === true ? 1 : 0);
  return 0;
}
