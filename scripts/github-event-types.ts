/**
 * GitHub webhooks as broker event types: one `data` event type per webhook event of
 * `@octokit/webhooks-examples`, with the payload schema of `@octokit/webhooks-schemas` translated to
 * JSON Schema draft-04 (the broker's dialect) and cut down to a self-contained document per event.
 *
 * Used by the demo (`scripts/demo-github.ts`) and by `test/unit/github-event-types.test.ts`, which
 * checks that every real payload validates against the broker's effective schema of its event type.
 */
import { createRequire } from 'node:module';
import { lookupField } from '../src/domain/effective-schema.js';
import { cloneJson, isJsonObject, type JsonObject, type JsonValue } from '../src/domain/json-schema-walk.js';

const require = createRequire(import.meta.url);

/** The examples package; its `main` is `api.github.com/index.json`: `[{name, actions, examples: [payload...]}]`. */
export const EXAMPLES_PACKAGE = '@octokit/webhooks-examples';
/** The schemas package; its `main` is `schema.json`: a draft-07 bundle with `definitions` and local `$ref`s. */
export const SCHEMAS_PACKAGE = '@octokit/webhooks-schemas';

/** The dialect URI set on every translated root. */
export const DRAFT_04_URI = 'http://json-schema.org/draft-04/schema#';

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

/**
 * A change to one schema of the official bundle (draft-07, before translation):
 * - `unrequire`: removes names from its `required` array;
 * - `allowTypes`: adds types to its `type` (and `null` to its `enum`, if any, when `null` is added);
 * - `addProperties`: declares more properties (on an object closed by `additionalProperties: false`);
 * - `removeKeyword`: deletes one keyword (e.g. a `const` or a `format`).
 */
export type SchemaFixChange =
  | { op: 'unrequire'; properties: readonly string[] }
  | { op: 'allowTypes'; types: readonly string[] }
  | { op: 'addProperties'; properties: Readonly<Record<string, JsonObject>> }
  | { op: 'removeKeyword'; keyword: string };

/** A named, explained loosening of the official schema where the official examples disagree with it. */
export interface SchemaFix {
  /** Short unique name, printed by the demo. */
  name: string;
  /** JSON pointer into the `@octokit/webhooks-schemas` bundle (`#/definitions/...`). */
  pointer: string;
  change: SchemaFixChange;
  /** Why: which example payloads break the official schema, and how. */
  reason: string;
}

/**
 * The fixes applied to the official schema bundle before translation. The examples package holds
 * payloads captured over years while the schemas follow GitHub's current documentation, so some real
 * payloads predate fields the schemas now require, or carry values the schemas do not allow. Every fix
 * loosens exactly what real payloads need and nothing else; a fix that no longer changes anything
 * (the upstream schema was corrected) makes {@link loadGithubEventTypes} throw, so the list stays minimal.
 */
