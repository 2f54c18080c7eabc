/**
 * Seeking by time (docs/consuming.md "Seeking by time"): the pure part of finding, in a partition, the
 * first event received at or after a moment. The storage narrows the search with the partition's time
 * index (one entry per second) and hands the stream entries of that window here; this module compares
 * their `metadata.received_at`.
 *
 * Every event of one stream entry came in the same publish request and carries the same
 * `metadata.received_at` (the publisher stamps a batch once), so the first event of an entry speaks
 * for the whole entry.
 */

/** A stream entry as read: the offset of its first event and its events' JSON texts joined by `\n`. */
export interface SeekEntry {
  /** Internal offset of the first event in `data`. */
  readonly first: number;
  readonly data: Uint8Array;
}

const NEWLINE = 0x0a;

/**
 * `metadata.received_at` of the first event of `data` (JSON texts joined by `\n`), in unix ms; NaN
 * when it has none (category `undefined`) or the text is not an event.
 */
export function receivedAtOfFirst(data: Uint8Array): number {
  const end = data.indexOf(NEWLINE);
  const text = Buffer.from(data.buffer, data.byteOffset, end < 0 ? data.byteLength : end).toString();
  try {
    const event: unknown = JSON.parse(text);
    if (typeof event !== 'object' || event === null) return Number.NaN;
    const metadata: unknown = (event as { metadata?: unknown }).metadata;
    if (typeof metadata !== 'object' || metadata === null) return Number.NaN;
    const receivedAt: unknown = (metadata as { received_at?: unknown }).received_at;
    return typeof receivedAt === 'string' ? Date.parse(receivedAt) : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/**
 * The offset of the first event, in offset order, of the first entry among `entries` (in offset order)
 * whose `metadata.received_at` is at or after `atMs` (unix ms); undefined when none is. Entries without
 * `received_at` are passed over.
 */
export function firstReceivedAtOrAfter(entries: readonly SeekEntry[], atMs: number): number | undefined {
  for (const entry of entries) {
    const receivedAt = receivedAtOfFirst(entry.data);
    if (!Number.isNaN(receivedAt) && receivedAt >= atMs) return entry.first;
  }
  return undefined;
}

/** An RFC 3339 date-time: date, `T` (or a space), time with an optional fraction, and a zone. */
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;

/**
 * The moment of an RFC 3339 date-time text in unix ms (a fraction beyond ms is cut), or undefined when
 * the text is not one: no zone (a local time names no moment), or no such date (e.g. month 13).
 */
export function parseSeekTime(text: string): number | undefined {
  if (!RFC3339.test(text)) return undefined;
  const ms = Date.parse(text);
  return Number.isNaN(ms) ? undefined : ms;
}
