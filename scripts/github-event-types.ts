/**
 * GitHub webhooks as broker event types: one `data` event type per webhook event of
 * `@octokit/webhooks-examples`, with the payload schema of `@octokit/webhooks-schemas` translated to
 * JSON Schema draft-04 (the broker's dialect) and cut down to a self-contained document per event.
 *
 * Used by the demo (`scripts/demo-github.ts`) and by `test/unit/github-event-types.test.ts`, which
 * checks that every real payload validates against the broker's effective schema of its event type.
 * The fixes to the official schemas are data in `github-schema-fixes.ts`; the translation to draft-04
 * is `json-schema-draft04.ts`, the cutting per event `schema-bundle.ts`. Both packages are read at run
 * time with `require` (dev dependencies, not bundled into dist/).
 */
import { createRequire } from 'node:module';
import { lookupField } from '../src/domain/schema/effective-schema.js';
import { cloneJson, isJsonObject, type JsonObject } from '../src/domain/schema/json-schema-walk.js';
import { applySchemaFix, EXCLUDED_PAYLOADS, SCHEMA_FIXES, type SchemaFix } from './github-schema-fixes.js';
import { translateToDraft04 } from './json-schema-draft04.js';
import { extractDefinition, hoistRequiredPath } from './schema-bundle.js';

const require = createRequire(import.meta.url);

/** The examples package; its `main` is `api.github.com/index.json`: `[{name, actions, examples: [payload...]}]`. */
export const EXAMPLES_PACKAGE = '@octokit/webhooks-examples';
/** The schemas package; its `main` is `schema.json`: a draft-07 bundle with `definitions` and local `$ref`s. */
export const SCHEMAS_PACKAGE = '@octokit/webhooks-schemas';

/** Owning application of every demo event type. */
export const OWNING_APPLICATION = 'github-demo';

/** The JSON body of `POST /event-types` for one webhook event. */
export interface EventTypeBody {
  /** `github.<event>`, see {@link eventTypeName}. */
  name: string;
  owning_application: string;
  category: 'data';
  enrichment_strategies: ['metadata_enrichment'];
  /** `hash` on `repository.id` when the translated schema requires it (see {@link loadGithubEventTypes}). */
  partition_strategy: 'random' | 'hash';
  /** Present exactly when `partition_strategy` is `hash`; relative to `data` (category `data`). */
  partition_key_fields?: string[];
  /** `schema` is the translated draft-04 payload schema as a JSON string. */
  schema: { type: 'json_schema'; schema: string };
  default_statistic: { messages_per_minute: number; message_size: number; read_parallelism: number; write_parallelism: number };
}

/** One webhook event (`push`, `issues`, ...): its event type body and its example payloads. */
export interface GithubEventType {
  /** The webhook event name as GitHub spells it, e.g. `pull_request`. */
  name: string;
  /** The body to `POST /event-types`. */
  definition: EventTypeBody;
  /** The example payloads (minus {@link EXCLUDED_PAYLOADS}), to be wrapped by {@link wrapAsDataEvent}. */
  payloads: JsonObject[];
}

/** The broker name of a webhook event: `github.<event>` with characters outside `[-0-9a-zA-Z_]` replaced by `_`. */
export function eventTypeName(eventName: string): string {
  return 'github.' + eventName.replace(/[^-0-9a-zA-Z_]/g, '_');
}

/**
 * Wraps a webhook payload as a `data` category event (docs/concepts.md "Categories"):
 * `{metadata: {eid, occurred_at: now}, data_type: "github.<event>", data_op: "C", data: payload}`.
 * @param eid a UUID, e.g. from `crypto.randomUUID()`
 */
export function wrapAsDataEvent(eventName: string, payload: JsonObject, eid: string): JsonObject {
  return { metadata: { eid, occurred_at: new Date().toISOString() }, data_type: eventTypeName(eventName), data_op: 'C', data: payload };
}

/** One entry of the examples package's `index.json` (the fields used here). */
export interface WebhookExamples {
  name: string;
  actions: string[];
  examples: JsonObject[];
}

