/**
 * Limits on untrusted JSON bodies (DESIGN.md §7: bad input never crashes a node — JSON depth limit,
 * strict UTF-8, no prototype pollution; WIRE.md "Conventions": malformed JSON is 400). Pure, no I/O:
 * used by the HTTP server for every JSON request body and by the publish worker for event batches.
 */
import { isUtf8 } from 'node:buffer';

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

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

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
 * `2 × (maxDepth + 1)` bytes cannot nest that deep and is not scanned. Costs about 1-2 ms per MB, a
 * tenth of what the publish worker spends on a batch. Invalid JSON may give any answer; `JSON.parse`
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

/**
 * Where each event of a batch body lies, found by {@link scanEventBatch}: one entry per object that is
 * an item of the top-level array, in order. Offsets are byte offsets into the scanned body. The layout
 * describes valid JSON only; for a body `JSON.parse` refuses it may be anything.
 */
export interface EventBatchLayout {
  /** Objects found as items of the top-level array. */
  readonly count: number;
  /** Offset of each item's opening brace. */
  readonly starts: readonly number[];
  /** Offset one past each item's closing brace. */
  readonly ends: readonly number[];
  /** Offset of the closing brace of each item's top-level `metadata` object; -1 when it has none. */
  readonly metadataEnds: readonly number[];
  /** Whether that `metadata` object has no member (`{}`). */
  readonly metadataEmpty: readonly boolean[];
  /** Object members (`:` outside strings) anywhere in each item: a parsed item with fewer keys had duplicates. */
  readonly members: readonly number[];
  /** Bit set per item of {@link EVENT_TEXT_LINE_BREAK}, {@link EVENT_TEXT_NUMBER}, {@link EVENT_TEXT_KEY}: 0 when none applies. */
  readonly flags: readonly number[];
}

/** {@link EventBatchLayout.flags}: the item holds a tab, CR or LF between its tokens (stored text is one line per event). */
export const EVENT_TEXT_LINE_BREAK = 1;
/**
 * {@link EventBatchLayout.flags}: the item holds a number whose text does not survive as it is — an
 * exponent (may overflow to `Infinity`, or underflow to `-0`), a negative zero (`JSON.stringify` writes
 * `0`), or more than 17 significant digits (more precision than the parsed double keeps).
 */
export const EVENT_TEXT_NUMBER = 2;
/** {@link EventBatchLayout.flags}: a top-level key of the item holds an escape (it could spell `metadata`), or `metadata` appears twice. */
export const EVENT_TEXT_KEY = 4;

/** Result of {@link scanEventBatch}: the offset of the first bracket beyond the depth limit (-1: none) and the layout. */
export interface EventBatchScan {
  readonly tooDeepAt: number;
  readonly layout: EventBatchLayout;
}

const TAB = 0x09;
const LINE_FEED = 0x0a;
const CARRIAGE_RETURN = 0x0d;
const COLON = 0x3a;
const COMMA = 0x2c;
const MINUS = 0x2d;
const DOT = 0x2e;
const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;
const LOWER_E = 0x65;
const UPPER_E = 0x45;
const METADATA = Buffer.from('metadata');

/**
 * The publish worker's single structural pass over a batch body (issue 17 §1): the nesting depth check
 * of {@link nestingBeyond} (same answer, for bodies of any length) and, for a body that is an array of
 * objects, each event's byte range, its `metadata` object's closing brace and what would keep its text
 * from being stored as sent ({@link EventBatchLayout}). Works on the raw bytes: the ASCII bytes it looks at
 * never occur inside a UTF-8 multi-byte sequence. Strings are skipped with the native `Buffer.indexOf`. Invalid JSON may give any layout; `JSON.parse` refuses it anyway.
 *
 * @param bytes the body (already gunzipped)
 * @param maxDepth deepest nesting accepted (the outermost array is level 1)
 */
