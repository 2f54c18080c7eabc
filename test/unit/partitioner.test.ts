import { describe, expect, it } from 'vitest';
import { fnv1a32, hashPartition, readPath, userDefinedPartition } from '../../src/domain/event-type/partitioner.js';

describe('partitioner', () => {
  it('computes FNV-1a 32-bit test vectors', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
  });

  it('maps equal keys to the same partition and spreads different keys', () => {
    const paths = [['data', 'id']];
    const partitionOf = (id: unknown) => hashPartition({ data: { id, other: Math.random() } }, paths, 8);
    expect(partitionOf('k1')).toBe(partitionOf('k1'));
    const used = new Set(Array.from({ length: 200 }, (_, i) => partitionOf(`key-${i}`)));
    expect(used.size).toBe(8);
    expect(typeof hashPartition({ data: {} }, paths, 8)).toBe('string');
  });

  it('distinguishes key values that stringify alike', () => {
    const paths = [['a'], ['b']];
    const samples = Array.from({ length: 50 }, (_, i) => [hashPartition({ a: `x${i}`, b: 'y' }, paths, 1024), hashPartition({ a: 'x', b: `${i}y` }, paths, 1024)]);
    expect(samples.some(([p, q]) => p !== q)).toBe(true);
  });

  it('reads dotted paths', () => {
    expect(readPath({ a: { b: { c: 3 } } }, ['a', 'b', 'c'])).toBe(3);
    expect(readPath({ a: [1] }, ['a', '0'])).toBeUndefined();
    expect(readPath(null, ['a'])).toBeUndefined();
  });

  it('takes user_defined partitions from metadata.partition', () => {
    expect(userDefinedPartition({ metadata: { partition: '2' } }, 4)).toBe(2);
    expect(userDefinedPartition({ metadata: { partition: '4' } }, 4)).toMatch(/does not exist/);
    expect(userDefinedPartition({ metadata: { partition: '01' } }, 4)).toMatch(/does not exist/);
    expect(userDefinedPartition({ metadata: {} }, 4)).toMatch(/required/);
  });
});
