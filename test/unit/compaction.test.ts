import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { planTombstones } from '../../src/domain/storages/deleted-events.js';
import type { EventType } from '../../src/domain/event-type/event-type.js';
import { hashPartition } from '../../src/domain/event-type/partitioner.js';
import { buildPublishSpec } from '../../src/services/event-types/event-type-cache.js';
import { createKeys } from '../../src/storage/keys.js';
import { appendCall } from '../../src/storage/partition-store.js';
import { processBatch } from '../../workers/publish-batch.js';
import { ValidatorCache } from '../../workers/validator-cache.js';
import type { PublishSpec } from '../../src/domain/batch/publish-spec.js';
import { eventTypeRecord } from '../support/fixtures.js';

/** Log compaction and deleted events (docs/concepts.md "Retention and compaction"): the pure parts. Redis behaviour is in test/integration/compaction.test.ts. */

const now = '2026-01-01T00:00:00.000Z';

const eventType = (overrides: Partial<EventType> = {}): EventType => eventTypeRecord({ name: 'unit.compacted', cleanup_policy: 'compact', ...overrides });

const spec = (overrides: Partial<EventType> = {}, partitionCount = 4): PublishSpec => buildPublishSpec({ record: eventType(overrides), topology: { partitionCount, timeline: 1 } });

/** An event with compaction key `key` (null = none). */
const event = (id: string, key: string | null = id) => ({ metadata: { eid: randomUUID(), occurred_at: now, ...(key === null ? {} : { partition_compaction_key: key }) }, id });

describe('publish spec and worker output for compacted event types', () => {
  it.each([
    ['delete', undefined],
    ['compact', true],
    ['compact_and_delete', true],
  ] as const)('cleanup_policy %s → compacted %s', (policy, compacted) => {
    expect(spec({ cleanup_policy: policy }).compacted).toBe(compacted);
  });

  it('hands each partition its events’ compaction keys, in event order', () => {
    const s = spec();
    const events = [event('a', 'k1'), event('b', 'k2'), event('a', 'k3'), event('c', 'k1')];
    const result = processBatch({ kind: 'publish', body: Buffer.from(JSON.stringify(events)), spec: s, maxEventBytes: 999_000, receivedAt: now, publishedBy: 'u', flowId: 'f' }, new ValidatorCache());
    expect(result.kind).toBe('accepted');
    if (result.kind !== 'accepted') return;
    for (const payload of result.partitions) {
      const texts = Buffer.from(payload.data).toString().split('\n');
      expect(payload.compactionKeys).toHaveLength(payload.count);
      expect(payload.compactionKeys).toEqual(texts.map((t) => (JSON.parse(t) as { metadata: { partition_compaction_key: string } }).metadata.partition_compaction_key));
    }
    expect(result.partitions.flatMap((p) => p.compactionKeys ?? []).sort()).toEqual(['k1', 'k1', 'k2', 'k3']);
  });

  it('carries no compaction keys for cleanup_policy delete', () => {
    const s = spec({ cleanup_policy: 'delete' });
    const result = processBatch({ kind: 'publish', body: Buffer.from(JSON.stringify([event('a', null)])), spec: s, maxEventBytes: 999_000, receivedAt: now, publishedBy: 'u', flowId: 'f' }, new ValidatorCache());
    expect(result.kind).toBe('accepted');
    if (result.kind === 'accepted') expect(result.partitions[0]?.compactionKeys).toBeUndefined();
  });

  it('rejects an event without a compaction key (422, step validating)', () => {
    const result = processBatch({ kind: 'publish', body: Buffer.from(JSON.stringify([event('a', null)])), spec: spec(), maxEventBytes: 999_000, receivedAt: now, publishedBy: 'u', flowId: 'f' }, new ValidatorCache());
    expect(result).toMatchObject({ kind: 'rejected', items: [{ publishing_status: 'failed', step: 'validating' }] });
  });
});

