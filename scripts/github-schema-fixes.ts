/**
 * The named, explained loosenings of the official GitHub webhook schemas (`@octokit/webhooks-schemas`)
 * where the official example payloads (`@octokit/webhooks-examples`) disagree with them, and the code
 * that applies one to the draft-07 bundle before translation. Data first: {@link SCHEMA_FIXES} and
 * {@link EXCLUDED_PAYLOADS}; printed by the demo, proven necessary one by one by
 * test/unit/github-event-types.test.ts.
 */
import { cloneJson, isJsonObject, type JsonObject, type JsonValue } from '../src/domain/schema/json-schema-walk.js';
import { decodePointerSegment } from './schema-bundle.js';

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
 * (the upstream schema was corrected) makes `loadGithubEventTypes` (scripts/github-event-types.ts) throw, so the list stays minimal.
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

/** The schema a fix's pointer (`#/definitions/...`) reaches in the bundle. @throws Error when it reaches none */
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

/**
 * Applies one fix in place to the draft-07 bundle.
 * @throws Error when the fix changes nothing (stale: remove it) or its pointer does not reach a schema
 */
export function applySchemaFix(bundle: JsonObject, fix: SchemaFix): void {
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
