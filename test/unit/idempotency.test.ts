import { describe, expect, it } from 'vitest';
import { EID_KEY_BYTES, eidHash, idempotencyAnnotationProblems, idempotencyWindowSeconds, writeEidKey } from '../../src/domain/batch/idempotency.js';
import { fnv1a32 } from '../../src/domain/event-type/partitioner.js';

const EID = '0f8fad5b-d9cb-469f-a165-70867728950e';

function keyOf(eid: string): string {
  const target = new Uint8Array(EID_KEY_BYTES);
  writeEidKey(eid, target, 0);
  return Buffer.from(target).toString('hex');
}

describe('eid keys', () => {
  it('are the 16 bytes of the uuid', () => {
    expect(keyOf(EID)).toBe(EID.replaceAll('-', ''));
  });

  it('are the same for every text of one uuid (case, urn:uuid: prefix)', () => {
    expect(keyOf(EID.toUpperCase())).toBe(keyOf(EID));
    expect(keyOf(`urn:uuid:${EID}`)).toBe(keyOf(EID));
    expect(keyOf(`URN:UUID:${EID.toUpperCase()}`)).toBe(keyOf(EID));
  });

  it('hash as their canonical text does, so every text of one uuid goes to one partition', () => {
    for (const eid of [EID, EID.toUpperCase(), `urn:uuid:${EID}`, `URN:UUID:${EID.toUpperCase()}`]) expect(eidHash(eid)).toBe(fnv1a32(EID));
    expect(eidHash('not-a-uuid')).toBe(fnv1a32('not-a-uuid'));
  });

  it('are written at the offset given, leaving the rest of the buffer alone', () => {
    const target = new Uint8Array(3 * EID_KEY_BYTES).fill(0xee);
    writeEidKey(EID, target, EID_KEY_BYTES);
    expect(Buffer.from(target.subarray(0, EID_KEY_BYTES)).every((b) => b === 0xee)).toBe(true);
    expect(Buffer.from(target.subarray(EID_KEY_BYTES, 2 * EID_KEY_BYTES)).toString('hex')).toBe(EID.replaceAll('-', ''));
    expect(Buffer.from(target.subarray(2 * EID_KEY_BYTES)).every((b) => b === 0xee)).toBe(true);
  });

  it.each([
    ['no dashes', EID.replaceAll('-', '')],
    ['a dash out of place', '0f8fad5bd-9cb-469f-a165-70867728950e'],
    ['a non-hex digit', '0f8fad5b-d9cb-469f-a165-70867728950g'],
    ['too short', EID.slice(1)],
    ['empty', ''],
  ])('refuse a text that is not a uuid: %s', (_label, eid) => {
    expect(() => writeEidKey(eid, new Uint8Array(EID_KEY_BYTES), 0)).toThrow(RangeError);
  });

  it('refuse to write past the end of the buffer', () => {
    expect(() => writeEidKey(EID, new Uint8Array(EID_KEY_BYTES), 1)).toThrow(RangeError);
  });
});

describe('the idempotency window annotation', () => {
  it('takes an integer from 1 to 86,400 on an event type whose events carry eids', () => {
    expect(idempotencyWindowSeconds({ 'broker.io/idempotency-window-seconds': '600' })).toBe(600);
    expect(idempotencyWindowSeconds({})).toBeUndefined();
    expect(idempotencyAnnotationProblems({ 'broker.io/idempotency-window-seconds': '86401' }, 'business')).toHaveLength(1);
    expect(idempotencyAnnotationProblems({ 'broker.io/idempotency-window-seconds': '0' }, 'business')).toHaveLength(1);
    expect(idempotencyAnnotationProblems({ 'broker.io/idempotency-window-seconds': '60' }, 'undefined')).toHaveLength(1);
    expect(idempotencyAnnotationProblems({ 'broker.io/idempotency-window-seconds': '60' }, 'data')).toEqual([]);
  });
});
