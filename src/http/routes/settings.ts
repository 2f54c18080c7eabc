import { checkBody } from '../../domain/rule-problems.js';
import { FeatureInputSchema, parseAdminsInput } from '../../domain/settings-input.js';
import { brokerError, invalidInput } from '../../errors/catalog.js';
import type { AccessControl } from '../../services/access-control.js';
import { isBlacklistType, isFeature, type BlacklistType, type Settings } from '../../services/settings.js';
import type { AuditLog } from '../../services/audit-log.js';
import type { AdminAuthorization } from '../../storage/settings-store.js';
import { BlacklistParams } from '../api/operation-routes.js';
import { inputOf } from '../request-inputs.js';
import type { Handler, HttpServer } from '../server.js';

/**
 * Administrator settings (spec "Settings, storages and others"; WIRE.md "Settings"):
 * `GET/POST /settings/admins`, `GET /settings/blacklist`, `PUT/DELETE /settings/blacklist/{type}/{name}`,
 * `GET/POST /settings/features`. Reading features and the blacklist needs only authentication; changing
 * them needs the admin `writers` list, changing the administrators the `admins` list. While
 * `disable_db_write_operations` is on, only features can change (so it can be turned off again).
 */
export function settingsRoutes(http: HttpServer, settings: Settings, access: AccessControl, audit: AuditLog): void {
  http.route('GET', '/settings/admins', (ctx) => {
    access.requireSettings(ctx.subject, 'read');
    return Promise.resolve({ status: 200, body: settings.admins() });
  });

  const setAdmins: Handler = async (ctx) => {
    access.requireSettings(ctx.subject, 'admin');
    access.requireWritable();
    const admins = parseAdmins(await ctx.json(), access);
    const previous = settings.admins();
    await settings.setAdmins(admins);
    audit.record({ subject: ctx.subject, resource: 'admins', resourceId: 'admins', op: 'U', previous, next: admins });
    return { status: 200, body: admins };
  };
  http.route('POST', '/settings/admins', setAdmins, { limited: true });
  http.route('PUT', '/settings/admins', setAdmins, { limited: true });

  http.route('GET', '/settings/blacklist', () => Promise.resolve({ status: 200, body: settings.blacklist() }));

  for (const [method, blocked] of [['PUT', true], ['DELETE', false]] as const) {
    http.route(method, '/settings/blacklist/:type/:name', async (ctx) => {
      access.requireSettings(ctx.subject, 'write');
      const params = inputOf(BlacklistParams, ctx.input.params, 'path');
      const type = blacklistTypeOf(params.type);
      const name = params.name;
      access.requireWritable();
      const entry = { type, name };
      const was = settings.isBlocked(type, name);
      await settings.setBlocked(type, name, blocked);
      if (was !== blocked) audit.record({ subject: ctx.subject, resource: 'blacklist', resourceId: `${type}:${name}`, op: blocked ? 'C' : 'D', ...(blocked ? { next: entry } : { previous: entry }) });
      return { status: 204 };
    });
  }

  http.route('GET', '/settings/features', () => Promise.resolve({ status: 200, body: { items: settings.features() } }));

  http.route('POST', '/settings/features', async (ctx) => {
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
  });
}

/**
 * An AdminAuthorization body (`AdminsInputSchema`, src/domain/settings-input.ts) whose attributes the
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

/** The blacklist type of a `{type}` path parameter its schema accepted (any case). */
function blacklistTypeOf(text: string): BlacklistType {
  const type = text.toUpperCase();
  if (!isBlacklistType(type)) throw new Error(`blacklist type "${text}" passed its schema but is not one of the types`);
  return type;
}