export function scanEventBatch(bytes: Uint8Array, maxDepth: number): EventBatchScan {
  const length = bytes.byteLength;
  const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, length);
  const starts: number[] = [];
  const ends: number[] = [];
  const metadataEnds: number[] = [];
  const metadataEmpty: boolean[] = [];
  const members: number[] = [];
  const flags: number[] = [];
  const layout: EventBatchLayout = { count: 0, starts, ends, metadataEnds, metadataEmpty, members, flags };
  let depth = 0;
  // As nestingBeyond: text shorter than 2 × (maxDepth + 1) bytes cannot nest that deep as valid JSON, so an
  // unclosed run of brackets in it is left to JSON.parse (same 400 detail as parseUntrustedJson).
  const depthLimit = length < 2 * (maxDepth + 1) ? length : maxDepth;
  /** Whether the outermost value is an array (its object items are the events). */
  let topArray = false;
  /** Per item being scanned (`itemStart` ≥ 0): */
  let itemStart = -1;
  let itemMembers = 0;
  let itemFlags = 0;
  let itemMetadataEnd = -1;
  let itemMetadataEmpty = false;
  /** At depth 2 in an item: the next string is a key; the value after the current key is `metadata`'s. */
  let expectKey = false;
  let metadataValue = false;
  let seenMetadata = false;
  /** Offset of the `metadata` object's opening brace while the scan is inside it, else -1. */
  let metadataOpen = -1;
  for (let i = 0; i < length; i++) {
    const c = buffer[i] ?? 0;
    if (c === QUOTE) {
      const begin = i;
      i = stringEnd(buffer, i);
      if (i < 0) break; // unterminated: JSON.parse refuses the body
      if (depth === 2 && itemStart >= 0 && expectKey) {
        expectKey = false;
        metadataValue = false;
        if (holdsBackslash(buffer, begin + 1, i)) itemFlags |= EVENT_TEXT_KEY;
        else if (i - begin - 1 === METADATA.length && isMetadataKey(buffer, begin + 1)) {
          if (seenMetadata) itemFlags |= EVENT_TEXT_KEY;
          seenMetadata = true;
          metadataValue = true;
        }
      }
    } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (++depth > depthLimit) return { tooDeepAt: i, layout };
      if (depth === 1) topArray = c === OPEN_ARRAY;
      else if (depth === 2 && topArray && c === OPEN_OBJECT) {
        itemStart = i;
        itemMembers = 0;
        itemFlags = 0;
        itemMetadataEnd = -1;
        itemMetadataEmpty = false;
        expectKey = true;
        metadataValue = false;
        seenMetadata = false;
        metadataOpen = -1;
      } else if (depth === 3 && metadataValue && c === OPEN_OBJECT) {
        metadataOpen = i;
        metadataValue = false;
      }
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      if (depth === 3 && metadataOpen >= 0) {
        itemMetadataEnd = i;
        itemMetadataEmpty = onlySpacesBetween(buffer, metadataOpen, i);
        metadataOpen = -1;
      } else if (depth === 2 && itemStart >= 0) {
        starts.push(itemStart);
        ends.push(i + 1);
        metadataEnds.push(itemMetadataEnd);
        metadataEmpty.push(itemMetadataEmpty);
        members.push(itemMembers);
        flags.push(itemFlags);
        itemStart = -1;
      }
      depth--;
    } else if (itemStart < 0) {
      continue; // between items: nothing else matters
    } else if (c === COLON) {
      itemMembers++;
    } else if (c === COMMA) {
      if (depth === 2) expectKey = true;
    } else if (c === MINUS || (c >= DIGIT_0 && c <= DIGIT_9)) {
      const end = numberEnd(buffer, i);
      if (!numberSurvives(buffer, i, end)) itemFlags |= EVENT_TEXT_NUMBER;
      i = end - 1;
    } else if (c === LINE_FEED || c === CARRIAGE_RETURN || c === TAB) {
      itemFlags |= EVENT_TEXT_LINE_BREAK;
    }
  }
  return { tooDeepAt: -1, layout: { ...layout, count: starts.length } };
}

/** Whether a backslash lies in `[from, to)`. */
function holdsBackslash(bytes: Uint8Array, from: number, to: number): boolean {
  for (let k = from; k < to; k++) if (bytes[k] === BACKSLASH) return true;
  return false;
}

/** Whether the 8 bytes at `at` spell `metadata`. */
function isMetadataKey(bytes: Uint8Array, at: number): boolean {
  for (let k = 0; k < METADATA.length; k++) if (bytes[at + k] !== METADATA[k]) return false;
  return true;
}

/** Whether only spaces lie strictly between offsets `open` and `close`. */
function onlySpacesBetween(bytes: Uint8Array, open: number, close: number): boolean {
  for (let k = open + 1; k < close; k++) if (bytes[k] !== 0x20) return false;
  return true;
}

