import { LRUCache } from 'lru-cache';
import type { TimelineMap } from '../../../domain/storages/timeline.js';
import type { Logger } from '../../../observability/logger.js';
import type { PartitionLogs } from '../../../storage/partition-logs.js';
import { IDLE_POLL_FACTOR } from '../../../storage/partition-wakeups.js';
import type { EventSegment } from '../../../storage/partition-store.js';
import { offsetField } from '../../../storage/subscription-state-store.js';
import type { TimelineLookup } from '../stream/partition-reader.js';
import type { SubscriptionPartition } from '../session/session-types.js';

/** Bytes of stored events a group keeps for its streams (a batch is usually a slice of an entry another stream of the group read a moment ago). */
export const QUEUE_GROUP_CACHE_BYTES = 32 * 1024 * 1024;
/** How long a read entry stays in a group's cache, ms. */
const CACHE_TTL_MS = 30_000;
/** New events per stream woken by a publish notice (see `QueueGroup.wakeAll`). */
const EVENTS_PER_WAKE = 100;
/** Stream entries one read asks for at most. */
const READ_ENTRIES = 4;
const NEWLINE = 0x0a;

/** A read entry (or the part of one from the offset a read started at), with where each event starts. */
interface CachedSegment {
  readonly first: number;
  readonly count: number;
  readonly data: Buffer;
  /** Byte offset of each event in `data`, and `data.length + 1` after the last. */
  readonly starts: Uint32Array;
}

/** One partition of a group: its newest offset as known, its timelines and its cached segments by first offset. */
interface GroupPartition {
  readonly eventType: string;
  readonly partition: string;
  timelines: TimelineMap;
  newest: number;
  /** First offsets of cached segments, ascending. */
  firsts: number[];
  unlisten: () => void;
}

/**
 * What the queue-mode streams of one subscription on one node share (docs/architecture.md#45-queue-mode-state):
 * the newest offset of each partition (read once, then moved by the partitions' publish notices, which wake
 * the streams), and the stored events they read, so that a batch cut from the middle of a stream entry does
 * not read the whole entry again. Made by the first stream of the subscription on the node and dropped with
 * the last, so nothing outlives the streams.
 */
export class QueueGroup {
  private readonly partitions = new Map<string, GroupPartition>();
  private readonly wakers = new Set<{ readonly wake: () => void; readonly hungry: () => boolean }>();
  private readonly cache: LRUCache<string, CachedSegment>;
  /** Settles once the newest offsets were read and the notices listened to. */
  readonly ready: Promise<void>;

  constructor(
    subscriptionPartitions: readonly SubscriptionPartition[],
    private readonly logs: Pick<PartitionLogs, 'ranges' | 'notices' | 'read'>,
    private readonly timelines: TimelineLookup,
    private readonly logger: Logger,
    pollIntervalMs: number,
  ) {
    for (const p of subscriptionPartitions) {
      this.partitions.set(offsetField(p.eventType, p.partition), { eventType: p.eventType, partition: p.partition, timelines: p.timelines, newest: -1, firsts: [], unlisten: () => undefined });
    }
    this.cache = new LRUCache<string, CachedSegment>({
      maxSize: QUEUE_GROUP_CACHE_BYTES,
      sizeCalculation: (s) => s.data.length + s.starts.byteLength + 64,
      ttl: CACHE_TTL_MS,
      dispose: (s, key) => this.unindex(key, s.first),
    });
    this.ready = this.start();
    // The safety net: newest offsets read again (a notice may have been missed) and one waiting stream
    // woken, whose claim also releases batches past their deadline (a stream or node that died).
    this.poll = setInterval(() => {
      void this.refresh().then(
        () => this.wakeAll(1),
        (err: unknown) => this.logger.warn({ err: (err as Error).message }, 'could not read the newest offsets of a queue subscription'),
      );
    }, pollIntervalMs * IDLE_POLL_FACTOR);
  }

