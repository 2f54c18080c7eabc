import { Type } from '@sinclair/typebox';
import { checkBody } from '../../domain/event-type/rule-problems.js';
import { AdminsInputSchema, FeatureInputSchema, parseAdminsInput } from '../../domain/settings/settings-input.js';
import { PublishQuotaListSchema, PublishQuotaSchema, QUOTA_KINDS, isQuotaKind, type PublishQuota, type QuotaKind } from '../../domain/batch/publish-quota.js';
import { brokerError, invalidInput } from '../../errors/catalog.js';
import type { AccessControl } from '../../services/access-control.js';
import { BLACKLIST_TYPES, isBlacklistType, isFeature, type BlacklistType, type Settings } from '../../services/settings.js';
import type { AuditLog } from '../../services/audit-log.js';
import type { AdminAuthorization } from '../../domain/settings/admin-authorization.js';
import { empty, json, jsonBody, problems, routesOf, type Route, type RouteHandler } from '../api/route-model.js';
import { AdminAuthorizationSchema, BlacklistSchema, FeatureListSchema } from '../api/wire-schemas.js';

/** The services the settings routes use. */
export interface SettingsDeps {
  readonly settings: Settings;
  readonly access: AccessControl;
  readonly audit: AuditLog;
}

/**
 * `{type}` and `{name}` of `PUT`/`DELETE /settings/blacklist/{type}/{name}` (docs/operations.md
 * "Blacklist"): a blacklist type in any case and a name of 1 to 255 characters; anything else is 400.
 */
export const BlacklistParams = Type.Object({
  type: Type.String({
    'x-any-case-enum': BLACKLIST_TYPES.map((t) => t.toLowerCase()),
    'x-status': 400,
    'x-messages': { 'x-any-case-enum': `has unknown blacklist type {value}; use ${BLACKLIST_TYPES.slice(0, -1).join(', ')} or ${BLACKLIST_TYPES.at(-1) ?? ''}` },
    description: `${BLACKLIST_TYPES.join(', ')} (any case)`,
  }),
  name: Type.String({ minLength: 1, maxLength: 255, 'x-status': 400, 'x-messages': { minLength: 'must have 1 to 255 characters', maxLength: 'must have 1 to 255 characters' }, description: 'the application or event type' }),
});

/** `{kind}` and `{name}` of `PUT`/`DELETE /settings/quotas/{kind}/{name}` (docs/publishing.md "Quotas"); anything else is 400. */
export const QuotaParams = Type.Object({
  kind: Type.String({ enum: [...QUOTA_KINDS], 'x-status': 400, 'x-messages': { enum: `has unknown quota kind {value}; use ${QUOTA_KINDS.join(' or ')}` }, description: QUOTA_KINDS.join(' or ') }),
  name: Type.String({ minLength: 1, maxLength: 255, 'x-status': 400, 'x-messages': { minLength: 'must have 1 to 255 characters', maxLength: 'must have 1 to 255 characters' }, description: 'the subject id or the owning application' }),
});

const route = routesOf<SettingsDeps>();

/** `PUT` sets, `DELETE` removes a publishing quota. */
const setQuota =
  (set: boolean): RouteHandler<SettingsDeps, typeof QuotaParams, undefined, undefined> =>
  async (ctx, { settings, access, audit }) => {
    access.requireSettings(ctx.subject, 'write');
    const kind = quotaKindOf(ctx.input.params.kind);
    const name = ctx.input.params.name;
    let quota: PublishQuota | undefined;
    if (set) {
      const checked = checkBody(PublishQuotaSchema, await ctx.json());
      if (!checked.ok) throw invalidInput(checked.status, checked.details, checked.errors);
      quota = checked.value;
    }
    access.requireWritable();
    const previous = settings.quota(kind, name);
    await settings.setQuota(kind, name, quota);
    if (previous !== undefined || quota !== undefined) {
      audit.record({ subject: ctx.subject, resource: 'quota', resourceId: `${kind}:${name}`, op: quota === undefined ? 'D' : previous === undefined ? 'C' : 'U', ...(previous ? { previous } : {}), ...(quota ? { next: quota } : {}) });
    }
    return quota === undefined ? { status: 204 } : { status: 200, body: { kind, name, ...quota } };
  };