export const SCHEMA_FIXES: readonly SchemaFix[] = [
  {
    name: 'repository-newer-fields',
    pointer: '#/definitions/repository',
    change: { op: 'unrequire', properties: ['is_template', 'web_commit_signoff_required', 'topics', 'visibility', 'custom_properties'] },
    reason: 'Fields GitHub added to repository objects over the years (custom_properties in 2023); 47 payloads captured earlier (push[0], issues[0], pull_request[0], ...) lack some or all of them.',
  },
  {
    name: 'app-created-at-format',
    pointer: '#/definitions/app/properties/created_at',
    change: { op: 'removeKeyword', keyword: 'format' },
    reason: 'check_run[7] and check_run[8] (rerequested) carry app.created_at "2018-04-25 20:42:10": a timestamp without "T" and zone, not RFC 3339 date-time.',
  },
  {
    name: 'app-updated-at-format',
    pointer: '#/definitions/app/properties/updated_at',
    change: { op: 'removeKeyword', keyword: 'format' },
    reason: 'check_run[7] and check_run[8] carry app.updated_at "2018-04-25 20:42:10" (same as app-created-at-format).',
  },
  {
    name: 'code-scanning-reopened-alert-timestamps',
    pointer: '#/definitions/code_scanning_alert$reopened/properties/alert',
    change: { op: 'addProperties', properties: { updated_at: { type: 'string', format: 'date-time' }, fixed_at: { type: ['string', 'null'], format: 'date-time' } } },
    reason: 'code_scanning_alert[0] (reopened) has alert.updated_at and alert.fixed_at, which the closed alert object of that action does not declare.',
  },
  {
    name: 'code-scanning-reopened-rule-help',
    pointer: '#/definitions/code_scanning_alert$reopened/properties/alert/properties/rule/properties/help',
    change: { op: 'allowTypes', types: ['string'] },
    reason: 'The schema allows only null for rule.help of a reopened alert; code_scanning_alert[0] carries the rule help text (a string).',
  },
  {
    name: 'code-scanning-reopened-rule-tags',
    pointer: '#/definitions/code_scanning_alert$reopened/properties/alert/properties/rule/properties/tags',
    change: { op: 'allowTypes', types: ['array'] },
    reason: 'The schema allows only null for rule.tags of a reopened alert; code_scanning_alert[0] carries ["style"].',
  },
  {
    name: 'deployment-created-workflow',
    pointer: '#/definitions/deployment$created',
    change: { op: 'unrequire', properties: ['workflow', 'workflow_run'] },
    reason: 'deployment[0] predates the workflow and workflow_run fields of deployment events.',
  },
  {
    name: 'discussion-comment-created-installation',
    pointer: '#/definitions/discussion_comment$created',
    change: { op: 'unrequire', properties: ['installation'] },
    reason: 'installation is present only for GitHub App deliveries; discussion_comment[0] is a repository webhook delivery without it.',
  },
  {
    name: 'discussion-comment-created-reactions',
    pointer: '#/definitions/discussion_comment$created/properties/comment',
    change: { op: 'unrequire', properties: ['reactions'] },
    reason: 'discussion_comment[0] predates comment.reactions.',
  },
  {
    name: 'github-org-avatar-url',
    pointer: '#/definitions/github-org/properties/avatar_url',
    change: { op: 'removeKeyword', keyword: 'const' },
    reason: 'The schema pins the avatar URL of the github organization to the avatars.githubusercontent.com host; repository_vulnerability_alert[0] uses the older avatars1.githubusercontent.com host.',
  },
  {
    name: 'installation-suspension',
    pointer: '#/definitions/installation',
    change: { op: 'unrequire', properties: ['suspended_at', 'suspended_by'] },
    reason: 'installation[0] and installation_repositories[0] predate installation suspension (the fields are null when not suspended, absent before).',
  },
  {
    name: 'installation-repositories-added-requester',
    pointer: '#/definitions/installation_repositories$added',
    change: { op: 'unrequire', properties: ['requester'] },
    reason: 'installation_repositories[0] (added) predates the requester field.',
  },
  {
    name: 'issue-newer-fields',
    pointer: '#/definitions/issue',
    change: { op: 'unrequire', properties: ['active_lock_reason', 'reactions'] },
    reason: 'issue_comment[0] and issues[0] predate issue.active_lock_reason and issue.reactions.',
  },
  {
    name: 'issue-comment-newer-fields',
    pointer: '#/definitions/issue-comment',
    change: { op: 'unrequire', properties: ['performed_via_github_app', 'reactions'] },
    reason: 'issue_comment[0] predates comment.performed_via_github_app and comment.reactions.',
  },
  {
    name: 'label-description',
    pointer: '#/definitions/label',
    change: { op: 'unrequire', properties: ['description'] },
    reason: 'issue_comment[0], issues[0] and label[0] have labels without the (later added) description field.',
  },
  {
    name: 'ping-hook-deliveries-url',
    pointer: '#/definitions/ping$event/properties/hook',
    change: { op: 'unrequire', properties: ['deliveries_url'] },
    reason: 'ping[0] predates hook.deliveries_url.',
  },
  {
    name: 'pull-request-newer-fields',
    pointer: '#/definitions/pull-request',
    change: { op: 'unrequire', properties: ['active_lock_reason', 'auto_merge'] },
    reason: 'pull_request[0] predates pull_request.active_lock_reason and pull_request.auto_merge.',
  },
  {
    name: 'pull-request-opened-lock-reason',
    pointer: '#/definitions/pull_request$opened/properties/pull_request/allOf/1',
    change: { op: 'unrequire', properties: ['active_lock_reason'] },
    reason: 'pull_request[0] (opened) predates active_lock_reason (the opened action requires it again beside pull-request-newer-fields).',
  },
  {
    name: 'pull-request-review-comment-created-lock-reason',
    pointer: '#/definitions/pull_request_review_comment$created/properties/pull_request',
    change: { op: 'unrequire', properties: ['active_lock_reason'] },
    reason: 'pull_request_review_comment[0] predates pull_request.active_lock_reason.',
  },
  {
    name: 'simple-pull-request-newer-fields',
    pointer: '#/definitions/simple-pull-request',
    change: { op: 'unrequire', properties: ['active_lock_reason', 'auto_merge', 'draft'] },
    reason: 'pull_request_review[0] predates pull_request.active_lock_reason, auto_merge and draft.',
  },
  {
    name: 'pull-request-review-comment-multiline',
    pointer: '#/definitions/pull-request-review-comment',
    change: { op: 'unrequire', properties: ['line', 'original_line', 'original_start_line', 'start_line', 'side', 'start_side', 'reactions'] },
    reason: 'pull_request_review_comment[0] predates multi-line review comments (line, side, start_* fields) and comment.reactions.',
  },
  {
    name: 'release-name-nullable',
    pointer: '#/definitions/release/properties/name',
    change: { op: 'allowTypes', types: ['null'] },
    reason: 'release[0] (published) has release.name null: a release created from a tag without a title.',
  },
  {
    name: 'release-body-nullable',
    pointer: '#/definitions/release/properties/body',
    change: { op: 'allowTypes', types: ['null'] },
    reason: 'release[0] (published) has release.body null: a release without notes.',
  },
  {
    name: 'repository-vulnerability-alert-fields',
    pointer: '#/definitions/repository-vulnerability-alert-alert',
    change: { op: 'unrequire', properties: ['node_id', 'number', 'state'] },
    reason: 'repository_vulnerability_alert[0] (create) predates alert.node_id, alert.number and alert.state.',
  },
  {
    name: 'repository-vulnerability-alert-create-state',
    pointer: '#/definitions/repository_vulnerability_alert$create/properties/alert/allOf/1',
    change: { op: 'unrequire', properties: ['state'] },
    reason: 'repository_vulnerability_alert[0] (create) has no alert.state (the create action requires it again beside repository-vulnerability-alert-fields).',
  },
  {
    name: 'security-advisory-published-fields',
    pointer: '#/definitions/security_advisory$published/properties/security_advisory',
    change: { op: 'unrequire', properties: ['cve_id', 'cvss', 'cwes'] },
    reason: 'security_advisory[0] (published) predates advisory.cve_id, cvss and cwes.',
  },
  {
    name: 'sponsorship-tier-newer-fields',
    pointer: '#/definitions/sponsorship-tier',
    change: { op: 'unrequire', properties: ['is_custom_amount', 'is_one_time'] },
    reason: 'sponsorship[1] (pending_tier_change) has a changes.tier.from without is_custom_amount and is_one_time.',
  },
  {
    name: 'workflow-job-newer-fields',
    pointer: '#/definitions/workflow-job',
    change: { op: 'unrequire', properties: ['created_at', 'head_branch', 'run_attempt', 'workflow_name'] },
    reason: 'workflow_job[0] (in_progress) predates workflow_job.created_at, head_branch, run_attempt and workflow_name.',
  },
  {
    name: 'workflow-run-newer-fields',
    pointer: '#/definitions/workflow-run',
    change: { op: 'unrequire', properties: ['actor', 'display_title', 'path', 'triggering_actor'] },
    reason: 'workflow_run[0] (completed) predates workflow_run.actor, display_title, path and triggering_actor.',
  },
  {
    name: 'workflow-run-completed-conclusion-nullable',
    pointer: '#/definitions/workflow_run$completed/properties/workflow_run/allOf/1/properties/conclusion',
    change: { op: 'allowTypes', types: ['null'] },
    reason: 'workflow_run[0] (action completed, but workflow_run.status "queued") has conclusion null, which the completed action does not allow.',
  },
];

