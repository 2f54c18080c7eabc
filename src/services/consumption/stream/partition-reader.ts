import type { BrokerConfig } from '../../../config/config-schema.js';
import type { StreamParameters } from '../../../domain/stream/stream-parameters.js';
import type { TimelineMap } from '../../../domain/storages/timeline.js';
import type { PartitionLogs } from '../../../storage/partition-logs.js';
import type { EventSegment } from '../../../storage/partition-store.js';
import type { BatchCutter } from './batch-cutter.js';
import { IDLE_POLL_FACTOR } from '../../../storage/partition-wakeups.js';
import type { StreamPartition } from './stream-partition.js';

/** What reading asks of the stream's policy (part of `StreamPolicy`, event-stream.ts). */
export interface ReadPolicy {
  /**
   * Whether an event goes to the client (per-event authorization); skipped events are not sent but the
   * cursor moves past them. Absent = every event.
   */
  accept?(partition: StreamPartition, event: string): boolean;
  /**
   * Called when the reader moved `partition`'s cursor (`partition.sent`) over offsets with no event
   * behind them, the stream having nothing of the partition buffered: retention removed them before the
   * stream reached them (`expired` of them), or compaction did (docs/consuming.md "Events removed
   * before they were read"). Absent = nothing to do (the low-level stream just goes on from there).
   */
  passedOver?(partition: StreamPartition, expired: number): void;
  /**
   * The stream's filter (docs/consuming.md "Filters"): events it does not match are passed over like
   * events `accept` refuses (not sent; the cursor moves past them). Absent = every event.
   */
  readonly filter?: EventFilter;
}

/**
 * A consumer's filter, tested off the main thread (src/services/event-filters.ts runs it in the worker
 * threads): the reader hands it each read slice's segments and gets one flag per event back.
 */
export interface EventFilter {
  /**
   * @param segments stream entries of one partition, in offset order (stored texts joined by `\n`)
   * @returns one byte per event of the segments together, in order: 1 where the event matches
   * @throws BrokerError 503 (BUSY) when the test took longer than its time limit
   */
  match(segments: readonly EventSegment[]): Promise<Uint8Array>;
}

/** Where reading finds an event type's current timelines (the event type cache; undefined = unknown). */
export interface TimelineLookup {
  get(name: string): Promise<{ readonly timelines: TimelineMap } | undefined>;
}

/** What a {@link PartitionReader} reads from and into. */
export interface PartitionReaderOptions {
  /** `batch_limit` (a partition with that many events buffered is not read) and `batch_timespan`. */
  readonly rules: Pick<StreamParameters, 'batchLimit' | 'batchTimespanSeconds'>;
  readonly logs: PartitionLogs;
  readonly eventTypes: TimelineLookup;
  readonly config: BrokerConfig['consumption'];
  readonly policy: ReadPolicy;
  /** The stream's partitions by key (the loop's map; a partition no longer in it is not filled). */
  readonly partitions: ReadonlyMap<string, StreamPartition>;
  /** The read buffers (read events go there; their size counts against the cap). */
  readonly buffers: BatchCutter;
  /** Bytes the client's socket still holds (they count against the cap too). */
  readonly clientBufferedBytes: () => number;
  /** Wakes the stream's loop (a publish notice for one of its partitions arrived). */
  readonly wake: () => void;
}

/**
 * Reading of one stream (docs/architecture.md#41-the-batch-loop-eventstreamloop): follows each partition's active
 * timeline and its publish notices (a notice records the partition's next offset and wakes the loop),
 * and reads stream entries after each partition's last read offset into the read buffers while the
 * stream's buffered bytes (its own plus the client socket's) stay under
 * `consumption.maxStreamBufferBytes`. A partition is read when it has room (fewer than `batch_limit`
 * events buffered) and something new, or when its safety-net poll is due.
 */
export class PartitionReader {
  private readonly rules: Pick<StreamParameters, 'batchLimit' | 'batchTimespanSeconds'>;
  private readonly logs: PartitionLogs;
  private readonly eventTypes: TimelineLookup;
  private readonly config: BrokerConfig['consumption'];
  private readonly policy: ReadPolicy;
  private readonly partitions: ReadonlyMap<string, StreamPartition>;
  private readonly buffers: BatchCutter;
  private readonly clientBufferedBytes: () => number;
  private readonly wake: () => void;

  constructor(options: PartitionReaderOptions) {
    this.rules = options.rules;
    this.logs = options.logs;
    this.eventTypes = options.eventTypes;
    this.config = options.config;
    this.policy = options.policy;
    this.partitions = options.partitions;
    this.buffers = options.buffers;
    this.clientBufferedBytes = options.clientBufferedBytes;
    this.wake = options.wake;
  }

