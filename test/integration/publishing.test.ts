import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatOffset } from '../../src/domain/cursor/offsets.js';
import type { RedisClient } from '../../src/storage/redis/redis-connection.js';
import { afterChangeNotice, call, harnessRedis, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent, schemaText } from '../support/fixtures.js';
import { decodeEntry } from '../../src/domain/batch/entry-codec.js';

let broker: TestBroker;
let redis: RedisClient;

beforeAll(async () => {
  broker = await startTestBroker({ BROKER_PUBLISH_MAX_EVENT_BYTES: '2000' });
  redis = harnessRedis();
});
afterAll(async () => {
  await broker.stop();
  redis.disconnect();
});

const fourPartitions = { default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: 4, write_parallelism: 4 } };

/** Every stored event of a partition, parsed, in offset order (read straight from the stream). */
async function storedEvents(name: string, partition: string): Promise<Record<string, unknown>[]> {
  const entries = await redis.xrangeBuffer(broker.keys.partitionLog(name, 1, partition), '-', '+');
  return entries.flatMap(([, fields]) => {
    const data = decodeEntry(fields[2] ?? 'd', fields[3] ?? Buffer.alloc(0)).toString();
    return data.split('\n').map((text) => JSON.parse(text) as Record<string, unknown>);
  });
}

/** The keys of a partition of timeline 1 that an append writes: log, meta and time index. */
function partitionKeys(name: string, partition: string): string[] {
  return [broker.keys.partitionLog(name, 1, partition), broker.keys.partitionMeta(name, 1, partition), broker.keys.partitionTimeIndex(name, 1, partition)];
}

/** Drops partitions as the registry's deletion does (one key at a time: on a cluster they are in other slots than each other). */
async function dropPartitions(name: string, partitions: readonly string[]): Promise<void> {
  for (const p of partitions) for (const key of partitionKeys(name, p)) await redis.del(key);
}

async function newest(name: string): Promise<string[]> {
  const partitions = (await call(broker.url, 'GET', `/event-types/${name}/partitions`)).json as { newest_available_offset: string }[];
  return partitions.map((p) => p.newest_available_offset);
}

