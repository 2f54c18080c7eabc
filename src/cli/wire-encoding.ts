/**
 * Content encodings `broker publish` can put on the wire (`Content-Encoding` of a batch body).
 *
 * zstd hook: the broker accepts only gzip today (415 for other encodings) and Node 20's zlib has no
 * zstd. When the zstd binding lands (with the broker's `Content-Encoding: zstd` support), set
 * `ENCODERS.zstd` to its compress function; `--zstd` then works with no other change.
 */
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
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
  zstd: undefined,
};

/**
 * The encoder of `encoding`.
 * @throws CliError (exit 2) when this build cannot encode it (zstd, for now)
 */
export function encoderOf(encoding: WireEncoding): Encoder {
  const encoder = ENCODERS[encoding];
  if (encoder === undefined) throw usageError(`--${encoding}: ${encoding} is not available in this build yet (use --gzip)`);
  return encoder;
}
