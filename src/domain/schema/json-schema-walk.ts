/**
 * Traversal of JSON Schema draft-04 documents: visits every subschema position (properties,
 * patternProperties, additionalProperties, items, additionalItems, definitions, dependencies,
 * allOf/anyOf/oneOf, not). Used by the effective-schema builder, the schema guard and schema evolution.
 */

export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject;
/** A parsed JSON object. */
export interface JsonObject {
  [key: string]: JsonValue;
}

/** Whether a value is a JSON object (not null, not an array). */
export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The keywords whose value is a map of name → subschema. */
export const SCHEMA_MAP_KEYWORDS = ['properties', 'patternProperties', 'definitions'] as const;
/** The keywords whose value is one subschema. */
export const SCHEMA_SINGLE_KEYWORDS = ['additionalProperties', 'additionalItems', 'not'] as const;
/** The keywords whose value is an array of subschemas. */
export const SCHEMA_ARRAY_KEYWORDS = ['allOf', 'anyOf', 'oneOf'] as const;

/**
 * Calls `visit` for `schema` and every nested subschema, depth first, with the JSON pointer of each.
 * `visit` may mutate the object it is given (the walk reads children after the call).
 */
export function walkSchema(schema: JsonValue, visit: (node: JsonObject, pointer: string) => void, pointer = '#'): void {
  if (!isJsonObject(schema)) return;
  visit(schema, pointer);
  for (const keyword of SCHEMA_MAP_KEYWORDS) {
    const map = schema[keyword];
    if (isJsonObject(map)) for (const [name, sub] of Object.entries(map)) walkSchema(sub, visit, `${pointer}/${keyword}/${escapePointer(name)}`);
  }
  for (const keyword of SCHEMA_SINGLE_KEYWORDS) walkSchema(schema[keyword] ?? null, visit, `${pointer}/${keyword}`);
  for (const keyword of SCHEMA_ARRAY_KEYWORDS) {
    const list = schema[keyword];
    if (Array.isArray(list)) list.forEach((sub, i) => walkSchema(sub, visit, `${pointer}/${keyword}/${i}`));
  }
  const items = schema.items;
  if (Array.isArray(items)) items.forEach((sub, i) => walkSchema(sub, visit, `${pointer}/items/${i}`));
  else walkSchema(items ?? null, visit, `${pointer}/items`);
  const dependencies = schema.dependencies;
  if (isJsonObject(dependencies)) {
    for (const [name, dep] of Object.entries(dependencies)) if (isJsonObject(dep)) walkSchema(dep, visit, `${pointer}/dependencies/${escapePointer(name)}`);
  }
}

/**
 * The subschema a local `$ref` (`#` or `#/...`, percent- and `~`-escaped JSON pointer) points at in
 * `root`, or why it does not resolve (the text of the problem, naming the `$ref`). Used by the schema
 * cost analysis and by the priming instance of a new validator.
 */
export function resolveLocalRef(root: JsonObject, ref: string): { readonly ok: true; readonly schema: JsonObject } | { readonly ok: false; readonly problem: string } {
  let target: JsonValue = root;
  const pointer = ref === '#' ? '' : ref.startsWith('#/') ? ref.slice(2) : undefined;
  if (pointer === undefined) return { ok: false, problem: `$ref ${JSON.stringify(ref)} is not a local reference` };
  if (pointer !== '') {
    for (const raw of pointer.split('/')) {
      let segment: string;
      try {
        segment = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
      } catch {
        return { ok: false, problem: `$ref ${JSON.stringify(ref)} is not a valid JSON pointer` };
      }
      target = Array.isArray(target) ? (target[Number(segment)] ?? null) : isJsonObject(target) && Object.hasOwn(target, segment) ? (target[segment] ?? null) : null;
    }
  }
  if (!isJsonObject(target)) return { ok: false, problem: `$ref ${JSON.stringify(ref)} does not point at a subschema of this document` };
  return { ok: true, schema: target };
}

function escapePointer(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

/** Deep copy of a JSON value (schemas are small; structuredClone keeps types). */
export function cloneJson<T extends JsonValue>(value: T): T {
  return structuredClone(value);
}
