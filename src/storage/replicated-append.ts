import type { Redis } from 'ioredis';
import type { Keys } from './keys.js';
import { settleBy } from './deadline.js';
import { coalesceWrites } from './redis-connection.js';
import { appendCall, timedOut, writeFailure, type PartitionAppend, type PartitionWrite } from './partition-store.js';
import { Scripts } from './scripts.js';

/** Connections reserved for acknowledged writes: a `WAIT` blocks its connection until replicas confirm. */
export const REPLICATED_CONNECTIONS = 4;

/** One reserved connection with its scripts. */
interface Lane {
  readonly redis: Redis;
  readonly scripts: Scripts;
}

/**
 * Appends with replica acknowledgement (DESIGN.md §4; config `publish.minReplicas`): each batch's
 * partition scripts and then `WAIT minReplicas replicaTimeoutMs` go out on one connection in that
 * order, so the `WAIT` covers exactly those writes (and any earlier ones of that connection). A batch
 * counts as written only when the `WAIT` reports at least `minReplicas` replicas; otherwise every one of
 * its partitions is reported failed (the events stay on the master: a client retry may duplicate them,
 * as at-least-once allows). `WAIT` blocks its connection, so batches are spread over
 * {@link REPLICATED_CONNECTIONS} reserved connections instead of the shared command connection.
 * Standalone Redis only (one master takes every write).
 */
export class ReplicatedAppender {
  private next = 0;

  /**
   * @param lanes reserved connections (see {@link ReplicatedAppender.open})
   * @param minReplicas replicas that must confirm (≥ 1)
   * @param timeoutMs how long `WAIT` waits for them
   */
  constructor(
    private readonly lanes: readonly Lane[],
    private readonly keys: Keys,
    readonly minReplicas: number,
    readonly timeoutMs: number,
  ) {}

  /** Duplicates `redis` into {@link REPLICATED_CONNECTIONS} reserved connections and loads the scripts on each. */
  static async open(redis: Redis, keys: Keys, minReplicas: number, timeoutMs: number): Promise<ReplicatedAppender> {
    const lanes = await Promise.all(
      Array.from({ length: REPLICATED_CONNECTIONS }, async (_, i) => {
        // A WAIT may legitimately take `timeoutMs`; the command timeout must not fire first.
        const lane = redis.duplicate({ connectionName: `broker-replicated-${i}`, commandTimeout: (redis.options.commandTimeout ?? 5000) + timeoutMs, lazyConnect: true });
        coalesceWrites(lane);
        await lane.connect();
        return { redis: lane, scripts: new Scripts(lane) };
      }),
    );
    return new ReplicatedAppender(lanes, keys, minReplicas, timeoutMs);
  }

  /**
   * Like `PartitionStore.append`, confirmed by `minReplicas` replicas. Never throws.
   * @param keys the key names of the storage written to (another key namespace of the same deployment;
   *   default: the node's own)
   * @param deadlineAt `performance.now()` ms by which the batch reports (issue 15 §5.1): then every
   *   write not yet confirmed is `timed out` (its scripts were sent: they may still be written)
   * @returns per write: ok with its first offset, or failed with a reason (script error, too few
   *   replicas: `acknowledged by k of n replicas within t ms`, or `timed out`)
   */
  async append(name: string, timeline: number, writes: readonly PartitionAppend[], keys: Keys = this.keys, deadlineAt?: number): Promise<PartitionWrite[]> {
    return settleBy(this.appendOnLane(name, timeline, writes, keys), deadlineAt, () => writes.map(timedOut));
  }

  private async appendOnLane(name: string, timeline: number, writes: readonly PartitionAppend[], keys: Keys): Promise<PartitionWrite[]> {
    const lane = this.lanes[this.next++ % this.lanes.length] as Lane;
    // Issued in this order on one connection: the scripts, then the WAIT that covers them.
    const scripted = writes.map((w) => {
      const call = appendCall(keys, name, timeline, w);
      return lane.scripts.run(call.script, call.keys, call.args);
    });
    const waited = lane.redis.wait(this.minReplicas, this.timeoutMs);
    const [scripts, replicas] = await Promise.all([Promise.allSettled(scripted), waited.then((n) => ({ n }), (err: unknown) => ({ err: err as Error }))]);
    const shortfall =
      'err' in replicas
        ? `not confirmed by replicas: ${replicas.err.message}`
        : replicas.n < this.minReplicas
          ? `acknowledged by ${replicas.n} of ${this.minReplicas} replicas within ${this.timeoutMs} ms`
          : undefined;
    return scripts.map((s): PartitionWrite => {
      if (s.status === 'rejected') {
        return writeFailure(s.reason);
      }
      return shortfall === undefined ? { ok: true, firstOffset: Number(s.value) } : { ok: false, reason: shortfall };
    });
  }

  close(): void {
    for (const lane of this.lanes) lane.redis.disconnect();
  }
}
