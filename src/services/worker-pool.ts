import os from 'node:os';
import v8 from 'node:v8';
import { Piscina } from 'piscina';
import { brokerError, BrokerError } from '../errors/catalog.js';
import type { BrokerConfig } from '../config/config-schema.js';
import type { PublishSpec } from '../domain/batch/publish-spec.js';
import type { CompileResult, FilterMatches, FilterNeeded, FilterTask, ForgetResult, ForgetTask, GuardResult, PublishResult, PublishTask, PublishTaskSpec, SchemaCost, SchemaNeeded, StandaloneResult, StandaloneTask, WarmResult, WarmTask } from '../../workers/publish-protocol.js';
import type { WorkerPoolLoad } from '../observability/meters.js';
import type { SchemaCostLimits } from '../domain/schema/schema-cost.js';
import { DEFAULT_WORKER_VALIDATOR_BOUNDS, type ValidatorCacheBounds } from '../../workers/validator-cache.js';

/**
 * The piscina pool running `workers/publish-worker.js`, so parsing and validating events does not hold
 * the main thread (docs/architecture.md "Inline or worker"). Task bodies are transferred,
 * never copied twice; a task that overruns its time limit is aborted (piscina terminates and replaces
 * the worker), so a hostile batch or schema cannot stall the node. Schema checks (whose cost a user's
 * schema decides) run one at a time per node, so they hold at most one worker and
 * publishing always keeps the others; how many wait is bounded by the control-plane limiter
 * (`http.controlConcurrency`), which admits the requests that run them.
 */
export class WorkerPool {
  private readonly pool: Piscina;
  /** Settles when the last queued schema check is done. */
  private schemaCheckTail: Promise<void> = Promise.resolve();

  /** Each publish spec without its schema text, as tasks carry it, so a batch does not copy the schema to a thread that has its validator; dropped with the spec. */
  private readonly leanSpecs = new WeakMap<PublishSpec, PublishTaskSpec>();

  /** Settles when the last queued task for every thread is done (see `onEveryThread`). */
  private everyThreadTail: Promise<void> = Promise.resolve();

  /** When each task handed to piscina and not yet settled was handed over (`performance.now()` ms), in that order. */
  private readonly pending = new Map<number, number>();
  private nextTaskId = 0;

  /** Validators each thread holds, as its last forget round reported (threadId → count). */
  private readonly validatorCounts = new Map<number, number>();

  /** @param validatorBounds validators kept per thread (`caches.workerValidatorEntries` and `caches.workerValidatorBytes`) */
  constructor(config: BrokerConfig['publish'], validatorBounds: ValidatorCacheBounds = DEFAULT_WORKER_VALIDATOR_BOUNDS) {
    const threads = config.workerThreads > 0 ? config.workerThreads : os.availableParallelism();
    // V8 flags are process-wide: a `--max-semi-space-size` or `--min-semi-space-size` an operator gives the
    // node (NODE_OPTIONS, or the command line) would also size each worker's young generation (and
    // override `resourceLimits`): with 64, every thread would get ~130 MB of semi-spaces it does not need
    // (the churn benchmark's RSS grew by that much; docs/decisions/0010-young-generation-v8-default.md).
    // The main isolate is sized already; clearing the flags leaves V8's defaults for the threads created
    // after.
    v8.setFlagsFromString('--max-semi-space-size=0');
    v8.setFlagsFromString('--min-semi-space-size=0');
    this.pool = new Piscina({
      filename: new URL('../../workers/publish-worker.js', import.meta.url).href,
      minThreads: threads,
      maxThreads: threads,
      idleTimeout: 60_000,
      concurrentTasksPerWorker: 1,
      workerData: { validatorBounds, nice: config.workerThreadNice },
    });
  }

  /**
   * Drops the validators of retired schema keys in every thread, so deleted or changed event types do not
   * keep memory. Never throws; a thread
   * missed keeps the validators until its LRU drops them.
   */
  async forgetSchemas(schemaKeys: readonly string[]): Promise<void> {
    try {
      await this.onEveryThread<ForgetResult>({ kind: 'forget', schemaKeys } satisfies ForgetTask);
    } catch {
      // the pool is closing
    }
  }

  /**
   * Compiles a publish spec's validator in every thread ahead of its first batch, so that batch does not wait for
   * a compilation; a thread that
   * holds it already answers at once.
   * @returns the schema's cost when a thread found it within the main thread's budget, else undefined
   * @throws BrokerError BUSY (503) when a round takes longer than `timeoutMs`; Error when the schema does not compile
   */
  async warm(spec: PublishSpec, timeoutMs: number): Promise<SchemaCost | undefined> {
    const answers = await this.onEveryThread<WarmResult>({ kind: 'warm', schemaKey: spec.schemaKey, effectiveSchema: spec.effectiveSchema } satisfies WarmTask, timeoutMs);
    return answers.find((a) => a.cost !== undefined)?.cost;
  }

