import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { buildPublishSpec } from '../../src/services/event-types/event-type-cache.js';
import { decodeEntry, encodeEntries, isZstdField, MAX_KEPT_RATIO, PLAIN_FIELD, ZSTD_FIELD } from '../../src/domain/batch/entry-codec.js';
import { processBatch } from '../../workers/publish-batch.js';
import { eidsOfPayloads } from '../../workers/stored-texts.js';
import { ValidatorCache } from '../../workers/validator-cache.js';
import type { PublishTask } from '../../workers/publish-protocol.js';
import { eventTypeRecord } from '../support/fixtures.js';

/** `n` order-like JSON texts joined by `\n`, as a partition's payload holds them. */
function texts(n: number, seed = 'x'): Buffer {
  return Buffer.from(Array.from({ length: n }, (_, i) => JSON.stringify({ metadata: { eid: randomUUID(), occurred_at: '2026-01-01T00:00:00.000Z', event_type: 'unit.order' }, id: `${seed}-${i}`, note: 'amber birch cedar delta ember fjord' })).join('\n'));
}

describe('the stored entry codec', () => {
  it('compresses entries of at least minBytes into views of one buffer of their own, and decodes them to the same bytes', () => {
    const entries = [texts(10, 'a'), texts(1, 'b'), texts(100, 'c')];
    const small = entries[1]?.byteLength ?? 0;
    const encoded = encodeEntries(entries, small + 1);
    expect(encoded.map((e) => e.format)).toEqual([ZSTD_FIELD, PLAIN_FIELD, ZSTD_FIELD]);
    // The plain entry is the caller's view; the frames share one exactly sized ArrayBuffer (transferable whole).
    expect(encoded[1]?.data).toBe(entries[1]);
    const [a, , c] = encoded;
    expect(a?.data.buffer).toBe(c?.data.buffer);
    expect(a?.data.buffer.byteLength).toBe((a?.data.byteLength ?? 0) + (c?.data.byteLength ?? 0));
    encoded.forEach((e, i) => {
      expect(e.data.byteLength).toBeLessThanOrEqual(entries[i]?.byteLength ?? 0);
      expect(decodeEntry(e.format, Buffer.from(e.data)).equals(entries[i] ?? Buffer.alloc(0))).toBe(true);
    });
    // On the wire the field name is read as bytes.
    expect(decodeEntry(Buffer.from('z'), Buffer.from(a?.data ?? [])).equals(entries[0] ?? Buffer.alloc(0))).toBe(true);
  });

  it('keeps entries plain where the frame would not save 10 %: incompressible bytes, and anything with compression off', () => {
    const random = Buffer.from(Array.from({ length: 4096 }, () => Math.floor(Math.random() * 256)));
    const [encoded] = encodeEntries([random], 0);
    expect(encoded?.format).toBe(PLAIN_FIELD);
    expect(encoded?.data).toBe(random);
    expect(MAX_KEPT_RATIO).toBeLessThan(1);
    expect(encodeEntries([Buffer.alloc(0)], 0)[0]?.format).toBe(PLAIN_FIELD);
  });

  it('reads a plain entry (field d, as every entry written before compression) as it is, and refuses a damaged frame', () => {
    const plain = texts(3);
    expect(decodeEntry('d', plain)).toBe(plain);
    expect(decodeEntry(Buffer.from('d'), plain)).toBe(plain);
    expect(isZstdField('z') && isZstdField(Buffer.from('z'))).toBe(true);
    expect(isZstdField('d') || isZstdField(Buffer.from('zz'))).toBe(false);
    expect(() => decodeEntry('z', plain)).toThrow(/zstd frame/);
    const [frame] = encodeEntries([texts(20)], 0);
    const cut = Buffer.from(frame?.data ?? []).subarray(0, 20);
    expect(() => decodeEntry('z', cut)).toThrow();
  });

  it('lets a thread compress a batch larger than its kept scratch, then smaller ones', () => {
    const large = texts(30_000, 'l');
    expect(large.byteLength).toBeGreaterThan(4 * 1024 * 1024);
    const [big] = encodeEntries([large], 1);
    expect(decodeEntry(big?.format ?? 'd', Buffer.from(big?.data ?? [])).equals(large)).toBe(true);
    const after = texts(50);
    const [next] = encodeEntries([after], 1);
    expect(decodeEntry(next?.format ?? 'd', Buffer.from(next?.data ?? [])).equals(after)).toBe(true);
  });
});

