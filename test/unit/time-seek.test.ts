import { describe, expect, it } from 'vitest';
import { firstReceivedAtOrAfter, parseSeekTime, receivedAtOfFirst, type SeekEntry } from '../../src/domain/cursor/time-seek.js';

/** A stream entry of `n` events received at `receivedAt` (ISO text, or none), the first at offset `first`. */
function entry(first: number, n: number, receivedAt?: string): SeekEntry {
  const event = (i: number): string => JSON.stringify({ order_number: `o-${first + i}`, ...(receivedAt !== undefined ? { metadata: { eid: 'x', received_at: receivedAt } } : {}) });
  return { first, data: Buffer.from(Array.from({ length: n }, (_, i) => event(i)).join('\n')) };
}

describe('seeking by time: the pure search', () => {
  it('reads metadata.received_at of the first event of an entry, NaN without it', () => {
    expect(receivedAtOfFirst(entry(0, 3, '2026-01-01T00:00:01.250Z').data)).toBe(Date.parse('2026-01-01T00:00:01.250Z'));
    expect(receivedAtOfFirst(entry(0, 2).data)).toBeNaN();
    expect(receivedAtOfFirst(Buffer.from('not json\n{}'))).toBeNaN();
    // A payload field of the same name is not metadata.
    expect(receivedAtOfFirst(Buffer.from(JSON.stringify({ received_at: '2026-01-01T00:00:00Z' })))).toBeNaN();
  });

  it('finds the first entry received at or after the moment, to the millisecond', () => {
    const entries = [entry(0, 3, '2026-01-01T00:00:01.000Z'), entry(3, 2, '2026-01-01T00:00:01.500Z'), entry(5, 4, '2026-01-01T00:00:02.000Z')];
    expect(firstReceivedAtOrAfter(entries, Date.parse('2026-01-01T00:00:00.999Z'))).toBe(0);
    expect(firstReceivedAtOrAfter(entries, Date.parse('2026-01-01T00:00:01.000Z'))).toBe(0);
    expect(firstReceivedAtOrAfter(entries, Date.parse('2026-01-01T00:00:01.001Z'))).toBe(3);
    expect(firstReceivedAtOrAfter(entries, Date.parse('2026-01-01T00:00:01.500Z'))).toBe(3);
    expect(firstReceivedAtOrAfter(entries, Date.parse('2026-01-01T00:00:01.501Z'))).toBe(5);
    expect(firstReceivedAtOrAfter(entries, Date.parse('2026-01-01T00:00:02.001Z'))).toBeUndefined();
    expect(firstReceivedAtOrAfter([], 0)).toBeUndefined();
  });

  it('passes over entries without received_at', () => {
    expect(firstReceivedAtOrAfter([entry(0, 1), entry(1, 1, '2026-01-01T00:00:05Z')], Date.parse('2026-01-01T00:00:00Z'))).toBe(1);
  });

  it('parses RFC 3339 date-times with a zone, and nothing else', () => {
    expect(parseSeekTime('2026-01-01T12:00:00Z')).toBe(Date.UTC(2026, 0, 1, 12));
    expect(parseSeekTime('2026-01-01T12:00:00.250+01:00')).toBe(Date.UTC(2026, 0, 1, 11, 0, 0, 250));
    expect(parseSeekTime('2026-01-01T12:00:00.123456Z')).toBe(Date.UTC(2026, 0, 1, 12, 0, 0, 123));
    expect(parseSeekTime('2026-01-01t12:00:00z')).toBe(Date.UTC(2026, 0, 1, 12));
    for (const bad of ['', 'yesterday', '2026-01-01', '2026-01-01T12:00:00', '2026-13-01T00:00:00Z', '2026-01-01T12:00Z']) expect(parseSeekTime(bad), bad).toBeUndefined();
  });
});
