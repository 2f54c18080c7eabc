/**
 * The automatic dead-letter queue of subscriptions (docs/consuming.md "Dead letters"; the
 * "unprocessable event policy" of the reference service): subscription annotations that let a subscription stop being blocked by an event its
 * consumer can never process. Pure: annotation rules and the decisions a stream makes per partition.
 *
 * Each time a stream ends with events of a partition sent but not committed, that partition's failed
 * send count grows (a commit that moves it resets the count). At `maxEventSendCount` the partition
 * enters dead-letter search: the window up to `batch_limit` events after its committed offset is sent
 * one event per batch, each only once the one before is committed; an event whose single-event batch
 * again reaches the count is skipped — committed by the service and, with `DEAD_LETTER_QUEUE`,
 * published to {@link DEAD_LETTER_EVENT_TYPE}. Normal batching resumes once the window is committed.
 */

import { CONSUMPTION_MODE_ANNOTATION } from './consumption-mode.js';

/** Subscription annotation: how many times a batch may be sent without a commit (integer ≥ 1). */
export const MAX_EVENT_SEND_COUNT_ANNOTATION = 'broker.io/subscription-max-event-send-count';
/** Subscription annotation: `SKIP_EVENT` or `DEAD_LETTER_QUEUE`. */
export const UNPROCESSABLE_EVENT_POLICY_ANNOTATION = 'broker.io/unprocessable-event-policy';
/** The service's own annotation keys under its reserved prefix that subscriptions may carry (the dead-letter queue, the consumption mode). */
export const SUBSCRIPTION_SERVICE_ANNOTATIONS: ReadonlySet<string> = new Set([MAX_EVENT_SEND_COUNT_ANNOTATION, UNPROCESSABLE_EVENT_POLICY_ANNOTATION, CONSUMPTION_MODE_ANNOTATION]);

/** The event type skipped events are published to with `DEAD_LETTER_QUEUE` (created at startup). */
export const DEAD_LETTER_EVENT_TYPE = 'broker.dead.letter.queue';

/** What to do with an event that reached the send count in dead-letter search. */
export type UnprocessableEventPolicy = 'SKIP_EVENT' | 'DEAD_LETTER_QUEUE';

/** A subscription's dead-letter settings, from its annotations. */
export interface DeadLetterPolicy {
  readonly maxEventSendCount: number;
  readonly unprocessableEventPolicy: UnprocessableEventPolicy;
}

/** Largest accepted `subscription-max-event-send-count`. */
const MAX_SEND_COUNT = 1_000_000;

/**
 * 422 detail lines for the service's annotations of a subscription: both or neither, the count an
 * integer from 1 to 1,000,000 written in decimal, the policy `SKIP_EVENT` or `DEAD_LETTER_QUEUE`.
 */
export function deadLetterAnnotationProblems(annotations: Readonly<Record<string, string>> | undefined): string[] {
  const count = annotations?.[MAX_EVENT_SEND_COUNT_ANNOTATION];
  const policy = annotations?.[UNPROCESSABLE_EVENT_POLICY_ANNOTATION];
  const problems: string[] = [];
  if ((count === undefined) !== (policy === undefined)) {
    problems.push(`Annotations "${MAX_EVENT_SEND_COUNT_ANNOTATION}" and "${UNPROCESSABLE_EVENT_POLICY_ANNOTATION}" must be given together`);
  }
  if (count !== undefined && !(/^[1-9][0-9]{0,6}$/.test(count) && Number(count) <= MAX_SEND_COUNT)) {
    problems.push(`Annotation "${MAX_EVENT_SEND_COUNT_ANNOTATION}" must be an integer from 1 to ${MAX_SEND_COUNT}, got ${JSON.stringify(count)}`);
  }
  if (policy !== undefined && policy !== 'SKIP_EVENT' && policy !== 'DEAD_LETTER_QUEUE') {
    problems.push(`Annotation "${UNPROCESSABLE_EVENT_POLICY_ANNOTATION}" must be "SKIP_EVENT" or "DEAD_LETTER_QUEUE", got ${JSON.stringify(policy)}`);
  }
  return problems;
}

/** The subscription's dead-letter policy, or undefined when its annotations set none (or are invalid). */
export function deadLetterPolicyOf(annotations: Readonly<Record<string, string>> | undefined): DeadLetterPolicy | undefined {
  if (deadLetterAnnotationProblems(annotations).length > 0) return undefined;
  const count = annotations?.[MAX_EVENT_SEND_COUNT_ANNOTATION];
  const policy = annotations?.[UNPROCESSABLE_EVENT_POLICY_ANNOTATION];
  if (count === undefined || policy === undefined) return undefined;
  return { maxEventSendCount: Number(count), unprocessableEventPolicy: policy as UnprocessableEventPolicy };
}

/**
 * A partition's dead-letter state as stored with the subscription's consumption state: failed sends
 * since the last commit that moved it, and the last offset of the search window while searching.
 */
export interface PartitionDeadLetterState {
  readonly failedSends: number;
  /** Last offset (internal, dense) of the dead-letter search window; undefined when not searching. */
  readonly searchUntil: number | undefined;
}

/** What a stream does when it takes a partition, given its dead-letter state (see the module comment). */
export type DeadLetterStart =
  /** Stream normally. */
  | { readonly kind: 'normal' }
  /** Start (or go on with) the search up to `until`; `enter` when the state must be written (count reset, window set). */
  | { readonly kind: 'search'; readonly until: number; readonly enter: boolean }
  /** Skip the event after `committed` (the poison event), then go on searching up to `until`. */
  | { readonly kind: 'skip'; readonly until: number };

/**
 * The decision for a partition a stream takes at `committed` (last committed offset).
 * @param batchLimit the stream's `batch_limit`: a new search window covers that many events
 */
export function deadLetterStart(policy: DeadLetterPolicy, state: PartitionDeadLetterState, committed: number, batchLimit: number): DeadLetterStart {
  const reached = state.failedSends >= policy.maxEventSendCount;
  if (state.searchUntil !== undefined && state.searchUntil > committed) {
    return reached ? { kind: 'skip', until: state.searchUntil } : { kind: 'search', until: state.searchUntil, enter: false };
  }
  if (reached) return { kind: 'search', until: committed + batchLimit, enter: true };
  return { kind: 'normal' };
}

/** The dead-letter event for a skipped event (`error.message` says why), without metadata (enrichment adds it). */
export function deadLetterEvent(input: { subscriptionId: string; eventType: string; partition: string; offset: string; failedSends: number; event: unknown; eid: string; occurredAt: string }): Record<string, unknown> {
  return {
    metadata: { eid: input.eid, occurred_at: input.occurredAt },
    subscription_id: input.subscriptionId,
    event_type: input.eventType,
    partition: input.partition,
    offset: input.offset,
    error: { message: `skipped by the broker's dead-letter queue: sent ${input.failedSends} times in a single-event batch without a commit` },
    event: input.event,
  };
}
