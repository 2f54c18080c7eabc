import { describe, expect, it } from 'vitest';
import { keySlot } from '../../src/storage/redis/key-slot.js';
import { createKeys } from '../../src/storage/keys.js';

describe('keySlot', () => {
  // Expected values from `redis-cli CLUSTER KEYSLOT <key>` (Redis 7).
  it.each([
    ['123456789', 12739],
    ['foo', 12182],
    ['{user1000}.following', 3443],
    ['foo{}{bar}', 8363],
    ['foo{{bar}}zap', 4015],
    ['foo{bar}{zap}', 5061],
    ['broker:{et:orders:7}:t1:meta', 8170],
    ['é{ü}', 9552],
  ])('puts %j in slot %i, as CLUSTER KEYSLOT does', (key, slot) => {
    expect(keySlot(key)).toBe(slot);
  });

  it("puts every key of a partition in one slot (the appender routes a partition's script by it)", () => {
    const keys = createKeys('p:');
    const slots = new Set([keys.partitionMeta('a.b', 2, '3'), keys.partitionLog('a.b', 2, '3'), keys.partitionTimeIndex('a.b', 2, '3'), keys.partitionNotices('a.b', 2, '3')].map(keySlot));
    expect(slots.size).toBe(1);
  });
});
