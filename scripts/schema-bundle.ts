/**
 * Cutting a translated schema bundle into self-contained documents, one per definition, and stating
 * implied required paths at the root (used by scripts/github-event-types.ts for the webhook events).
 * Pure: works on parsed JSON, the inputs are not changed (except by {@link hoistRequiredPath}, on purpose).
 */
import { cloneJson, isJsonObject, type JsonObject, type JsonValue } from '../src/domain/schema/json-schema-walk.js';
import { DRAFT_04_URI } from './json-schema-draft04.js';

const DEFINITION_REF = /^#\/definitions\/([^/]+)/;

/** One JSON pointer segment, URI-decoded and RFC 6901-unescaped. */
export function decodePointerSegment(segment: string): string {
  return decodeURIComponent(segment).replaceAll('~1', '/').replaceAll('~0', '~');
}

function collectRefs(node: JsonValue, into: Set<string>): void {
  if (Array.isArray(node)) for (const item of node) collectRefs(item, into);
  else if (isJsonObject(node)) {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') into.add(value);
      else if (key !== 'enum' && key !== 'default') collectRefs(value, into);
    }
  }
}

/**
 * The self-contained schema of one definition of a translated bundle: that definition at the root,
 * plus the definitions it reaches transitively under `definitions`. The root is made an object schema
 * (`type: "object"` beside a `oneOf` of objects).
 */
export function extractDefinition(bundleDefinitions: JsonObject, rootName: string): JsonObject {
  const rootSchema = bundleDefinitions[rootName];
  if (!isJsonObject(rootSchema)) throw new Error(`no definition "${rootName}"`);
  const reached = new Map<string, JsonValue>();
  const queue: JsonValue[] = [rootSchema];
  while (queue.length > 0) {
    const refs = new Set<string>();
    collectRefs(queue.pop() ?? null, refs);
    for (const ref of refs) {
      const match = DEFINITION_REF.exec(ref);
      if (!match?.[1]) throw new Error(`unexpected $ref "${ref}" in "${rootName}"`);
      const name = decodePointerSegment(match[1]);
      if (reached.has(name)) continue;
      const definition = bundleDefinitions[name];
      if (definition === undefined) throw new Error(`dangling $ref "${ref}" in "${rootName}"`);
      reached.set(name, definition);
      queue.push(definition);
    }
  }
  const root = cloneJson(rootSchema);
  if (root.type === undefined) root.type = 'object';
  else if (root.type !== 'object') throw new Error(`"${rootName}" is not an object schema`);
  const definitions: JsonObject = {};
  for (const name of [...reached.keys()].sort()) definitions[name] = cloneJson(reached.get(name) ?? null);
  return { $schema: DRAFT_04_URI, ...root, ...(reached.size > 0 ? { definitions } : {}) };
}

/** Follows local `#/definitions/x` references until a schema that is not a `$ref` (`{}` for a cycle or another pointer). */
function resolve(node: JsonValue, definitions: JsonObject): JsonValue {
  let current = node;
  const seen = new Set<string>();
  while (isJsonObject(current) && typeof current.$ref === 'string') {
    const ref = current.$ref;
    if (seen.has(ref)) return {};
    seen.add(ref);
    const match = DEFINITION_REF.exec(ref);
    if (!match?.[1] || ref !== match[0]) return {};
    current = definitions[decodePointerSegment(match[1])] ?? {};
  }
  return current;
}

/**
 * Whether every instance valid against `node` has the dotted `path` present (following `$ref`,
 * `allOf` (any member), `oneOf`/`anyOf` (every member), `required` + `properties`). Conservative.
 */
function requiresPath(node: JsonValue, path: readonly string[], definitions: JsonObject, depth = 0): boolean {
  if (path.length === 0) return true;
  if (depth > 32) return false;
  const schema = resolve(node, definitions);
  if (!isJsonObject(schema)) return false;
  const [head, ...rest] = path;
  if (head === undefined) return true;
  if (Array.isArray(schema.allOf) && schema.allOf.some((sub) => requiresPath(sub, path, definitions, depth + 1))) return true;
  for (const keyword of ['oneOf', 'anyOf'] as const) {
    const list = schema[keyword];
    if (Array.isArray(list) && list.length > 0 && list.every((sub) => requiresPath(sub, path, definitions, depth + 1))) return true;
  }
  const objectOnly = schema.type === 'object';
  if (!objectOnly || !Array.isArray(schema.required) || !schema.required.includes(head)) return false;
  if (rest.length === 0) return true;
  const properties = isJsonObject(schema.properties) ? schema.properties : {};
  return requiresPath(properties[head] ?? {}, rest, definitions, depth + 1);
}

/**
 * When every valid payload has `<path>` (see {@link requiresPath}), states it at the root, as
 * `properties`/`required` (the form the broker reads partition key fields from): a redundant
 * constraint, so validation does not change. Returns whether it did.
 */
export function hoistRequiredPath(root: JsonObject, path: readonly string[]): boolean {
  const definitions = isJsonObject(root.definitions) ? root.definitions : {};
  if (path.length === 0 || !requiresPath(root, path, definitions)) return false;
  let implied: JsonObject = {};
  for (let i = path.length - 1; i >= 1; i--) implied = { properties: { [path[i] ?? '']: implied }, required: [path[i] ?? ''] };
  const head = path[0] ?? '';
  const properties = isJsonObject(root.properties) ? root.properties : {};
  const existing = properties[head];
  properties[head] = existing === undefined ? implied : { allOf: [existing], ...implied };
  root.properties = properties;
  const required = Array.isArray(root.required) ? root.required : [];
  if (!required.includes(head)) root.required = [...required, head];
  return true;
}