describe('publishing', () => {
  it('answers 200 with an empty body, stores events in array order per partition, enriched, one stream entry per partition per batch', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('pub.order', fourPartitions));
    const batch = Array.from({ length: 200 }, (_, i) => orderEvent(`O${i}`, { seq: i }));
    const answer = await call(broker.url, 'POST', '/event-types/pub.order/events', batch, { 'X-Flow-Id': 'flow-123' });
    expect(answer.status).toBe(200);
    expect(answer.text).toBe('');
    expect(answer.headers.get('x-flow-id')).toBe('flow-123');

    let total = 0;
    for (const p of ['0', '1', '2', '3']) {
      const events = await storedEvents('pub.order', p);
      total += events.length;
      const seqs = events.map((e) => e.seq as number);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
      expect(await redis.xlen(broker.keys.partitionLog('pub.order', 1, p))).toBe(events.length > 0 ? 1 : 0);
      for (const event of events) {
        expect(event.metadata).toMatchObject({ event_type: 'pub.order', version: '1.0.0', partition: p, published_by: 'unauthenticated', flow_id: 'flow-123' });
        expect(Date.parse((event.metadata as { received_at: string }).received_at)).not.toBeNaN();
      }
    }
    expect(total).toBe(200);
    const offsets = await newest('pub.order');
    const counts = await Promise.all(['0', '1', '2', '3'].map(async (p) => (await storedEvents('pub.order', p)).length));
    expect(offsets).toEqual(counts.map((c) => formatOffset(1, c - 1)));
  });

  it('keeps a producer-set flow_id, and generates a flow id when the request has none', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('pub.flow'));
    const own = orderEvent('F1');
    (own.metadata as Record<string, unknown>).flow_id = 'producer-flow';
    const answer = await call(broker.url, 'POST', '/event-types/pub.flow/events', [own, orderEvent('F2')]);
    const generated = answer.headers.get('x-flow-id');
    expect(generated).toMatch(/^[0-9a-f-]{36}$/);
    const events = await storedEvents('pub.flow', '0');
    expect(events.map((e) => (e.metadata as { flow_id: string }).flow_id)).toEqual(['producer-flow', generated]);
  });

  it('maps equal hash keys to the same partition', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('pub.hash', { ...fourPartitions, partition_strategy: 'hash', partition_key_fields: ['order_number'] }));
    const keys = ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta'];
    for (let round = 0; round < 3; round++) {
      const answer = await call(broker.url, 'POST', '/event-types/pub.hash/events', keys.map((k) => orderEvent(k, { round })));
      expect(answer.status).toBe(200);
    }
    const partitionOfKey = new Map<string, Set<string>>();
    for (const p of ['0', '1', '2', '3']) {
      for (const event of await storedEvents('pub.hash', p)) {
        const set = partitionOfKey.get(event.order_number as string) ?? new Set();
        set.add(p);
        partitionOfKey.set(event.order_number as string, set);
      }
    }
    expect([...partitionOfKey.keys()].sort()).toEqual([...keys].sort());
    for (const set of partitionOfKey.values()) expect(set.size).toBe(1);
    expect(new Set([...partitionOfKey.values()].map((s) => [...s][0])).size).toBeGreaterThan(1);
  });

  it('uses metadata.partition under user_defined and rejects a missing or unknown one at the partitioning step', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('pub.user', { ...fourPartitions, partition_strategy: 'user_defined' }));
    const to = (p: string | undefined) => {
      const event = orderEvent('U');
      if (p !== undefined) (event.metadata as Record<string, unknown>).partition = p;
      return event;
    };
    expect((await call(broker.url, 'POST', '/event-types/pub.user/events', [to('2'), to('2'), to('0')])).status).toBe(200);
    expect((await storedEvents('pub.user', '2')).length).toBe(2);
    const rejected = await call(broker.url, 'POST', '/event-types/pub.user/events', [to('1'), to(undefined), to('9')]);
    expect(rejected.status).toBe(422);
    expect(rejected.json).toMatchObject([
      { publishing_status: 'aborted' },
      { publishing_status: 'failed', step: 'partitioning' },
      { publishing_status: 'failed', step: 'partitioning' },
    ]);
    expect((await storedEvents('pub.user', '1')).length).toBe(0);
  });

  it('answers 422 with one item per event and writes nothing when any event is invalid', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('pub.invalid', fourPartitions));
    const before = await newest('pub.invalid');
    const withReceivedAt = orderEvent('R');
    (withReceivedAt.metadata as Record<string, unknown>).received_at = new Date().toISOString();
    const wrongType = orderEvent('W');
    (wrongType.metadata as Record<string, unknown>).event_type = 'other.type';
    const batch = [orderEvent('ok1'), { metadata: { eid: 'not-a-uuid', occurred_at: 'x' }, order_number: 'bad' }, orderEvent('ok2'), withReceivedAt, wrongType, { metadata: (orderEvent('m').metadata as object) }];
    const answer = await call(broker.url, 'POST', '/event-types/pub.invalid/events', batch);
    expect(answer.status).toBe(422);
    expect(answer.headers.get('content-type')).toBe('application/json');
    const items = answer.json as { eid: string; publishing_status: string; step: string; detail: string }[];
    expect(items.map((i) => i.publishing_status)).toEqual(['aborted', 'failed', 'aborted', 'failed', 'failed', 'failed']);
    expect(items[1]).toMatchObject({ eid: 'not-a-uuid', step: 'validating' });
    expect(items[3]?.detail).toContain('received_at');
    expect(items[4]?.detail).toContain('other.type');
    expect(items[5]?.detail).toContain('order_number');
    expect(items[0]?.eid).toBe((batch[0]?.metadata as { eid: string }).eid);
    expect(await newest('pub.invalid')).toEqual(before);
  });

  it('reports aborted items before the first invalid event at step validating, after it at none (none only when an earlier event failed validation)', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('pub.steps', fourPartitions));
    const invalid = { metadata: { eid: 'not-a-uuid', occurred_at: new Date().toISOString() }, order_number: 'bad' };
    const noOrder = { metadata: orderEvent('x').metadata };
    const batch = [orderEvent('a'), orderEvent('b'), invalid, orderEvent('c'), noOrder, orderEvent('d')];
    const answer = await call(broker.url, 'POST', '/event-types/pub.steps/events', batch);
    expect(answer.status).toBe(422);
    const items = answer.json as { eid: string; publishing_status: string; step: string; detail: string }[];
    expect(items.map((i) => [i.publishing_status, i.step])).toEqual([
      ['aborted', 'validating'],
      ['aborted', 'validating'],
      ['failed', 'validating'],
      ['aborted', 'none'],
      ['failed', 'validating'],
      ['aborted', 'none'],
    ]);
    expect(items.map((i) => i.eid)).toEqual(batch.map((e) => (e.metadata as { eid: string }).eid));
    for (const item of items.filter((i) => i.publishing_status === 'aborted')) expect(item.detail).toBe('aborted: another event of the batch failed');
    expect(await newest('pub.steps')).toEqual(['001-0001--1', '001-0001--1', '001-0001--1', '001-0001--1']);

    // A partitioning failure: every event passed validation, so later items report validating, earlier ones partitioning.
    await call(broker.url, 'POST', '/event-types', businessEventType('pub.steps.user', { ...fourPartitions, partition_strategy: 'user_defined' }));
    const to = (partition: string) => {
      const event = orderEvent('U');
      (event.metadata as Record<string, unknown>).partition = partition;
      return event;
    };
    const partitioned = await call(broker.url, 'POST', '/event-types/pub.steps.user/events', [to('1'), to('9'), to('2')]);
    expect(partitioned.status).toBe(422);
    expect((partitioned.json as { publishing_status: string; step: string }[]).map((i) => [i.publishing_status, i.step])).toEqual([
      ['aborted', 'partitioning'],
      ['failed', 'partitioning'],
      ['aborted', 'validating'],
    ]);
    expect(await newest('pub.steps.user')).toEqual(['001-0001--1', '001-0001--1', '001-0001--1', '001-0001--1']);
  });

  it('refuses events above the size limit at the validating step, writing nothing', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('pub.size'));
    const answer = await call(broker.url, 'POST', '/event-types/pub.size/events', [orderEvent('small'), orderEvent('big', { pad: 'x'.repeat(3000) })]);
    expect(answer.status).toBe(422);
    expect(answer.json).toMatchObject([{ publishing_status: 'aborted' }, { publishing_status: 'failed', step: 'validating' }]);
    expect((answer.json as { detail: string }[])[1]?.detail).toMatch(/exceeds the limit of 2000 bytes/);
    expect(await newest('pub.size')).toEqual(['001-0001--1']);
  });

  it.each([
    ['an object', '{"a":1}'],
    ['an array with a non-object', '[{"metadata":{}}, 3]'],
    ['invalid JSON', '[{"a":'],
    ['an empty body', ''],
  ])('answers 400 for a body that is %s', async (_what, body) => {
    await call(broker.url, 'POST', '/event-types', businessEventType('pub.malformed'));
    const answer = await call(broker.url, 'POST', '/event-types/pub.malformed/events', body);
    expect(answer.status).toBe(400);
    expect(answer.headers.get('content-type')).toBe('application/problem+json');
  });

  it('answers 400 for invalid UTF-8, 404 for an unknown event type, and 200 for an empty array', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('pub.misc'));
    const invalidUtf8 = Buffer.concat([Buffer.from('[{"order_number":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}]')]);
    expect((await call(broker.url, 'POST', '/event-types/pub.misc/events', invalidUtf8)).status).toBe(400);
    expect((await call(broker.url, 'POST', '/event-types/pub.nothing/events', [orderEvent('x')])).status).toBe(404);
    expect((await call(broker.url, 'POST', '/event-types/pub.misc/events', [])).status).toBe(200);
  });

  it('accepts gzip bodies and answers 400 for corrupt gzip', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('pub.gzip'));
    const body = gzipSync(JSON.stringify([orderEvent('G1'), orderEvent('G2')]));
    expect((await call(broker.url, 'POST', '/event-types/pub.gzip/events', body, { 'content-encoding': 'gzip' })).status).toBe(200);
    expect((await storedEvents('pub.gzip', '0')).map((e) => e.order_number)).toEqual(['G1', 'G2']);
    const corrupt = Buffer.from(body);
    corrupt.fill(0x41, 12, 30);
    const answer = await call(broker.url, 'POST', '/event-types/pub.gzip/events', corrupt, { 'content-encoding': 'gzip' });
    expect(answer.status).toBe(400);
    expect(answer.headers.get('content-type')).toBe('application/problem+json');
    expect((await storedEvents('pub.gzip', '0')).length).toBe(2);
  });

  it('stores undefined-category events as sent, without validation or enrichment', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('pub.undefined', { category: 'undefined', enrichment_strategies: [], schema: { type: 'json_schema', schema: schemaText({}, [], { additionalProperties: true }) } }));
    const events = [{ anything: [1, 2, { x: null }] }, { metadata: 'not even an object' }];
    expect((await call(broker.url, 'POST', '/event-types/pub.undefined/events', events)).status).toBe(200);
    expect(await storedEvents('pub.undefined', '0')).toEqual(events);
  });

  it('validates data change events: data_op, data_type and the schema under data', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('pub.data', { category: 'data', partition_strategy: 'hash', partition_key_fields: ['order_number'], ...fourPartitions }));
    const good = { metadata: orderEvent('x').metadata, data_type: 'order', data_op: 'C', data: { order_number: 'D1' } };
    expect((await call(broker.url, 'POST', '/event-types/pub.data/events', [good])).status).toBe(200);
    const badOp = { ...good, data_op: 'X' };
    const missingKey = { ...good, data: { amount: 3 } };
    const answer = await call(broker.url, 'POST', '/event-types/pub.data/events', [badOp, missingKey]);
    expect(answer.status).toBe(422);
    expect(answer.json).toMatchObject([{ publishing_status: 'failed', step: 'validating' }, { publishing_status: 'failed', step: 'validating' }]);
  });

  it('answers 207 when storage fails for some partitions: written items submitted, the others failed', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('pub.partial', { ...fourPartitions, partition_strategy: 'user_defined' }));
    // Break partition 1's counters so its script fails while the other partitions write normally.
    await redis.set(broker.keys.partitionMeta('pub.partial', 1, '1'), 'not a hash');
    const to = (p: string) => {
      const event = orderEvent(`P${p}`);
      (event.metadata as Record<string, unknown>).partition = p;
      return event;
    };
    const batch = [to('0'), to('1'), to('2'), to('1')];
    const answer = await call(broker.url, 'POST', '/event-types/pub.partial/events', batch);
    expect(answer.status).toBe(207);
    const items = answer.json as { eid: string; publishing_status: string; step: string; detail: string }[];
    expect(items.map((i) => i.publishing_status)).toEqual(['submitted', 'failed', 'submitted', 'failed']);
    // Each item carries its event's eid, in input order (read back from the stored texts).
    expect(items.map((i) => i.eid)).toEqual(batch.map((e) => (e.metadata as { eid: string }).eid));
    expect(items[1]).toMatchObject({ step: 'publishing' });
    expect(items[1]?.detail.length).toBeGreaterThan(0);
    expect((await storedEvents('pub.partial', '0')).length).toBe(1);
    expect((await storedEvents('pub.partial', '2')).length).toBe(1);
  });

  it('answers 404 and writes nothing when the event type was deleted while this node still holds its copy', async () => {
    const name = 'pub.stale';
    // Created, and its change notice heard back, before the node caches it below.
    await afterChangeNotice(broker, name, () => call(broker.url, 'POST', '/event-types', businessEventType(name, fourPartitions)));
    const partitions = ['0', '1', '2', '3'];
    // Its partitions are opened with it: empty ones have their counters already, and the id of the timeline they belong to.
    const [timeline] = JSON.parse((await redis.hget(broker.keys.eventType(name), 'timelines')) ?? '[]') as { id: string }[];
    for (const p of partitions) expect(await redis.hgetall(broker.keys.partitionMeta(name, 1, p))).toEqual({ next: '0', oldest: '0', timeline: timeline?.id });
    expect((await call(broker.url, 'POST', `/event-types/${name}/events`, [orderEvent('S0')])).status).toBe(200);
    // Deleted as the registry deletes it, but without its change notice: the node keeps its cached copy, as a
    // node does until the notice of a deletion made through another node reaches it.
    await redis.srem(broker.keys.eventTypeNames, name);
    await redis.del(broker.keys.eventType(name));
    await redis.del(broker.keys.eventTypeSchemas(name));
    await dropPartitions(name, partitions);
    const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, Array.from({ length: 8 }, (_, i) => orderEvent(`S${i + 1}`)));
    expect(answer.status, answer.text).toBe(404);
    expect(answer.json).toMatchObject({ status: 404, detail: `EventType "${name}" does not exist.` });
    // No partition key was created again: the events did not go to keys no event type owns.
    for (const p of partitions) for (const key of partitionKeys(name, p)) expect(await redis.exists(key), key).toBe(0);
  });

  /**
   * Creates `name` with four partitions (its creation notice heard back, so it cannot drop the copy cached
   * next) and publishes one event through the node (which then caches it),
   * then deletes it and creates it again with `partitionCount` partitions behind the node's back (no
   * change notice): a new first timeline id, its partitions opened as the registry opens them (the same
   * keys, the new id recorded). @returns the new timeline id
   */
  async function recreatedBehindTheNode(name: string, partitionCount: number): Promise<string> {
    await afterChangeNotice(broker, name, () => call(broker.url, 'POST', '/event-types', businessEventType(name, fourPartitions)));
    expect((await call(broker.url, 'POST', `/event-types/${name}/events`, [orderEvent('first')])).status).toBe(200);
    const stored = await redis.hgetall(broker.keys.eventType(name));
    const [first] = JSON.parse(stored.timelines ?? '[]') as Record<string, unknown>[];
    const topology = JSON.parse(stored.topology ?? '{}') as Record<string, unknown>;
    const reborn = randomUUID();
    await dropPartitions(name, ['0', '1', '2', '3']);
    await redis.hset(broker.keys.eventType(name), 'timelines', JSON.stringify([{ ...first, id: reborn }]), 'topology', JSON.stringify({ ...topology, partitionCount }));
    for (let p = 0; p < partitionCount; p++) await redis.hset(broker.keys.partitionMeta(name, 1, String(p)), 'next', 0, 'oldest', 0, 'timeline', reborn);
    return reborn;
  }

  it('answers 404 when the event type was deleted and created again while this node still holds the deleted one; creates none of its partitions', async () => {
    const name = 'pub.reborn';
    await recreatedBehindTheNode(name, 1);
    const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, Array.from({ length: 40 }, (_, i) => orderEvent(`R${i + 1}`)));
    expect(answer.status, answer.text).toBe(404);
    // The batch was partitioned over the deleted one's four partitions: the new one got none of 1-3.
    for (const p of ['1', '2', '3']) for (const key of partitionKeys(name, p)) expect(await redis.exists(key), key).toBe(0);
  });

  it('answers 404 when the event type was deleted and created again with the same partitions while this node still holds the deleted one; writes none of the batch', async () => {
    const name = 'pub.twin';
    await recreatedBehindTheNode(name, 4);
    const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, Array.from({ length: 40 }, (_, i) => orderEvent(`T${i + 1}`)));
    expect(answer.status, answer.text).toBe(404);
    // The new event type's partitions got none of the deleted one's events.
    for (const p of ['0', '1', '2', '3']) {
      expect(await redis.hget(broker.keys.partitionMeta(name, 1, p), 'next'), p).toBe('0');
      expect(await redis.exists(broker.keys.partitionLog(name, 1, p)), p).toBe(0);
    }
  });

  it('writes to partitions opened before timeline ids were recorded (their meta has no timeline field)', async () => {
    const name = 'pub.legacy-meta';
    await call(broker.url, 'POST', '/event-types', businessEventType(name, fourPartitions));
    for (const p of ['0', '1', '2', '3']) await redis.hdel(broker.keys.partitionMeta(name, 1, p), 'timeline');
    const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, Array.from({ length: 20 }, (_, i) => orderEvent(`L${i}`)));
    expect(answer.status, answer.text).toBe(200);
    const counts = await Promise.all(['0', '1', '2', '3'].map((p) => redis.hget(broker.keys.partitionMeta(name, 1, p), 'next')));
    expect(counts.reduce((sum, next) => sum + Number(next ?? 0), 0)).toBe(20);
    // Appended as they were, not refused and opened again (which would have recorded the timeline id).
    for (const p of ['0', '1', '2', '3']) expect(await redis.hexists(broker.keys.partitionMeta(name, 1, p), 'timeline'), p).toBe(0);
  });

  it('opens a partition of an existing event type that was never opened (created before partitions were opened) and writes to it', async () => {
    const name = 'pub.unopened';
    await call(broker.url, 'POST', '/event-types', businessEventType(name, fourPartitions));
    for (const p of ['0', '1', '2', '3']) await redis.del(broker.keys.partitionMeta(name, 1, p));
    const batch = Array.from({ length: 40 }, (_, i) => orderEvent(`U${i}`));
    const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, batch);
    expect(answer.status, answer.text).toBe(200);
    const stored = (await Promise.all(['0', '1', '2', '3'].map((p) => storedEvents(name, p)))).flat();
    expect(stored.map((e) => (e.metadata as { eid: string }).eid).sort()).toEqual(batch.map((e) => (e.metadata as { eid: string }).eid).sort());
    const counts = await Promise.all(['0', '1', '2', '3'].map((p) => redis.hget(broker.keys.partitionMeta(name, 1, p), 'next')));
    expect(counts.reduce((sum, next) => sum + Number(next ?? 0), 0)).toBe(40);
  });
});

