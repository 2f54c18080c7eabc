/**
 * How a subscription's streams share its partitions (docs/consuming.md "Queue mode"): `stream` (the
 * default) gives each partition to one stream at a time, in order, committed by offset; `queue` lets any
 * number of streams read every partition at once, each batch going to one stream and acknowledged on its
 * own. Set with a subscription annotation at creation; fixed afterwards. Pure: the annotation's rules.
 */

/** Subscription annotation: `stream` (default) or `queue`. */
export const CONSUMPTION_MODE_ANNOTATION = 'broker.io/consumption-mode';

/** The consumption modes of a subscription. */
export type ConsumptionMode = 'stream' | 'queue';

const MODES: readonly ConsumptionMode[] = ['stream', 'queue'];

/** The subscription's consumption mode from its annotations (`stream` when absent or invalid). */
export function consumptionModeOf(annotations: Readonly<Record<string, string>> | undefined): ConsumptionMode {
  return annotations?.[CONSUMPTION_MODE_ANNOTATION] === 'queue' ? 'queue' : 'stream';
}

/**
 * 422 detail lines for the consumption mode annotation: `stream` or `queue`; a queue-mode subscription
 * takes no `filter` (its batches are offset ranges handed out before their events are read).
 */
export function consumptionModeProblems(annotations: Readonly<Record<string, string>> | undefined, hasFilter: boolean): string[] {
  const mode = annotations?.[CONSUMPTION_MODE_ANNOTATION];
  if (mode === undefined) return [];
  if (!(MODES as readonly string[]).includes(mode)) return [`Annotation "${CONSUMPTION_MODE_ANNOTATION}" must be "stream" or "queue", got ${JSON.stringify(mode)}`];
  if (mode === 'queue' && hasFilter) return [`A subscription with annotation "${CONSUMPTION_MODE_ANNOTATION}": "queue" cannot have a filter`];
  return [];
}
