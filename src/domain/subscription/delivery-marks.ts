/**
 * What a stream reads of the first event of a batch it delivers, for the delivery latency histogram and
 * its exemplars (docs/metrics.md, docs/tracing.md): `metadata.received_at` and the `traceparent` of
 * `metadata.span_ctx`, found in the stored text with the native `Buffer.indexOf` rather than by parsing it,
 * so a batch costs a few hundred nanoseconds whatever its size.
 */
import { CLOSE_OBJECT, LINE_FEED, QUOTE } from '../json/json-bytes.js';

/** The marks of one event's stored text. */
export interface DeliveryMarks {
  /** `metadata.received_at` in ms since the epoch. */
  readonly receivedAtMs: number;
  /** `metadata.span_ctx.traceparent`, when the event carries one. */
  readonly traceparent?: string;
}

const RECEIVED_AT = Buffer.from('"received_at":"');
/**
 * What follows the enrichment's `received_at` value: the broker appends `received_at` to `metadata`
 * (a producer may not send it) and then `event_type` (unless sent) and always `version` (never sent), both
 * when it splices the fields into the producer's text and when it serializes the event (docs/publishing.md
 * "Enrichment"). A `"received_at":"…"` that anything else follows belongs to the producer's data.
 */
const AFTER_RECEIVED_AT = [Buffer.from('","event_type":'), Buffer.from('","version":')];
const SPAN_CTX = Buffer.from('"span_ctx":{');
const TRACEPARENT = Buffer.from('"traceparent":"');

/**
 * The delivery marks of the first event of `events` (stored texts joined by `\n`, as a stream entry
 * holds them): undefined when it has no enrichment `received_at` (category `undefined`) or the value is
 * not a date. A producer's data that holds the enrichment's exact byte sequence before `metadata` would be
 * read instead; that costs the histogram one wrong sample, nothing else.
 * @param withTraceparent look for `span_ctx.traceparent` too: a node with tracing keeps exemplars (the
 *   search costs about a microsecond for a 700-byte event, so a node without tracing skips it)
 */
export function deliveryMarks(events: Buffer, withTraceparent = true): DeliveryMarks | undefined {
  const lineEnd = events.indexOf(LINE_FEED);
  // The first event only: every search below stays within it, however many events follow.
  const event = lineEnd < 0 ? events : events.subarray(0, lineEnd);
  let receivedAtMs = Number.NaN;
  for (let at = event.indexOf(RECEIVED_AT); at >= 0; at = event.indexOf(RECEIVED_AT, at + 1)) {
    const from = at + RECEIVED_AT.length;
    const close = event.indexOf(QUOTE, from);
    if (close < 0) break;
    if (!AFTER_RECEIVED_AT.some((after) => startsWith(event, close, after))) continue;
    receivedAtMs = isoMillis(event, from, close);
    break;
  }
  if (Number.isNaN(receivedAtMs)) return undefined;
  const traceparent = withTraceparent ? traceparentOf(event) : undefined;
  return traceparent === undefined ? { receivedAtMs } : { receivedAtMs, traceparent };
}

/** The `traceparent` string of the first `"span_ctx":{…}` object of `event`, or undefined. */
function traceparentOf(event: Buffer): string | undefined {
  const spanCtx = event.indexOf(SPAN_CTX);
  if (spanCtx < 0) return undefined;
  const closeBrace = event.indexOf(CLOSE_OBJECT, spanCtx);
  const at = event.indexOf(TRACEPARENT, spanCtx);
  if (at < 0 || at >= closeBrace) return undefined;
  const from = at + TRACEPARENT.length;
  const close = event.indexOf(QUOTE, from);
  return close < 0 || close > closeBrace ? undefined : event.toString('latin1', from, close);
}

/**
 * The time of an RFC 3339 date-time in `bytes[from, to)` in ms since the epoch, NaN when it is not one. The
 * broker writes `received_at` as `Date.toISOString` does (`2026-11-28T10:00:00.250Z`): read from its digits
 * (a tenth of `Date.parse`'s cost, no string made); any other form goes to `Date.parse`.
 */
function isoMillis(bytes: Buffer, from: number, to: number): number {
  if (to - from === ISO_LENGTH && bytes[from + 4] === DASH && bytes[from + 10] === LETTER_T && bytes[from + 19] === DOT && bytes[from + 23] === LETTER_Z) {
    const year = digits(bytes, from, 4);
    const month = digits(bytes, from + 5, 2);
    const day = digits(bytes, from + 8, 2);
    const hours = digits(bytes, from + 11, 2);
    const minutes = digits(bytes, from + 14, 2);
    const seconds = digits(bytes, from + 17, 2);
    const millis = digits(bytes, from + 20, 3);
    if (year >= 0 && month >= 1 && month <= 12 && day >= 1 && day <= 31 && hours <= 23 && minutes <= 59 && seconds <= 59 && millis >= 0 && hours >= 0 && minutes >= 0 && seconds >= 0) {
      return Date.UTC(year, month - 1, day, hours, minutes, seconds, millis);
    }
  }
  return Date.parse(bytes.toString('latin1', from, to));
}

/** The decimal number of `count` digits at `at`, or -1 when one of them is not a digit. */
function digits(bytes: Buffer, at: number, count: number): number {
  let value = 0;
  for (let i = at; i < at + count; i++) {
    const digit = (bytes[i] ?? 0) - DIGIT_0;
    if (digit < 0 || digit > 9) return -1;
    value = value * 10 + digit;
  }
  return value;
}

const ISO_LENGTH = 24;
const DASH = 0x2d;
const DOT = 0x2e;
const DIGIT_0 = 0x30;
const LETTER_T = 0x54;
const LETTER_Z = 0x5a;

/** Whether `bytes` holds `prefix` at `at`. */
function startsWith(bytes: Buffer, at: number, prefix: Buffer): boolean {
  if (at + prefix.length > bytes.length) return false;
  for (let i = 0; i < prefix.length; i++) if (bytes[at + i] !== prefix[i]) return false;
  return true;
}