  /**
   * Reads more events for partitions that have room and something new (or are due a poll), after
   * taking each event type's current timelines.
   * @throws BrokerError 503 when Redis fails while reading or a timeline's storage cannot be opened
   */
  async fill(): Promise<void> {
    await this.refreshTimelines();
    const capBytes = this.config.maxStreamBufferBytes;
    const buffered = this.clientBufferedBytes() + this.buffers.bufferedBytes;
    if (buffered >= capBytes) return;
    const t = performance.now();
    const due = [...this.partitions.values()].filter(
      (p) => p.active && p.bufferedEvents < this.rules.batchLimit && (p.knownNext - 1 > p.read || t - p.lastReadAt >= this.pollIntervalOf(p)),
    );
    // Entries vary in size (one publish request's share each): ask for as many as the room left
    // should hold at the partition's average entry size, so one read overshoots the cap by one entry at most.
    const room = capBytes - buffered;
    const lastReadAt = due.map((p) => p.lastReadAt);
    const readFrom = due.map((p) => p.read);
    const noticesBefore = due.map((p) => p.notices);
    const reads = Promise.all(
      due.map((p) => {
        p.lastReadAt = t;
        // Unknown entry size: one entry first. Reads stay near READ_TARGET_BYTES so one large reply
        // never holds the event loop (and the commits waiting on it) for long.
        const budget = Math.min(room / due.length, READ_TARGET_BYTES);
        const count = p.entryBytes === 0 ? 1 : Math.max(1, Math.min(this.config.readEntries, Math.floor(budget / p.entryBytes)));
        return this.logs.read(p.eventType, p.timelines, p.partition, p.read, count);
      }),
    );
    // A failed round read nothing: each partition stays due as it was (the loop retries it).
    const restore = (err: unknown): never => {
      due.forEach((p, i) => (p.lastReadAt = lastReadAt[i] ?? p.lastReadAt));
      throw err;
    };
    const slices = await reads.catch(restore);
    // With a filter, each slice's events are tested in the worker threads (all slices at once) before any is buffered.
    const filter = this.policy.filter;
    const matches = filter === undefined ? [] : await Promise.all(slices.map((slice) => (slice.segments.length > 0 ? filter.match(slice.segments) : Promise.resolve(undefined)))).catch(restore);
    // Filtering and batch_timespan look at single events; otherwise whole entries travel as they are.
    const perEvent = this.policy.accept !== undefined || this.rules.batchTimespanSeconds > 0;
    const jumps: { p: StreamPartition; after: number; first: number }[] = [];
    due.forEach((p, i) => {
      const slice = slices[i];
      // A partition that moved meanwhile (left the stream, or skipped ahead by a commit) reads again from where it is now.
      if (!slice || !p.active || this.partitions.get(p.key) !== p || p.read !== readFrom[i]) return;
      const head = slice.segments[0];
      const tail = slice.segments[slice.segments.length - 1];
      if (head === undefined || tail === undefined) {
        // Nothing new as of the read; a notice heard meanwhile may announce events stored after it ran.
        if (p.notices === noticesBefore[i] && p.knownNext - 1 > p.read) p.knownNext = p.read + 1;
        return;
      }
      if (head.first > p.read + 1 && p.bufferedEvents === 0) {
        // Retention or compaction removed the events the stream would read next: continue at the first
        // kept one. Nothing was sent of the offsets in between, so nothing of them is in flight.
        jumps.push({ p, after: p.read, first: head.first });
        p.sent = head.first - 1;
      }
      let bytes = 0;
      const flags = matches[i];
      let flagAt = 0;
      for (const segment of slice.segments) {
        bytes += segment.data.length;
        if (flags !== undefined) this.addMatching(p, segment, flags, flagAt, perEvent);
        else if (perEvent) this.addEvents(p, segment);
        else this.buffers.push(p, segment);
        flagAt += segment.count;
      }
      p.entryBytes = bytes / slice.segments.length;
      p.read = tail.first + tail.count - 1;
      // A read cut at readEntries leaves more behind: read again without waiting for a notice.
      if (slice.more) p.knownNext = Number.POSITIVE_INFINITY;
      else if (p.knownNext - 1 <= p.read) p.knownNext = p.read + 1;
    });
    if (jumps.length > 0 && this.policy.passedOver !== undefined) await this.reportJumps(jumps, this.policy.passedOver.bind(this.policy));
  }

  /**
   * Tells the policy of each jump over removed offsets, with the events of it that retention removed:
   * the offsets of the jump below the partition's oldest retained offset (compaction never moves that,
   * so offsets it removed count as none). When the range cannot be read (Redis failing) the jump is
   * reported with 0 expired events rather than failing a read that already filled the buffers.
   */
  private async reportJumps(jumps: readonly { p: StreamPartition; after: number; first: number }[], passedOver: (p: StreamPartition, expired: number) => void): Promise<void> {
    const oldest = await Promise.all(
      jumps.map(({ p }) =>
        this.logs.ranges(p.eventType, p.timelines, [p.partition]).then(
          (ranges) => ranges[0]?.oldest ?? 0,
          () => 0,
        ),
      ),
    );
    jumps.forEach(({ p, after, first }, i) => {
      if (!p.active || this.partitions.get(p.key) !== p) return;
      const expired = Math.max(0, Math.min(first, oldest[i] ?? 0) - 1 - after);
      p.expiredEvents += expired;
      passedOver(p, expired);
    });
  }

