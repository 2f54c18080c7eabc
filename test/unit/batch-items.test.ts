import { describe, expect, it } from 'vitest';
import { abortPoint, abortedStep, rejectedItems } from '../../src/domain/batch/batch-items.js';
import type { PublishStep } from '../../src/domain/batch/batch-item-response.js';

/** Items of a rejected batch (docs/publishing.md "Answers"). */
describe('rejectedItems', () => {
  const failures = (entries: [number, PublishStep][]) => new Map(entries.map(([i, step]) => [i, { step, detail: `item ${i} failed` }]));
  const steps = (count: number, entries: [number, PublishStep][]) =>
    rejectedItems(Array.from({ length: count }, (_, i) => `e${i}`), failures(entries)).map((item) => `${item.publishing_status}:${item.step}`);

  it.each([
    // [events, failures, expected statuses and steps]
    [3, [[0, 'validating']], ['failed:validating', 'aborted:none', 'aborted:none']],
    [3, [[2, 'validating']], ['aborted:validating', 'aborted:validating', 'failed:validating']],
    [5, [[1, 'validating'], [3, 'validating']], ['aborted:validating', 'failed:validating', 'aborted:none', 'failed:validating', 'aborted:none']],
    [4, [[2, 'partitioning']], ['aborted:partitioning', 'aborted:partitioning', 'failed:partitioning', 'aborted:validating']],
    // A validation failure comes first in step order, wherever it is in the batch.
    [4, [[0, 'partitioning'], [2, 'validating']], ['failed:partitioning', 'aborted:validating', 'failed:validating', 'aborted:none']],
    [3, [[1, 'enriching']], ['aborted:enriching', 'failed:enriching', 'aborted:partitioning']],
  ] as [number, [number, PublishStep][], string[]][])('%i events, failures %j', (count, entries, expected) => {
    expect(steps(count, entries)).toEqual(expected);
  });

  it('keeps eids and details in input order; aborted items say why', () => {
    const items = rejectedItems(['a', '', 'c'], failures([[1, 'validating']]));
    expect(items).toEqual([
      { eid: 'a', publishing_status: 'aborted', step: 'validating', detail: 'aborted: another event of the batch failed' },
      { eid: '', publishing_status: 'failed', step: 'validating', detail: 'item 1 failed' },
      { eid: 'c', publishing_status: 'aborted', step: 'none', detail: 'aborted: another event of the batch failed' },
    ]);
  });

  it('finds the abort point as the earliest step, then the lowest index', () => {
    const point = abortPoint(failures([[5, 'partitioning'], [7, 'validating'], [6, 'validating']]));
    expect(point).toEqual({ index: 6, step: 'validating' });
    expect(abortedStep(0, point)).toBe('validating');
    expect(abortedStep(9, point)).toBe('none');
  });
});