  private readonly poll: NodeJS.Timeout;

  /** The offsets fields of the subscription's partitions, in a fixed order (the round robin of claims). */
  get fields(): string[] {
    return [...this.partitions.keys()];
  }

  /** The newest offset known of each partition (by offsets field). */
  newest(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [field, p] of this.partitions) out.set(field, p.newest);
    return out;
  }

  /** The timelines of a partition's event type, as the group last read them. */
  timelinesOf(field: string): TimelineMap | undefined {
    return this.partitions.get(field)?.timelines;
  }

  /**
   * Registers a stream's wake-up for new events. `hungry` says whether the stream waits for events with
   * room to take them (its last claim found nothing): only such streams are woken. @returns its removal
   */
  onWake(wake: () => void, hungry: () => boolean): () => void {
    const entry = { wake, hungry };
    this.wakers.add(entry);
    return () => this.wakers.delete(entry);
  }

  /**
   * Wakes the streams waiting for events: after a publish of `events` events, about one stream per
   * `EVENTS_PER_WAKE` of them (at least one; each takes what it has room for and claims again while
   * events are left), taken in turn, so dozens of idle streams do not each run a claim per publish;
   * `Infinity` wakes all of them.
   */
  wakeAll(events = Number.POSITIVE_INFINITY): void {
    const hungry = [...this.wakers].filter((w) => w.hungry());
    if (hungry.length === 0) return;
    const count = Math.min(hungry.length, Math.max(1, Math.ceil(events / EVENTS_PER_WAKE)));
    for (let i = 0; i < count; i++) (hungry[(this.turn + i) % hungry.length] as { wake: () => void }).wake();
    this.turn = (this.turn + count) % Math.max(1, hungry.length);
  }

  /** Where the next partial wake-up starts (round robin over the hungry streams). */
  private turn = 0;

  /**
   * Listens to every partition's notices, then reads the newest offsets: a publish between the two is
   * either in what the read finds or announced by a notice the group hears (the other order loses a
   * notice sent between read and listen, and the streams wait for the safety-net poll).
   */
  private async start(): Promise<void> {
    for (const p of this.partitions.values()) {
      const { wakeups, channel } = await this.logs.notices(p.eventType, p.timelines, p.partition);
      p.unlisten = wakeups.listen(channel, (next) => {
        if (!Number.isFinite(next)) {
          // Notices may have been missed: read the newest offsets, then wake every waiting stream.
          void this.refresh().then(() => this.wakeAll(), () => undefined);
          return;
        }
        const added = next - 1 - p.newest;
        if (added <= 0) return;
        p.newest = next - 1;
        this.wakeAll(added);
      });
    }
    await this.refresh();
  }

  /**
   * Reads the timelines and the newest offset of every partition again (a stream's poll, when a notice may
   * have been missed). @throws BrokerError 503
   */
  async refresh(): Promise<void> {
    const byEventType = new Map<string, GroupPartition[]>();
    for (const p of this.partitions.values()) {
      const list = byEventType.get(p.eventType) ?? [];
      list.push(p);
      byEventType.set(p.eventType, list);
    }
    for (const [name, list] of byEventType) {
      const timelines = (await this.timelines.get(name))?.timelines ?? (list[0] as GroupPartition).timelines;
      const ranges = await this.logs.ranges(name, timelines, list.map((p) => p.partition));
      list.forEach((p, i) => {
        p.timelines = timelines;
        p.newest = Math.max(p.newest, ranges[i]?.newest ?? -1);
      });
    }
  }

  /**
   * The stored events `from`..`to` of a partition (inclusive), as slices of the stored texts joined by
   * `\n` (what `BatchWriter.batch` takes), from the cache or Redis. Events retention removed are missing
   * (the slices start later). @throws BrokerError 503
   */
  async read(field: string, from: number, to: number): Promise<{ readonly slices: Buffer[]; readonly count: number }> {
    const p = this.partitions.get(field);
    if (!p) return { slices: [], count: 0 };
    const slices: Buffer[] = [];
    let count = 0;
    let at = from;
    while (at <= to) {
      let segment = this.cached(field, p, at);
      // Another stream of the group may be reading these entries now: wait for it, not read them again.
      const pending = segment === undefined ? this.loads.get(field) : undefined;
      if (pending !== undefined) {
        await pending.catch(() => undefined);
        segment = this.cached(field, p, at);
      }
      if (!segment) {
        await this.load(field, p, at - 1);
        segment = this.cached(field, p, at) ?? this.firstAfter(field, p, at);
        if (!segment) break;
        if (segment.first > at) at = segment.first;
        if (at > to) break;
      }
      const end = Math.min(to, segment.first + segment.count - 1);
      const startByte = segment.starts[at - segment.first] as number;
      const endByte = (segment.starts[end - segment.first + 1] as number) - 1;
      slices.push(segment.data.subarray(startByte, endByte));
      count += end - at + 1;
      at = end + 1;
    }
    return { slices, count };
  }

  private key(field: string, first: number): string {
    return `${field}|${first}`;
  }

  /** The cached segment holding offset `at`, if any. */
  private cached(field: string, p: GroupPartition, at: number): CachedSegment | undefined {
    const firsts = p.firsts;
    let lo = 0;
    let hi = firsts.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if ((firsts[mid] as number) <= at) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    for (let i = found; i >= 0 && i > found - 4; i--) {
      const s = this.cache.get(this.key(field, firsts[i] as number));
      if (s && s.first <= at && at < s.first + s.count) return s;
    }
    return undefined;
  }

  /** The first cached segment starting after `at` (events before it were removed by retention). */
  private firstAfter(field: string, p: GroupPartition, at: number): CachedSegment | undefined {
    const first = p.firsts.find((f) => f > at);
    return first === undefined ? undefined : this.cache.get(this.key(field, first));
  }

  private async load(field: string, p: GroupPartition, after: number): Promise<void> {
    const loading = this.logs.read(p.eventType, p.timelines, p.partition, after, READ_ENTRIES).then((slice) => {
      for (const s of slice.segments) this.add(field, p, s);
    });
    this.loads.set(field, loading);
    try {
      await loading;
    } finally {
      if (this.loads.get(field) === loading) this.loads.delete(field);
    }
  }

  /** The read of each partition in progress, by offsets field. */
  private readonly loads = new Map<string, Promise<void>>();

  private add(field: string, p: GroupPartition, s: EventSegment): void {
    if (s.count <= 0) return;
    const starts = new Uint32Array(s.count + 1);
    let position = 0;
    for (let i = 0; i < s.count; i++) {
      starts[i] = position;
      const nl = s.data.indexOf(NEWLINE, position);
      position = nl < 0 ? s.data.length + 1 : nl + 1;
    }
    starts[s.count] = s.data.length + 1;
    const key = this.key(field, s.first);
    // Stored events never change: a segment cached already stays as it is.
    if (this.cache.has(key)) return;
    const firsts = p.firsts;
    let i = firsts.length;
    while (i > 0 && (firsts[i - 1] as number) > s.first) i--;
    firsts.splice(i, 0, s.first);
    this.cache.set(key, { first: s.first, count: s.count, data: s.data, starts });
  }

  private unindex(key: string, first: number): void {
    const field = key.slice(0, key.lastIndexOf('|'));
    const p = this.partitions.get(field);
    if (!p) return;
    const i = p.firsts.indexOf(first);
    if (i >= 0) p.firsts.splice(i, 1);
  }

  /** Stops listening and drops the cache (the group's last stream ended). */
  close(): void {
    clearInterval(this.poll);
    for (const p of this.partitions.values()) p.unlisten();
    this.wakers.clear();
    this.cache.clear();
    this.logger.debug({ partitions: this.partitions.size }, 'queue group closed');
  }
}
