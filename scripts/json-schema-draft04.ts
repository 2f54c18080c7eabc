/**
 * Translation of a JSON Schema draft-06/07 document to draft-04, the broker's dialect (`ajv-draft-04`,
 * no remote references): see {@link translateToDraft04}. Used for the GitHub webhook schemas of the
 * demo (scripts/github-event-types.ts). Pure.
 */
import { cloneJson, isJsonObject, type JsonObject, type JsonValue } from '../src/domain/schema/json-schema-walk.js';

/** The dialect URI set on every translated root. */
export const DRAFT_04_URI = 'http://json-schema.org/draft-04/schema#';

/** Draft-04 keywords whose value is plain data (or a number/string rule), copied unchanged. */
const DRAFT_04_VALUE_KEYWORDS = new Set([
  'title', 'description', 'default', 'multipleOf', 'maximum', 'minimum', 'maxLength', 'minLength', 'pattern',
  'maxItems', 'minItems', 'uniqueItems', 'maxProperties', 'minProperties', 'enum', 'type', 'format',
]);
const MAP_KEYWORDS = new Set(['properties', 'patternProperties', 'definitions']);
const ARRAY_KEYWORDS = new Set(['allOf', 'anyOf', 'oneOf']);
/** Positions where draft-04 itself allows a boolean instead of a schema. */
const BOOLEAN_ALLOWED = new Set(['additionalProperties', 'additionalItems']);

interface TranslationContext {
  /** `$id` (absolute or `#anchor`) → local pointer of the schema carrying it. */
  readonly ids: ReadonlyMap<string, string>;
  /** Counts of dropped keywords, when the caller wants them. */
  readonly dropped: Map<string, number> | undefined;
}

/**
 * Translates a JSON Schema draft-06/07 document to draft-04, as the broker compiles it
 * (`ajv-draft-04`, no remote references).
 *
 * Translated (same meaning):
 * - `const: v` → `enum: [v]` (beside an existing `enum`, as `allOf: [{enum: [v]}]`);
 * - numeric `exclusiveMinimum: n` → `minimum: n, exclusiveMinimum: true` (likewise `exclusiveMaximum`);
 *   when a `minimum` is also present the stricter bound wins;
 * - `if/then/else` → `allOf: [{anyOf: [{allOf: [if, then]}, {allOf: [{not: if}, else]}]}]`;
 * - `contains: S` → `allOf: [{anyOf: [{not: {type: "array"}}, {not: {items: {not: S}}}]}]`;
 * - boolean subschemas `true`/`false` → `{}`/`{not: {}}` (kept as booleans where draft-04 allows them:
 *   `additionalProperties`, `additionalItems`);
 * - `$ref` to another document or to a `$id` (`other.json#/definitions/x`, `#anchor`, `https://…/x.json`)
 *   → local `#/definitions/...`; a `$ref` that cannot be made local throws. Siblings of `$ref` are
 *   dropped (draft-07 ignores them);
 * - `$schema` removed everywhere and set to draft-04 at the root.
 *
 * Dropped (annotations, or loosening where draft-04 cannot express the rule): `$id`, `id`, `$comment`,
 * `examples`, `readOnly`, `writeOnly`, `contentMediaType`, `contentEncoding`, `propertyNames` (a
 * loosening: property names are no longer checked), `tsAdditionalProperties` and every other keyword
 * that is not draft-04 (e.g. the `ts*` TypeScript-generator hints), empty `required` arrays (invalid in draft-04).
 * @param dropped if given, receives the names of dropped keywords with their counts
 */
export function translateToDraft04(schema: JsonObject, dropped?: Map<string, number>): JsonObject {
  const ids = new Map<string, string>();
  collectIds(schema, '#', ids);
  const translated = translateSchema(schema, { ids, dropped }, '#');
  if (!isJsonObject(translated)) throw new Error('the root schema must be an object');
  return { $schema: DRAFT_04_URI, ...translated };
}

function collectIds(node: JsonValue, pointer: string, ids: Map<string, string>): void {
  if (Array.isArray(node)) {
    node.forEach((item, i) => collectIds(item, `${pointer}/${i}`, ids));
    return;
  }
  if (!isJsonObject(node)) return;
  const id = node.$id;
  if (typeof id === 'string') ids.set(id, pointer);
  for (const [key, value] of Object.entries(node)) {
    // `enum`, `const`, `default`, `examples` hold data, not schemas.
    if (key === 'enum' || key === 'const' || key === 'default' || key === 'examples') continue;
    collectIds(value, `${pointer}/${escapePointer(key)}`, ids);
  }
}

/** RFC 6901 escaping of one pointer segment. */
function escapePointer(segment: string): string {
  return segment.replaceAll('~', '~0').replaceAll('/', '~1');
}

