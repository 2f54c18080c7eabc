/**
 * The structural byte scan of a publish batch body: the nesting depth check and each event's byte
 * range and `metadata` object, so the publish worker can store each event's own text
 * (docs/architecture.md "3.3 Inline or worker").
 */
import { BACKSLASH, CARRIAGE_RETURN, CLOSE_ARRAY, CLOSE_OBJECT, COMMA, LINE_FEED, OPEN_ARRAY, OPEN_OBJECT, QUOTE, TAB, stringEnd } from '../json/json-bytes.js';

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

const COLON = 0x3a;
const MINUS = 0x2d;
const DOT = 0x2e;
const DIGIT_0 = 0x30;
const DIGIT_9 = 0x39;
const LOWER_E = 0x65;
const UPPER_E = 0x45;
const METADATA = Buffer.from('metadata');

/**
 * The publish worker's single structural pass over a batch body, so the worker reads the body once
 * before parsing it: the nesting depth check of `nestingBeyond` (src/domain/json/json-limits.ts; same answer,
 * for bodies of any length) and, for a body that is an array of
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
