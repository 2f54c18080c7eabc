/**
 * Equality of parsed JSON values as schema comparison needs it (src/domain/schema/schema-diff.ts): deep
 * equality ignoring object key order, set equality of arrays, and a canonical text. Pure.
 */
import { isJsonObject, type JsonObject, type JsonValue } from '../schema/json-schema-walk.js';

/** Deep equality of JSON values; object key order is ignored, array order is not. */
export function jsonEqual(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => jsonEqual(item, b[i]));
  }
  if (!isJsonObject(a) || !isJsonObject(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && jsonEqual(own(a, key), own(b, key)));
}

/** The object's own value at `key` (never an inherited one such as `constructor`). */
export function own(object: JsonObject, key: string): JsonValue | undefined {
  return Object.hasOwn(object, key) ? object[key] : undefined;
}

/**
 * Equality of two arrays as sets of JSON values (non-arrays compare with {@link jsonEqual}). Linear in
 * the values' size (each value becomes its canonical text once), so a large `enum` cannot make a
 * schema update quadratic on the main thread.
 */
export function sameSet(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  if (!Array.isArray(a) || !Array.isArray(b)) return jsonEqual(a, b);
  const left = new Set(a.map(canonicalJson));
  const right = new Set(b.map(canonicalJson));
  return left.size === right.size && [...left].every((text) => right.has(text));
}

/** JSON text with object keys sorted: equal for values {@link jsonEqual} calls equal. */
export function canonicalJson(value: JsonValue): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (!isJsonObject(value)) return JSON.stringify(value);
  const keys = Object.keys(value).sort();
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key] ?? null)}`).join(',')}}`;
}
