/**
 * Idempotent publishing (docs/publishing.md "Idempotent publishing"): an event type annotation that
 * makes a retried batch store each `metadata.eid` at most once within a window. Pure: the annotation
 * rule and its value.
 */

/** Event type annotation: the idempotency window in seconds (an integer from 1 to 86,400; absent = off). */
export const IDEMPOTENCY_WINDOW_ANNOTATION = 'broker.io/idempotency-window-seconds';
/** The service's own annotation keys under its reserved prefix that event types may carry. */
export const EVENT_TYPE_SERVICE_ANNOTATIONS: ReadonlySet<string> = new Set([IDEMPOTENCY_WINDOW_ANNOTATION]);
/** Longest idempotency window: one day, in seconds. */
export const MAX_IDEMPOTENCY_WINDOW_SECONDS = 86_400;

/**
 * 422 detail lines for the service's annotations of an event type: the window an integer from 1 to
 * 86,400 written in decimal, on an event type whose events carry `metadata.eid` (not category `undefined`).
 * @param category the event type's category (`undefined` events have no eid to remember)
 */
export function idempotencyAnnotationProblems(annotations: Readonly<Record<string, unknown>> | undefined, category: string | undefined): string[] {
  const value = annotations?.[IDEMPOTENCY_WINDOW_ANNOTATION];
  if (value === undefined) return [];
  if (typeof value !== 'string' || !/^[1-9][0-9]{0,4}$/.test(value) || Number(value) > MAX_IDEMPOTENCY_WINDOW_SECONDS) {
    return [`Annotation "${IDEMPOTENCY_WINDOW_ANNOTATION}" must be an integer from 1 to ${MAX_IDEMPOTENCY_WINDOW_SECONDS} (seconds), got ${JSON.stringify(value)}`];
  }
  if (category === 'undefined') return [`Annotation "${IDEMPOTENCY_WINDOW_ANNOTATION}" needs events with metadata.eid: not available for category undefined`];
  return [];
}

/** The idempotency window of an event type's annotations in seconds, or undefined when off (or invalid). */
export function idempotencyWindowSeconds(annotations: Readonly<Record<string, string>> | undefined): number | undefined {
  const value = annotations?.[IDEMPOTENCY_WINDOW_ANNOTATION];
  if (value === undefined || idempotencyAnnotationProblems(annotations, 'business').length > 0) return undefined;
  return Number(value);
}

/** Bytes of an eid's key in the partition's eid sets: the 128 bits of the uuid. */
export const EID_KEY_BYTES = 16;

/** Value of each hex digit's character code (0–9, a–f, A–F), -1 for any other. */
const HEX_VALUES: Int8Array = (() => {
  const values = new Int8Array(128).fill(-1);
  for (let d = 0; d < 16; d++) {
    values[d.toString(16).charCodeAt(0)] = d;
    values[d.toString(16).toUpperCase().charCodeAt(0)] = d;
  }
  return values;
})();

/** Length of the optional `urn:uuid:` prefix the uuid format allows. */
const URN_PREFIX_LENGTH = 'urn:uuid:'.length;

/**
 * Where the 32 hex digits of a uuid text start: 0, or after a `urn:uuid:` prefix (any case), as the
 * uuid format validation admits.
 */
function hexStart(eid: string): number {
  return eid.length === 36 + URN_PREFIX_LENGTH && eid.slice(0, URN_PREFIX_LENGTH).toLowerCase() === 'urn:uuid:' ? URN_PREFIX_LENGTH : 0;
}

/**
 * FNV-1a (32 bit) of the eid as idempotent publishing compares it — a uuid: lower case, without a
 * `urn:uuid:` prefix — computed without building that text (other texts hash as they are): with `random`
 * partitioning, an idempotent event type's events go to `eidHash(eid) % partitionCount`, so a retry
 * lands where the first attempt did, whichever text of the uuid it sends (docs/publishing.md
 * "Idempotent publishing"). Equals `fnv1a32(eid)` for a lower-case uuid without prefix.
 */
export function eidHash(eid: string): number {
  const start = hexStart(eid);
  const canonical = eid.length - start === 36;
  let hash = 0x811c9dc5;
  for (let i = canonical ? start : 0; i < eid.length; i++) {
    const code = eid.charCodeAt(i);
    hash ^= canonical && code >= 65 && code <= 90 ? code + 32 : code;
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/**
 * Writes the 16 bytes of the uuid `eid` (its 32 hex digits; dashes and a `urn:uuid:` prefix skipped)
 * into `target` at `offset`: the key a partition's eid sets hold for it (docs/publishing.md
 * "Idempotent publishing"). Two texts of one uuid (upper and lower case, with or without the prefix)
 * get the same key.
 * @param eid `metadata.eid`, validated as format uuid (`8-4-4-4-12` hex digits)
 * @throws RangeError when `eid` is not such a uuid (validation lets none through), or `target` is too short
 */
export function writeEidKey(eid: string, target: Uint8Array, offset: number): void {
  const start = hexStart(eid);
  if (eid.length - start !== 36 || offset + EID_KEY_BYTES > target.length) throw new RangeError(`not a uuid eid, or no room for its key: ${JSON.stringify(eid)}`);
  let at = offset;
  let high = -1;
  for (let i = 0; i < 36; i++) {
    const code = eid.charCodeAt(start + i);
    const dash = i === 8 || i === 13 || i === 18 || i === 23;
    if (dash !== (code === 45)) throw new RangeError(`not a uuid eid: ${JSON.stringify(eid)}`);
    if (dash) continue;
    const value = code < 128 ? (HEX_VALUES[code] ?? -1) : -1;
    if (value < 0) throw new RangeError(`not a uuid eid: ${JSON.stringify(eid)}`);
    if (high < 0) high = value;
    else {
      target[at++] = (high << 4) | value;
      high = -1;
    }
  }
}