function translateSchema(node: JsonValue, ctx: TranslationContext, position: string): JsonValue {
  if (typeof node === 'boolean') return BOOLEAN_ALLOWED.has(position) ? node : node ? {} : { not: {} };
  if (!isJsonObject(node)) throw new Error(`not a schema at ${position}: ${JSON.stringify(node)}`);
  if (typeof node.$ref === 'string') return { $ref: localRef(node.$ref, ctx) };
  const out: JsonObject = {};
  const allOf: JsonValue[] = [];
  for (const [key, value] of Object.entries(node)) {
    if (DRAFT_04_VALUE_KEYWORDS.has(key)) {
      out[key] = cloneJson(value);
    } else if (key === 'required') {
      if (Array.isArray(value) && value.length > 0) out.required = cloneJson(value);
    } else if (MAP_KEYWORDS.has(key) && isJsonObject(value)) {
      const map: JsonObject = {};
      for (const [name, sub] of Object.entries(value)) map[name] = translateSchema(sub, ctx, key);
      out[key] = map;
    } else if (ARRAY_KEYWORDS.has(key) && Array.isArray(value)) {
      out[key] = value.map((sub) => translateSchema(sub, ctx, key));
    } else if (key === 'items') {
      out.items = Array.isArray(value) ? value.map((sub) => translateSchema(sub, ctx, key)) : translateSchema(value, ctx, key);
    } else if (key === 'additionalProperties' || key === 'additionalItems' || key === 'not') {
      out[key] = translateSchema(value, ctx, key);
    } else if (key === 'dependencies' && isJsonObject(value)) {
      const deps: JsonObject = {};
      for (const [name, dep] of Object.entries(value)) deps[name] = Array.isArray(dep) ? cloneJson(dep) : translateSchema(dep, ctx, key);
      out.dependencies = deps;
    } else if (key === 'const') {
      if ('enum' in node) allOf.push({ enum: [cloneJson(value)] });
      else out.enum = [cloneJson(value)];
    } else if (key === 'exclusiveMinimum' || key === 'exclusiveMaximum') {
      translateExclusiveBound(node, key, value, out);
    } else if (key === 'if') {
      const condition = translateSchema(value, ctx, key);
      const then = 'then' in node ? translateSchema(node.then ?? null, ctx, 'then') : {};
      const otherwise = 'else' in node ? translateSchema(node.else ?? null, ctx, 'else') : {};
      allOf.push({ anyOf: [{ allOf: [condition, then] }, { allOf: [{ not: condition }, otherwise] }] });
    } else if (key === 'contains') {
      allOf.push({ anyOf: [{ not: { type: 'array' } }, { not: { items: { not: translateSchema(value, ctx, key) } } }] });
    } else if (key !== 'then' && key !== 'else') {
      // Dropped: `$schema`, `$id`, `propertyNames`, annotations, `ts*` hints, unknown keywords
      // (`then`/`else` are consumed with `if`, and dropped without it).
      ctx.dropped?.set(key, (ctx.dropped.get(key) ?? 0) + 1);
    }
  }
  if (allOf.length > 0) out.allOf = [...(Array.isArray(out.allOf) ? out.allOf : []), ...allOf];
  return out;
}

function translateExclusiveBound(node: JsonObject, key: 'exclusiveMinimum' | 'exclusiveMaximum', value: JsonValue, out: JsonObject): void {
  const boundKey = key === 'exclusiveMinimum' ? 'minimum' : 'maximum';
  if (typeof value === 'boolean') {
    out[key] = value; // already draft-04
    return;
  }
  if (typeof value !== 'number') return;
  const inclusive = node[boundKey];
  const stricter = typeof inclusive === 'number' && (key === 'exclusiveMinimum' ? inclusive > value : inclusive < value);
  if (stricter) return; // the inclusive bound (copied as is) already excludes `value`
  out[boundKey] = value;
  out[key] = true;
}

/** Rewrites a `$ref` to a local `#/...` pointer. */
function localRef(ref: string, ctx: TranslationContext): string {
  if (ref === '#' || ref.startsWith('#/')) return ref;
  const byId = ctx.ids.get(ref);
  if (byId !== undefined) return byId;
  const hash = ref.indexOf('#');
  const base = hash < 0 ? ref : ref.slice(0, hash);
  const fragment = hash < 0 ? '' : ref.slice(hash + 1);
  const baseId = ctx.ids.get(base) ?? ctx.ids.get(base + '#');
  if (baseId !== undefined) return fragment === '' ? baseId : baseId + fragment;
  // Another file of the same bundle (`common.json#/definitions/x`): its definitions are ours.
  if (fragment.startsWith('/definitions/')) return '#' + fragment;
  throw new Error(`cannot make $ref "${ref}" local`);
}
