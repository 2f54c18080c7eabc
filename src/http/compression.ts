import zlib from 'node:zlib';
import zstd from 'zstd-napi/binding.js';

/**
 * HTTP content codings of the broker (docs/compression.md; docs/http-api.md "Compression"):
 * which coding a consumption stream is sent with, the per-stream compressors that turn batch lines
 * into complete compressed blocks, and the bounded zstd decoder of publish bodies.
 *
 * zstd comes from `zstd-napi` (Node 20's zlib has none; docs/architecture.md "9. Dependencies"):
 * an N-API binding of libzstd 1.5.7 built from the sources inside its npm tarball, with the streaming
 * API (`ZSTD_compressStream2` with `ZSTD_e_flush`, `ZSTD_decompressStream`) a stream needs.
 */

/** The codings a stream can be sent with. */
export type StreamCoding = 'zstd' | 'gzip';

/** zstd level of streams: libzstd's default (3), the speed/ratio point it recommends. */
export const ZSTD_STREAM_LEVEL = 3;
/**
 * zstd window and match-finder tables of streams, log2: a 64 KiB window with 32 Ki-entry hash and chain
 * tables. A stream is flushed per batch, so matches are mostly within a batch or the last few: this
 * compresses better than level 3's own parameters with a 1 MiB window, at the same CPU, and a stream's
 * compressor holds a fraction of the native memory (docs/decisions/0007-zstd-and-gzip-for-streams.md,
 * "Figures the code relies on").
 */
export const ZSTD_STREAM_WINDOW_LOG = 16;
/** zstd hash table of streams, log2 entries (see {@link ZSTD_STREAM_WINDOW_LOG}). */
export const ZSTD_STREAM_HASH_LOG = 15;
/** zstd chain table of streams, log2 entries (see {@link ZSTD_STREAM_WINDOW_LOG}). */
export const ZSTD_STREAM_CHAIN_LOG = 15;
/**
 * Largest zstd window a publish body may ask for, log2 bytes: 2^23 = 8 MiB, the limit RFC 9659 sets
 * for the `zstd` HTTP content coding. A frame asking for more is refused, so a body cannot make the
 * decoder reserve more than that for its window.
 */
export const ZSTD_MAX_WINDOW_LOG = 23;
/** gzip level of streams: zlib's default (6). */
export const GZIP_STREAM_LEVEL = zlib.constants.Z_DEFAULT_COMPRESSION;
/**
 * gzip window (2^14 = 16 KiB) and hash memory (`memLevel` 6) of streams: 96 KiB of deflate state per
 * stream instead of zlib's default 256 KiB, for 122.4 instead of 120.6 bytes/event on the same 20,000
 * events (1.5 % larger) at no more CPU.
 */
export const GZIP_STREAM_WINDOW_BITS = 14;
/** zlib `memLevel` of streams: 2^(6+9) bytes of hash memory (see {@link GZIP_STREAM_WINDOW_BITS}). */
export const GZIP_STREAM_MEM_LEVEL = 6;

/**
 * The coding to send a consumption stream with, from the request's `Accept-Encoding` (RFC 9110
 * §12.5.3): the acceptable coding (q > 0) among zstd and gzip with the highest q-value, zstd when
 * they tie (it costs the broker less CPU per byte saved); `*` stands for any coding not named; `x-gzip`
 * counts as gzip. `undefined` (identity) when neither is acceptable or the header is absent.
 * @param acceptEncoding the header's value as received
 */
