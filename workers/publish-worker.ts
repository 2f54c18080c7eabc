/**
 * Piscina worker entry (docs/architecture.md "Inline or worker"): one ValidatorCache per thread; tasks are batches to publish or
 * the registry's schema checks (guard, cost and compilation), or tests of stored events against a consumer's
 * filter (docs/consuming.md "Filters"), which run here because their cost
 * grows with the schema a user sent. Accepted batches hand their partition payloads back by transfer, not copy.
 */
import { threadId, workerData } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { guardSchema } from '../src/domain/schema/schema-guard.js';
import { standaloneValidatorCode } from '../src/domain/schema/schema-compiler.js';
import type { JsonObject } from '../src/domain/schema/json-schema-walk.js';
import { primingInstance } from '../src/domain/schema/priming-instance.js';
import { processBatch } from './publish-batch.js';
import { matchEvents } from './filter-events.js';
import { ROUND_WAIT_MS, type CompileResult, type FilterMatches, type FilterNeeded, type ForgetResult, type GuardResult, type PublishResult, type RoundTask, type SchemaNeeded, type StandaloneResult, type WarmResult, type WorkerTask } from './publish-protocol.js';
import { DEFAULT_WORKER_VALIDATOR_BOUNDS, ValidatorCache, type ValidatorCacheBounds } from './validator-cache.js';
import { setThreadNiceness } from './thread-priority.js';

/** What the pool hands over as worker data: `caches.workerValidatorEntries` and `caches.workerValidatorBytes`, and `publish.workerThreadNice`. */
const handedOver = workerData as { validatorBounds?: ValidatorCacheBounds; nice?: number } | undefined;
const validatorBounds = handedOver?.validatorBounds ?? DEFAULT_WORKER_VALIDATOR_BOUNDS;
setThreadNiceness(handedOver?.nice ?? 0);
const validators = new ValidatorCache(validatorBounds);

export default function run(task: WorkerTask): PublishResult | SchemaNeeded | GuardResult | CompileResult | ForgetResult | WarmResult | StandaloneResult | ReturnType<typeof Piscina.move> {
  if (task.kind === 'forget') {
    validators.forget(task.schemaKeys);
    awaitRound(task);
    return { threadId, validators: validators.size };
  }
  if (task.kind === 'warm') {
    // Compiled and primed here unless this thread holds it already (then it was primed when compiled).
    const { cost } = validators.get(task);
    awaitRound(task);
    return cost ? { threadId, validators: validators.size, cost } : { threadId, validators: validators.size };
  }
  if (task.kind === 'standalone') {
    try {
      const schema = JSON.parse(task.effectiveSchema) as JsonObject;
      return { ok: true, code: standaloneValidatorCode(schema), primingInstance: primingInstance(schema) };
    } catch (err) {
      return { ok: false, reason: (err as Error).message };
    }
  }
  if (task.kind === 'filter') {
    // Filters share the thread's validator cache (their keys never equal a schema key); the text comes only when asked for.
    if (task.filter === undefined && !validators.has(task.filterKey)) {
      const needed: FilterNeeded = { kind: 'filter-needed', data: task.data };
      return move(needed, [task.data.buffer as ArrayBuffer]);
    }
    const { validate } = validators.get({ schemaKey: task.filterKey, effectiveSchema: task.filter });
    const matches: FilterMatches = { kind: 'matches', flags: matchEvents(validate, task.data, task.count) };
    return move(matches, [matches.flags.buffer as ArrayBuffer]);
  }
  if (task.kind === 'compile') return validators.check(task.effectiveSchema, task.limits);
  if (task.kind === 'guard') {
    const guarded = guardSchema(task.schema, { maxSchemaBytes: task.maxSchemaBytes, costLimits: task.limits });
    return guarded.ok ? { ok: true } : { ok: false, reason: guarded.reason };
  }
  // The pool sends the schema text only after this thread asked for it, rather than cloning it into every task.
  if (task.spec.category !== 'undefined' && task.spec.effectiveSchema === undefined && !validators.has(task.spec.schemaKey)) {
    const needed: SchemaNeeded = { kind: 'schema-needed', body: task.body };
    return move(needed, [task.body.buffer as ArrayBuffer]);
  }
  // A traced batch (docs/tracing.md) is timed here, on this thread's clock in epoch ms: the main thread records its `validate` span.
  const startMs = task.traced === true ? performance.timeOrigin + performance.now() : 0;
  const processed = processBatch(task, validators);
  const result = task.traced === true ? { ...processed, timing: { startMs, endMs: performance.timeOrigin + performance.now() } } : processed;
  if (result.kind !== 'accepted') return result;
  // The partitions' payloads are views of one buffer (StoredTexts.payloads), their eid keys of another: transfer each once.
  const buffers = new Set<ArrayBuffer>();
  for (const p of result.partitions) {
    buffers.add(p.data.buffer as ArrayBuffer);
    if (p.eidKeys) buffers.add(p.eidKeys.buffer as ArrayBuffer);
  }
  return move(result, [...buffers, result.itemPartitions.buffer as ArrayBuffer]);
}

/** Hands `value` back with `buffers` transferred, not copied. */
function move(value: object, buffers: ArrayBuffer[]): ReturnType<typeof Piscina.move> {
  const transferable = {
    get [Piscina.transferableSymbol]() {
      return buffers;
    },
    get [Piscina.valueSymbol]() {
      return value;
    },
  };
  // piscina's declared symbol types do not line up with its exported symbols; the shape is its Transferable.
  return Piscina.move(transferable as unknown as Parameters<typeof Piscina.move>[0]);
}

/**
 * Counts this thread in its round and holds it until every thread of the round ran its task, or
 * `ROUND_WAIT_MS` passed (see {@link RoundTask}): a thread that waits takes no other task of the round.
 */
function awaitRound(task: RoundTask): void {
  const { round, parties } = task;
  if (round === undefined || parties === undefined) return;
  if (Atomics.add(round, 0, 1) + 1 >= parties) {
    Atomics.notify(round, 0);
    return;
  }
  const until = performance.now() + ROUND_WAIT_MS;
  for (let seen = Atomics.load(round, 0); seen < parties; seen = Atomics.load(round, 0)) {
    const left = until - performance.now();
    if (left <= 0) return;
    Atomics.wait(round, 0, seen, left);
  }
}
