import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { keySlot } from './key-slot.js';
import type { Keys } from './keys.js';
import { settleBy } from './deadline.js';
import { appendCall, appendWrite, timedOut, writeFailure, type PartitionAppend, type PartitionWrite, type TimelineRef } from './partition-store.js';
import { coalesceWrites, type RedisClient } from './redis-connection.js';
import { Scripts } from './scripts.js';

/** Connections reserved for acknowledged writes (per master on a cluster): a `WAIT` blocks its connection until replicas confirm. */
export const REPLICATED_CONNECTIONS = 4;

/** Rounds of redirections (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, node unreachable) a cluster write follows before it fails, as ioredis's `maxRedirections`. */
export const MAX_REDIRECTIONS = 16;

/** Pause before a round retried after TRYAGAIN, CLUSTERDOWN or an unreachable node, as ioredis's `retryDelayOn*`. */
const RETRY_DELAY_MS = 100;

/**
 * Appends confirmed by replicas (`publish.minReplicas` ≥ 1; docs/operations.md "Durability"), as {@link PartitionLogs}
 * uses them: a standalone deployment ({@link ReplicatedAppender}) or a Redis Cluster
 * ({@link ClusterReplicatedAppender}).
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
  /** Closes the reserved connections. */
  close(): void;
}

/**
 * Opens the replica-confirmed appender of a deployment: {@link ClusterReplicatedAppender} for a cluster
 * client, {@link ReplicatedAppender} for a standalone one.
 * @throws Error when the reserved connections cannot be opened
 */
export async function openReplicatedAppender(redis: RedisClient, keys: Keys, minReplicas: number, timeoutMs: number): Promise<ReplicatedAppend> {
  return redis instanceof Cluster ? ClusterReplicatedAppender.open(redis, keys, minReplicas, timeoutMs) : ReplicatedAppender.open(redis, keys, minReplicas, timeoutMs);
}

/** One reserved connection with its scripts. */
interface Lane {
  readonly redis: Redis;
  readonly scripts: Scripts;
}

/** What one lane reported for a group of writes: each script's outcome, and the replicas' shortfall (undefined: confirmed). */
interface LaneOutcome {
  readonly scripts: PromiseSettledResult<unknown>[];
  readonly shortfall: string | undefined;
}

/**
 * Issues the writes' scripts and then `WAIT minReplicas timeoutMs` on one connection, in that order, so
 * the `WAIT` covers exactly those writes (and earlier ones of that connection).
 * @param asking precede each script with `ASKING` (an ASK redirection during a slot migration)
 */
async function writeAndWait(lane: Lane, calls: readonly ReturnType<typeof appendCall>[], minReplicas: number, timeoutMs: number, asking = false): Promise<LaneOutcome> {
  const scripted = calls.map((call) => {
    // Its reply is of no interest: a refused ASKING shows in the script's own reply.
    if (asking) lane.redis.asking().catch(() => undefined);
    return lane.scripts.run(call.script, call.keys, call.args);
  });
  const waited = lane.redis.wait(minReplicas, timeoutMs);
  const [scripts, replicas] = await Promise.all([Promise.allSettled(scripted), waited.then((n) => ({ n }), (err: unknown) => ({ err: err as Error }))]);
  const shortfall =
    'err' in replicas
      ? `not confirmed by replicas: ${replicas.err.message}`
      : replicas.n < minReplicas
        ? `acknowledged by ${replicas.n} of ${minReplicas} replicas within ${timeoutMs} ms`
        : undefined;
  return { scripts, shortfall };
}

/**
 * Appends with replica acknowledgement (docs/operations.md "Durability"; config `publish.minReplicas`) on a standalone
 * master: each batch's partition scripts and then `WAIT minReplicas replicaTimeoutMs` go out on one
 * connection in that order. A batch counts as written only when the `WAIT` reports at least
 * `minReplicas` replicas; otherwise every one of its partitions is reported failed (the events stay on
 * the master: a client retry may duplicate them, as at-least-once allows). `WAIT` blocks its
 * connection, so batches are spread over {@link REPLICATED_CONNECTIONS} reserved connections instead
 * of the shared command connection.
 */
