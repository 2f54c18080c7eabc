/**
 * The items of a 207 or 422 answer to a batch (docs/publishing.md "Answers"), as the
 * publish workers, the publisher and the deleted-events service build them. Types only.
 */

/** Step names of BatchItemResponse (docs/publishing.md "Answers"), in the order an event goes through them. */
export type PublishStep = 'none' | 'validating' | 'partitioning' | 'enriching' | 'publishing';

/** One item of a 422/207 answer (docs/publishing.md "Answers"). */
export interface BatchItemResponse {
  eid: string;
  publishing_status: 'submitted' | 'failed' | 'aborted';
  step: PublishStep;
  detail: string;
}
