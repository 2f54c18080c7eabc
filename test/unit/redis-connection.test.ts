import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { BrokerError } from '../../src/errors/catalog.js';
import { parseClusterNode, storageError } from '../../src/storage/redis/redis-connection.js';

describe('storageError', () => {
  it.each([
    'Command timed out',
    'Connection is closed.',
    'connect ECONNREFUSED 127.0.0.1:6379',
    'MOVED 8925 127.0.0.1:7001',
    'ASK 8925 127.0.0.1:7001',
    'TRYAGAIN Multiple keys request during rehashing of slot',
    'CLUSTERDOWN The cluster is down',
    'Too many Cluster redirections. Last error: Error: Connection is closed.',
    "Cluster isn't ready and enableOfflineQueue options is false",
    'All keys in the pipeline should belong to the same slots allocation group',
    'None of startup nodes is available',
  ])('maps "%s" to 503 STORAGE_UNAVAILABLE with Retry-After', (message) => {
    let thrown: unknown;
    try {
      storageError(new Error(message));
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(BrokerError);
    expect((thrown as BrokerError).code).toBe('STORAGE_UNAVAILABLE');
    expect((thrown as BrokerError).headers).toEqual({ 'Retry-After': '1' });
  });

  it('rethrows other errors unchanged (bugs answer 500)', () => {
    const bug = new Error('WRONGTYPE Operation against a key holding the wrong kind of value');
    expect(() => storageError(bug)).toThrow(bug);
    expect(() => storageError(new Error('CROSSSLOT Keys in request do not hash to the same slot'))).toThrow(/CROSSSLOT/);
    expect(() => storageError(new Error('a TASK failed'))).toThrow(/TASK/);
  });
});

describe('cluster configuration', () => {
  it('parses seed nodes host:port, IPv6 in brackets', () => {
    expect(parseClusterNode('10.0.0.1:7000')).toEqual({ host: '10.0.0.1', port: 7000 });
    expect(parseClusterNode('redis-a.internal:6379')).toEqual({ host: 'redis-a.internal', port: 6379 });
    expect(parseClusterNode('[::1]:7001')).toEqual({ host: '::1', port: 7001 });
    for (const bad of ['10.0.0.1', ':7000', 'host:0', 'host:70000', 'a:b:1']) expect(() => parseClusterNode(bad), bad).toThrow(/host:port/);
  });

  it('reads redis.clusterNodes from BROKER_REDIS_CLUSTER_NODES (JSON) and refuses it together with redis.url', () => {
    expect(loadConfig({}).redis.clusterNodes).toEqual([]);
    expect(loadConfig({ BROKER_REDIS_CLUSTER_NODES: '["127.0.0.1:7000","127.0.0.1:7001"]' }).redis.clusterNodes).toEqual(['127.0.0.1:7000', '127.0.0.1:7001']);
    expect(() => loadConfig({ BROKER_REDIS_CLUSTER_NODES: '["no-port"]' })).toThrow('redis.clusterNodes');
    expect(() => loadConfig({ BROKER_REDIS_CLUSTER_NODES: '127.0.0.1:7000' })).toThrow('redis.clusterNodes');
    expect(() => loadConfig({ BROKER_REDIS_CLUSTER_NODES: '["127.0.0.1:7000"]', BROKER_REDIS_URL: 'redis://h:1' })).toThrow('redis.clusterNodes');
  });
});
