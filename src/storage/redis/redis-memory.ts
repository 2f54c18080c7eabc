import { Cluster, type Redis } from 'ioredis';
import { formatBytes, judgeMaster, memoryReportOf, UsageHistory, type MasterMemory } from '../../domain/storages/memory-budget.js';
import type { Logger } from '../../observability/logger.js';
import { keySlot } from './key-slot.js';
import { addressOf, parseInfo } from './redis-checks.js';
import { masterNodes, type RedisClient } from './redis-connection.js';

/**
 * The master connection holding `key` (for commands whose key ioredis cannot route, as `MEMORY USAGE`):
 * on a Redis Cluster the master of the key's slot in the client's slot map (undefined when the map does
 * not name one the client is connected to); standalone, the connection itself.
 */
export function masterNodeOf(redis: RedisClient, key: string): Redis | undefined {
  if (!(redis instanceof Cluster)) return redis;
  const node = redis.slots[keySlot(key)]?.[0];
  return node === undefined ? undefined : redis.nodes('master').find((n) => addressOf(n) === node);
}

/** How a {@link RedisMemoryWatch} judges and how often it reads (config `redisMemory`). */
export interface RedisMemoryOptions {
  /** `redisMemory.highWaterPercent`. */
  readonly highWaterPercent: number;
  /** `redisMemory.checkIntervalMs`. */
  readonly checkIntervalMs: number;
}

/** The window of the net rate behind {@link MasterMemory.secondsToMark}: the last minute. */
const RATE_WINDOW_MS = 60_000;

/**
 * What one node knows of the memory of one Redis deployment's masters (docs/operations.md "Memory and
 * retention"): every `redisMemory.checkIntervalMs` it reads `INFO memory` from each master (one command
 * per master, never per publish: a standalone Redis is its one master; on a Redis Cluster every master
 * of the slot map) and judges each against the high-water mark (`domain/storages/memory-budget.ts`). The
 * publisher asks it which master holds a partition and whether that master is full — a map lookup —
 * and refuses the partitions of full masters with 507. Between two reads it adds the bytes this node
 * appended to each master to what the last read said ({@link noteAppended}), so one node publishing at
 * full speed stops at the mark, not a whole interval's writes past it. A master that fell below the mark (retention,
 * compaction, a deletion) accepts publishes again at the next read.
 *
 * A master without `maxmemory` is judged against its machine's memory (`total_system_memory`), with a
 * warning logged once when the node first sees it. A read that fails keeps the last states (a Redis
 * that cannot be reached fails publishes on its own); a master never read is not full.
 *
 * Memory: one state and one minute of samples (60 at the default interval) per master; masters that
 * leave the slot map are dropped at the next read.
 */
export class RedisMemoryWatch {
  private readonly states = new Map<string, MasterMemory>();
  /**
   * Bytes this node appended to each master since its last read, and the state they make of it (the
   * read's `used_memory` plus them): between two reads the node counts its own appends, so a producer
   * at full speed cannot carry a master a whole interval's writes past its mark.
   */
  private readonly appended = new Map<string, { bytes: number; state: MasterMemory }>();
  private readonly histories = new Map<string, UsageHistory>();
  /** Masters warned about for having no `maxmemory` (one line per master and node). */
  private readonly warned = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;
  private lastError = '';

