/**
 * The items of a rejected batch (docs/publishing.md "Answers": 422, nothing
 * written, one item per input event in input order, so a client can match items to its events). Pure.
 */
import type { BatchItemResponse, PublishStep } from './batch-item-response.js';

/** The steps an event goes through, in order (docs/publishing.md "Answers"); `none` is before the first. */
const STEP_ORDER: readonly PublishStep[] = ['none', 'validating', 'partitioning', 'enriching', 'publishing'];

/** A failed item of a batch: the step it failed at and why. */
export interface ItemFailure {
  readonly step: PublishStep;
  readonly detail: string;
}

/** Where a rejected batch counts as aborted: the item `index` failing at `step`. */
export interface AbortPoint {
  readonly index: number;
  readonly step: PublishStep;
}

/**
 * Where a rejected batch counts as aborted: at its first failure in step order — the earliest step
 * any item failed at (validating, then partitioning, then enriching), and there the lowest index.
 * @param failures failed items by index; not empty
 */
export function abortPoint(failures: ReadonlyMap<number, { readonly step: PublishStep }>): AbortPoint {
  let step: PublishStep = 'publishing';
  let index = Number.MAX_SAFE_INTEGER;
  for (const [i, failure] of failures) {
    const order = STEP_ORDER.indexOf(failure.step);
    const current = STEP_ORDER.indexOf(step);
    if (order < current || (order === current && i < index)) {
      step = failure.step;
      index = i;
    }
  }
  return { index, step };
}

/**
 * The step an item that did not fail reports (status `aborted`). `none` appears only when publishing
 * was aborted during validation of an earlier event (docs/publishing.md "Answers"). An item before the {@link abortPoint}
 * got through the step the batch was aborted at, so it reports that step (`validating` before an item
 * that failed validation); an item after it was not reached there, so it reports the step before
 * (`none` after a validation failure: not reached at all; `validating` after a partitioning failure).
 * The broker still checks every event so as to report every failure: a failing item after the abort
 * point is `failed` with its own step (not counted here).
 */
export function abortedStep(index: number, point: AbortPoint): PublishStep {
  return index < point.index ? point.step : (STEP_ORDER[STEP_ORDER.indexOf(point.step) - 1] ?? 'none');
}

/**
 * One item per event: `failed` with the step and detail of its failure, or `aborted` at the step
 * {@link abortedStep} gives, with the detail `aborted: another event of the batch failed`.
 * @param eids `metadata.eid` per input event ('' when absent), in input order
 * @param failures failed items by index; not empty
 */
export function rejectedItems(eids: readonly string[], failures: ReadonlyMap<number, ItemFailure>): BatchItemResponse[] {
  const point = abortPoint(failures);
  return eids.map((eid, i): BatchItemResponse => {
    const failure = failures.get(i);
    return failure
      ? { eid, publishing_status: 'failed', step: failure.step, detail: failure.detail }
      : { eid, publishing_status: 'aborted', step: abortedStep(i, point), detail: 'aborted: another event of the batch failed' };
  });
}