/** An example payload that is not published, with the reason. */
export interface ExcludedPayload {
  /** Webhook event name. */
  event: string;
  /** Index in that event's `examples` array of the examples package. */
  index: number;
  reason: string;
}

/** Example payloads left out because no reasonable schema fix covers them (printed by the demo). */
export const EXCLUDED_PAYLOADS: readonly ExcludedPayload[] = [];

/** The broker name of a webhook event: `github.<event>` with characters outside `[-0-9a-zA-Z_]` replaced by `_`. */
export function eventTypeName(eventName: string): string {
  return 'github.' + eventName.replace(/[^-0-9a-zA-Z_]/g, '_');
}

/**
 * Wraps a webhook payload as a `data` category event (WIRE.md "Effective schema and metadata"):
 * `{metadata: {eid, occurred_at: now}, data_type: "github.<event>", data_op: "C", data: payload}`.
 * @param eid a UUID, e.g. from `crypto.randomUUID()`
 */
export function wrapAsDataEvent(eventName: string, payload: JsonObject, eid: string): JsonObject {
  return { metadata: { eid, occurred_at: new Date().toISOString() }, data_type: eventTypeName(eventName), data_op: 'C', data: payload };
}

// ---------------------------------------------------------------------------------------------
// Translation draft-07 → draft-04
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Per-event extraction
// ---------------------------------------------------------------------------------------------