const setAdmins: RouteHandler<SettingsDeps, undefined, undefined, undefined> = async (ctx, { settings, access, audit }) => {
  access.requireSettings(ctx.subject, 'admin');
  access.requireWritable();
  const admins = parseAdmins(await ctx.json(), access);
  const previous = settings.admins();
  await settings.setAdmins(admins);
  audit.record({ subject: ctx.subject, resource: 'admins', resourceId: 'admins', op: 'U', previous, next: admins });
  return { status: 200, body: admins };
};

/** `PUT` blocks, `DELETE` unblocks an application or event type. */
const setBlocked =
  (blocked: boolean): RouteHandler<SettingsDeps, typeof BlacklistParams, undefined, undefined> =>
  async (ctx, { settings, access, audit }) => {
    access.requireSettings(ctx.subject, 'write');
    const type = blacklistTypeOf(ctx.input.params.type);
    const name = ctx.input.params.name;
    access.requireWritable();
    const entry = { type, name };
    const was = settings.isBlocked(type, name);
    await settings.setBlocked(type, name, blocked);
    if (was !== blocked) audit.record({ subject: ctx.subject, resource: 'blacklist', resourceId: `${type}:${name}`, op: blocked ? 'C' : 'D', ...(blocked ? { next: entry } : { previous: entry }) });
    return { status: 204 };
  };

/**
 * Administrator settings (docs/operations.md "Administrator settings", "Feature toggles", "Blacklist"):
 * `GET/POST/PUT /settings/admins`, `GET /settings/blacklist`, `PUT/DELETE /settings/blacklist/{type}/{name}`,
 * `GET/POST /settings/features`, `GET /settings/quotas`, `PUT/DELETE /settings/quotas/{kind}/{name}`. Reading features, the blacklist and quotas
 * needs only authentication; changing them needs the admin `writers` list, changing the administrators
 * the `admins` list. While `disable_db_write_operations` is on, only features can change (so it can be
 * turned off again).
 */
