/**
 * The stored form of a batch entry's events (docs/architecture.md "3.4 The write: `publishBatch`, dense offsets, notices"; docs/decisions/0032-events-stored-compressed.md):
 * the events' JSON texts joined by `\n`, either as they are (stream entry field `d`) or as one zstd frame
 * of those bytes (field `z`). The field name is the entry's format marker, so a log mixes both and entries
 * written before compression existed read as they always did.
 *
 * Compression runs where the batch is validated: in a worker thread for every batch above
 * `publish.inlineMaxBytes`, on the main thread only for the small inline ones. Decompression runs where an
 * entry is read (`PartitionStore.read`): zstd decodes at several hundred MB/s per core, so a reader pays
 * a fraction of what sending the events costs.
 */
import zstd from 'zstd-napi/binding.js';

/** Stream entry field of events stored as they are: their JSON texts joined by `\n`. */
export const PLAIN_FIELD = 'd';
/** Stream entry field of events stored compressed: one zstd frame of their JSON texts joined by `\n`. */
export const ZSTD_FIELD = 'z';

/** The stored formats of a batch entry's events: the stream entry field that holds them. */
export type EntryFormat = typeof PLAIN_FIELD | typeof ZSTD_FIELD;

/**
 * zstd level of stored entries: 1, libzstd's fastest standard level. On the benchmark's order events it
 * stores 1000-event batches in about 0.17× and 10-event batches in about 0.25× of their JSON bytes; level 3
 * gains under 2 % for more time (docs/decisions/0032-events-stored-compressed.md).
 */
export const STORED_ZSTD_LEVEL = 1;

/**
 * A compressed entry is kept only when it is at most this share of the plain bytes; otherwise the plain
 * bytes are stored (incompressible events, such as random or already compressed payloads, then cost
 * readers no decompression for nothing).
 */
export const MAX_KEPT_RATIO = 0.9;

/**
 * The largest entry a frame may inflate to, in bytes (256 MiB, far above any batch body a node accepts):
 * a damaged frame cannot make a reader allocate more.
 */
export const MAX_DECODED_BYTES = 256 * 1024 * 1024;

/** The largest compression scratch a thread keeps between batches, in bytes (4 MiB). */
const KEPT_SCRATCH_BYTES = 4 * 1024 * 1024;

/** The first four bytes of every zstd frame (RFC 8878 §3.1.1), little-endian 0xFD2FB528. */
const ZSTD_MAGIC = [0x28, 0xb5, 0x2f, 0xfd] as const;
/** `z` in UTF-8. */
const Z_BYTE = 0x7a;

let cctx: InstanceType<typeof zstd.CCtx> | undefined;
let dctx: InstanceType<typeof zstd.DCtx> | undefined;
/** The thread's compression scratch, grown to the largest bound seen; frames are copied out of it. */
let scratch: Buffer | undefined;

/** The thread's compression context (workers and the main thread each get their own, on first use). */
function threadCCtx(): InstanceType<typeof zstd.CCtx> {
  if (cctx === undefined) {
    cctx = new zstd.CCtx();
    cctx.setParameter(zstd.CParameter.compressionLevel, STORED_ZSTD_LEVEL);
    // The content size in every frame header: a reader allocates the decoded entry once.
    cctx.setParameter(zstd.CParameter.contentSizeFlag, 1);
  }
  return cctx;
}

/** What {@link encodeEntries} made of one entry: its stored bytes and their format. */
export interface EncodedEntry {
  readonly format: EntryFormat;
  readonly data: Uint8Array;
}

/**
 * The bytes to store for each entry (events joined by `\n`) and their format: one zstd frame when the
 * entry has at least `minBytes` bytes and the frame is at most {@link MAX_KEPT_RATIO} of it, else the
 * entry itself (the same view). The frames are views of ONE buffer with an ArrayBuffer of its own, sized
 * to them, so a worker transfers them in one piece (as the plain payloads, docs/decisions/0016-one-payload-buffer-per-batch.md).
 * @param minBytes smallest plain size compressed (`publish.storedCompressionMinBytes`)
 */
export function encodeEntries(entries: readonly Uint8Array[], minBytes: number): EncodedEntry[] {
  const context = threadCCtx();
  const frames: { readonly at: number; readonly length: number }[] = [];
  let used = 0;
  for (const data of entries) {
    if (data.byteLength < Math.max(minBytes, 1)) {
      frames.push({ at: -1, length: 0 });
      continue;
    }
    const bound = zstd.compressBound(data.byteLength);
    if (scratch === undefined || scratch.byteLength < used + bound) {
      const grown = Buffer.allocUnsafeSlow(Math.max(used + bound, (scratch?.byteLength ?? 0) * 2, 64 * 1024));
      if (scratch !== undefined) scratch.copy(grown, 0, 0, used);
      scratch = grown;
    }
    const length = context.compress2(scratch.subarray(used, used + bound), data);
    if (length > data.byteLength * MAX_KEPT_RATIO) {
      frames.push({ at: -1, length: 0 });
      continue;
    }
    frames.push({ at: used, length });
    used += length;
  }
  const packed = used > 0 && scratch !== undefined ? Buffer.allocUnsafeSlow(used) : undefined;
  if (packed !== undefined && scratch !== undefined) scratch.copy(packed, 0, 0, used);
  // A thread keeps a scratch for batches of ordinary size only.
  if (scratch !== undefined && scratch.byteLength > KEPT_SCRATCH_BYTES) scratch = undefined;
  return entries.map((data, i) => {
    const frame = frames[i];
    if (packed === undefined || frame === undefined || frame.at < 0) return { format: PLAIN_FIELD, data };
    return { format: ZSTD_FIELD, data: packed.subarray(frame.at, frame.at + frame.length) };
  });
}

/**
 * The events joined by `\n` of a stored entry's value, by its field name (the format marker): the value
 * itself for {@link PLAIN_FIELD} (and any field that is not `z`, as before), the decompressed frame for
 * {@link ZSTD_FIELD}.
 * @throws Error when a `z` value is not one whole zstd frame within {@link MAX_DECODED_BYTES} (a damaged entry; the broker never writes one)
 */
export function decodeEntry(field: string | Uint8Array, value: Buffer): Buffer {
  if (!isZstdField(field)) return value;
  if (!startsWithZstdMagic(value)) throw new Error('a compressed stream entry does not hold a zstd frame');
  const size = zstd.getFrameContentSize(value);
  if (size === null || size > MAX_DECODED_BYTES) throw new Error('a compressed stream entry does not declare a size within bounds');
  const out = Buffer.allocUnsafe(size);
  dctx ??= new zstd.DCtx();
  const written = dctx.decompress(out, value);
  if (written !== size) throw new Error('a compressed stream entry inflated to another size than it declares');
  return out;
}

/** Whether a stream entry's field name marks compressed events (`z`), as a string or the raw bytes of a buffered read. */
export function isZstdField(field: string | Uint8Array): boolean {
  return typeof field === 'string' ? field === ZSTD_FIELD : field.byteLength === 1 && field[0] === Z_BYTE;
}

function startsWithZstdMagic(value: Uint8Array): boolean {
  return value.byteLength >= 4 && value[0] === ZSTD_MAGIC[0] && value[1] === ZSTD_MAGIC[1] && value[2] === ZSTD_MAGIC[2] && value[3] === ZSTD_MAGIC[3];
}