describe('appendCall', () => {
  const keys = createKeys('p:');
  it('uses publishBatch without compaction keys and publishCompacted (with the index key in the partition slot) with them', () => {
    const data = Buffer.from('{"a":1}\n{"a":2}');
    const timeline = { order: 1, id: 'a-timeline-id' };
    expect(appendCall(keys, 'et', timeline, { partition: '2', count: 2, data })).toMatchObject({ script: 'publishBatch', args: [2, data, 'a-timeline-id'] });
    const compacted = appendCall(keys, 'et', timeline, { partition: '2', count: 2, data, compactionKeys: ['x', 'y'] });
    expect(compacted.script).toBe('publishCompacted');
    expect(compacted.args).toEqual([2, data, 'a-timeline-id', 'x', 'y']);
    expect(compacted.keys).toHaveLength(5);
    for (const key of compacted.keys) expect(key).toContain('{et:et:2}');
    expect(keys.partitionTombstones('et', 1, '2')).toContain('{et:et:2}');
  });
});

describe('planTombstones (deleted-events)', () => {
  it('refuses a body that is not an array of objects (400)', () => {
    expect(planTombstones({}, spec())).toMatchObject({ kind: 'malformed' });
    expect(planTombstones([1], spec())).toMatchObject({ kind: 'malformed' });
  });

  it('places each key in the partition its compaction key hashes to under hash partitioning, once per partition', () => {
    const s = spec();
    expect(s.partitionKeyPaths).toEqual([['metadata', 'partition_compaction_key']]);
    const plan = planTombstones([event('a', 'k'), event('b', 'k'), event('a', 'j')], s);
    expect(plan.kind).toBe('planned');
    if (plan.kind !== 'planned') return;
    const pk = hashPartition({ metadata: { partition_compaction_key: 'k' } }, [['metadata', 'partition_compaction_key']], 4) as number;
    const pj = hashPartition({ metadata: { partition_compaction_key: 'j' } }, [['metadata', 'partition_compaction_key']], 4) as number;
    expect(plan.itemPartitions).toEqual([[pk], [pk], [pj]]);
    if (pk === pj) expect([...(plan.partitions.get(pk) ?? [])].sort()).toEqual(['j', 'k']);
    else expect([...(plan.partitions.get(pk) ?? [])]).toEqual(['k']);
  });

  it('keeps partition_key_fields for event types that are not compacted', () => {
    expect(spec({ cleanup_policy: 'delete', partition_key_fields: ['id'] }).partitionKeyPaths).toEqual([['id']]);
  });

  it('sends a key to every partition under random partitioning, and to metadata.partition under user_defined', () => {
    const random = planTombstones([{ metadata: { partition_compaction_key: 'k' } }], spec({ partition_strategy: 'random', partition_key_fields: [] }, 3));
    expect(random).toMatchObject({ kind: 'planned', itemPartitions: [[0, 1, 2]] });
    const userDefined = planTombstones([{ metadata: { partition_compaction_key: 'k', partition: '2' } }], spec({ partition_strategy: 'user_defined', partition_key_fields: [] }, 3));
    expect(userDefined).toMatchObject({ kind: 'planned', itemPartitions: [[2]] });
  });

  it('answers 422 items when a key or the partition data is missing; the others are aborted', () => {
    const plan = planTombstones([{ metadata: { eid: 'e1', partition_compaction_key: 'k' }, id: 'a' }, { metadata: { eid: 'e2' }, id: 'a' }, { metadata: { partition_compaction_key: '' }, id: 'a' }, { metadata: { partition_compaction_key: 'k' } }], spec());
    expect(plan).toMatchObject({
      kind: 'rejected',
      items: [
        { eid: 'e1', publishing_status: 'aborted', step: 'validating' },
        { eid: 'e2', publishing_status: 'failed', step: 'validating' },
        { eid: '', publishing_status: 'failed', step: 'validating' },
        { eid: '', publishing_status: 'aborted', step: 'none' },
      ],
    });
    const userDefined = planTombstones([{ metadata: { partition_compaction_key: 'k' } }], spec({ partition_strategy: 'user_defined', partition_key_fields: [] }, 3));
    expect(userDefined).toMatchObject({ kind: 'rejected', items: [{ publishing_status: 'failed', step: 'partitioning' }] });
  });
});
