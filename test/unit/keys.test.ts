import { describe, expect, it } from 'vitest';
import { createKeys } from '../../src/storage/keys.js';

/** The slot-deciding part of a key (Redis Cluster hash tag). */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  const close = key.indexOf('}', open + 1);
  return open >= 0 && close > open + 1 ? key.slice(open + 1, close) : key;
}

describe('key builder', () => {
  const keys = createKeys('broker:');

  it("keeps a partition's keys in one slot and spreads partitions", () => {
    const tags = new Set(
      [keys.partitionLog('a.b', 1, '0'), keys.partitionMeta('a.b', 1, '0'), keys.partitionTimeIndex('a.b', 1, '0'), keys.partitionNotices('a.b', 1, '0'), keys.partitionReplicatedNotices('a.b', 1, '0')].map(hashTag),
    );
    expect(tags.size).toBe(1);
    expect(hashTag(keys.partitionLog('a.b', 1, '1'))).not.toBe(hashTag(keys.partitionLog('a.b', 1, '0')));
  });

  it('keeps registry keys in one slot', () => {
    expect(new Set([keys.eventTypeNames, keys.eventType('x'), keys.eventTypeSchemas('x')].map(hashTag))).toEqual(new Set(['registry']));
  });

  it.each(['a}b', 'a{b', 'x:y', '../etc', 'a b', '', '1a'])('refuses to build keys from the name %j', (name) => {
    expect(() => keys.eventType(name)).toThrow();
    expect(() => keys.partitionLog(name, 1, '0')).toThrow();
  });

  it.each(['-1', '01', 'a', '1}'])('refuses partition %j', (partition) => {
    expect(() => keys.partitionLog('ok', 1, partition)).toThrow();
  });
});
