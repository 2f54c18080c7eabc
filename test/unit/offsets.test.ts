import { describe, expect, it } from 'vitest';
import { formatOffset, parseOffset, resolveCursor, shiftOffset } from '../../src/domain/cursor/offsets.js';

// Offsets as docs/concepts.md "Offsets and cursors" describes them.
describe('offsets', () => {
  it.each([
    [1, 5, '001-0001-000000000000000005'],
    [1, -1, '001-0001--1'],
    [1, 0, '001-0001-000000000000000000'],
    [255, 123456789, '001-00ff-000000000123456789'],
  ])('formats timeline %i offset %i as %s', (timeline, offset, text) => {
    expect(formatOffset(timeline, offset)).toBe(text);
    expect(parseOffset(text)).toEqual({ kind: 'position', position: { timeline, offset } });
  });

  it('compares correctly as strings within a partition', () => {
    const texts = [-1, 0, 9, 10, 99, 100, 12345].map((o) => formatOffset(1, o));
    expect([...texts].sort()).toEqual(texts);
  });

  it.each(['BEGIN', 'begin', 'Begin'])('parses %s as the beginning', (text) => {
    expect(parseOffset(text)).toEqual({ kind: 'begin' });
  });

  it.each([['5', 5], ['0', 0], ['-1', -1]])('parses bare number %s on the first timeline', (text, offset) => {
    expect(parseOffset(text)).toEqual({ kind: 'position', position: { timeline: 1, offset } });
  });

  it.each(['', 'abc', '05', '-2', '001-0001-5', '001-0000-000000000000000005', '002-0001-000000000000000005', '001-0001-0000000000000000050', '1e3', ' 5'])(
    'refuses malformed %j',
    (text) => expect(parseOffset(text)).toBeUndefined(),
  );

  it('resolves cursors against a partition range', () => {
    const range = { oldest: 10, newest: 20 };
    expect(resolveCursor({ kind: 'begin' }, range, 1)).toEqual({ ok: true, offset: 9 });
    expect(resolveCursor({ kind: 'position', position: { timeline: 1, offset: 9 } }, range, 1)).toEqual({ ok: true, offset: 9 });
    expect(resolveCursor({ kind: 'position', position: { timeline: 1, offset: 20 } }, range, 1)).toEqual({ ok: true, offset: 20 });
    expect(resolveCursor({ kind: 'position', position: { timeline: 1, offset: 8 } }, range, 1)).toMatchObject({ ok: false, reason: 'offset has expired' });
    expect(resolveCursor({ kind: 'position', position: { timeline: 1, offset: 21 } }, range, 1)).toMatchObject({ ok: false });
    expect(resolveCursor({ kind: 'position', position: { timeline: 2, offset: 15 } }, range, 1)).toMatchObject({ ok: false });
    expect(resolveCursor({ kind: 'begin' }, { oldest: 0, newest: -1 }, 1)).toEqual({ ok: true, offset: -1 });
  });
});

describe('shiftOffset (shifted cursors)', () => {
  const range = { oldest: 3, newest: 9 };
  it.each([
    [5, 2, 7],
    [5, -2, 3],
    [5, -3, 2],
    [5, 4, 9],
    [5, 0, 5],
    [2, 7, 9],
  ])('moves %i by %i to %i within the available range (oldest - 1 .. newest)', (offset, shift, moved) => {
    expect(shiftOffset(offset, shift, range)).toEqual({ ok: true, offset: moved });
  });

  it('refuses a result before just-before-the-oldest event or after the newest one', () => {
    expect(shiftOffset(5, -4, range)).toEqual({ ok: false, reason: 'shifting by -4 goes 1 event(s) before the oldest available offset' });
    expect(shiftOffset(5, 5, range)).toEqual({ ok: false, reason: 'shifting by 5 goes 1 event(s) after the newest available offset' });
    // Everything expired (newest < oldest): only the position just before the oldest remains.
    expect(shiftOffset(2, 0, { oldest: 3, newest: 2 })).toEqual({ ok: true, offset: 2 });
    expect(shiftOffset(2, 1, { oldest: 3, newest: 2 }).ok).toBe(false);
    expect(shiftOffset(2, -1, { oldest: 3, newest: 2 }).ok).toBe(false);
  });
});