export const SETTINGS_ROUTES: readonly Route<SettingsDeps>[] = [
  route({
    method: 'GET', path: '/settings/admins', operationId: 'getAdmins', tag: 'Settings', access: 'authenticated',
    summary: 'The administrators', responses: { '200': json('the three lists', AdminAuthorizationSchema), ...problems(403) },
    handler: (ctx, { settings, access }) => {
      access.requireSettings(ctx.subject, 'read');
      return Promise.resolve({ status: 200, body: settings.admins() });
    },
  }),
  ...(['POST', 'PUT'] as const).map((method) =>
    route({
      method, path: '/settings/admins', operationId: method === 'POST' ? 'setAdmins' : 'setAdminsPut', tag: 'Settings', access: 'authenticated', limited: true,
      summary: 'Replace the administrators', body: jsonBody(AdminsInputSchema),
      responses: { '200': json('the new administrators', AdminAuthorizationSchema), ...problems(400, 403, 422, 503) },
      handler: setAdmins,
    }),
  ),
  route({
    method: 'GET', path: '/settings/blacklist', operationId: 'getBlacklist', tag: 'Settings', access: 'authenticated',
    summary: 'The blacklist', responses: { '200': json('blocked producers and consumers', BlacklistSchema) },
    handler: (_ctx, { settings }) => Promise.resolve({ status: 200, body: settings.blacklist() }),
  }),
  ...(['PUT', 'DELETE'] as const).map((method) =>
    route({
      method, path: '/settings/blacklist/{type}/{name}', operationId: method === 'PUT' ? 'block' : 'unblock', tag: 'Settings', access: 'authenticated',
      params: BlacklistParams,
      summary: method === 'PUT' ? 'Block an application or event type' : 'Unblock an application or event type',
      responses: { '204': empty(method === 'PUT' ? 'blocked' : 'unblocked'), ...problems(400, 403, 503) },
      handler: setBlocked(method === 'PUT'),
    }),
  ),
  route({
    method: 'GET', path: '/settings/quotas', operationId: 'getQuotas', tag: 'Settings', access: 'authenticated',
    summary: 'Publishing quotas', description: 'Events and bytes per second a publishing subject, or the producers to an owning application\'s event types, may publish, counted for the whole cluster (docs/publishing.md "Quotas"); none by default.',
    responses: { '200': json('every quota, by kind and name', PublishQuotaListSchema) },
    handler: (_ctx, { settings }) => Promise.resolve({ status: 200, body: { items: settings.quotas() } }),
  }),
  route({
    method: 'PUT', path: '/settings/quotas/{kind}/{name}', operationId: 'setQuota', tag: 'Settings', access: 'authenticated', params: QuotaParams,
    summary: 'Set a publishing quota', description: 'A publish over it is refused with 429 `QUOTA_EXCEEDED` and `Retry-After`, nothing written. Needs the settings `writers`.',
    body: jsonBody(PublishQuotaSchema),
    responses: { '200': json('the quota set', PublishQuotaListSchema.properties.items.items), ...problems(400, 403, 422, 503) },
    handler: setQuota(true),
  }),
  route({
    method: 'DELETE', path: '/settings/quotas/{kind}/{name}', operationId: 'removeQuota', tag: 'Settings', access: 'authenticated', params: QuotaParams,
    summary: 'Remove a publishing quota', responses: { '204': empty('removed (or there was none)'), ...problems(400, 403, 503) },
    handler: setQuota(false),
  }),
  route({
    method: 'GET', path: '/settings/features', operationId: 'getFeatures', tag: 'Settings', access: 'authenticated',
    summary: 'Feature toggles', responses: { '200': json('every feature and whether it is on', FeatureListSchema) },
    handler: (_ctx, { settings }) => Promise.resolve({ status: 200, body: { items: settings.features() } }),
  }),
  route({
    method: 'POST', path: '/settings/features', operationId: 'setFeature', tag: 'Settings', access: 'authenticated',
    summary: 'Turn a feature on or off', body: jsonBody(FeatureInputSchema),
    responses: { '204': empty('set'), ...problems(400, 403) },
    handler: async (ctx, { settings, access, audit }) => {
      access.requireSettings(ctx.subject, 'write');
      const checked = checkBody(FeatureInputSchema, await ctx.json());
      if (!checked.ok) throw invalidInput(checked.status, checked.details, checked.errors);
      const { feature, enabled } = checked.value;
      const name = feature.toLowerCase();
      const previous = isFeature(name) ? settings.enabled(name) : undefined;
      const entry = { subject: ctx.subject, resource: 'feature', resourceId: name, op: 'U', previous: { feature: name, enabled: previous }, next: { feature: name, enabled } } as const;
      // Turning the audit log off is its last entry: recorded while it is still on.
      const disablingAudit = name === 'audit_log_collection' && previous === true && !enabled;
      if (disablingAudit) audit.record(entry);
      await settings.setFeature(name, enabled);
      if (!disablingAudit) audit.record(entry);
      return { status: 204 };
    },
  }),
];

/**
 * An AdminAuthorization body (`AdminsInputSchema`, src/domain/settings/settings-input.ts) whose attributes the
 * plugin accepts. @throws BrokerError 400 (shape), 422 (a list empty or missing, an attribute twice, a refused attribute)
 */
function parseAdmins(body: unknown, access: AccessControl): AdminAuthorization {
  const parsed = parseAdminsInput(body);
  if (!parsed.ok) throw invalidInput(parsed.status, parsed.details, parsed.errors);
  const { admins, readers, writers } = parsed.value;
  const problems = access.attributeProblems({ admins, readers, writers });
  if (problems.length > 0) throw brokerError('UNPROCESSABLE', { reason: problems.join('\n') });
  return parsed.value;
}

/** The quota kind of a `{kind}` path parameter its schema accepted. */
function quotaKindOf(text: string): QuotaKind {
  if (!isQuotaKind(text)) throw new Error(`quota kind "${text}" passed its schema but is not one of the kinds`);
  return text;
}

/** The blacklist type of a `{type}` path parameter its schema accepted (any case). */
function blacklistTypeOf(text: string): BlacklistType {
  const type = text.toUpperCase();
  if (!isBlacklistType(type)) throw new Error(`blacklist type "${text}" passed its schema but is not one of the types`);
  return type;
}
