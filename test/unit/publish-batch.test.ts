import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { buildPublishSpec } from '../../src/services/event-types/event-type-cache.js';
import type { EventType } from '../../src/domain/event-type/event-type.js';
import { processBatch } from '../../workers/publish-batch.js';
import { eidsOfPayloads } from '../../workers/stored-texts.js';
import { compiledValidatorBytes, ValidatorCache } from '../../workers/validator-cache.js';
import type { PublishTask, PublishTaskSpec } from '../../workers/publish-protocol.js';
import { eventTypeRecord } from '../support/fixtures.js';

const now = '2026-01-01T00:00:00.000Z';

const eventType = (overrides: Partial<EventType> = {}): EventType => eventTypeRecord(overrides, '1.2.0');

function task(events: unknown, et = eventType(), partitionCount = 3, maxEventBytes = 999_000): PublishTask {
  return {
    kind: 'publish',
    body: Buffer.from(typeof events === 'string' ? events : JSON.stringify(events)),
    spec: buildPublishSpec({ record: et, topology: { partitionCount, timeline: 1 } }),
    maxEventBytes,
    receivedAt: now,
    publishedBy: 'tester',
    flowId: 'flow-1',
  };
}

const event = (id: string) => ({ metadata: { eid: randomUUID(), occurred_at: now }, id });
const cache = new ValidatorCache();