describe('partitions and cursors', () => {
  beforeAll(async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('cursor.et', { default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: 2, write_parallelism: 2 }, partition_strategy: 'user_defined' }));
    const to = (p: string, n: number) => Array.from({ length: n }, () => {
      const e = orderEvent('C');
      (e.metadata as Record<string, unknown>).partition = p;
      return e;
    });
    await call(broker.url, 'POST', '/event-types/cursor.et/events', to('0', 10));
  });

  it('reports partitions with offsets in the cursor format, and 404 for an unknown partition', async () => {
    expect((await call(broker.url, 'GET', '/event-types/cursor.et/partitions')).json).toEqual([
      { partition: '0', oldest_available_offset: '001-0001-000000000000000000', newest_available_offset: '001-0001-000000000000000009' },
      { partition: '1', oldest_available_offset: '001-0001-000000000000000000', newest_available_offset: '001-0001--1' },
    ]);
    expect((await call(broker.url, 'GET', '/event-types/cursor.et/partitions/0')).json).toMatchObject({ partition: '0' });
    const missing = await call(broker.url, 'GET', '/event-types/cursor.et/partitions/7');
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject({ detail: 'partition not found' });
  });

  it('computes cursor distances (BEGIN and bare numbers accepted) and lag', async () => {
    const distances = await call(broker.url, 'POST', '/event-types/cursor.et/cursor-distances', [
      { initial_cursor: { partition: '0', offset: 'BEGIN' }, final_cursor: { partition: '0', offset: '001-0001-000000000000000009' } },
      { initial_cursor: { partition: '0', offset: '3' }, final_cursor: { partition: '0', offset: '3' } },
      { initial_cursor: { partition: '0', offset: 'begin' }, final_cursor: { partition: '0', offset: '001-0001-000000000000000000' } },
    ]);
    expect(distances.status).toBe(200);
    expect((distances.json as { distance: number }[]).map((d) => d.distance)).toEqual([10, 0, 1]);
    const lag = await call(broker.url, 'POST', '/event-types/cursor.et/cursors-lag', [{ partition: '0', offset: '001-0001-000000000000000004' }, { partition: '1', offset: 'BEGIN' }]);
    expect(lag.json).toEqual([
      { partition: '0', oldest_available_offset: '001-0001-000000000000000000', newest_available_offset: '001-0001-000000000000000009', unconsumed_events: 5 },
      { partition: '1', oldest_available_offset: '001-0001-000000000000000000', newest_available_offset: '001-0001--1', unconsumed_events: 0 },
    ]);
  });

  it.each([
    ['an unknown partition', { partition: '5', offset: 'BEGIN' }],
    ['a malformed offset', { partition: '0', offset: 'abc' }],
    ['an offset beyond the newest', { partition: '0', offset: '001-0001-000000000000000010' }],
    ['another timeline', { partition: '0', offset: '001-0002-000000000000000001' }],
    ['a cursor without offset', { partition: '0' }],
  ])('answers 422 for %s', async (_what, cursor) => {
    const lag = await call(broker.url, 'POST', '/event-types/cursor.et/cursors-lag', [cursor]);
    expect(lag.status).toBe(422);
    const distance = await call(broker.url, 'POST', '/event-types/cursor.et/cursor-distances', [{ initial_cursor: cursor, final_cursor: cursor }]);
    expect(distance.status).toBe(422);
  });
});