  /**
   * @param storage the storage id the deployment serves (`default` for the node's own), for logs and metrics
   * @param clock monotonic ms (default `performance.now`; tests pass their own)
   */
  constructor(
    private readonly redis: RedisClient,
    readonly storage: string,
    private readonly options: RedisMemoryOptions,
    private readonly logger: Logger,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** Reads once (so the node knows its masters before it serves; never throws), then every `checkIntervalMs`. */
  async start(): Promise<void> {
    await this.refresh();
    this.timer ??= setInterval(() => void this.refresh(), this.options.checkIntervalMs);
    this.timer.unref();
  }

  /** Stops the reads; resolves once a read under way is done. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.reading;
  }

  /** Reads every master now, joining a read under way (after Redis refused a write for memory, say). Never rejects. */
  refresh(): Promise<void> {
    this.reading ??= this.read()
      .catch((err: unknown) => this.failed(this.storage, err))
      .finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async read(): Promise<void> {
    const nodes = masterNodes(this.redis);
    const now = this.clock();
    const seen = new Set<string>();
    await Promise.all(
      nodes.map(async (node) => {
        const master = addressOf(node);
        seen.add(master);
        let report: ReturnType<typeof memoryReportOf>;
        try {
          report = memoryReportOf(parseInfo(await node.info('memory')));
        } catch (err) {
          this.failed(master, err);
          return;
        }
        if (report === undefined) return;
        this.lastError = '';
        let history = this.histories.get(master);
        if (history === undefined) this.histories.set(master, (history = new UsageHistory(RATE_WINDOW_MS)));
        history.add(now, report.usedBytes);
        const judged = judgeMaster(master, report, this.options.highWaterPercent);
        const state = judged.full ? judged : { ...judged, secondsToMark: history.secondsTo(judged.markBytes) };
        const before = this.states.get(master);
        this.states.set(master, state);
        this.appended.delete(master);
        if (report.maxmemoryBytes === 0) this.warnUnlimited(state);
        if (before !== undefined && before.full !== state.full) this.logTransition(state);
        else if (before === undefined && state.full) this.logTransition(state);
      }),
    );
    // A cluster client knows no masters before it is connected; keep what was read until it does.
    if (nodes.length > 0) {
      for (const master of [...this.states.keys()]) {
        if (seen.has(master)) continue;
        this.states.delete(master);
        this.appended.delete(master);
        this.histories.delete(master);
      }
    }
  }

  private failed(master: string, err: unknown): void {
    const message = err instanceof Error ? err.message : String(err);
    if (message !== this.lastError) this.logger.warn({ redis: master, storage: this.storage, err: message }, 'cannot read INFO memory; the last known memory state of this master is kept');
    this.lastError = message;
  }

  private warnUnlimited(state: MasterMemory): void {
    if (this.warned.has(state.master)) return;
    this.warned.add(state.master);
    this.logger.warn(
      { redis: state.master, storage: this.storage, systemBytes: state.limitBytes, markBytes: state.markBytes },
      `the Redis at ${state.master} has no maxmemory: it keeps every retained event in RAM and grows until the machine runs out of memory, ` +
        'when the kernel kills a process (likely redis-server, losing up to a second of acknowledged events with appendfsync everysec) and the restart replays the whole append-only file. ' +
        `The broker takes the machine's memory (${formatBytes(state.limitBytes)}, total_system_memory) as the limit of its high-water mark (${formatBytes(state.markBytes)}). ` +
        'Set a limit: `CONFIG SET maxmemory <bytes>` and `maxmemory <bytes>` in redis.conf so it survives a restart, about half the machine\'s memory when the broker runs beside it ' +
        '(docs/operations.md "Memory and retention").',
    );
  }

  private logTransition(state: MasterMemory): void {
    const fields = { redis: state.master, storage: this.storage, usedBytes: state.usedBytes, markBytes: state.markBytes, limitBytes: state.limitBytes };
    if (state.full) this.logger.warn(fields, 'Redis master at or above its high-water mark: publishes to its partitions are refused with 507 until memory is freed');
    else this.logger.info(fields, 'Redis master below its high-water mark again: publishes to its partitions are accepted');
  }

  /** Every master's state (as last read, with this node's appends since counted in), in no particular order. */
  masters(): MasterMemory[] {
    return [...this.states.keys()].flatMap((master) => this.current(master) ?? []);
  }

  /** The address of the master holding `key` (its hash tag's slot on a cluster; standalone: the one master), if known. */
  private addressOf(key: string): string | undefined {
    if (this.redis instanceof Cluster) return this.redis.slots[keySlot(key)]?.[0];
    return this.states.keys().next().value;
  }

  /** A master's state now: as last read, with this node's appends since counted in (`usedBytes`, `full`). */
  private current(master: string): MasterMemory | undefined {
    return this.appended.get(master)?.state ?? this.states.get(master);
  }

  /**
   * The state of the master holding `key` (a partition's key: its hash tag decides the slot) — as last
   * read, with this node's appends since counted in — or undefined when that master was not read yet.
   */
  masterOf(key: string): MasterMemory | undefined {
    const master = this.addressOf(key);
    return master === undefined ? undefined : this.current(master);
  }

  /** The master holding `key` when it is at or above its mark (its partitions refuse publishes), else undefined. */
  fullMasterOf(key: string): MasterMemory | undefined {
    const state = this.masterOf(key);
    return state?.full === true ? state : undefined;
  }

  /**
   * Counts bytes this node appended to the master holding `key` since its last read (the events' stored
   * bytes: Redis adds at least as much), so the master counts as full as soon as they carry it to its
   * mark, not only at the next read. The next read replaces the estimate with Redis's own figure.
   */
  noteAppended(key: string, bytes: number): void {
    const master = this.addressOf(key);
    const read = master === undefined ? undefined : this.states.get(master);
    if (master === undefined || read === undefined || bytes <= 0) return;
    const total = (this.appended.get(master)?.bytes ?? 0) + bytes;
    const usedBytes = read.usedBytes + total;
    const full = usedBytes >= read.markBytes;
    this.appended.set(master, { bytes: total, state: { ...read, usedBytes, full, secondsToMark: full ? 0 : read.secondsToMark } });
  }

  /** Whether some master is at or above its mark (when none is, a publish looks no further). */
  anyFull(): boolean {
    for (const master of this.states.keys()) if (this.current(master)?.full === true) return true;
    return false;
  }

  /** One master's state when every master read is at or above its mark (a publish can be refused before it is validated), else undefined. */
  allFull(): MasterMemory | undefined {
    let first: MasterMemory | undefined;
    for (const master of this.states.keys()) {
      const state = this.current(master);
      if (state?.full !== true) return undefined;
      first ??= state;
    }
    return first;
  }

  /** Bytes below the mark over every master read: Σ max(0, mark − used); Infinity when a master's limit is unknown. */
  roomBytes(): number {
    let room = 0;
    for (const state of this.states.values()) room += Math.max(0, state.markBytes - state.usedBytes);
    return room;
  }
}
