import type { Category, CleanupPolicy, CompatibilityMode } from '../event-type/event-type.js';
import { cloneJson, isJsonObject, walkSchema, type JsonObject, type JsonValue } from './json-schema-walk.js';

/**
 * The effective schema of an event type (docs/concepts.md "Categories"): what events of `business` and `data` categories are validated against.
 *
 * - `business`: the submitted schema with a required `metadata` added to its top-level properties.
 * - `data`: `{metadata, data_type, data_op, data: <submitted>}`, all required, nothing else.
 * - `undefined`: the submitted schema, never used for validation.
 * Under `compatible` mode every object schema without `additionalProperties` is closed.
 */

/** `metadata` as producers may send it; `partition_compaction_key` only (and then required) for compacted types. */
export function metadataSchema(cleanupPolicy: CleanupPolicy): JsonObject {
  const compacted = cleanupPolicy !== 'delete';
  const properties: JsonObject = {
    eid: { type: 'string', format: 'uuid' },
    event_type: { type: 'string' },
    occurred_at: { type: 'string', format: 'date-time' },
    parent_eids: { type: 'array', items: { type: 'string', format: 'uuid' } },
    flow_id: { type: 'string' },
    partition: { type: 'string' },
    span_ctx: { type: 'object', additionalProperties: { type: 'string' } },
  };
  if (compacted) properties.partition_compaction_key = { type: 'string', minLength: 1 };
  return {
    type: 'object',
    properties,
    required: compacted ? ['eid', 'occurred_at', 'partition_compaction_key'] : ['eid', 'occurred_at'],
    additionalProperties: false,
  };
}

/** Result of building an effective schema: the schema, or the rule the submitted schema breaks. */
export type EffectiveSchemaResult = { ok: true; schema: JsonObject } | { ok: false; reason: string };

/**
 * Builds the effective schema of a submitted (already parsed, already guarded) schema.
 * @param submitted the event type's `schema.schema`, parsed
 */
export function buildEffectiveSchema(submitted: JsonObject, category: Category, cleanupPolicy: CleanupPolicy, mode: CompatibilityMode): EffectiveSchemaResult {
  const user = cloneJson(submitted);
  delete user.$schema;
  delete user.id;
  if (mode === 'compatible') closeObjects(user);
  if (category === 'undefined') return { ok: true, schema: user };
  const metadata = metadataSchema(cleanupPolicy);
  if (category === 'business') {
    const properties = isJsonObject(user.properties) ? user.properties : {};
    if ('metadata' in properties) return { ok: false, reason: 'the schema must not define "metadata": the service defines it for business events' };
    const required = Array.isArray(user.required) ? user.required.filter((r) => r !== 'metadata') : [];
    return { ok: true, schema: { ...user, type: 'object', properties: { metadata, ...properties }, required: ['metadata', ...required] } };
  }
  rebaseLocalRefs(user, '#/properties/data');
  return {
    ok: true,
    schema: {
      type: 'object',
      properties: {
        metadata,
        data_type: { type: 'string' },
        data_op: { type: 'string', enum: ['C', 'U', 'D', 'S'] },
        data: user,
      },
      required: ['metadata', 'data_type', 'data_op', 'data'],
      additionalProperties: false,
    },
  };
}

/** Compatible mode: objects are closed unless the schema says otherwise (docs/concepts.md "Schema versions"). */
function closeObjects(schema: JsonObject): void {
  walkSchema(schema, (node) => {
    const isObjectSchema = node.type === 'object' || isJsonObject(node.properties);
    if (isObjectSchema && !('additionalProperties' in node)) node.additionalProperties = false;
  });
}

/** Moves local `$ref`s (`#/...`) under a new base, because the submitted schema is nested there. */
function rebaseLocalRefs(schema: JsonObject, base: string): void {
  walkSchema(schema, (node) => {
    const ref = node.$ref;
    if (typeof ref === 'string' && (ref === '#' || ref.startsWith('#/'))) node.$ref = base + ref.slice(1);
  });
}

/**
 * Looks a dot-separated field path up in an effective schema, following `properties` only.
 * @returns whether the field is declared, and whether every step of the path is `required`
 */
export function lookupField(schema: JsonObject, path: string): { declared: boolean; required: boolean } {
  let node: JsonValue = schema;
  let required = true;
  for (const segment of path.split('.')) {
    if (!isJsonObject(node) || !isJsonObject(node.properties) || !(segment in node.properties)) return { declared: false, required: false };
    if (!(Array.isArray(node.required) && node.required.includes(segment))) required = false;
    node = node.properties[segment] ?? null;
  }
  return { declared: true, required };
}