describe('processBatch with storedCompressionMinBytes', () => {
  const cache = new ValidatorCache();
  const event = (id: string) => ({ metadata: { eid: randomUUID(), occurred_at: '2026-01-01T00:00:00.000Z' }, id, note: 'amber birch cedar delta ember fjord grove harbor' });
  function task(events: unknown[], overrides: Parameters<typeof eventTypeRecord>[0] = {}, minBytes: number | 'off' = 1024): PublishTask {
    return {
      kind: 'publish',
      body: Buffer.from(JSON.stringify(events)),
      spec: buildPublishSpec({ record: eventTypeRecord(overrides, '1.0.0'), topology: { partitionCount: 1, timeline: 1 } }),
      maxEventBytes: 1_000_000,
      receivedAt: '2026-01-01T00:00:01.000Z',
      publishedBy: 'tester',
      flowId: 'flow-1',
      ...(minBytes === 'off' ? {} : { storedCompressionMinBytes: minBytes }),
    };
  }

  it('compresses a partition share of at least minBytes; the bytes counted and the eids read back are those of the JSON', () => {
    const batch = Array.from({ length: 20 }, (_, i) => event(`e${i}`));
    const plain = processBatch(task(batch, {}, 'off'), cache);
    const compressed = processBatch(task(batch), cache);
    if (plain.kind !== 'accepted' || compressed.kind !== 'accepted') throw new Error('not accepted');
    const [p] = plain.partitions;
    const [c] = compressed.partitions;
    expect(p?.compressed).toBeUndefined();
    expect(c?.compressed).toBe(true);
    expect(c?.data.byteLength).toBeLessThan((p?.data.byteLength ?? 0) * 0.5);
    expect(compressed.bytes).toBe(plain.bytes);
    expect(eidsOfPayloads(compressed.partitions, compressed.itemPartitions)).toEqual(batch.map((e) => e.metadata.eid));
    const texts = decodeEntry(ZSTD_FIELD, Buffer.from(c?.data ?? [])).toString().split('\n');
    expect(texts.map((t) => (JSON.parse(t) as { id: string }).id)).toEqual(batch.map((e) => e.id));
  });

  it('stores a single event below minBytes plain, and compacted or idempotent event types always plain', () => {
    const single = processBatch(task([event('one')]), cache);
    if (single.kind !== 'accepted') throw new Error('not accepted');
    expect(single.partitions[0]?.compressed).toBeUndefined();
    const batch = Array.from({ length: 20 }, (_, i) => ({ ...event(`e${i}`), metadata: { eid: randomUUID(), occurred_at: '2026-01-01T00:00:00.000Z', partition_compaction_key: `k${i}` } }));
    const compacted = processBatch(task(batch, { cleanup_policy: 'compact' }), cache);
    if (compacted.kind !== 'accepted') throw new Error(JSON.stringify(compacted));
    expect(compacted.partitions[0]?.compressed).toBeUndefined();
    const idempotent = processBatch(task(Array.from({ length: 20 }, (_, i) => event(`i${i}`)), { annotations: { 'broker.io/idempotency-window-seconds': '60' } }), cache);
    if (idempotent.kind !== 'accepted') throw new Error(JSON.stringify(idempotent));
    expect(idempotent.partitions[0]?.eidKeys).toBeDefined();
    expect(idempotent.partitions[0]?.compressed).toBeUndefined();
  });
});