export class ReplicatedAppender implements ReplicatedAppend {
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

  /** See {@link ReplicatedAppend.append}: one `WAIT` covers the whole batch, so a shortfall fails every write. */
  async append(name: string, timeline: TimelineRef, writes: readonly PartitionAppend[], keys: Keys = this.keys, deadlineAt?: number): Promise<PartitionWrite[]> {
    return settleBy(this.appendOnLane(name, timeline, writes, keys), deadlineAt, () => writes.map(timedOut));
  }

  private async appendOnLane(name: string, timeline: TimelineRef, writes: readonly PartitionAppend[], keys: Keys): Promise<PartitionWrite[]> {
    const lane = this.lanes[this.next++ % this.lanes.length] as Lane;
    const { scripts, shortfall } = await writeAndWait(lane, writes.map((w) => appendCall(keys, name, timeline, w)), this.minReplicas, this.timeoutMs);
    return scripts.map((s): PartitionWrite => {
      if (s.status === 'rejected') return writeFailure(s.reason);
      const written = appendWrite(s.value);
      return !written.ok || shortfall === undefined ? written : { ok: false, reason: shortfall };
    });
  }

  close(): void {
    for (const lane of this.lanes) lane.redis.disconnect();
  }
}

/** The reserved connections to one master (node `host:port`), used in turn. */
interface MasterLanes {
  readonly lanes: readonly Lane[];
  next: number;
}

/** Where a write goes next in a cluster: a node `host:port` (undefined: the slot's master in the slot map), with `ASKING` or not. */
interface Route {
  readonly node: string | undefined;
  readonly asking: boolean;
}

/**
 * Why a cluster write did not run and where to send it again: MOVED (the slot has another master: the
 * slot map is refreshed), ASK (the slot is being migrated: `ASKING` on the named node), or a refusal
 * that passes (TRYAGAIN, CLUSTERDOWN, the node's connection not open: the slot map is refreshed and
 * the round retried after {@link RETRY_DELAY_MS}). Undefined: the failure is final. Each of these
 * replies means the script did not run, so sending it again cannot duplicate events; a failure after
 * the script may have run (a closed connection with the command in flight, a timeout) is final.
 */
