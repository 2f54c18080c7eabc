/**
 * Piscina worker entry (DESIGN.md §5): one ValidatorCache per thread; tasks are batches to publish or
 * the registry's schema checks (guard, cost and compilation), which run here because their cost
 * grows with the schema a user sent (issue 13 §1). Accepted batches hand their partition payloads back by transfer, not copy.
 */
import { threadId, workerData } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { guardSchema } from '../src/domain/schema-guard.js';
import { processBatch, ValidatorCache } from './publish-batch.js';
import type { CompileResult, ForgetResult, GuardResult, PublishResult, WorkerTask } from './publish-protocol.js';

/** `caches.workerValidatorEntries`, handed over by the pool as worker data. */
const validatorEntries = (workerData as { validatorEntries?: number } | undefined)?.validatorEntries ?? 256;
const validators = new ValidatorCache(validatorEntries);

export default function run(task: WorkerTask): PublishResult | GuardResult | CompileResult | ForgetResult | ReturnType<typeof Piscina.move> {
  if (task.kind === 'forget') {
    validators.forget(task.schemaKeys);
    return { threadId, validators: validators.size };
  }
  if (task.kind === 'compile') return validators.check(task.effectiveSchema, task.limits);
  if (task.kind === 'guard') {
    const guarded = guardSchema(task.schema, { maxSchemaBytes: task.maxSchemaBytes, costLimits: task.limits });
    return guarded.ok ? { ok: true } : { ok: false, reason: guarded.reason };
  }
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
