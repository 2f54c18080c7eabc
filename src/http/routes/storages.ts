import { Type } from '@sinclair/typebox';
import { NODE_STORAGE_ID, parseStorage, storageNotFound, storageView, type Storage } from '../../domain/storages/storage.js';
import { brokerError } from '../../errors/catalog.js';
import type { AccessControl } from '../../services/access-control.js';
import type { AuditLog } from '../../services/audit-log.js';
import { probeStorage, type StorageStore } from '../../storage/storage-store.js';
import { empty, json, jsonBody, problems, routesOf, type Route } from '../api/route-model.js';
import { Location } from '../api/route-parts.js';
import { StorageInputSchema, StorageViewSchema } from '../api/wire-schemas.js';

/** Two storages that would write the same keys: the same deployment (URL, seeds or the node's own) and prefix. */
const sameKeys = (a: Storage, b: Storage): boolean =>
  a.redis_configuration.key_prefix === b.redis_configuration.key_prefix &&
  (a.redis_configuration.url ?? '') === (b.redis_configuration.url ?? '') &&
  (a.redis_configuration.cluster_nodes ?? []).join(',') === (b.redis_configuration.cluster_nodes ?? []).join(',');

/** The services the storage routes use. */
export interface StorageDeps {
  readonly store: StorageStore;
  readonly access: AccessControl;
  /** The event types with a timeline on a storage (it cannot be deleted while there are any). */
  readonly usersOf: (id: string) => Promise<string[]>;
  readonly audit: AuditLog;
}

/** `{id}` of a storage. */
const StorageIdParam = Type.Object({ id: Type.String() });

const route = routesOf<StorageDeps>();

/**
 * Storage routes (docs/operations.md "Storages and timelines"): `GET/POST /storages`, `GET/DELETE
 * /storages/{id}`, `PUT /storages/default/{id}`. Reading needs any administrators' list, changing the
 * `admins` list; changes are refused (503) while `disable_db_write_operations` is on. Creation: 409 for
 * an existing id, 422 for a broken record, for keys another storage writes, or for a deployment that
 * does not answer. Deletion: 409 for the default storage, for the node's own (`default`) and for a
 * storage in use by a timeline (not cleaned up). Changes are audited (resource `storage`). Answers show
 * `default: true` on the default storage and hide URL passwords. New event types get their first
 * timeline on the default storage.
 */
export const STORAGE_ROUTES: readonly Route<StorageDeps>[] = [
  route({
    method: 'GET', path: '/storages', operationId: 'listStorages', tag: 'Storages and timelines', access: 'authenticated',
    summary: 'List storages', responses: { '200': json('every storage', Type.Array(StorageViewSchema)), ...problems(403) },
    handler: async (ctx, { store, access }) => {
      access.requireSettings(ctx.subject, 'read');
      const { storages, defaultId } = await store.list();
      return { status: 200, body: storages.map((s) => storageView(s, defaultId)) };
    },
  }),
  route({
    method: 'POST', path: '/storages', operationId: 'createStorage', tag: 'Storages and timelines', access: 'authenticated',
    summary: 'Register a storage', body: jsonBody(StorageInputSchema),
    responses: { '201': json('registered', StorageViewSchema, { Location }), ...problems(400, 403, 409, 422, 503) },
    handler: async (ctx, { store, access, audit }) => {
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
    },
  }),
  route({
    method: 'GET', path: '/storages/{id}', operationId: 'getStorage', tag: 'Storages and timelines', access: 'authenticated',
    params: StorageIdParam,
    summary: 'Get a storage', responses: { '200': json('the storage', StorageViewSchema), ...problems(403, 404) },
    handler: async (ctx, { store, access }) => {
      access.requireSettings(ctx.subject, 'read');
      const id = ctx.input.params.id;
      const [storage, { defaultId }] = await Promise.all([store.get(id), store.list()]);
      if (!storage) throw storageNotFound(id);
      return { status: 200, body: storageView(storage, defaultId) };
    },
  }),
  route({
    method: 'DELETE', path: '/storages/{id}', operationId: 'deleteStorage', tag: 'Storages and timelines', access: 'authenticated',
    params: StorageIdParam,
    summary: 'Delete a storage', responses: { '204': empty('deleted'), ...problems(403, 404, 409, 503) },
    handler: async (ctx, { store, access, usersOf, audit }) => {
      access.requireSettings(ctx.subject, 'admin');
      access.requireWritable();
      const id = ctx.input.params.id;
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
    },
  }),
  route({
    method: 'PUT', path: '/storages/default/{id}', operationId: 'setDefaultStorage', tag: 'Storages and timelines', access: 'authenticated',
    params: StorageIdParam,
    summary: 'Make a storage the default one', responses: { '200': json('the new default storage', StorageViewSchema), ...problems(403, 404, 503) },
    handler: async (ctx, { store, access, audit }) => {
      access.requireSettings(ctx.subject, 'admin');
      access.requireWritable();
      const id = ctx.input.params.id;
      if (!(await store.setDefault(id))) throw storageNotFound(id);
      const storage = await store.get(id);
      if (!storage) throw storageNotFound(id);
      audit.record({ subject: ctx.subject, resource: 'storage', resourceId: id, op: 'U', next: storageView(storage, id) });
      return { status: 200, body: storageView(storage, id) };
    },
  }),
];

