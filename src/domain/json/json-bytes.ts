/**
 * Byte-level helpers shared by the scans of JSON bodies (src/domain/json/json-limits.ts,
 * src/domain/batch/event-batch-scan.ts, src/domain/batch/event-batch-parse.ts): the ASCII bytes they look at and
 * {@link stringEnd}. In UTF-8 these bytes never occur inside a multi-byte sequence, so the scans work
 * on the raw bytes without decoding them.
 */

export const QUOTE = 0x22;
export const BACKSLASH = 0x5c;
export const OPEN_ARRAY = 0x5b;
export const CLOSE_ARRAY = 0x5d;
export const OPEN_OBJECT = 0x7b;
export const CLOSE_OBJECT = 0x7d;
export const TAB = 0x09;
export const LINE_FEED = 0x0a;
export const CARRIAGE_RETURN = 0x0d;
export const COMMA = 0x2c;

/** Offset of the quote closing the string that opens at `start`, or -1 when it is unterminated. */
export function stringEnd(buffer: Buffer, start: number): number {
  let end = start;
  for (;;) {
    end = buffer.indexOf(QUOTE, end + 1);
    if (end < 0) return -1;
    let backslashes = 0;
    while (buffer[end - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return end;
  }
}
