/**
 * Parsing of publish batch bodies in the publish worker: the checks of `parseUntrustedJson`
 * (src/domain/json/json-limits.ts) with the layout of {@link scanEventBatch}, and long bodies parsed in
 * pieces (docs/decisions/0013-batch-bodies-parsed-in-pieces.md).
 */
import { isUtf8 } from 'node:buffer';
import { scanEventBatch, type EventBatchLayout } from './event-batch-scan.js';
import { CARRIAGE_RETURN, CLOSE_ARRAY, COMMA, LINE_FEED, OPEN_ARRAY, TAB } from '../json/json-bytes.js';
import { MAX_JSON_DEPTH } from '../json/json-limits.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Result of {@link parseEventBatch}: the parsed body with its layout, or why it is malformed (a 400 detail). */
export type ParsedEventBatch = { ok: true; value: unknown; layout: EventBatchLayout } | { ok: false; reason: string };

/**
 * `parseUntrustedJson` for event batches (the publish worker): the same checks, answers and order
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
 * its large-object space, on pages of its own mapped for it and unmapped when it dies: decoding a batch
 * body into one string costs page faults that the same bytes in pieces under that size do not
 * (docs/decisions/0013-batch-bodies-parsed-in-pieces.md "Figures the code relies on").
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
