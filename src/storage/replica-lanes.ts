import type { Redis } from 'ioredis';
import type { Keys } from './keys.js';
import { appendCall, appendWrite, confirmCall, confirmedNext, type PartitionAppend, type PartitionWrite, type TimelineRef } from './partition-store.js';
import type { Scripts, ScriptArg, ScriptName } from './scripts.js';

// What the replica-confirmed appenders share (replicated-append.ts for a standalone master,
// redis/cluster-replicated-append.ts for a Redis Cluster): their contract, and one reserved connection's
// round of writes, `WAIT` and high-watermark moves.

/**
 * Connections reserved for acknowledged writes (per master on a cluster): a `WAIT` blocks its connection
 * until replicas confirm. Each master has one more, which never waits: the high watermark moves there
 * (a move queued behind the next batch's `WAIT` on a lane would wait one more replica round trip).
 */
export const REPLICATED_CONNECTIONS = 4;

/** A partition of a timeline: what a confirmation names. */
export interface PartitionRef {
  readonly name: string;
  readonly timeline: number;
  readonly partition: string;
}

/**
 * Appends confirmed by replicas (`publish.minReplicas` ≥ 1; docs/operations.md "Durability"), as {@link PartitionLogs}
 * uses them: a standalone deployment ({@link ReplicatedAppender}) or a Redis Cluster
 * ({@link ClusterReplicatedAppender}).
 *
 * With `watermark` on (readers wait for replicas), every write a `WAIT` confirmed moves its partition's
 * high watermark (`confirmReplicated-2.lua`) before the append reports, on a connection to the same master
 * that never waits: to the end of the write (the first offset it reports plus its event count), or — for an
 * idempotent append, whose reply does not tell how many events it stored — to the `next` offset a
 * `confirmReplicated` call sent right after it saw, which the same `WAIT` covers. A write the `WAIT` did not
 * confirm leaves the watermark where it is. A move that fails (the master went away after confirming)
 * leaves it behind: a later confirmed write or a {@link confirm} takes it on.
 */
export interface ReplicatedAppend {
  /** Replicas that must confirm (≥ 1). */
  readonly minReplicas: number;
  /** How long `WAIT` waits for them, in ms. */
  readonly timeoutMs: number;
  /**
   * Like `PartitionStore.append`, confirmed by `minReplicas` replicas. Never throws.
   * @param keys the key names of the storage written to (another key namespace of the same deployment;
   *   default: the appender's own)
   * @param deadlineAt `performance.now()` ms by which the batch reports, so a stalled replica cannot hold the
   *   answer: then every
   *   write not yet confirmed is `timed out` (its scripts were sent: they may still be written)
   * @returns per write, in order: ok with its first offset, or failed with a reason (script error, too
   *   few replicas: `acknowledged by k of n replicas within t ms`, or `timed out`)
   */
  append(name: string, timeline: TimelineRef, writes: readonly PartitionAppend[], keys?: Keys, deadlineAt?: number): Promise<PartitionWrite[]>;
  /**
   * Confirms partitions as they are (docs/operations.md "Durability"): per partition a `confirmReplicated`
   * call with 0 (a write that answers the partition's `next`), `WAIT`, and, confirmed, the watermark moved
   * to that `next` — for a watermark left behind (its move failed, a failover, a partition written before
   * watermarks, or by a node whose readers do not wait), and for the last events of a timeline being
   * closed. Never throws.
   * @param keys the key names of the storage (default: the appender's own)
   * @returns per partition, in order: whether its watermark now reaches what it held when the call began
   */
  confirm(partitions: readonly PartitionRef[], keys?: Keys): Promise<boolean[]>;
  /** Closes the reserved connections. */
  close(): void;
}

/** One reserved connection with its scripts. */
export interface Lane {
  readonly redis: Redis;
  readonly scripts: Scripts;
}

/** A script call: its name, keys in its header's order, and arguments. */
interface ScriptCall {
  readonly script: ScriptName;
  readonly keys: readonly string[];
  readonly args: readonly ScriptArg[];
}

/** A write sent before a `WAIT`, and how its partition's high watermark follows once the `WAIT` confirmed it. */
export interface WaitedWrite {
  /** An append, or the first step of a confirmation (`confirmReplicated` with 0). */
  readonly call: ScriptCall;
  /** The partition written. */
  readonly target: PartitionRef;
  /**
   * The partition's `next` after the write, from its reply (undefined: nothing to move the watermark to);
   * absent: the write's reply does not tell (an idempotent append), so a `confirmReplicated` call with 0
   * goes right after it, and its reply tells.
   */
  readonly endOf?: (reply: unknown) => number | undefined;
}

