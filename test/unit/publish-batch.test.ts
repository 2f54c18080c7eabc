import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { buildPublishSpec } from '../../src/services/event-type-cache.js';
import type { EventType } from '../../src/domain/event-type.js';
import { processBatch, ValidatorCache } from '../../workers/publish-batch.js';
import type { PublishTask } from '../../workers/publish-protocol.js';
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
    expect(result.eids).toEqual(batch.map((e) => e.metadata.eid));
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

  it('reports every invalid event as failed and the rest as aborted', () => {
    const bad = { metadata: { eid: randomUUID(), occurred_at: now, published_by: 'me' }, id: 'x' };
    const result = processBatch(task([event('a'), { metadata: { eid: 'e', occurred_at: now } }, bad]), cache);
    expect(result.kind).toBe('rejected');
    if (result.kind !== 'rejected') return;
    expect(result.items.map((i) => [i.publishing_status, i.step])).toEqual([['aborted', 'none'], ['failed', 'validating'], ['failed', 'validating']]);
    expect(result.items[2]?.detail).toContain('published_by');
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
    const local = new ValidatorCache(2);
    const [one, two, three] = ['1', '2', '3'].map((v) => task([event('a')], eventType({ schema: { ...eventType().schema, schema: JSON.stringify({ type: 'object', title: v }) } })).spec);
    if (!one || !two || !three) throw new Error('specs missing');
    const first = local.get(one);
    expect(local.get(one)).toBe(first);
    local.get(two);
    local.get(three);
    expect(local.get(one)).not.toBe(first);
  });
});
