import { describe, expect, it } from 'vitest';
import { parseStorage, storageView } from '../../src/domain/storages/storage.js';
import { BrokerError } from '../../src/errors/catalog.js';

describe('parseStorage', () => {
  it('keeps exactly the fields of a well-formed record', () => {
    expect(parseStorage({ id: 'a.b-c_1', storage_type: 'redis', redis_configuration: { key_prefix: 'x:', cluster_nodes: ['r1:7000', 'r2:7000'] }, default: true })).toEqual({
      id: 'a.b-c_1',
      storage_type: 'redis',
      redis_configuration: { key_prefix: 'x:', cluster_nodes: ['r1:7000', 'r2:7000'] },
    });
  });

  it.each([
    [{ id: '', storage_type: 'redis', redis_configuration: { key_prefix: '' } }, 'id:'],
    [{ id: 'x', storage_type: 'redis', redis_configuration: { key_prefix: 'a b' } }, 'key_prefix'],
    [{ id: 'x', storage_type: 'redis', redis_configuration: { key_prefix: '', url: 'redis://h:1', cluster_nodes: ['h:1'] } }, 'not both'],
    [{ id: 'x', storage_type: 'redis', redis_configuration: { key_prefix: '', cluster_nodes: [] } }, 'cluster_nodes'],
    [{ id: 'x', storage_type: 'redis' }, 'redis_configuration: must be an object'],
    [{ id: 'x', storage_type: 'redis', redis_configuration: { key_prefix: '', port: 1 } }, 'redis_configuration.port: unknown field'],
  ])('refuses %j with 422 naming %s', (body, part) => {
    try {
      parseStorage(body);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(BrokerError);
      expect((err as BrokerError).status).toBe(422);
      expect((err as BrokerError).message).toContain(part);
    }
  });

  it('refuses a body that is not an object with 400', () => {
    expect(() => parseStorage('x')).toThrow(expect.objectContaining({ status: 400 }) as Error);
  });
});

describe('storageView', () => {
  it('hides the password of a URL and marks the default', () => {
    const storage = parseStorage({ id: 's', storage_type: 'redis', redis_configuration: { key_prefix: '', url: 'rediss://user:s3cret@host:6380/0' } });
    expect(storageView(storage, 's')).toEqual({ ...storage, redis_configuration: { key_prefix: '', url: 'rediss://user:***@host:6380/0' }, default: true });
    expect(storageView(storage, 'other').default).toBe(false);
  });
});