/** Offset one past the number token starting at `start` (digits, sign, point, exponent). */
function numberEnd(bytes: Uint8Array, start: number): number {
  let k = start + 1;
  for (; k < bytes.byteLength; k++) {
    const d = bytes[k] ?? 0;
    if (!((d >= DIGIT_0 && d <= DIGIT_9) || d === DOT || d === MINUS || d === 0x2b || d === LOWER_E || d === UPPER_E)) break;
  }
  return k;
}

/**
 * Whether a number token, stored as written, parses to the value `JSON.stringify` of its parsed value
 * would give: no exponent, not a negative zero, at most 17 significant digits.
 */
function numberSurvives(bytes: Uint8Array, start: number, end: number): boolean {
  let digits = 0;
  let nonZero = false;
  for (let k = start; k < end; k++) {
    const d = bytes[k] ?? 0;
    if (d === LOWER_E || d === UPPER_E) return false;
    if (d > DIGIT_0 && d <= DIGIT_9) nonZero = true;
    if (d >= DIGIT_0 && d <= DIGIT_9 && (nonZero || digits > 0)) digits++;
  }
  if (!nonZero && bytes[start] === MINUS) return false;
  return digits <= 17;
}

/** Result of {@link parseEventBatch}: the parsed body with its layout, or why it is malformed (a 400 detail). */
export type ParsedEventBatch = { ok: true; value: unknown; layout: EventBatchLayout } | { ok: false; reason: string };

/**
 * {@link parseUntrustedJson} for event batches (the publish worker): the same checks, answers and order
 * (depth, strict UTF-8, JSON), with the depth check done by {@link scanEventBatch}, whose layout lets the
 * worker store each event's own text. A body of events longer than {@link PARSE_PIECE_BYTES} is decoded
 * and parsed in pieces of at most that ({@link parseInPieces}); a shorter body, any other body and every
 * malformed one as a whole with the fatal decoder (one UTF-8 pass), so its 400 detail is the one
 * `JSON.parse` gives for the whole text.
 * @returns never throws
 */
export function parseEventBatch(bytes: Uint8Array, maxDepth = MAX_JSON_DEPTH): ParsedEventBatch {
  const scan = scanEventBatch(bytes, maxDepth);
  if (scan.tooDeepAt >= 0) return { ok: false, reason: `the body nests arrays and objects deeper than ${maxDepth} levels (at byte ${scan.tooDeepAt})` };
  if (bytes.byteLength > PARSE_PIECE_BYTES && scan.layout.count > 0) {
    // The same verdict as the fatal decoder (WHATWG UTF-8: no overlong forms, surrogates or truncated sequences).
    if (!isUtf8(bytes)) return { ok: false, reason: 'the body is not valid UTF-8' };
    const pieces = parseInPieces(bytes, scan.layout);
    if (pieces !== undefined) return { ok: true, value: pieces, layout: scan.layout };
  }
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { ok: false, reason: 'the body is not valid UTF-8' };
  }
  try {
    return { ok: true, value: JSON.parse(text), layout: scan.layout };
  } catch (err) {
    return { ok: false, reason: `the body is not valid JSON: ${(err as Error).message}` };
  }
}

/**
 * Bytes of body text decoded into one string at most, unless a single event is longer. V8 allocates a
 * string over 128 KB (two bytes per character once one character is beyond Latin-1, so 64 KB of text) in
 * its large-object space, on pages of its own mapped for it and unmapped when it dies: decoding a
 * 527 KB batch body into one string took 1.9-2.4 ms on the bench machine (page faults), the same
 * bytes in pieces under that size 0.07-0.12 ms (bench/README.md "publish-batches").
 */
export const PARSE_PIECE_BYTES = 32 * 1024;

/**
 * Parses a UTF-8-valid batch body that is a JSON array of objects piece by piece: runs of whole events of
 * at most {@link PARSE_PIECE_BYTES} together, each decoded and parsed as `[` + its text + `]`. The text
 * between events is checked to be what JSON allows there (whitespace around `[`, `,` and `]`) and the
 * events themselves are checked by `JSON.parse`, so the result equals `JSON.parse` of the whole body.
 *
 * @param bytes the body, already known to be valid UTF-8 (a piece boundary is an ASCII brace, so no
 *   character is split)
 * @param layout the body's {@link scanEventBatch} layout, with at least one event
 * @returns the parsed events, or undefined when the body is not a plain array of objects or a piece does
 *   not parse (the caller then parses the whole body, which gives the error, or the value)
 */
