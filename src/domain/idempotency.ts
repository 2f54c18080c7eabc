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