  /**
   * A schema's validator as standalone code, generated in a worker (the main thread instantiates it).
   * @returns the code, or why not (also when it takes longer than `timeoutMs`)
   */
  async standaloneCode(effectiveSchema: string, timeoutMs: number): Promise<StandaloneResult> {
    try {
      return await this.runWithTimeout<StandaloneResult>({ kind: 'standalone', effectiveSchema } satisfies StandaloneTask, timeoutMs, [], `no code within ${timeoutMs} ms`);
    } catch (err) {
      // Not the schema's doing: the threads were busy past the limit, or the pool is closing.
      return { ok: false, reason: (err as Error).message, transient: true };
    }
  }

  /**
   * Runs a task once in every live thread: piscina cannot address a thread, so the pool sends one task
   * per thread at once, in rounds, until every thread answered (at most four rounds).
   * @returns the answers of the rounds (a thread may appear more than once)
   */
  private onEveryThread<T extends { readonly threadId: number; readonly validators: number }>(task: object, timeoutMs?: number): Promise<T[]> {
    // One round at a time: piscina gives a task to an idle thread first, so a round alone on idle threads
    // reaches each in one go; rounds of several event types at once (two nodes starting together, each
    // hearing of the other's event types) would share the threads and could miss one after four rounds.
    const done = this.everyThreadTail.then(() => this.everyThreadRounds<T>(task, timeoutMs));
    this.everyThreadTail = done.then(
      () => undefined,
      () => undefined,
    );
    return done;
  }

  private async everyThreadRounds<T extends { readonly threadId: number; readonly validators: number }>(task: object, timeoutMs?: number): Promise<T[]> {
    const threads = this.pool.threads.length;
    const seen = new Set<number>();
    const all: T[] = [];
    for (let round = 0; round < 4 && seen.size < threads; round++) {
      // Shared by the round's tasks: each thread waits in it until the others took theirs (`RoundTask`).
      const roundTask = { ...task, round: new Int32Array(new SharedArrayBuffer(4)), parties: threads };
      // A thread runs one task at a time, so the answer that arrives last holds its current count (rounds
      // of several event types run at once: one round's answers may all arrive before another's).
      const run = async (): Promise<T> => {
        const answer = await (timeoutMs === undefined ? this.run<T>(roundTask, {}) : this.runWithTimeout<T>(roundTask, timeoutMs, [], `a task for every thread took longer than ${timeoutMs} ms`));
        this.validatorCounts.set(answer.threadId, answer.validators);
        return answer;
      };
      const answers = await Promise.all(Array.from({ length: threads }, run));
      for (const answer of answers) {
        seen.add(answer.threadId);
        all.push(answer);
      }
    }
    return all;
  }

  /** Validators held by the worker threads, as they last reported (`broker_cache_entries{cache="worker_validators"}`). */
  get validatorCount(): number {
    let total = 0;
    for (const count of this.validatorCounts.values()) total += count;
    return total;
  }

  /** Worker threads in the pool. */
  get threads(): number {
    return this.pool.threads.length;
  }

  /** Threads, queue depth and delay, utilisation and completed tasks (the `broker_worker_pool_*` metrics). */
  get load(): WorkerPoolLoad {
    return { threads: this.pool.threads.length, queueSize: this.pool.queueSize, queueDelayMs: this.queueDelayMs, utilization: this.pool.utilization, completed: this.pool.completed };
  }

  /**
   * The queue delay: how long the oldest task still waiting for a thread has waited, in ms (0 when none
   * waits). Publish admission holds it to `http.publishMaxQueueDelayMs` (docs/publishing.md "Refusals and
   * deadlines"). Piscina starts tasks in the order they were handed to it, so the tasks waiting are the
   * last `queueSize` of those not settled; the first of them is found after at most one entry per thread.
   */
  get queueDelayMs(): number {
    const started = this.pending.size - this.pool.queueSize;
    let index = 0;
    for (const handedAt of this.pending.values()) {
      if (index++ >= started) return performance.now() - handedAt;
    }
    return 0;
  }

  /** Hands `task` to piscina, keeping when it did so until it settles (see {@link queueDelayMs}). */
  private async run<T>(task: object, options: { transferList?: ArrayBuffer[]; signal?: AbortSignal }): Promise<T> {
    const id = this.nextTaskId++;
    this.pending.set(id, performance.now());
    try {
      return (await this.pool.run(task, options)) as T;
    } finally {
      this.pending.delete(id);
    }
  }

  /**
   * Processes one batch in a worker. The task's body buffer is transferred (unusable afterwards). The
   * effective schema's text travels only to a thread that lacks the validator: the task
   * goes without it, and a thread that answers `schema-needed` gets it again with the text, within the
   * same time limit.
   * @param task a task whose spec holds the schema text (the cached event type's spec)
   * @throws BrokerError BUSY (503) when it takes longer than `timeoutMs`
   */
  async publish(task: PublishTask & { readonly spec: PublishSpec }, timeoutMs: number): Promise<PublishResult> {
    const signal = AbortSignal.timeout(timeoutMs);
    const detail = `the batch was not processed within ${timeoutMs} ms`;
    const lean: PublishTask = { ...task, spec: this.leanSpec(task.spec) };
    const first = await this.runWithSignal<PublishResult | SchemaNeeded>(lean, signal, [task.body.buffer as ArrayBuffer], detail);
    if (first.kind !== 'schema-needed') return first;
    const full: PublishTask = { ...task, body: first.body };
    const second = await this.runWithSignal<PublishResult | SchemaNeeded>(full, signal, [first.body.buffer as ArrayBuffer], detail);
    if (second.kind === 'schema-needed') throw new Error('a publish worker asked for the schema text it was sent');
    return second;
  }