  /**
   * True when `p` has known data to read and room for it, given `buffered` bytes (the stream's read
   * buffers plus the client socket's): then the loop goes round again at once.
   */
  hasNews(p: StreamPartition, buffered: number): boolean {
    return p.knownNext - 1 > p.read && p.bufferedEvents < this.rules.batchLimit && buffered < this.config.maxStreamBufferBytes;
  }

  /**
   * When `p`'s next safety-net read is due (ms, `performance.now()`); never while {@link fill} would not
   * read it: its next batch is already buffered (a stream held by `max_uncommitted_events` until a
   * commit) or the stream's buffers are at `consumption.maxStreamBufferBytes`. The commit or the drain
   * that lets it read again wakes the loop. (A due time in the past there made a waiting stream's loop
   * run every millisecond: 1.7 ms of CPU per second per stream, most of what 200 subscriptions cost in the
   * `fan-out` bench.)
   * @param buffered bytes the stream holds now (unsent frames and buffered events)
   */
  pollDeadline(p: StreamPartition, buffered: number): number {
    if (p.bufferedEvents >= this.rules.batchLimit || buffered >= this.config.maxStreamBufferBytes) return Number.POSITIVE_INFINITY;
    return p.lastReadAt + this.pollIntervalOf(p);
  }

  /**
   * Takes each event type's current timelines and (re)subscribes partitions to the notices of their
   * active timeline: after a switch, publishes land on the new timeline and wake readers there.
   * @throws BrokerError 503 when a timeline's storage cannot be opened
   */
  private async refreshTimelines(): Promise<void> {
    const current = new Map<string, TimelineMap>();
    for (const p of this.partitions.values()) {
      let timelines = current.get(p.eventType);
      if (timelines === undefined) {
        timelines = (await this.eventTypes.get(p.eventType))?.timelines ?? p.timelines;
        current.set(p.eventType, timelines);
      }
      p.timelines = timelines;
      if (p.listening === timelines.active.order) continue;
      const { wakeups, channel, order } = await this.logs.notices(p.eventType, timelines, p.partition);
      if (this.partitions.get(p.key) !== p) continue;
      p.unlisten();
      p.listening = order;
      p.unlisten = wakeups.listen(channel, (next) => {
        p.knownNext = next;
        p.notices++;
        this.wake();
      });
      p.noticesLive = () => wakeups.live(channel);
      // A publish may have landed on the new timeline before the subscription: read at once.
      p.knownNext = Number.POSITIVE_INFINITY;
    }
  }

  /** Splits a segment into single events, leaving out those the policy does not accept. */
  private addEvents(p: StreamPartition, segment: EventSegment): void {
    let position = 0;
    for (let i = 0; i < segment.count; i++) {
      const newline = segment.data.indexOf(NEWLINE, position);
      const end = newline < 0 ? segment.data.length : newline;
      const data = segment.data.subarray(position, end);
      position = end + 1;
      const offset = segment.first + i;
      if (this.policy.accept !== undefined && !this.policy.accept(p, data.toString())) this.buffers.skip(p, offset);
      else this.buffers.push(p, { first: offset, count: 1, data });
    }
  }

  /**
   * Buffers the events of `segment` its filter matched (`flags[at + i]` for its event `i`) and passes over
   * the others. Matching events in a row travel as one segment unless `perEvent` (then each goes through
   * `accept` on its own).
   */
  private addMatching(p: StreamPartition, segment: EventSegment, flags: Uint8Array, at: number, perEvent: boolean): void {
    let position = 0;
    // The run of matching events being gathered: its first offset and byte, and its count.
    let runFirst = 0;
    let runStart = 0;
    let runCount = 0;
    const flush = (end: number): void => {
      if (runCount > 0) this.buffers.push(p, { first: runFirst, count: runCount, data: segment.data.subarray(runStart, end) });
      runCount = 0;
    };
    for (let i = 0; i < segment.count; i++) {
      const newline = segment.data.indexOf(NEWLINE, position);
      const end = newline < 0 ? segment.data.length : newline;
      const offset = segment.first + i;
      if (flags[at + i] !== 1) {
        flush(position - 1);
        this.buffers.skip(p, offset);
      } else if (perEvent) {
        const data = segment.data.subarray(position, end);
        if (this.policy.accept !== undefined && !this.policy.accept(p, data.toString())) this.buffers.skip(p, offset);
        else this.buffers.push(p, { first: offset, count: 1, data });
      } else if (runCount++ === 0) {
        runFirst = offset;
        runStart = position;
      }
      position = end + 1;
    }
    flush(position - 1);
  }

  /** ms between safety-net reads of a partition: slower while its notices reach this node. */
  private pollIntervalOf(p: StreamPartition): number {
    return p.noticesLive() ? this.config.pollIntervalMs * IDLE_POLL_FACTOR : this.config.pollIntervalMs;
  }
}

const NEWLINE = 0x0a;
/** Bytes one partition read aims at (at least one entry is always read). */
const READ_TARGET_BYTES = 1 << 20;
