import os from 'node:os';
import { Piscina } from 'piscina';
import { BrokerError } from '../errors/catalog.js';
import type { BrokerConfig } from '../config/config-schema.js';
import type { CompileResult, PublishResult, PublishTask } from '../../workers/publish-protocol.js';
import type { WorkerPoolLoad } from '../observability/meters.js';

/**
 * The piscina pool running `workers/publish-worker.js` (DESIGN.md §5). Task bodies are transferred,
 * never copied twice; a task that overruns its time limit is aborted (piscina replaces the worker), so
 * a hostile batch or schema cannot stall the node.
 */
export class WorkerPool {
  private readonly pool: Piscina;

  constructor(config: BrokerConfig['publish']) {
    const threads = config.workerThreads > 0 ? config.workerThreads : os.availableParallelism();
    this.pool = new Piscina({
      filename: new URL('../../workers/publish-worker.js', import.meta.url).href,
      minThreads: threads,
      maxThreads: threads,
      idleTimeout: 60_000,
      concurrentTasksPerWorker: 1,
    });
  }

  /** Worker threads in the pool. */
  get threads(): number {
    return this.pool.threads.length;
  }

  /** Threads, queue depth, utilisation and completed tasks, as piscina reports them (the `broker_worker_pool_*` metrics). */
  get load(): WorkerPoolLoad {
    return { threads: this.pool.threads.length, queueSize: this.pool.queueSize, utilization: this.pool.utilization, completed: this.pool.completed };
  }

  /**
   * Processes one batch in a worker. The task's body buffer is transferred (unusable afterwards).
   * @throws BrokerError BUSY (503) when it takes longer than `timeoutMs`
   */
  async publish(task: PublishTask, timeoutMs: number): Promise<PublishResult> {
    return this.runWithTimeout<PublishResult>(task, timeoutMs, [task.body.buffer as ArrayBuffer], `the batch was not processed within ${timeoutMs} ms`);
  }

  /** Compiles an effective schema in a worker. @returns ok, or the reason it cannot be used (also on timeout) */
  async compile(effectiveSchema: string, timeoutMs: number): Promise<CompileResult> {
    try {
      return await this.runWithTimeout<CompileResult>({ kind: 'compile', effectiveSchema }, timeoutMs, [], '');
    } catch (err) {
      if (err instanceof BrokerError) return { ok: false, reason: `the schema did not compile within ${timeoutMs} ms` };
      throw err;
    }
  }

  private async runWithTimeout<T>(task: object, timeoutMs: number, transferList: ArrayBuffer[], timeoutDetail: string): Promise<T> {
    try {
      return (await this.pool.run(task, { transferList, signal: AbortSignal.timeout(timeoutMs) })) as T;
    } catch (err) {
      if ((err as Error).name === 'AbortError' || (err as Error).name === 'TimeoutError') throw new BrokerError('BUSY', timeoutDetail, { 'Retry-After': '1' });
      throw err;
    }
  }

  /** Waits for running tasks, then stops the threads (graceful shutdown). */
  async close(): Promise<void> {
    await this.pool.close();
  }
}