describe('processBatch (the worker hot path)', () => {
  it('groups serialized, enriched events per partition in input order', () => {
    const batch = Array.from({ length: 30 }, (_, i) => event(`k${i % 5}`));
    const result = processBatch(task(batch), cache);
    if (result.kind !== 'accepted') throw new Error(JSON.stringify(result));
    expect(result.itemPartitions.length).toBe(30);
    // A 207 answer reads the eids back from the stored texts, in input order.
    expect(eidsOfPayloads(result.partitions, result.itemPartitions)).toEqual(batch.map((e) => e.metadata.eid));
    const perPartition = result.partitions.map((p) => Buffer.from(p.data).toString().split('\n').map((t) => JSON.parse(t) as { id: string; metadata: Record<string, string> }));
    expect(perPartition.flat().length).toBe(30);
    for (const [i, p] of result.partitions.entries()) {
      const events = perPartition[i] ?? [];
      expect(events.length).toBe(p.count);
      for (const e of events) {
        expect(e.metadata).toMatchObject({ received_at: now, event_type: 'unit.order', version: '1.2.0', partition: String(p.partition), published_by: 'tester', flow_id: 'flow-1' });
      }
      const order = events.map((e) => batch.findIndex((b) => b.metadata.eid === e.metadata.eid));
      expect(order).toEqual([...order].sort((a, b) => a - b));
    }
    const partitionsOfKey = new Map<string, Set<number>>();
    result.itemPartitions.forEach((p, i) => partitionsOfKey.set(batch[i]?.id ?? '', (partitionsOfKey.get(batch[i]?.id ?? '') ?? new Set()).add(p)));
    expect([...partitionsOfKey.values()].every((set) => set.size === 1)).toBe(true);
  });

  it('reads the eids back from the stored texts whatever their source: spliced, serialized, none sent (category undefined)', () => {
    // Serialized: a newline between tokens, a duplicate key, a producer's own metadata.partition.
    const texts = [
      JSON.stringify(event('a')),
      `{"metadata":\n{"eid":"${randomUUID()}","occurred_at":"${now}"},"id":"b"}`,
      `{"id":"c","id":"c2","metadata":{"eid":"${randomUUID()}","occurred_at":"${now}"}}`,
      JSON.stringify({ metadata: { eid: randomUUID(), occurred_at: now, partition: '1' }, id: 'd' }),
    ];
    const eids = texts.map((t) => (JSON.parse(t) as { metadata: { eid: string } }).metadata.eid);
    const result = processBatch(task(`[${texts.join(',')}]`), cache);
    if (result.kind !== 'accepted') throw new Error(JSON.stringify(result));
    expect(eidsOfPayloads(result.partitions, result.itemPartitions)).toEqual(eids);

    const plain = [{ id: 1 }, { id: 2, metadata: { eid: 'not validated here' } }, { id: 3, metadata: 'no object' }];
    const undefinedCategory = processBatch(task(plain, eventType({ category: 'undefined', enrichment_strategies: [] })), cache);
    if (undefinedCategory.kind !== 'accepted') throw new Error(JSON.stringify(undefinedCategory));
    expect(eidsOfPayloads(undefinedCategory.partitions, undefinedCategory.itemPartitions)).toEqual(['', 'not validated here', '']);
  });

  it('reports every invalid event as failed; the rest aborted at validating before the first failure, at none after it', () => {
    const bad = { metadata: { eid: randomUUID(), occurred_at: now, published_by: 'me' }, id: 'x' };
    const result = processBatch(task([event('a'), { metadata: { eid: 'e', occurred_at: now } }, event('b'), bad, event('c')]), cache);
    expect(result.kind).toBe('rejected');
    if (result.kind !== 'rejected') return;
    expect(result.items.map((i) => [i.publishing_status, i.step])).toEqual([
      ['aborted', 'validating'],
      ['failed', 'validating'],
      ['aborted', 'none'],
      ['failed', 'validating'],
      ['aborted', 'none'],
    ]);
    expect(result.items[3]?.detail).toContain('published_by');
  });

  it('after a partitioning failure, reports items before it at partitioning and items after it at validating', () => {
    const userDefined = eventType({ partition_strategy: 'user_defined', partition_key_fields: [] });
    const at = (partition: string | undefined) => ({ metadata: { eid: randomUUID(), occurred_at: now, ...(partition === undefined ? {} : { partition }) }, id: 'x' });
    const result = processBatch(task([at('0'), at('7'), at('1'), at(undefined)], userDefined), cache);
    if (result.kind !== 'rejected') throw new Error(JSON.stringify(result));
    expect(result.items.map((i) => [i.publishing_status, i.step])).toEqual([
      ['aborted', 'partitioning'],
      ['failed', 'partitioning'],
      ['aborted', 'validating'],
      ['failed', 'partitioning'],
    ]);
    // A validation failure anywhere comes first in step order: the batch counts as aborted there.
    const mixed = processBatch(task([at('0'), at('7'), at('1'), { metadata: { eid: 'not-a-uuid', occurred_at: now }, id: 'x' }, at('2')], userDefined), cache);
    if (mixed.kind !== 'rejected') throw new Error(JSON.stringify(mixed));
    expect(mixed.items.map((i) => [i.publishing_status, i.step])).toEqual([
      ['aborted', 'validating'],
      ['failed', 'partitioning'],
      ['aborted', 'validating'],
      ['failed', 'validating'],
      ['aborted', 'none'],
    ]);
  });

  it.each([
    ['{"a":1}', /array/],
    ['[1]', /item 0/],
    ['[{"a":', /JSON/],
  ])('calls %s malformed', (body, detail) => {
    const result = processBatch(task(body), cache);
    expect(result.kind).toBe('malformed');
    if (result.kind === 'malformed') expect(result.detail).toMatch(detail);
  });

  it('checks event sizes only when the body exceeds the limit, measuring the stored text', () => {
    const small = processBatch(task([event('a')], eventType(), 1, 10_000), cache);
    expect(small.kind).toBe('accepted');
    const big = processBatch(task([event('a'), { ...event('b'), pad: 'x'.repeat(600) }], eventType(), 1, 500), cache);
    expect(big.kind).toBe('rejected');
  });

  it('keeps one compiled validator per schema key', () => {
    const local = new ValidatorCache({ maxEntries: 2, maxBytes: 1_000_000 });
    const [one, two, three] = ['1', '2', '3'].map((v) => task([event('a')], eventType({ schema: { ...eventType().schema, schema: JSON.stringify({ type: 'object', title: v }) } })).spec);
    if (!one || !two || !three) throw new Error('specs missing');
    const first = local.get(one);
    expect(local.get(one)).toBe(first);
    local.get(two);
    local.get(three);
    expect(local.get(one)).not.toBe(first);
  });

  it('bounds the validators it keeps by their estimated heap (from their schema texts), not only by their count', () => {
    const specOf = (title: string): PublishTaskSpec => task([event('a')], eventType({ schema: { ...eventType().schema, schema: JSON.stringify({ type: 'object', title, description: 'd'.repeat(1000) }) } })).spec;
    const [one, two, three] = ['1', '2', '3'].map(specOf);
    if (!one?.effectiveSchema || !two?.effectiveSchema || !three?.effectiveSchema) throw new Error('specs missing');
    // Room for two of the three validators (of equal size) and not for three.
    const twoTexts = compiledValidatorBytes(one.effectiveSchema.length) + compiledValidatorBytes(two.effectiveSchema.length);
    const local = new ValidatorCache({ maxEntries: 100, maxBytes: twoTexts + 10 });
    const first = local.get(one);
    local.get(two);
    expect(local.size).toBe(2);
    expect(local.bytes).toBe(twoTexts);
    local.get(three);
    expect(local.size).toBe(2);
    expect(local.has(one.schemaKey)).toBe(false);
    expect(local.get(one)).not.toBe(first);
    // A validator estimated larger than the whole bound is compiled and used, not kept.
    const huge = specOf('x'.repeat(twoTexts / 5));
    // (an empty object lacks the business `metadata` the effective schema requires)
    expect(local.get(huge).validate({})).toBe(false);
    expect(local.get(huge).validate({ metadata: { eid: randomUUID(), occurred_at: now } })).toBe(true);
    expect(local.has(huge.schemaKey)).toBe(false);
  });
});