/** Reads the examples package (its `main`, `api.github.com/index.json`), checking its shape. */
export function loadWebhookExamples(): WebhookExamples[] {
  const raw: unknown = require(EXAMPLES_PACKAGE);
  if (!Array.isArray(raw)) throw new Error(`${EXAMPLES_PACKAGE}: expected an array`);
  return raw.map((entry: unknown, i) => {
    if (!isJsonObject(entry) || typeof entry.name !== 'string' || !Array.isArray(entry.examples)) throw new Error(`${EXAMPLES_PACKAGE}[${i}]: unexpected shape`);
    const name = entry.name;
    const examples = entry.examples.map((example, j) => {
      if (!isJsonObject(example)) throw new Error(`${EXAMPLES_PACKAGE}: ${name}[${j}] is not an object`);
      return example;
    });
    const actions = Array.isArray(entry.actions) ? entry.actions.filter((a): a is string => typeof a === 'string') : [];
    return { name, actions, examples };
  });
}

/** Reads the schema bundle (its `main`, `schema.json`): a draft-07 document with `definitions`. */
export function loadWebhookSchemaBundle(): JsonObject {
  const raw: unknown = require(SCHEMAS_PACKAGE);
  if (!isJsonObject(raw) || !isJsonObject(raw.definitions)) throw new Error(`${SCHEMAS_PACKAGE}: expected an object with definitions`);
  // `require` caches the module: work on a copy, the fixes mutate it.
  return cloneJson(raw);
}

/** The definition holding an event's payload schema: `<event>_event` (a oneOf over actions) or `<event>$event`. */
function eventDefinitionName(definitions: JsonObject, eventName: string): string {
  for (const candidate of [`${eventName}_event`, `${eventName}$event`]) if (isJsonObject(definitions[candidate])) return candidate;
  throw new Error(`${SCHEMAS_PACKAGE} has no schema for webhook event "${eventName}"`);
}

/** The partition key used when the translated schema requires it. */
export const HASH_KEY_FIELDS = ['repository.id'] as const;

/**
 * Builds one event type per webhook event of the examples package:
 * 1. the official schema bundle gets {@link SCHEMA_FIXES} (each must still change something);
 * 2. the bundle is translated with {@link translateToDraft04};
 * 3. per event, the payload definition (`<event>_event`, a oneOf over its actions, or `<event>$event`)
 *    becomes the root of a self-contained schema holding only the definitions it reaches;
 * 4. when every payload must have `repository.id`, that is stated at the root (redundant, so it does
 *    not change validation) and the event type is hash-partitioned on `repository.id`; otherwise random.
 * Payloads listed in {@link EXCLUDED_PAYLOADS} are left out.
 * @param fixes the fixes to apply ({@link SCHEMA_FIXES}; the tests pass subsets to prove each is needed)
 * @throws Error when a fix no longer applies or changes nothing, or a `$ref` cannot be made local
 */
export function loadGithubEventTypes(fixes: readonly SchemaFix[] = SCHEMA_FIXES): GithubEventType[] {
  const bundle = loadWebhookSchemaBundle();
  for (const fix of fixes) applySchemaFix(bundle, fix);
  const translated = translateToDraft04(bundle);
  const definitions = isJsonObject(translated.definitions) ? translated.definitions : {};
  return loadWebhookExamples().map((group) => {
    const schema = extractDefinition(definitions, eventDefinitionName(definitions, group.name));
    const hashed = hoistRequiredPath(schema, HASH_KEY_FIELDS[0].split('.')) && HASH_KEY_FIELDS.every((f) => lookupField(schema, f).required);
    const definition: EventTypeBody = {
      name: eventTypeName(group.name),
      owning_application: OWNING_APPLICATION,
      category: 'data',
      enrichment_strategies: ['metadata_enrichment'],
      partition_strategy: hashed ? 'hash' : 'random',
      ...(hashed ? { partition_key_fields: [...HASH_KEY_FIELDS] } : {}),
      schema: { type: 'json_schema', schema: JSON.stringify(schema) },
      default_statistic: { messages_per_minute: 1000, message_size: 10000, read_parallelism: 2, write_parallelism: 2 },
    };
    const payloads = group.examples.filter((_, index) => !EXCLUDED_PAYLOADS.some((x) => x.event === group.name && x.index === index));
    return { name: group.name, definition, payloads };
  });
}
