import { NODE_STORAGE_ID, parseStorage, storageNotFound, storageView, type Storage } from '../../domain/storage.js';
import { brokerError } from '../../errors/catalog.js';
import type { AccessControl } from '../../services/access-control.js';
import type { AuditLog } from '../../services/audit-log.js';
import { probeStorage, type StorageStore } from '../../storage/storage-store.js';
import type { HttpServer } from '../server.js';

/** Two storages that would write the same keys: the same deployment (URL, seeds or the node's own) and prefix. */
const sameKeys = (a: Storage, b: Storage): boolean =>
  a.redis_configuration.key_prefix === b.redis_configuration.key_prefix &&
  (a.redis_configuration.url ?? '') === (b.redis_configuration.url ?? '') &&
  (a.redis_configuration.cluster_nodes ?? []).join(',') === (b.redis_configuration.cluster_nodes ?? []).join(',');

/**
 * Storage routes (spec "Settings, storages and others", "Storage"; issue 6 §3.1): `GET/POST /storages`,
 * `GET/DELETE /storages/{id}`, `PUT /storages/default/{id}`. Reading needs any administrators' list,
 * changing the `admins` list; changes are refused (503) while `disable_db_write_operations` is on.
 * Creation: 409 for an existing id, 422 for a broken record, for keys another storage writes, or for a
 * deployment that does not answer. Deletion: 409 for the default storage, for the node's own
 * (`default`) and for a storage in use. Changes are audited (resource `storage`). Answers show `default: true` on the default storage and hide URL passwords.
 *
 * A storage used by a timeline (not cleaned up) cannot be deleted either (409). New event types get
 * their first timeline on the default storage.
 */
/** @param usersOf the event types with a timeline on a storage (it cannot be deleted while there are any) */
export function storageRoutes(http: HttpServer, store: StorageStore, access: AccessControl, usersOf: (id: string) => Promise<string[]>, audit: AuditLog): void {
  http.route('GET', '/storages', async (ctx) => {
    access.requireSettings(ctx.subject, 'read');
    const { storages, defaultId } = await store.list();
    return { status: 200, body: storages.map((s) => storageView(s, defaultId)) };
  });

  http.route('POST', '/storages', async (ctx) => {
    access.requireSettings(ctx.subject, 'admin');
    access.requireWritable();
    const storage = parseStorage(await ctx.json());
    const { storages, defaultId } = await store.list();
    if (storages.some((s) => s.id === storage.id)) throw brokerError('STORAGE_EXISTS', { id: storage.id });
    const clash = storages.find((s) => sameKeys(s, storage));
    if (clash) throw brokerError('STORAGE_PREFIX_TAKEN', { id: clash.id, prefix: storage.redis_configuration.key_prefix });
    const unreachable = await probeStorage(storage);
    if (unreachable !== undefined) throw brokerError('STORAGE_NOT_ANSWERING', { reason: unreachable });
    if (!(await store.create(storage))) throw brokerError('STORAGE_EXISTS', { id: storage.id });
    audit.record({ subject: ctx.subject, resource: 'storage', resourceId: storage.id, op: 'C', next: storageView(storage, defaultId) });
    return { status: 201, body: storageView(storage, defaultId), headers: { Location: `/storages/${storage.id}` } };
  });

  http.route('GET', '/storages/:id', async (ctx) => {
    access.requireSettings(ctx.subject, 'read');
    const id = ctx.params.id ?? '';
    const [storage, { defaultId }] = await Promise.all([store.get(id), store.list()]);
    if (!storage) throw storageNotFound(id);
    return { status: 200, body: storageView(storage, defaultId) };
  });

  http.route('DELETE', '/storages/:id', async (ctx) => {
    access.requireSettings(ctx.subject, 'admin');
    access.requireWritable();
    const id = ctx.params.id ?? '';
    if (id === NODE_STORAGE_ID) {
      if (!(await store.get(id))) throw storageNotFound(id);
      throw brokerError('STORAGE_RUNS_NODES', { id });
    }
    if (!(await store.get(id))) throw storageNotFound(id);
    const users = await usersOf(id);
    if (users.length > 0) throw brokerError('STORAGE_IN_USE', { id, eventTypes: users.map((u) => JSON.stringify(u)).join(', ') });
    const outcome = await store.delete(id);
    if (outcome === 'absent') throw storageNotFound(id);
    if (outcome === 'default') throw brokerError('STORAGE_IS_DEFAULT', { id });
    audit.record({ subject: ctx.subject, resource: 'storage', resourceId: id, op: 'D' });
    return { status: 204 };
  });

  http.route('PUT', '/storages/default/:id', async (ctx) => {
    access.requireSettings(ctx.subject, 'admin');
    access.requireWritable();
    const id = ctx.params.id ?? '';
    if (!(await store.setDefault(id))) throw storageNotFound(id);
    const storage = await store.get(id);
    if (!storage) throw storageNotFound(id);
    audit.record({ subject: ctx.subject, resource: 'storage', resourceId: id, op: 'U', next: storageView(storage, id) });
    return { status: 200, body: storageView(storage, id) };
  });
}
