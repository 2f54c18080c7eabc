import { Cluster, type Redis } from 'ioredis';
import type { Keys } from './keys.js';
import { settleBy } from '../util/deadline.js';
import { appendWrite, timedOut, writeFailure, type PartitionAppend, type PartitionWrite, type TimelineRef } from './partition-store.js';
import { coalesceWrites, type RedisClient } from './redis/redis-connection.js';
import { Scripts } from './scripts.js';
import { ClusterReplicatedAppender } from './redis/cluster-replicated-append.js';
import { REPLICATED_CONNECTIONS, waitedAppend, waitedConfirmation, writeAndWait, type Lane, type LaneOutcome, type PartitionRef, type ReplicatedAppend, type WaitedWrite } from './replica-lanes.js';

/**
 * Opens the replica-confirmed appender of a deployment: {@link ClusterReplicatedAppender} for a cluster
 * client, {@link ReplicatedAppender} for a standalone one.
 * @throws Error when the reserved connections cannot be opened
 */
export async function openReplicatedAppender(redis: RedisClient, keys: Keys, minReplicas: number, timeoutMs: number, watermark = true): Promise<ReplicatedAppend> {
  return redis instanceof Cluster ? ClusterReplicatedAppender.open(redis, keys, minReplicas, timeoutMs, watermark) : ReplicatedAppender.open(redis, keys, minReplicas, timeoutMs, watermark);
}

/**
 * Appends with replica acknowledgement (docs/operations.md "Durability"; config `publish.minReplicas`) on a standalone
 * master: each batch's partition scripts and then `WAIT minReplicas replicaTimeoutMs` go out on one
 * connection in that order. A batch counts as written only when the `WAIT` reports at least
 * `minReplicas` replicas; otherwise every one of its partitions is reported failed (the events stay on
 * the master: a client retry may duplicate them, as at-least-once allows). `WAIT` blocks its
 * connection, so batches are spread over {@link REPLICATED_CONNECTIONS} reserved connections instead
 * of the shared command connection; one more moves the high watermarks (see {@link ReplicatedAppend}).
 */
export class ReplicatedAppender implements ReplicatedAppend {
  private next = 0;

  /**
   * @param lanes reserved connections (see {@link ReplicatedAppender.open})
   * @param confirmLane the connection that moves the watermarks (never a `WAIT` on it)
   * @param minReplicas replicas that must confirm (≥ 1)
   * @param timeoutMs how long `WAIT` waits for them
   * @param watermark whether confirmed appends move their partitions' high watermark (readers wait for replicas)
   */
  constructor(
    private readonly lanes: readonly Lane[],
    private readonly confirmLane: Lane,
    private readonly keys: Keys,
    readonly minReplicas: number,
    readonly timeoutMs: number,
    private readonly watermark = true,
  ) {}

  /** Duplicates `redis` into {@link REPLICATED_CONNECTIONS} reserved connections and the confirming one, and loads the scripts on each. */
  static async open(redis: Redis, keys: Keys, minReplicas: number, timeoutMs: number, watermark = true): Promise<ReplicatedAppender> {
    const lanes = await Promise.all(
      Array.from({ length: REPLICATED_CONNECTIONS + 1 }, async (_, i) => {
        // A WAIT may legitimately take `timeoutMs`; the command timeout must not fire first.
        const name = i < REPLICATED_CONNECTIONS ? `broker-replicated-${i}` : 'broker-replicated-confirm';
        const lane = redis.duplicate({ connectionName: name, commandTimeout: (redis.options.commandTimeout ?? 5000) + timeoutMs, lazyConnect: true });
        coalesceWrites(lane);
        await lane.connect();
        return { redis: lane, scripts: new Scripts(lane) };
      }),
    );
    return new ReplicatedAppender(lanes.slice(0, REPLICATED_CONNECTIONS), lanes[REPLICATED_CONNECTIONS] as Lane, keys, minReplicas, timeoutMs, watermark);
  }

  /** See {@link ReplicatedAppend.append}: one `WAIT` covers the whole batch, so a shortfall fails every write. */
  async append(name: string, timeline: TimelineRef, writes: readonly PartitionAppend[], keys: Keys = this.keys, deadlineAt?: number): Promise<PartitionWrite[]> {
    return settleBy(this.appendOnLane(name, timeline, writes, keys), deadlineAt, () => writes.map(timedOut));
  }

  private async appendOnLane(name: string, timeline: TimelineRef, writes: readonly PartitionAppend[], keys: Keys): Promise<PartitionWrite[]> {
    const { scripts, shortfall } = await this.writeOnLane(
      writes.map((w) => waitedAppend(keys, name, timeline, w)),
      keys,
      this.watermark,
    );
    return scripts.map((s): PartitionWrite => {
      if (s.status === 'rejected') return writeFailure(s.reason);
      const written = appendWrite(s.value);
      return !written.ok || shortfall === undefined ? written : { ok: false, reason: shortfall };
    });
  }

  /** See {@link ReplicatedAppend.confirm}: one `WAIT` for all the partitions. */
  async confirm(partitions: readonly PartitionRef[], keys: Keys = this.keys): Promise<boolean[]> {
    if (partitions.length === 0) return [];
    return (await this.writeOnLane(partitions.map((p) => waitedConfirmation(keys, p)), keys, true)).moved;
  }

  private writeOnLane(writes: readonly WaitedWrite[], keys: Keys, watermark: boolean): Promise<LaneOutcome> {
    const lane = this.lanes[this.next++ % this.lanes.length] as Lane;
    return writeAndWait(lane, watermark ? this.confirmLane : undefined, writes, keys, this.minReplicas, this.timeoutMs);
  }

  close(): void {
    for (const lane of [...this.lanes, this.confirmLane]) lane.redis.disconnect();
  }
}