export function negotiateStreamCoding(acceptEncoding: string | undefined): StreamCoding | undefined {
  if (acceptEncoding === undefined || acceptEncoding.trim() === '') return undefined;
  const q = new Map<string, number>();
  for (const part of acceptEncoding.split(',')) {
    const [name = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    if (name === '') continue;
    let weight = 1;
    for (const param of params) {
      const match = /^q\s*=\s*(.*)$/.exec(param);
      // A malformed q-value counts as q=0: the client's wish is unknown, identity is always safe.
      if (match) weight = /^(0(\.\d{0,3})?|1(\.0{0,3})?)$/.test(match[1] ?? '') ? Number(match[1]) : 0;
    }
    const coding = name === 'x-gzip' ? 'gzip' : name;
    q.set(coding, Math.max(q.get(coding) ?? 0, weight));
  }
  const star = q.get('*') ?? 0;
  const zstdQ = q.get('zstd') ?? star;
  const gzipQ = q.get('gzip') ?? star;
  if (zstdQ <= 0 && gzipQ <= 0) return undefined;
  return zstdQ >= gzipQ ? 'zstd' : 'gzip';
}

/**
 * Compresses one stream's bytes into blocks a client can decode as they arrive: every `write` ends
 * with a flush (gzip `Z_SYNC_FLUSH`, zstd `ZSTD_e_flush`), so the bytes of the lines written so far
 * are all in the output, and compression adds no waiting. Output goes to the `onBlock` callback given
 * at creation: one buffer per `write` (zstd at once, gzip once zlib's thread finished it) and one for
 * the end of the stream.
 */
export interface StreamCompressor {
  readonly coding: StreamCoding;
  /** Compresses `chunks` (one or more complete batch lines) and flushes them out as one block. */
  write(chunks: readonly Buffer[]): void;
  /** Input bytes handed to `write` whose block has not gone to `onBlock` yet (for backpressure). */
  readonly pendingBytes: number;
  /** Resolves once every `write` so far produced its block (at once when none is pending). */
  idle(): Promise<void>;
  /**
   * Ends the compressed stream (the zstd frame's last block, the gzip trailer), hands those bytes to
   * `onBlock`, and releases the compressor's native memory.
   * @throws Error when the codec fails
   */
  end(): Promise<void>;
  /** The client left: drops pending work and releases the native memory now; no more `onBlock` calls. */
  destroy(): void;
}

/**
 * A compressor for one stream.
 * @param coding as negotiated by {@link negotiateStreamCoding}
 * @param onBlock receives each block of compressed bytes, in order
 */
export function createStreamCompressor(coding: StreamCoding, onBlock: (block: Buffer) => void): StreamCompressor {
  return coding === 'zstd' ? new ZstdStreamCompressor(onBlock) : new GzipStreamCompressor(onBlock);
}

/**
 * zstd through `ZSTD_compressStream2`, synchronous on the calling thread: one frame per stream, every
 * write flushed as complete blocks of that frame. zstd-napi has no explicit free: the context (about
 * 400 KB native) is dropped when the stream ends or the client leaves and freed by its finalizer at
 * the next garbage collection, which knows its size (zstd-napi reports it to V8 as external memory).
 */
class ZstdStreamCompressor implements StreamCompressor {
  readonly coding = 'zstd';
  readonly pendingBytes = 0;
  private cctx: zstd.CCtx | undefined;
  private scratch: Buffer | undefined;

  constructor(private readonly onBlock: (block: Buffer) => void) {
    const cctx = new zstd.CCtx();
    cctx.setParameter(zstd.CParameter.compressionLevel, ZSTD_STREAM_LEVEL);
    cctx.setParameter(zstd.CParameter.windowLog, ZSTD_STREAM_WINDOW_LOG);
    cctx.setParameter(zstd.CParameter.hashLog, ZSTD_STREAM_HASH_LOG);
    cctx.setParameter(zstd.CParameter.chainLog, ZSTD_STREAM_CHAIN_LOG);
    this.cctx = cctx;
  }

  write(chunks: readonly Buffer[]): void {
    const out = this.run(chunks, zstd.EndDirective.flush);
    if (out !== undefined && out.length > 0) this.onBlock(out);
  }

  idle(): Promise<void> {
    return Promise.resolve();
  }

  end(): Promise<void> {
    try {
      const out = this.run([], zstd.EndDirective.end);
      if (out !== undefined && out.length > 0) this.onBlock(out);
    } finally {
      this.destroy();
    }
    return Promise.resolve();
  }

  destroy(): void {
    this.cctx = undefined;
    this.scratch = undefined;
  }

  /** Feeds every chunk, then drives `directive` (flush or end) until libzstd has nothing left to give. */
  private run(chunks: readonly Buffer[], directive: zstd.EndDirective): Buffer | undefined {
    const cctx = this.cctx;
    if (cctx === undefined) return undefined;
    const scratch = (this.scratch ??= Buffer.allocUnsafe(zstd.cStreamOutSize()));
    const out: Buffer[] = [];
    let size = 0;
    const take = (produced: number): void => {
      if (produced === 0) return;
      out.push(Buffer.from(scratch.subarray(0, produced)));
      size += produced;
    };
    for (let i = 0; i < chunks.length; i++) {
      let src = chunks[i] ?? Buffer.alloc(0);
      const last = i === chunks.length - 1;
      const mode = last ? directive : zstd.EndDirective.continue;
      for (;;) {
        const [remaining, produced, consumed] = cctx.compressStream2(scratch, src, mode);
        take(produced);
        src = src.subarray(consumed);
        if (src.length === 0 && (mode === zstd.EndDirective.continue || remaining === 0)) break;
      }
    }
    if (chunks.length === 0) {
      for (;;) {
        const [remaining, produced] = cctx.compressStream2(scratch, Buffer.alloc(0), directive);
        take(produced);
        if (remaining === 0) break;
      }
    }
    return out.length === 1 ? out[0] : Buffer.concat(out, size);
  }
}

/**
 * gzip through a `zlib.Gzip` stream (documented API only) whose every write is flushed (`flush:
 * Z_SYNC_FLUSH`): the lines of one write go to zlib as one buffer, so each write is one job on libuv's
 * thread pool, and its callback comes once zlib has produced the block; the block's bytes, gathered from
 * `data` events, go to `onBlock` then. (A write per line followed by `flush()` cost one thread-pool round
 * trip per line plus one: under a publishing storm, when every round trip waits for a busy core, a
 * stream's p99 grew to a second; docs/decisions/0007-zstd-and-gzip-for-streams.md.) `destroy` (client
 * left) and `end` close the zlib handle, which frees its native memory at once.
 */
class GzipStreamCompressor implements StreamCompressor {
  readonly coding = 'gzip';
  pendingBytes = 0;
  private readonly gzip: zlib.Gzip;
  private gathered: Buffer[] = [];
  private waiters: (() => void)[] = [];
  private destroyed = false;

  constructor(private readonly onBlock: (block: Buffer) => void) {
    // zlib's default output chunk (16 KiB): a stream's blocks are gathered from every chunk anyway.
    this.gzip = zlib.createGzip({ level: GZIP_STREAM_LEVEL, windowBits: GZIP_STREAM_WINDOW_BITS, memLevel: GZIP_STREAM_MEM_LEVEL, flush: zlib.constants.Z_SYNC_FLUSH });
    this.gzip.on('data', (chunk: Buffer) => this.gathered.push(chunk));
    // Errors surface through write/flush callbacks and end(); a listener keeps them from crashing the node.
    this.gzip.on('error', () => undefined);
  }

  write(chunks: readonly Buffer[]): void {
    if (this.destroyed) return;
    const block = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    const bytes = block.length;
    if (bytes === 0) return;
    this.pendingBytes += bytes;
    this.gzip.write(block, () => {
      this.pendingBytes -= bytes;
      this.emit();
      if (this.pendingBytes === 0) this.wake();
    });
  }

  idle(): Promise<void> {
    if (this.pendingBytes === 0 || this.destroyed) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  async end(): Promise<void> {
    if (this.destroyed) return;
    try {
      await new Promise<void>((resolve, reject) => {
        this.gzip.once('end', resolve);
        this.gzip.once('error', reject);
        this.gzip.end();
      });
      this.emit();
    } finally {
      this.destroy();
    }
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.gathered = [];
    this.pendingBytes = 0;
    this.gzip.destroy();
    this.wake();
  }

  private emit(): void {
    if (this.destroyed || this.gathered.length === 0) return;
    const block = this.gathered.length === 1 ? this.gathered[0] : Buffer.concat(this.gathered);
    this.gathered = [];
    if (block !== undefined) this.onBlock(block);
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}

/** Why a zstd body was refused. */
export type ZstdBodyFailure = { readonly kind: 'too-large' } | { readonly kind: 'corrupt'; readonly reason: string };

/**
 * Decompresses a `Content-Encoding: zstd` request body without ever holding more than `limit`
 * inflated bytes: a frame that declares a larger content size is refused before decoding, and the
 * streaming decoder stops as soon as its output passes `limit` (a frame may not declare its size, or
 * lie). The window a frame may ask for is capped at {@link ZSTD_MAX_WINDOW_LOG}. Concatenated frames
 * are decoded in turn (RFC 8878 §3.1); skippable frames are skipped.
 * @param body the bytes as received
 * @param limit largest inflated size in bytes (`http.maxInflatedBodyBytes`)
 * @returns the inflated body, or why it was refused
 */
export function inflateZstdBody(body: Buffer, limit: number): { readonly ok: true; readonly body: Buffer } | { readonly ok: false; readonly failure: ZstdBodyFailure } {
  if (declaredContentSize(body) > limit) return { ok: false, failure: { kind: 'too-large' } };
  const dctx = new zstd.DCtx();
  dctx.setParameter(zstd.DParameter.windowLogMax, ZSTD_MAX_WINDOW_LOG);
  // One scratch buffer; what each call produced is copied out, so many tiny frames cannot pin many scratch buffers.
  const scratch = Buffer.allocUnsafe(zstd.dStreamOutSize());
  const out: Buffer[] = [];
  let size = 0;
  let src = body;
  let frameDone = true;
  const take = (produced: number): boolean => {
    size += produced;
    if (size > limit) return false;
    if (produced > 0) out.push(Buffer.from(scratch.subarray(0, produced)));
    return true;
  };
  try {
    while (src.length > 0) {
      const [remaining, produced, consumed] = dctx.decompressStream(scratch, src);
      if (!take(produced)) return { ok: false, failure: { kind: 'too-large' } };
      src = src.subarray(consumed);
      frameDone = remaining === 0;
      if (consumed === 0 && produced === 0) break;
    }
    // Output the decoder still holds once every input byte is in.
    while (!frameDone) {
      const [remaining, produced] = dctx.decompressStream(scratch, Buffer.alloc(0));
      if (!take(produced)) return { ok: false, failure: { kind: 'too-large' } };
      frameDone = remaining === 0;
      if (produced === 0) break;
    }
  } catch (err) {
    return { ok: false, failure: { kind: 'corrupt', reason: (err as Error).message } };
  }
  if (!frameDone || src.length > 0) return { ok: false, failure: { kind: 'corrupt', reason: 'the zstd frame is truncated' } };
  return { ok: true, body: Buffer.concat(out, size) };
}

/** The content size the first frame declares in its header; 0 when it declares none or is not a zstd frame (the decoder judges). */
function declaredContentSize(body: Buffer): number {
  try {
    return zstd.getFrameContentSize(body) ?? 0;
  } catch {
    return 0;
  }
}