const DEFINITION_REF = /^#\/definitions\/([^/]+)/;

function decodePointerSegment(segment: string): string {
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
function extractDefinition(bundleDefinitions: JsonObject, rootName: string): JsonObject {
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
function hoistRequiredPath(root: JsonObject, path: readonly string[]): boolean {
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

// ---------------------------------------------------------------------------------------------
// Schema fixes
// ---------------------------------------------------------------------------------------------

function locate(document: JsonObject, pointer: string): JsonObject {
  if (!pointer.startsWith('#/')) throw new Error(`schema fix pointer must start with "#/": ${pointer}`);
  let node: JsonValue = document;
  for (const raw of pointer.slice(2).split('/')) {
    const segment = decodePointerSegment(raw);
    if (Array.isArray(node)) node = node[Number(segment)] ?? null;
    else if (isJsonObject(node)) node = node[segment] ?? null;
    else node = null;
  }
  if (!isJsonObject(node)) throw new Error(`schema fix pointer does not reach a schema: ${pointer}`);
  return node;
}

/** Applies one fix in place; throws when the fix changes nothing (stale) or does not apply. */
function applySchemaFix(bundle: JsonObject, fix: SchemaFix): void {
  const node = locate(bundle, fix.pointer);
  const stale = (): never => {
    throw new Error(`schema fix "${fix.name}" changes nothing at ${fix.pointer}: remove it`);
  };
  const change = fix.change;
  switch (change.op) {
    case 'unrequire': {
      const required = Array.isArray(node.required) ? node.required : [];
      if (!change.properties.every((p) => required.includes(p))) stale();
      node.required = required.filter((r) => typeof r !== 'string' || !change.properties.includes(r));
      return;
    }
    case 'allowTypes': {
      const types = Array.isArray(node.type) ? node.type : typeof node.type === 'string' ? [node.type] : [];
      if (types.length === 0 || change.types.some((t) => types.includes(t))) stale();
      node.type = [...types, ...change.types];
      if (change.types.includes('null') && Array.isArray(node.enum) && !node.enum.includes(null)) node.enum = [...node.enum, null];
      return;
    }
    case 'addProperties': {
      const properties = isJsonObject(node.properties) ? node.properties : {};
      for (const [name, schema] of Object.entries(change.properties)) {
        if (name in properties) stale();
        properties[name] = cloneJson(schema);
      }
      node.properties = properties;
      return;
    }
    case 'removeKeyword': {
      if (!(change.keyword in node)) stale();
      delete node[change.keyword];
      return;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Loading the packages
// ---------------------------------------------------------------------------------------------

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
