/**
 * Content encodings `broker publish` can put on the wire (`Content-Encoding` of a batch body): gzip
 * from Node's zlib, zstd from the `zstd-napi` binding the broker itself uses (Node 20's zlib has none).
 */
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import { compress as zstdCompress } from 'zstd-napi';
import { usageError } from './exit-codes.js';

const gzipAsync = promisify(gzip);

/** An encoding of a batch body on the wire. */
export type WireEncoding = 'identity' | 'gzip' | 'zstd';

/** Compresses a body. */
export type Encoder = (body: Buffer) => Promise<Buffer>;

/** The encoder of each encoding; undefined = not available in this build. */
export const ENCODERS: Record<WireEncoding, Encoder | undefined> = {
  identity: (body) => Promise.resolve(body),
  gzip: (body) => gzipAsync(body),
  zstd: (body) => Promise.resolve(zstdCompress(body)),
};

/**
 * The encoder of `encoding`.
 * @throws CliError (exit 2) when this build cannot encode it
 */
export function encoderOf(encoding: WireEncoding): Encoder {
  const encoder = ENCODERS[encoding];
  if (encoder === undefined) throw usageError(`--${encoding}: ${encoding} is not available in this build yet (use --gzip)`);
  return encoder;
}