function parseInPieces(bytes: Uint8Array, layout: EventBatchLayout): unknown[] | undefined {
  const { count, starts, ends } = layout;
  const length = bytes.byteLength;
  const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, length);
  if (!separatorBetween(buffer, 0, starts[0] ?? 0, OPEN_ARRAY) || !separatorBetween(buffer, ends[count - 1] ?? 0, length, CLOSE_ARRAY)) return undefined;
  const events: unknown[] = [];
  let first = 0;
  for (let i = 0; i < count; i++) {
    const next = i + 1;
    if (next < count && !separatorBetween(buffer, ends[i] ?? 0, starts[next] ?? 0, COMMA)) return undefined;
    // The piece of events first..i ends here when the next event would take it past the bound.
    if (next < count && (ends[next] ?? 0) - (starts[first] ?? 0) <= PARSE_PIECE_BYTES) continue;
    let piece: unknown;
    try {
      piece = JSON.parse(`[${buffer.toString('utf8', starts[first] ?? 0, ends[i] ?? 0)}]`);
    } catch {
      return undefined;
    }
    for (const event of piece as unknown[]) events.push(event);
    first = next;
  }
  return events;
}

/** Whether `[from, to)` is exactly `separator` with JSON whitespace (space, tab, LF, CR) around it. */
function separatorBetween(bytes: Uint8Array, from: number, to: number, separator: number): boolean {
  let seen = false;
  for (let k = from; k < to; k++) {
    const c = bytes[k];
    if (c === separator && !seen) seen = true;
    else if (c !== 0x20 && c !== TAB && c !== LINE_FEED && c !== CARRIAGE_RETURN) return false;
  }
  return seen;
}

/** Offset of the quote closing the string that opens at `start`, or -1 when it is unterminated. */
function stringEnd(buffer: Buffer, start: number): number {
  let end = start;
  for (;;) {
    end = buffer.indexOf(QUOTE, end + 1);
    if (end < 0) return -1;
    let backslashes = 0;
    while (buffer[end - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return end;
  }
}

/**
 * Path of a key (the first one met) in a parsed JSON value that would change a prototype if the value were ever
 * copied key by key into another object (`Object.assign`, a deep merge, `target[key] = value`):
 * `__proto__` anywhere, or `constructor` holding an object with a `prototype` key (the two shapes
 * Fastify's secure-json-parse refuses). `JSON.parse` itself only creates own properties, so the value
 * found is harmless as it is; request bodies of the control plane refuse it anyway (400) so no later
 * code has to be careful. Iterative, so any depth is safe.
 *
 * @returns a JSON pointer such as `#/options/__proto__`, or undefined
 */
export function findPrototypeKey(value: unknown): string | undefined {
  const pending: { node: unknown; pointer: string }[] = [{ node: value, pointer: '#' }];
  for (let item = pending.pop(); item !== undefined; item = pending.pop()) {
    const { node, pointer } = item;
    if (typeof node !== 'object' || node === null) continue;
    if (Array.isArray(node)) {
      node.forEach((child: unknown, i) => pending.push({ node: child, pointer: `${pointer}/${i}` }));
      continue;
    }
    for (const key of Object.keys(node)) {
      const child: unknown = (node as Record<string, unknown>)[key];
      const at = `${pointer}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`;
      if (key === '__proto__') return at;
      if (key === 'constructor' && typeof child === 'object' && child !== null && Object.hasOwn(child, 'prototype')) return `${at}/prototype`;
      pending.push({ node: child, pointer: at });
    }
  }
  return undefined;
}

/**
 * Whether JSON text may contain a key {@link findPrototypeKey} looks for: `__proto__` or `prototype`
 * spelled out, or any `\u` escape (which could spell them). Text without any of them needs no walk,
 * which keeps the check to a few native substring searches for nearly every body.
 */
export function mayHavePrototypeKey(text: string): boolean {
  return text.includes('__proto__') || text.includes('prototype') || text.includes('\\u');
}