/** What one lane reported for a group of writes. */
export interface LaneOutcome {
  /** Each write's script outcome. */
  readonly scripts: PromiseSettledResult<unknown>[];
  /** The replicas' shortfall (undefined: confirmed). */
  readonly shortfall: string | undefined;
  /** Per write, whether its partition's watermark was moved to the end of the write. */
  readonly moved: boolean[];
}

/** The {@link WaitedWrite} of an append: the end is the first offset the script reports plus the events it carries, unless it is idempotent (some may be left out). */
export function waitedAppend(keys: Keys, name: string, timeline: TimelineRef, write: PartitionAppend): WaitedWrite {
  const target = { name, timeline: timeline.order, partition: write.partition };
  const call = appendCall(keys, name, timeline, write);
  if (write.idempotency !== undefined) return { call, target };
  return {
    call,
    target,
    endOf: (reply) => {
      const written = appendWrite(reply);
      return written.ok ? written.firstOffset + write.count : undefined;
    },
  };
}

/** The {@link WaitedWrite} that starts the confirmation of a partition as it is (its reply is its `next`). */
export function waitedConfirmation(keys: Keys, target: PartitionRef): WaitedWrite {
  return { call: confirmCall(keys, target.name, target.timeline, target.partition, 0), target, endOf: confirmedNext };
}

/**
 * Issues the writes' scripts and then `WAIT minReplicas timeoutMs` on one connection, in that order, so
 * the `WAIT` covers exactly those writes (and earlier ones of that connection, and everything the master
 * wrote before them); once it confirmed, and with a `confirmLane` (the same master's connection that never
 * waits), moves each written partition's high watermark to the end of its write (see {@link WaitedWrite}).
 * @param asking precede each script with `ASKING` (an ASK redirection during a slot migration)
 */
export async function writeAndWait(lane: Lane, confirmLane: Lane | undefined, writes: readonly WaitedWrite[], keys: Keys, minReplicas: number, timeoutMs: number, asking = false): Promise<LaneOutcome> {
  const send = (call: ScriptCall): Promise<unknown> => {
    // Its reply is of no interest: a refused ASKING shows in the script's own reply.
    if (asking) lane.redis.asking().catch(() => undefined);
    return lane.scripts.run(call.script, call.keys, call.args);
  };
  const sent = writes.map((w) => {
    const reply = send(w.call);
    if (w.endOf !== undefined || confirmLane === undefined) return { reply, end: reply.then(w.endOf ?? (() => undefined)) };
    // Sent right after the write on the same connection: the `next` it answers covers the write, and the WAIT covers it.
    const marked = send(confirmCall(keys, w.target.name, w.target.timeline, w.target.partition, 0));
    return { reply, end: Promise.all([reply, marked]).then(([, next]) => confirmedNext(next)) };
  });
  const waited = lane.redis.wait(minReplicas, timeoutMs);
  const [scripts, ends, replicas] = await Promise.all([
    Promise.allSettled(sent.map((s) => s.reply)),
    Promise.allSettled(sent.map((s) => s.end)),
    waited.then((n) => ({ n }), (err: unknown) => ({ err: err as Error })),
  ]);
  const shortfall =
    'err' in replicas
      ? `not confirmed by replicas: ${replicas.err.message}`
      : replicas.n < minReplicas
        ? `acknowledged by ${replicas.n} of ${minReplicas} replicas within ${timeoutMs} ms`
        : undefined;
  const moved = writes.map(() => false);
  if (shortfall === undefined && confirmLane !== undefined) {
    await Promise.all(
      writes.map(async (w, i) => {
        const end = ends[i];
        if (end?.status !== 'fulfilled' || end.value === undefined) return;
        const call = confirmCall(keys, w.target.name, w.target.timeline, w.target.partition, end.value);
        // A move that fails leaves the watermark behind; a later confirmed write or a confirmation takes it on.
        moved[i] = await confirmLane.scripts.run(call.script, call.keys, call.args).then(
          (reply) => confirmedNext(reply) !== undefined,
          () => false,
        );
      }),
    );
  }
  return { scripts, shortfall, moved };
}
