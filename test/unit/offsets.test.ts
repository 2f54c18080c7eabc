import { describe, expect, it } from 'vitest';
import { formatOffset, parseOffset, resolveCursor } from '../../src/domain/offsets.js';

describe('offsets (WIRE.md "Offsets and cursors")', () => {
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
