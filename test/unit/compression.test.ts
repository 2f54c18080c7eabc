import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { compress as zstdCompress, decompress as zstdDecompress } from 'zstd-napi';
import { createStreamCompressor, inflateZstdBody, negotiateStreamCoding, type StreamCoding } from '../../src/http/compression.js';

describe('negotiateStreamCoding', () => {
  it.each([
    [undefined, undefined],
    ['', undefined],
    ['identity', undefined],
    ['br, deflate', undefined],
    ['gzip', 'gzip'],
    ['GZIP', 'gzip'],
    ['x-gzip', 'gzip'],
    ['zstd', 'zstd'],
    ['gzip, zstd', 'zstd'],
    ['zstd;q=0.5, gzip', 'gzip'],
    ['zstd;q=0.8, gzip;q=0.8', 'zstd'],
    ['zstd;q=0, gzip;q=0', undefined],
    ['*', 'zstd'],
    ['*;q=0', undefined],
    ['zstd;q=0, *', 'gzip'],
    ['gzip;q=bogus', undefined],
  ])('Accept-Encoding %j → %s', (header, expected) => {
    expect(negotiateStreamCoding(header)).toBe(expected);
  });
});

describe('createStreamCompressor', () => {
  const decoders: Record<StreamCoding, (body: Buffer) => Buffer> = {
    zstd: (body) => zstdDecompress(body),
    gzip: (body) => zlib.gunzipSync(body, { finishFlush: zlib.constants.Z_SYNC_FLUSH }),
  };

  for (const coding of ['zstd', 'gzip'] as const) {
    it(`${coding}: every write is one block that completes the lines written so far; end closes the stream`, async () => {
      const blocks: Buffer[] = [];
      const compressor = createStreamCompressor(coding, (block) => blocks.push(block));
      const lines = Array.from({ length: 5 }, (_, i) => Buffer.from(`{"cursor":{"partition":"0","offset":"${i}"},"events":[${'{"kind":"page_view"},'.repeat(40)}{}]}\n`));
      for (const [i, line] of lines.entries()) {
        compressor.write([line.subarray(0, 10), line.subarray(10)]);
        expect(compressor.pendingBytes).toBe(coding === 'zstd' ? 0 : line.length);
        await compressor.idle();
        expect(compressor.pendingBytes).toBe(0);
        expect(blocks).toHaveLength(i + 1);
        if (coding === 'gzip') expect(decoders.gzip(Buffer.concat(blocks)).toString()).toBe(Buffer.concat(lines.slice(0, i + 1)).toString());
      }
      await compressor.end();
      const whole = Buffer.concat(blocks);
      expect(decoders[coding](whole).toString()).toBe(Buffer.concat(lines).toString());
      if (coding === 'gzip') expect(zlib.gunzipSync(whole).toString()).toBe(Buffer.concat(lines).toString());
      // Later lines share the history of earlier ones.
      expect(blocks[4]?.length ?? 0).toBeLessThan(blocks[0]?.length ?? 0);
    });

    it(`${coding}: after destroy nothing more comes out and idle() resolves`, async () => {
      const blocks: Buffer[] = [];
      const compressor = createStreamCompressor(coding, (block) => blocks.push(block));
      compressor.write([Buffer.from('{"a":1}\n')]);
      compressor.destroy();
      await compressor.idle();
      const seen = blocks.length;
      compressor.write([Buffer.from('{"a":2}\n')]);
      await compressor.idle();
      expect(blocks.length).toBe(seen);
    });
  }
});

describe('inflateZstdBody', () => {
  it('inflates one frame or several, within the limit', () => {
    expect(inflateZstdBody(zstdCompress(Buffer.from('[1,2,3]')), 100)).toEqual({ ok: true, body: Buffer.from('[1,2,3]') });
    const two = Buffer.concat([zstdCompress(Buffer.from('[1,')), zstdCompress(Buffer.from('2]'))]);
    expect(inflateZstdBody(two, 100)).toEqual({ ok: true, body: Buffer.from('[1,2]') });
    expect(inflateZstdBody(zstdCompress(Buffer.alloc(100)), 100).ok).toBe(true);
  });

  it('refuses a body one byte over the limit, declared or not', () => {
    expect(inflateZstdBody(zstdCompress(Buffer.alloc(101)), 100)).toEqual({ ok: false, failure: { kind: 'too-large' } });
    expect(inflateZstdBody(zstdCompress(Buffer.alloc(101), { contentSizeFlag: false }), 100)).toEqual({ ok: false, failure: { kind: 'too-large' } });
    // Many small frames add up.
    const frames = Buffer.concat(Array.from({ length: 11 }, () => zstdCompress(Buffer.alloc(10))));
    expect(inflateZstdBody(frames, 100)).toEqual({ ok: false, failure: { kind: 'too-large' } });
  });

  it('calls truncated, foreign and too-wide frames corrupt', () => {
    const body = zstdCompress(Buffer.from('x'.repeat(5000)));
    expect(inflateZstdBody(body.subarray(0, body.length - 3), 10_000)).toMatchObject({ ok: false, failure: { kind: 'corrupt' } });
    expect(inflateZstdBody(Buffer.from('plain text'), 10_000)).toMatchObject({ ok: false, failure: { kind: 'corrupt' } });
    const wide = zstdCompress(Buffer.alloc(20 * 1024 * 1024, 'a'), { windowLog: 25, contentSizeFlag: false });
    expect(inflateZstdBody(wide, 64 * 1024 * 1024)).toMatchObject({ ok: false, failure: { kind: 'corrupt', reason: expect.stringMatching(/memory/) as unknown } });
  });
});
