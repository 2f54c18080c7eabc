/**
 * Offsets and cursors (docs/concepts.md "Offsets and cursors").
 *
 * Offsets are dense per partition: the n-th event of a partition has offset n-1. On the wire an
 * offset is `001-<timeline, 4 lower-case hex>-<offset, 18 decimal digits>`; before the first event of
 * a timeline it is `001-<timeline>--1`. Inputs also accept `BEGIN` (any case: before the oldest
 * available event) and bare numbers (`"5"`, on the first timeline).
 */

/** The version prefix of every offset string. */
const OFFSET_VERSION = '001';
const DIGITS = 18;
/** Largest offset representable in 18 digits and still exact as a JS number. */
export const MAX_OFFSET = Number.MAX_SAFE_INTEGER;

/**
 * Most cursors in one request: a cursor reset or a commit (`items`), a lag query, or pairs of a cursor
 * distance query. A subscription has at most `subscriptions.maxPartitions` partitions
 * (100 by default) and an event type at most `eventTypes.maxPartitionCount` (8), so 1,000 leaves room
 * for repeated cursors of one partition while bounding the work of one request.
 */
export const MAX_CURSORS_PER_REQUEST = 1000;

/**
 * The 422 detail for a list of `count` cursors above {@link MAX_CURSORS_PER_REQUEST}, or undefined.
 * @param what names the list, e.g. `"items"`
 */
export function cursorCountProblem(count: number, what: string): string | undefined {
  return count > MAX_CURSORS_PER_REQUEST ? `${what} has ${count} cursors; at most ${MAX_CURSORS_PER_REQUEST} are allowed per request` : undefined;
}

/** A parsed position: `offset` is the last consumed event (-1 = before the first event). */
export interface Position {
  readonly timeline: number;
  readonly offset: number;
}

/** A parsed cursor input: either an explicit position or `BEGIN`. */
export type ParsedOffset = { readonly kind: 'position'; readonly position: Position } | { readonly kind: 'begin' };

/** Formats an offset of a timeline, e.g. `(1, 5)` → `001-0001-000000000000000005`, `(1, -1)` → `001-0001--1`. */
export function formatOffset(timeline: number, offset: number): string {
  const tl = timeline.toString(16).padStart(4, '0');
  if (offset < 0) return `${OFFSET_VERSION}-${tl}--1`;
  return `${OFFSET_VERSION}-${tl}-${offset.toString().padStart(DIGITS, '0')}`;
}

const FULL_FORM = /^001-([0-9a-f]{4})-(-1|[0-9]{18})$/;
const BARE_NUMBER = /^(-1|0|[1-9][0-9]{0,17})$/;

/**
 * Parses an offset string as clients send it.
 * @returns the parsed offset, or `undefined` when the string is malformed (callers answer 422 or 412)
 */
export function parseOffset(text: string): ParsedOffset | undefined {
  if (text.toLowerCase() === 'begin') return { kind: 'begin' };
  const full = FULL_FORM.exec(text);
  if (full) {
    const timeline = Number.parseInt(full[1] as string, 16);
    const offset = Number(full[2]);
    if (timeline < 1 || offset > MAX_OFFSET) return undefined;
    return { kind: 'position', position: { timeline, offset } };
  }
  if (BARE_NUMBER.test(text)) {
    const offset = Number(text);
    if (offset > MAX_OFFSET) return undefined;
    return { kind: 'position', position: { timeline: 1, offset } };
  }
  return undefined;
}

/** The available range of one partition: `oldest` is the first retained offset, `newest` the last written (-1 if none). */
export interface PartitionRange {
  readonly oldest: number;
  readonly newest: number;
}

/** The reason a cursor is refused when retention or compaction removed its offset already. */
export const OFFSET_EXPIRED = 'offset has expired';

/**
 * Resolves a cursor against a partition's range to the last consumed offset, or reports why it is
 * invalid: `BEGIN` is just before the oldest retained event; an offset below `oldest - 1` has expired;
 * an offset above `newest` does not exist yet.
 */
export function resolveCursor(parsed: ParsedOffset, range: PartitionRange, timeline: number): { ok: true; offset: number } | { ok: false; reason: string } {
  if (parsed.kind === 'begin') return { ok: true, offset: range.oldest - 1 };
  const { position } = parsed;
  if (position.timeline !== timeline) return { ok: false, reason: `timeline ${position.timeline} does not exist` };
  if (position.offset < range.oldest - 1) return { ok: false, reason: OFFSET_EXPIRED };
  if (position.offset > range.newest) return { ok: false, reason: 'offset is beyond the newest available offset' };
  return { ok: true, offset: position.offset };
}

/**
 * Moves a "last consumed" offset by `shift` events of its partition (negative: back), as
 * `POST /event-types/{name}/shifted-cursors` does (docs/consuming.md "Cursor tools"). Offsets are dense, so this is
 * addition; the result must still be a cursor of the partition: from just before the oldest available
 * event (`oldest - 1`) to the newest one.
 * @param shift a safe integer (events)
 * @returns the moved offset, or why it is not available (a 422 detail)
 */
export function shiftOffset(offset: number, shift: number, range: PartitionRange): { ok: true; offset: number } | { ok: false; reason: string } {
  const moved = offset + shift;
  if (moved < range.oldest - 1) return { ok: false, reason: `shifting by ${shift} goes ${range.oldest - 1 - moved} event(s) before the oldest available offset` };
  if (moved > range.newest) return { ok: false, reason: `shifting by ${shift} goes ${moved - range.newest} event(s) after the newest available offset` };
  return { ok: true, offset: moved };
}