function redirection(err: unknown): (Route & { readonly refresh: boolean; readonly delay: boolean }) | undefined {
  const message = err instanceof Error ? err.message : String(err);
  const redirect = /^(MOVED|ASK) \d+ (\S+)$/.exec(message);
  if (redirect) return { node: redirect[2], asking: redirect[1] === 'ASK', refresh: redirect[1] === 'MOVED', delay: false };
  if (/^(TRYAGAIN|CLUSTERDOWN)\b/.test(message) || /isn't writeable|ECONNREFUSED/.test(message)) return { node: undefined, asking: false, refresh: true, delay: true };
  return undefined;
}

/** `host:port` → connection options (IPv6 hosts keep their colons). */
function hostAndPort(node: string): { host: string; port: number } {
  const colon = node.lastIndexOf(':');
  return { host: node.slice(0, colon).replace(/^\[(.*)\]$/, '$1'), port: Number(node.slice(colon + 1)) };
}

/**
 * Appends with replica acknowledgement on a Redis Cluster (docs/operations.md "Durability"). `WAIT` counts the replicas of the node it runs on that acknowledged the writes
 * of its connection, and a cluster client sends each command to some node by its slot, so this keeps
 * its own connections per master ({@link REPLICATED_CONNECTIONS} each, opened on first use, closed
 * when a refreshed slot map no longer has that node as a master). A batch's writes are grouped by the
 * master owning each partition's slot (the partition's hash tag, `keys.ts`, by the cluster client's
 * slot map); per master, the partitions' scripts and then `WAIT minReplicas timeoutMs` go on one of
 * its connections. A master whose `WAIT` reports fewer replicas fails only its partitions' writes
 * (207 names them); the others succeed.
 *
 * Redirections (ioredis does not follow them for these connections): MOVED refreshes the slot map
 * and sends the write to the named node, ASK sends it with `ASKING` to the named node, TRYAGAIN,
 * CLUSTERDOWN and a node that cannot be reached refresh the slot map and retry after 100 ms; at most
 * {@link MAX_REDIRECTIONS} rounds, like the cluster client. These replies mean the script did not run,
 * so the retried write cannot duplicate events (a script that ran never goes again: a closed
 * connection or a timeout with the command in flight fails the write, and a client retry may then
 * duplicate, as at-least-once allows).
 */
export class ClusterReplicatedAppender implements ReplicatedAppend {
  private readonly masters = new Map<string, Promise<MasterLanes>>();
  private readonly onRefresh = (): void => this.prune();
  private closed = false;

  /**
   * @param cluster the deployment's cluster client: its slot map routes the writes
   * @param minReplicas replicas of each written master that must confirm (≥ 1)
   * @param timeoutMs how long each `WAIT` waits for them
   */
  constructor(
    private readonly cluster: Cluster,
    private readonly keys: Keys,
    readonly minReplicas: number,
    readonly timeoutMs: number,
  ) {
    cluster.on('refresh', this.onRefresh);
  }

  /**
   * Creates the appender and opens the reserved connections to every master the slot map names.
   * @throws Error when a master cannot be connected to
   */
  static async open(cluster: Cluster, keys: Keys, minReplicas: number, timeoutMs: number): Promise<ClusterReplicatedAppender> {
    const appender = new ClusterReplicatedAppender(cluster, keys, minReplicas, timeoutMs);
    try {
      await Promise.all([...appender.currentMasters()].map((node) => appender.lanesOf(node)));
    } catch (err) {
      appender.close();
      throw err;
    }
    return appender;
  }

  /** See {@link ReplicatedAppend.append}: one `WAIT` per master written to; a shortfall fails that master's writes only. */
  async append(name: string, timeline: TimelineRef, writes: readonly PartitionAppend[], keys: Keys = this.keys, deadlineAt?: number): Promise<PartitionWrite[]> {
    return settleBy(this.appendRouted(name, timeline, writes, keys), deadlineAt, () => writes.map(timedOut));
  }

  private async appendRouted(name: string, timeline: TimelineRef, writes: readonly PartitionAppend[], keys: Keys): Promise<PartitionWrite[]> {
    const calls = writes.map((w) => appendCall(keys, name, timeline, w));
    const slots = calls.map((call) => keySlot(call.keys[0] as string));
    const results: (PartitionWrite | undefined)[] = writes.map(() => undefined);
    let pending = new Map<number, Route>(calls.map((_, i) => [i, { node: undefined, asking: false }]));
    for (let round = 0; pending.size > 0; round++) {
      const groups = new Map<string, { node: string; asking: boolean; indexes: number[] }>();
      for (const [i, route] of pending) {
        const node = route.node ?? this.cluster.slots[slots[i] as number]?.[0];
        if (node === undefined) {
          results[i] = { ok: false, reason: `storage error: no master serves slot ${slots[i]}` };
          continue;
        }
        const id = `${route.asking ? 'ask ' : ''}${node}`;
        const group = groups.get(id) ?? { node, asking: route.asking, indexes: [] };
        group.indexes.push(i);
        groups.set(id, group);
      }
      const next = new Map<number, Route>();
      let refresh = false;
      let delay = false;
      const lastRound = round + 1 >= MAX_REDIRECTIONS;
      await Promise.all(
        [...groups.values()].map(async ({ node, asking, indexes }) => {
          const outcome = await this.writeOn(node, indexes.map((i) => calls[i] as ReturnType<typeof appendCall>), asking);
          indexes.forEach((i, j) => {
            const script = outcome.scripts[j] as PromiseSettledResult<unknown>;
            if (script.status === 'fulfilled') {
              const written = appendWrite(script.value);
              results[i] = !written.ok || outcome.shortfall === undefined ? written : { ok: false, reason: outcome.shortfall };
              return;
            }
            const retry = redirection(script.reason);
            if (retry === undefined || lastRound || this.closed) {
              results[i] = writeFailure(script.reason);
              return;
            }
            next.set(i, { node: retry.node, asking: retry.asking });
            refresh ||= retry.refresh;
            delay ||= retry.delay;
          });
        }),
      );
      pending = next;
      if (pending.size === 0) break;
      if (delay) await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS));
      if (refresh) await this.refreshSlots();
    }
    return results.map((r) => r ?? { ok: false, reason: 'storage error: not written' });
  }

  /** Runs the scripts and their `WAIT` on a connection to `node`; a node that cannot be connected to rejects every script. */
  private async writeOn(node: string, calls: readonly ReturnType<typeof appendCall>[], asking: boolean): Promise<LaneOutcome> {
    let master: MasterLanes;
    try {
      master = await this.lanesOf(node);
    } catch (err) {
      return { scripts: calls.map(() => ({ status: 'rejected', reason: err })), shortfall: undefined };
    }
    const lane = master.lanes[master.next++ % master.lanes.length] as Lane;
    return writeAndWait(lane, calls, this.minReplicas, this.timeoutMs, asking);
  }

  /** The reserved connections to `node`, opened on first use (a failed opening is tried again next time). */
  private lanesOf(node: string): Promise<MasterLanes> {
    const known = this.masters.get(node);
    if (known) return known;
    const opening = this.openLanes(node);
    this.masters.set(node, opening);
    opening.catch(() => {
      if (this.masters.get(node) === opening) this.masters.delete(node);
    });
    return opening;
  }

  private async openLanes(node: string): Promise<MasterLanes> {
    const base = this.cluster.options.redisOptions ?? {};
    const options: RedisOptions = {
      ...base,
      ...hostAndPort(node),
      // A WAIT may legitimately take `timeoutMs`; the command timeout must not fire first.
      commandTimeout: (base.commandTimeout ?? 5000) + this.timeoutMs,
      enableOfflineQueue: false,
      enableAutoPipelining: true,
      maxRetriesPerRequest: 0,
      lazyConnect: true,
      retryStrategy: (times) => Math.min(times * 100, 1000),
    };
    const lanes = Array.from({ length: REPLICATED_CONNECTIONS }, (_, i): Lane => {
      const redis = new Redis({ ...options, connectionName: `broker-replicated-${i}` });
      // Failures reach the writes themselves (failed items); the cluster client logs the node's state.
      redis.on('error', () => undefined);
      return { redis, scripts: new Scripts(redis) };
    });
    try {
      await Promise.all(lanes.map((lane) => lane.redis.connect()));
    } catch (err) {
      for (const lane of lanes) lane.redis.disconnect();
      throw err;
    }
    if (this.closed) {
      for (const lane of lanes) lane.redis.disconnect();
      throw new Error('Connection is closed (the appender was closed)');
    }
    return { lanes, next: 0 };
  }

  /** Masters named by the cluster client's slot map (`host:port`). */
  private currentMasters(): Set<string> {
    const masters = new Set<string>();
    for (const owners of this.cluster.slots) if (owners?.[0] !== undefined) masters.add(owners[0]);
    return masters;
  }

  /** Closes the connections to nodes that are no longer masters in the refreshed slot map (after their pending replies). */
  private prune(): void {
    const masters = this.currentMasters();
    for (const [node, lanes] of this.masters) {
      if (masters.has(node)) continue;
      this.masters.delete(node);
      lanes.then((m) => m.lanes.forEach((lane) => void lane.redis.quit().catch(() => lane.redis.disconnect())), () => undefined);
    }
  }

  /** Reloads the cluster client's slot map (joining a refresh under way); a failed refresh keeps the old map. */
  private refreshSlots(): Promise<void> {
    return new Promise((resolve) => this.cluster.refreshSlotsCache(() => resolve()));
  }

  close(): void {
    this.closed = true;
    this.cluster.off('refresh', this.onRefresh);
    for (const lanes of this.masters.values()) lanes.then((m) => m.lanes.forEach((lane) => lane.redis.disconnect()), () => undefined);
    this.masters.clear();
  }
}
