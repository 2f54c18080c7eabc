import { describe, expect, it } from 'vitest';
import { addedPartitions, growthProblem, parsePartitionCountBody, subscriptionLimitProblems } from '../../src/domain/event-type/repartitioning.js';

describe('parsePartitionCountBody', () => {
  it.each([
    [{ partition_count: 1 }, 1],
    [{ partition_count: 8, other: 'ignored' }, 8],
  ])('accepts %j', (body, count) => {
    expect(parsePartitionCountBody(body)).toEqual({ ok: true, count });
  });

  it.each([[[]], [null], ['4'], [4]])('refuses the non-object %j with 400', (body) => {
    expect(parsePartitionCountBody(body)).toMatchObject({ ok: false, status: 400 });
  });

  it.each([[{}], [{ partition_count: null }], [{ partition_count: 0 }], [{ partition_count: -2 }], [{ partition_count: 2.5 }], [{ partition_count: '2' }], [{ partition_count: true }]])(
    'refuses %j with 422',
    (body) => {
      expect(parsePartitionCountBody(body)).toMatchObject({ ok: false, status: 422 });
    },
  );
});

describe('growthProblem', () => {
  it.each([
    [2, 3, 8, undefined],
    [2, 8, 8, undefined],
    [2, 2, 8, undefined],
    // The same count is fine even above a cap lowered since.
    [10, 10, 8, undefined],
  ])('%i → %i (cap %i) is allowed', (current, wanted, max, expected) => {
    expect(growthProblem(current, wanted, max)).toBe(expected);
  });

  it('refuses shrinking and growing past the cap', () => {
    expect(growthProblem(3, 2, 8)).toBe('partition_count can only grow: the event type has 3 partitions, 2 were requested');
    expect(growthProblem(3, 9, 8)).toBe('partition_count must not be more than 8');
    expect(growthProblem(3, 2_000_000, 10_000_000)).toBe('partition_count must not be more than 1000000');
  });
});

describe('subscriptionLimitProblems', () => {
  it('lists the subscriptions whose partitions over all event types would exceed the cap', () => {
    const problems = subscriptionLimitProblems(
      [
        { id: 's1', partitionCounts: [4, 4] },
        { id: 's2', partitionCounts: [6, 4] },
        { id: 's3', partitionCounts: [8] },
      ],
      8,
    );
    expect(problems).toEqual(['subscription s2 would have 10 partitions over its event types; at most 8 are allowed']);
  });
});

describe('addedPartitions', () => {
  it('names the partitions between the old and the new count', () => {
    expect(addedPartitions(2, 5)).toEqual(['2', '3', '4']);
    expect(addedPartitions(3, 3)).toEqual([]);
    expect(addedPartitions(4, 3)).toEqual([]);
  });
});
