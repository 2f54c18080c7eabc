/**
 * Limits on untrusted JSON bodies: bad input never crashes a node (JSON depth limit, strict UTF-8, no
 * prototype pollution; docs/architecture.md "7. Hostile input and the schema cost budget"), and
 * malformed JSON is answered 400 (docs/http-api.md). Pure, no I/O: used by the HTTP server for every
 * JSON request body; the publish worker parses event batches with the same checks
 * (src/domain/batch/event-batch-parse.ts).
 */
import { CLOSE_ARRAY, CLOSE_OBJECT, OPEN_ARRAY, OPEN_OBJECT, QUOTE, stringEnd } from './json-bytes.js';
import { findPrototypeKey, mayHavePrototypeKey } from './prototype-keys.js';

/**
 * Deepest nesting of arrays and objects accepted in a request body (the outermost array or object is
 * level 1). `JSON.parse` itself is iterative in V8, but much of what runs afterwards is recursive —
 * `JSON.stringify` of an event, `structuredClone`, ajv validators of recursive schemas — and throws
 * `RangeError` around 5,000-10,000 levels; 512 leaves a wide margin on any thread's stack while no real
 * payload comes close (a GitHub webhook nests about 6 levels).
 */
export const MAX_JSON_DEPTH = 512;

/** Result of {@link parseUntrustedJson}: the value, or why the body is malformed (a 400 problem detail). */
export type UntrustedJson = { ok: true; value: unknown } | { ok: false; reason: string };

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Options of {@link parseUntrustedJson}. */
export interface UntrustedJsonOptions {
  /** Deepest nesting accepted; {@link MAX_JSON_DEPTH} by default. */
  readonly maxDepth?: number;
  /** Refuse a value holding a key {@link findPrototypeKey} finds (control-plane bodies); default false. */
  readonly refusePrototypeKeys?: boolean;
}

/**
 * Decodes and parses a body strictly, cheapest and most protective check first:
 * 1. nesting depth ({@link nestingBeyond}) before anything else, so a 1,000,000-level `[[[[…]]]]` costs one
 *    linear scan (a few ms), not a parse (about 300 ms);
 * 2. UTF-8 with `fatal` decoding: an invalid byte sequence (stray continuation byte, overlong form,
 *    encoded surrogate, truncated sequence) is refused, never replaced by U+FFFD;
 * 3. `JSON.parse`;
 * 4. with `refusePrototypeKeys`, no `__proto__` key and no `constructor.prototype` ({@link findPrototypeKey}),
 *    walked only when the text could spell one ({@link mayHavePrototypeKey}).
 *
 * @param bytes the body (already gunzipped)
 * @returns the parsed value, or the reason it is malformed (e.g. `the body is not valid UTF-8`), meant as
 *   the detail of a 400 problem; never throws
 */
export function parseUntrustedJson(bytes: Uint8Array, options: UntrustedJsonOptions = {}): UntrustedJson {
  const maxDepth = options.maxDepth ?? MAX_JSON_DEPTH;
  const tooDeep = nestingBeyond(bytes, maxDepth);
  if (tooDeep >= 0) return { ok: false, reason: `the body nests arrays and objects deeper than ${maxDepth} levels (at byte ${tooDeep})` };
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { ok: false, reason: 'the body is not valid UTF-8' };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, reason: `the body is not valid JSON: ${(err as Error).message}` };
  }
  if (options.refusePrototypeKeys === true && mayHavePrototypeKey(text)) {
    const at = findPrototypeKey(value);
    if (at !== undefined) return { ok: false, reason: `${at}: the body must not contain the key "${at.endsWith('/prototype') ? 'constructor.prototype' : '__proto__'}"` };
  }
  return { ok: true, value };
}

/**
 * Where a JSON body first nests deeper than `maxDepth`: one pass over the bytes counting `[`/`{` against
 * `]`/`}` outside strings, string contents skipped with the native `Buffer.indexOf`. Works on the raw
 * bytes: in UTF-8 these ASCII bytes never occur inside a multi-byte sequence. A body shorter than
 * `2 × (maxDepth + 1)` bytes cannot nest that deep and is not scanned. Costs a tenth of what the publish
 * worker spends on a batch (docs/decisions/0013-batch-bodies-parsed-in-pieces.md "Figures the code relies on"). Invalid JSON may give any answer; `JSON.parse`
 * refuses it anyway.
 *
 * @returns the byte offset of the first opening bracket beyond `maxDepth`, or -1
 */
export function nestingBeyond(bytes: Uint8Array, maxDepth: number): number {
  const length = bytes.byteLength;
  if (length < 2 * (maxDepth + 1)) return -1;
  const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, length);
  let depth = 0;
  for (let i = 0; i < length; i++) {
    const c = buffer[i];
    if (c === QUOTE) {
      i = stringEnd(buffer, i);
      if (i < 0) return -1;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > maxDepth) return i;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    }
  }
  return -1;
}
