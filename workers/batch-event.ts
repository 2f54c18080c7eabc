/**
 * An event of a publish batch as the worker handles it after parsing: a plain JSON object, with its
 * `metadata` object (absent for category `undefined`, or when the producer sent none).
 */

/** A parsed event: a JSON object (keys as sent; JSON.parse never sets a prototype). */
export type BatchEvent = Record<string, unknown>;

/** Whether a parsed item of the batch is an event (a JSON object, not null, not an array). */
export function isEvent(value: unknown): value is BatchEvent {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The event's `metadata` object, or undefined when it has none (or `metadata` is not an object). */
export function metadataOf(event: BatchEvent): BatchEvent | undefined {
  const metadata = event.metadata;
  return isEvent(metadata) ? metadata : undefined;
}

/** The event's `metadata.eid` as sent, or '' when it has none (an answer's items carry it). */
export function eidOf(event: BatchEvent): string {
  const eid = metadataOf(event)?.eid;
  return typeof eid === 'string' ? eid : '';
}
