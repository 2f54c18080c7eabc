import { describe, expect, it } from 'vitest';
import { compareVersions, judgeRedisServer, MIN_REDIS_VERSION, parseInfo } from '../../src/storage/redis/redis-checks.js';

describe('Redis requirements', () => {
  it('compares versions numerically', () => {
    expect(compareVersions('7.0.0', MIN_REDIS_VERSION)).toBe(0);
    expect(compareVersions('6.2.14', '7.0.0')).toBeLessThan(0);
    expect(compareVersions('7.2.4', '7.0.15')).toBeGreaterThan(0);
    expect(compareVersions('10.0', '7.0.0')).toBeGreaterThan(0);
    expect(compareVersions('7', '7.0.0')).toBe(0);
  });

  it('reads fields of an INFO answer', () => {
    const fields = parseInfo('# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n\r\n# Memory\r\nmaxmemory_policy:allkeys-lru\r\n');
    expect(fields.get('redis_version')).toBe('7.0.15');
    expect(fields.get('maxmemory_policy')).toBe('allkeys-lru');
    expect(fields.has('# Server')).toBe(false);
  });

  it('accepts Redis 7.0 or later with noeviction', () => {
    expect(judgeRedisServer('h:1', { version: '7.0.0', policy: 'noeviction' })).toEqual({ refusals: [], warnings: [] });
    expect(judgeRedisServer('h:1', { version: '7.4.2', policy: 'noeviction' })).toEqual({ refusals: [], warnings: [] });
  });

  it.each(['allkeys-lru', 'volatile-lru', 'allkeys-lfu', 'volatile-ttl', 'allkeys-random'])('refuses maxmemory-policy %s, naming it, the server and the fix', (policy) => {
    const { refusals } = judgeRedisServer('10.0.0.5:6379', { version: '7.2.4', policy });
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toContain(`maxmemory-policy ${policy}`);
    expect(refusals[0]).toContain('10.0.0.5:6379');
    expect(refusals[0]).toContain('CONFIG SET maxmemory-policy noeviction');
    expect(refusals[0]).toContain('redis.conf');
  });

  it('refuses a Redis older than 7.0, naming the version found and the one needed', () => {
    const { refusals } = judgeRedisServer('h:1', { version: '6.2.14', policy: 'noeviction' });
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toContain('version 6.2.14');
    expect(refusals[0]).toContain(`Redis ${MIN_REDIS_VERSION} or later`);
  });

  it('gives both reasons when both fail', () => {
    expect(judgeRedisServer('h:1', { version: '5.0.7', policy: 'allkeys-lru' }).refusals).toHaveLength(2);
  });

  it('warns, without refusing, when a fact cannot be read (INFO and CONFIG refused by a managed service)', () => {
    const verdict = judgeRedisServer('h:1', {});
    expect(verdict.refusals).toEqual([]);
    expect(verdict.warnings).toHaveLength(2);
    expect(verdict.warnings.join('\n')).toMatch(/maxmemory-policy.*noeviction/);
  });
});
