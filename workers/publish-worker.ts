/**
 * Piscina worker entry (DESIGN.md §5): one ValidatorCache per thread; tasks are batches to publish or
 * schema compilation checks. Accepted batches hand their partition payloads back by transfer, not copy.
 */
import { Piscina } from 'piscina';
import { processBatch, ValidatorCache } from './publish-batch.js';
import type { CompileResult, PublishResult, WorkerTask } from './publish-protocol.js';

const validators = new ValidatorCache();

export default function run(task: WorkerTask): PublishResult | CompileResult | ReturnType<typeof Piscina.move> {
  if (task.kind === 'compile') return validators.check(task.effectiveSchema);
  const result = processBatch(task, validators);
  if (result.kind !== 'accepted') return result;
  const transferable = {
    get [Piscina.transferableSymbol]() {
      return [...result.partitions.map((p) => p.data.buffer), result.itemPartitions.buffer];
    },
    get [Piscina.valueSymbol]() {
      return result;
    },
  };
  // piscina's declared symbol types do not line up with its exported symbols; the shape is its Transferable.
  return Piscina.move(transferable as unknown as Parameters<typeof Piscina.move>[0]);
}
