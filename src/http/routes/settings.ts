import { parseAttributeList, Problems } from '../../domain/rule-problems.js';
import type { JsonValue } from '../../domain/json-schema-walk.js';
import { brokerError, invalidInput } from '../../errors/catalog.js';
import type { AccessControl } from '../../services/access-control.js';
import { isBlacklistType, isFeature, type Settings } from '../../services/settings.js';
import type { AuditLog } from '../../services/audit-log.js';
import type { AdminAuthorization } from '../../storage/settings-store.js';
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
      const type = (ctx.params.type ?? '').toUpperCase();
      if (!isBlacklistType(type)) throw brokerError('BAD_REQUEST', { reason: `blacklist type "${ctx.params.type ?? ''}" is unknown; use CONSUMER_APP, CONSUMER_ET, PRODUCER_APP or PRODUCER_ET` });
      const name = ctx.params.name ?? '';
      if (name.length === 0 || name.length > 255) throw brokerError('BAD_REQUEST', { reason: 'the blacklisted name must have 1 to 255 characters' });
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
    const body = await ctx.json();
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw brokerError('BAD_REQUEST', { reason: 'the body must be an object {"feature": "...", "enabled": true|false}' });
    const { feature, enabled } = body as Record<string, unknown>;
    if (typeof feature !== 'string') throw brokerError('BAD_REQUEST', { reason: 'Field "feature" must be a string' });
    if (typeof enabled !== 'boolean') throw brokerError('BAD_REQUEST', { reason: 'Field "enabled" must be true or false' });
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
 * An AdminAuthorization body: `admins`, `readers`, `writers`, each a non-empty list of attributes the
 * plugin accepts. @throws BrokerError 400 (shape), 422 (a list empty or missing, a refused attribute)
 */
function parseAdmins(body: unknown, access: AccessControl): AdminAuthorization {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw brokerError('BAD_REQUEST', { reason: 'the body must be an object with admins, readers and writers' });
  const fields = body as Record<string, JsonValue>;
  const p = new Problems();
  const admins = parseAttributeList(fields.admins, 'admins', p);
  const readers = parseAttributeList(fields.readers, 'readers', p);
  const writers = parseAttributeList(fields.writers, 'writers', p);
  const result = p.result({ admins, readers, writers }, 'invalid administrators');
  if (!result.ok) throw invalidInput(result.status, result.details, result.errors);
  const problems = access.attributeProblems({ admins, readers, writers });
  if (problems.length > 0 || !admins || !readers || !writers) throw brokerError('UNPROCESSABLE', { reason: problems.join('\n') });
  return { admins, readers, writers };
}
