import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { call, clusterRun, startTestBroker, type TestBroker } from '../support/broker.js';

/**
 * Storages (docs/operations.md "Storages and timelines"): the node's own storage `default` is
 * there from the first start; administrators add storages (another key namespace of the same Redis, or
 * another deployment that must answer), choose the default, and delete storages not in use.
 */

let broker: TestBroker;

beforeAll(async () => {
  broker = await startTestBroker();
});
afterAll(async () => {
  await broker?.stop();
});

interface StorageView {
  id: string;
  storage_type: string;
  redis_configuration: { key_prefix: string; url?: string; cluster_nodes?: string[] };
  default: boolean;
}

const storages = async (): Promise<StorageView[]> => {
  const answer = await call(broker.url, 'GET', '/storages');
  expect(answer.status).toBe(200);
  return answer.json as StorageView[];
};

describe('storages', () => {
  it("lists the node's own storage as the default from the first start", async () => {
    expect(await storages()).toEqual([{ id: 'default', storage_type: 'redis', redis_configuration: { key_prefix: broker.prefix }, default: true }]);
    expect((await call(broker.url, 'GET', '/storages/default')).json).toMatchObject({ id: 'default', default: true });
    expect((await call(broker.url, 'GET', '/storages/nowhere')).status).toBe(404);
  });

  it('creates a storage in another key namespace of the same deployment; a duplicate id is 409', async () => {
    const body = { id: 'second', storage_type: 'redis', redis_configuration: { key_prefix: `${broker.prefix}second:` } };
    const created = await call(broker.url, 'POST', '/storages', body);
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe('/storages/second');
    expect(created.json).toEqual({ ...body, default: false });
    expect((await call(broker.url, 'GET', '/storages/second')).json).toEqual({ ...body, default: false });
    expect((await storages()).map((s) => s.id)).toEqual(['default', 'second']);

    const again = await call(broker.url, 'POST', '/storages', { ...body, redis_configuration: { key_prefix: 'elsewhere:' } });
    expect(again.status).toBe(409);
    expect(again.json).toMatchObject({ status: 409, detail: 'Storage "second" already exists.' });
  });

  it('refuses broken records (422 naming every problem), keys another storage writes, and deployments that do not answer', async () => {
    expect((await call(broker.url, 'POST', '/storages', [1])).status).toBe(400);
    const broken = await call(broker.url, 'POST', '/storages', { id: 'a b', storage_type: 'kafka', redis_configuration: { key_prefix: 'p', url: 'http://x', cluster_nodes: ['x'] }, extra: 1 });
    expect(broken.status).toBe(422);
    const detail = (broken.json as { detail: string }).detail;
    for (const part of ['id:', 'storage_type:', 'extra: unknown field', 'not both', 'redis_configuration.url:', 'redis_configuration.cluster_nodes:']) expect(detail).toContain(part);

    const clash = await call(broker.url, 'POST', '/storages', { id: 'clash', storage_type: 'redis', redis_configuration: { key_prefix: broker.prefix } });
    expect(clash.status).toBe(422);
    expect((clash.json as { detail: string }).detail).toContain('storage "default" already writes keys');

    const started = Date.now();
    const unreachable = await call(broker.url, 'POST', '/storages', { id: 'gone', storage_type: 'redis', redis_configuration: { key_prefix: '', url: 'redis://127.0.0.1:1' } });
    expect(unreachable.status).toBe(422);
    expect((unreachable.json as { detail: string }).detail).toContain('the deployment does not answer');
    expect(Date.now() - started).toBeLessThan(5000);
    expect((await storages()).map((s) => s.id)).not.toContain('gone');
  });

  it.skipIf(clusterRun())('creates a storage on another deployment that answers (here: the harness Redis by URL)', async () => {
    const created = await call(broker.url, 'POST', '/storages', { id: 'by-url', storage_type: 'redis', redis_configuration: { key_prefix: 'other:', url: inject('redisUrl') } });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ id: 'by-url', redis_configuration: { url: inject('redisUrl') }, default: false });
    expect((await call(broker.url, 'DELETE', '/storages/by-url')).status).toBe(204);
  });

  it('changes the default storage; the default and the node storage cannot be deleted', async () => {
    expect((await call(broker.url, 'PUT', '/storages/default/nowhere')).status).toBe(404);
    const set = await call(broker.url, 'PUT', '/storages/default/second');
    expect(set.status).toBe(200);
    expect(set.json).toMatchObject({ id: 'second', default: true });
    expect((await storages()).filter((s) => s.default).map((s) => s.id)).toEqual(['second']);

    const refused = await call(broker.url, 'DELETE', '/storages/second');
    expect(refused.status).toBe(409);
    expect((refused.json as { detail: string }).detail).toContain('it is the default storage');

    expect((await call(broker.url, 'PUT', '/storages/default/default')).status).toBe(200);
    const own = await call(broker.url, 'DELETE', '/storages/default');
    expect(own.status).toBe(409);
    expect((own.json as { detail: string }).detail).toContain('the storage the broker nodes run on');

    expect((await call(broker.url, 'DELETE', '/storages/second')).status).toBe(204);
    expect((await call(broker.url, 'DELETE', '/storages/second')).status).toBe(404);
    expect((await storages()).map((s) => s.id)).toEqual(['default']);
  });

  it('refuses changes in read-only mode and to subjects outside the administrators', async () => {
    const body = { id: 'late', storage_type: 'redis', redis_configuration: { key_prefix: `${broker.prefix}late:` } };
    expect((await call(broker.url, 'POST', '/settings/features', { feature: 'disable_db_write_operations', enabled: true })).status).toBe(204);
    expect((await call(broker.url, 'POST', '/storages', body)).status).toBe(503);
    expect((await call(broker.url, 'POST', '/settings/features', { feature: 'disable_db_write_operations', enabled: false })).status).toBe(204);

    const others = [{ data_type: 'user', value: 'someone-else' }];
    expect((await call(broker.url, 'POST', '/settings/admins', { admins: others, readers: others, writers: others })).status).toBe(200);
    expect((await call(broker.url, 'GET', '/storages')).status).toBe(403);
    expect((await call(broker.url, 'POST', '/storages', body)).status).toBe(403);
    expect((await call(broker.url, 'DELETE', '/storages/default')).status).toBe(403);
  });
});
