import { Redis, type Cluster, type RedisOptions } from 'ioredis';
import { keySlot } from './key-slot.js';
import type { Keys } from '../keys.js';
import { settleBy } from '../../util/deadline.js';
import { appendWrite, timedOut, writeFailure, type PartitionAppend, type PartitionWrite, type TimelineRef } from '../partition-store.js';
import { Scripts } from '../scripts.js';
import { REPLICATED_CONNECTIONS, waitedAppend, waitedConfirmation, writeAndWait, type Lane, type LaneOutcome, type PartitionRef, type ReplicatedAppend, type WaitedWrite } from '../replica-lanes.js';

/** Rounds of redirections (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, node unreachable) a cluster write follows before it fails, as ioredis's `maxRedirections`. */
export const MAX_REDIRECTIONS = 16;

/** Pause before a round retried after TRYAGAIN, CLUSTERDOWN or an unreachable node, as ioredis's `retryDelayOn*`. */
const RETRY_DELAY_MS = 100;

/** The reserved connections to one master (node `host:port`), used in turn, and the one that moves its watermarks. */
interface MasterLanes {
  readonly lanes: readonly Lane[];
  readonly confirmLane: Lane;
  next: number;
}

/** What became of one write of a cluster round: its script's reply, the shortfall of its master's `WAIT` and whether its watermark moved, or the failure. */
type RoutedWrite = { readonly ok: true; readonly reply: unknown; readonly shortfall: string | undefined; readonly moved: boolean } | { readonly ok: false; readonly reason: unknown };

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
 * its own connections per master ({@link REPLICATED_CONNECTIONS} each and the one that moves high
 * watermarks, opened on first use, closed when a refreshed slot map no longer has that node as a master:
 * a watermark is only ever moved on the master whose `WAIT` confirmed the writes). A batch's writes are grouped by the
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
   * @param watermark whether confirmed appends move their partitions' high watermark (readers wait for replicas)
   */
  constructor(
    private readonly cluster: Cluster,
    private readonly keys: Keys,
    readonly minReplicas: number,
    readonly timeoutMs: number,
    private readonly watermark = true,
  ) {
    cluster.on('refresh', this.onRefresh);
  }

  /**
   * Creates the appender and opens the reserved connections to every master the slot map names.
   * @throws Error when a master cannot be connected to
   */
  static async open(cluster: Cluster, keys: Keys, minReplicas: number, timeoutMs: number, watermark = true): Promise<ClusterReplicatedAppender> {
    const appender = new ClusterReplicatedAppender(cluster, keys, minReplicas, timeoutMs, watermark);
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
    const routed = await this.routed(
      writes.map((w) => waitedAppend(keys, name, timeline, w)),
      keys,
      this.watermark,
    );
    return routed.map((r): PartitionWrite => {
      if (!r.ok) return writeFailure(r.reason);
      const written = appendWrite(r.reply);
      return !written.ok || r.shortfall === undefined ? written : { ok: false, reason: r.shortfall };
    });
  }

  /** See {@link ReplicatedAppend.confirm}: one `WAIT` per master of the partitions. */
  async confirm(partitions: readonly PartitionRef[], keys: Keys = this.keys): Promise<boolean[]> {
    if (partitions.length === 0) return [];
    return (await this.routed(partitions.map((p) => waitedConfirmation(keys, p)), keys, true)).map((r) => r.ok && r.moved);
  }

  /**
   * Sends each write to the master of its partition's slot (grouped per master: the writes, then one
   * `WAIT`, then the watermarks moved), following redirections round by round.
   */
  private async routed(writes: readonly WaitedWrite[], keys: Keys, watermark: boolean): Promise<RoutedWrite[]> {
    const slots = writes.map((w) => keySlot(w.call.keys[0] as string));
    const results: (RoutedWrite | undefined)[] = writes.map(() => undefined);
    let pending = new Map<number, Route>(writes.map((_, i) => [i, { node: undefined, asking: false }]));
    for (let round = 0; pending.size > 0; round++) {
      const groups = new Map<string, { node: string; asking: boolean; indexes: number[] }>();
      for (const [i, route] of pending) {
        const node = route.node ?? this.cluster.slots[slots[i] as number]?.[0];
        if (node === undefined) {
          results[i] = { ok: false, reason: new Error(`no master serves slot ${slots[i]}`) };
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
          const outcome = await this.writeOn(node, indexes.map((i) => writes[i] as WaitedWrite), keys, watermark, asking);
          indexes.forEach((i, j) => {
            const script = outcome.scripts[j] as PromiseSettledResult<unknown>;
            if (script.status === 'fulfilled') {
              results[i] = { ok: true, reply: script.value, shortfall: outcome.shortfall, moved: outcome.moved[j] === true };
              return;
            }
            const retry = redirection(script.reason);
            if (retry === undefined || lastRound || this.closed) {
              results[i] = { ok: false, reason: script.reason };
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
    return results.map((r) => r ?? { ok: false, reason: new Error('not written') });
  }

  /** Runs the writes and their `WAIT` on a connection to `node`; a node that cannot be connected to rejects every script. */
  private async writeOn(node: string, writes: readonly WaitedWrite[], keys: Keys, watermark: boolean, asking: boolean): Promise<LaneOutcome> {
    let master: MasterLanes;
    try {
      master = await this.lanesOf(node);
    } catch (err) {
      return { scripts: writes.map(() => ({ status: 'rejected', reason: err })), shortfall: undefined, moved: writes.map(() => false) };
    }
    const lane = master.lanes[master.next++ % master.lanes.length] as Lane;
    return writeAndWait(lane, watermark ? master.confirmLane : undefined, writes, keys, this.minReplicas, this.timeoutMs, asking);
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
    const lanes = Array.from({ length: REPLICATED_CONNECTIONS + 1 }, (_, i): Lane => {
      const redis = new Redis({ ...options, connectionName: i < REPLICATED_CONNECTIONS ? `broker-replicated-${i}` : 'broker-replicated-confirm' });
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
    return { lanes: lanes.slice(0, REPLICATED_CONNECTIONS), confirmLane: lanes[REPLICATED_CONNECTIONS] as Lane, next: 0 };
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
      lanes.then((m) => [...m.lanes, m.confirmLane].forEach((lane) => void lane.redis.quit().catch(() => lane.redis.disconnect())), () => undefined);
    }
  }

  /** Reloads the cluster client's slot map (joining a refresh under way); a failed refresh keeps the old map. */
  private refreshSlots(): Promise<void> {
    return new Promise((resolve) => this.cluster.refreshSlotsCache(() => resolve()));
  }

  close(): void {
    this.closed = true;
    this.cluster.off('refresh', this.onRefresh);
    for (const lanes of this.masters.values()) lanes.then((m) => [...m.lanes, m.confirmLane].forEach((lane) => lane.redis.disconnect()), () => undefined);
    this.masters.clear();
  }
}