  /**
   * Tests `count` stored events (texts joined by `\n`) against a consumer's filter in a worker
   * (docs/consuming.md "Filters"). `data` is transferred (unusable afterwards). The filter's text goes
   * only to a thread that lacks its validator (the `schema-needed` round trip of {@link publish}),
   * within the same time limit.
   * @param filter the filter's key and canonical text (the text must have passed the registry's checks)
   * @returns one byte per event, 1 where it matches
   * @throws BrokerError BUSY (503) when it takes longer than `timeoutMs`
   */
  async matchFilter(filter: { readonly key: string; readonly text: string }, data: Uint8Array, count: number, timeoutMs: number): Promise<Uint8Array> {
    const signal = AbortSignal.timeout(timeoutMs);
    const detail = `the events were not filtered within ${timeoutMs} ms`;
    const lean: FilterTask = { kind: 'filter', filterKey: filter.key, data, count };
    const first = await this.runWithSignal<FilterMatches | FilterNeeded>(lean, signal, [data.buffer as ArrayBuffer], detail);
    if (first.kind === 'matches') return first.flags;
    const full: FilterTask = { ...lean, filter: filter.text, data: first.data };
    const second = await this.runWithSignal<FilterMatches | FilterNeeded>(full, signal, [first.data.buffer as ArrayBuffer], detail);
    if (second.kind !== 'matches') throw new Error('a worker asked for the filter text it was sent');
    return second.flags;
  }

  /** The spec without its schema text, made once per spec. */
  private leanSpec(spec: PublishSpec): PublishTaskSpec {
    let lean = this.leanSpecs.get(spec);
    if (lean === undefined) {
      const { effectiveSchema, ...rest } = spec;
      void effectiveSchema;
      lean = rest;
      this.leanSpecs.set(spec, lean);
    }
    return lean;
  }

  /**
   * Runs the registry's admission check of a schema text (src/domain/schema/schema-guard.ts) in a worker.
   * @returns ok, or the reason it is refused (also when it takes longer than `timeoutMs`)
   */
  async guardSchema(schema: string, maxSchemaBytes: number, limits: SchemaCostLimits, timeoutMs: number): Promise<GuardResult> {
    return this.schemaCheck<GuardResult>({ kind: 'guard', schema, maxSchemaBytes, limits }, timeoutMs, `checking the schema took longer than ${timeoutMs} ms`);
  }

  /**
   * Checks an effective schema's validation cost and compiles it in a worker.
   * @returns its cost, or the reason it cannot be used (also when it takes longer than `timeoutMs`)
   */
  async compile(effectiveSchema: string, limits: SchemaCostLimits, timeoutMs: number): Promise<CompileResult> {
    return this.schemaCheck<CompileResult>({ kind: 'compile', effectiveSchema, limits }, timeoutMs, `the schema did not compile within ${timeoutMs} ms`);
  }

  /** One schema check at a time per node; a timeout becomes a refusal with `timeoutReason`. */
  private async schemaCheck<T extends { ok: boolean }>(task: object, timeoutMs: number, timeoutReason: string): Promise<T | { ok: false; reason: string }> {
    const previous = this.schemaCheckTail;
    let release = (): void => undefined;
    this.schemaCheckTail = new Promise<void>((resolve) => (release = resolve));
    try {
      await previous;
      return await this.runWithTimeout<T>(task, timeoutMs, [], '');
    } catch (err) {
      if (err instanceof BrokerError && err.code === 'BUSY') return { ok: false, reason: timeoutReason };
      throw err;
    } finally {
      release();
    }
  }

  private async runWithTimeout<T>(task: object, timeoutMs: number, transferList: ArrayBuffer[], timeoutDetail: string): Promise<T> {
    return this.runWithSignal<T>(task, AbortSignal.timeout(timeoutMs), transferList, timeoutDetail);
  }

  private async runWithSignal<T>(task: object, signal: AbortSignal, transferList: ArrayBuffer[], timeoutDetail: string): Promise<T> {
    try {
      return await this.run<T>(task, { transferList, signal });
    } catch (err) {
      if ((err as Error).name === 'AbortError' || (err as Error).name === 'TimeoutError') throw brokerError('BUSY', { reason: timeoutDetail });
      throw err;
    }
  }

  /** Waits for running tasks, then stops the threads (graceful shutdown). */
  async close(): Promise<void> {
    await this.pool.close();
  }
}
