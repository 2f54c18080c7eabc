import type { StreamParameters } from '../../../domain/stream/stream-parameters.js';
import type { EventSegment } from '../../../storage/partition-store.js';
import type { StreamPartition } from './stream-partition.js';

/** What batch cutting asks of the stream's policy (part of `StreamPolicy`, event-stream.ts). */
export interface CutPolicy {
  /** Events the stream may still send right now over all its partitions (`Infinity` = no limit). */
  allowance(): number;
  /**
   * Most events the next batch of one partition may carry (absent = no limit of its own): a subscription
   * partition in dead-letter search sends one event per batch, each once the previous one is committed.
   */
  partitionAllowance?(partition: StreamPartition): number;
  /** Called after a batch with `count` events of `partition` went out; `partition.sent` is already advanced. */
  sent(partition: StreamPartition, count: number): void;
  /** Called when the cursor of `partition` moved past skipped events only (`partition.sent` already moved). */
  skipped?(partition: StreamPartition): void;
}

/** The stream parameters batch cutting follows (docs/consuming.md "Stream parameters"; seconds as in the API). */
export type BatchRules = Pick<StreamParameters, 'batchLimit' | 'batchFlushTimeoutSeconds' | 'batchTimespanSeconds' | 'streamKeepAliveLimit'>;

/**
 * Where cut batches go, one call per batch in the order they are cut. A batch's cursor is its
 * partition's `sent` at the time of the call (and, for a stream-wide cursor, every other partition's
 * `sent` at that time), so the receiver frames each batch at once (batch-writer.ts).
 */
export interface BatchOutput {
  /** A data batch of `count` events of `partition` (the stored bytes, events joined by `\n`); `partition.sent` is its last event. */
  batch(partition: StreamPartition, events: readonly Buffer[], count: number): void;
  /** An empty batch of `partition` (a keep-alive), its cursor at `partition.sent`. */
  keepAlive(partition: StreamPartition): void;
}

/** What a {@link BatchCutter} works on. */
export interface BatchCutterOptions {
  readonly rules: BatchRules;
  readonly policy: CutPolicy;
  /** The stream's partitions by key (the loop's map; the cutter only reads it). */
  readonly partitions: ReadonlyMap<string, StreamPartition>;
  /** `consumption.maxStreamBufferBytes`: at this many buffered bytes no batch can grow any more. */
  readonly maxBufferBytes: number;
}

/**
 * Batch cutting of one stream, without I/O or clock (docs/consuming.md "Stream parameters", "Keep-alives"):
 * keeps the partitions' read buffers and cuts batches of at most `batch_limit` events, at once when
 * full (at `batch_limit`, at what the policy's allowance — flow control, `stream_limit` — still
 * allows, at the buffer cap, or where an event falls outside `batch_timespan`), otherwise when
 * `batch_flush_timeout` passed since the partition's last batch: a partial batch, or an empty one (a
 * keep-alive). It counts keep-alives in a row for `stream_keep_alive_limit`. Times are passed in (ms,
 * `performance.now()` in the loop).
 */
export class BatchCutter {
  private readonly rules: BatchRules;
  private readonly policy: CutPolicy;
  private readonly partitions: ReadonlyMap<string, StreamPartition>;
  private readonly maxBufferBytes: number;
  /** Bytes in every partition's buffer (kept with each change). */
  private buffered = 0;

  constructor(options: BatchCutterOptions) {
    this.rules = options.rules;
    this.policy = options.policy;
    this.partitions = options.partitions;
    this.maxBufferBytes = options.maxBufferBytes;
  }

  /** Bytes in every partition's read buffer. */
  get bufferedBytes(): number {
    return this.buffered;
  }

  /** Appends read events (one segment: a stream entry, or one event of it) to `p`'s buffer. */
  push(p: StreamPartition, segment: EventSegment): void {
    p.segments.push(segment);
    p.bufferedEvents += segment.count;
    p.bufferBytes += segment.data.length;
    this.buffered += segment.data.length;
    p.skippedThrough = -1;
  }

  /** Records that the event at `offset` of `p` was read and left out: the cursor may move past it. */
  skip(p: StreamPartition, offset: number): void {
    p.skippedThrough = offset;
  }

  /** Drops `p`'s buffered events (and its skipped tail). */
  clear(p: StreamPartition): void {
    this.buffered -= p.bufferBytes;
    p.segments = [];
    p.bufferedEvents = 0;
    p.bufferBytes = 0;
    p.skippedThrough = -1;
  }

  /** Stops counting `p`'s buffer (the partition left the stream; its entry is dropped). */
  release(p: StreamPartition): void {
    this.buffered -= p.bufferBytes;
  }

  /** True when the read buffers hold `maxBufferBytes` or more: reading stopped. */
  atCap(): boolean {
    return this.buffered >= this.maxBufferBytes;
  }

  /** When `p`'s current batch window ends (ms): its partial batch or keep-alive is due then. */
  flushDeadline(p: StreamPartition): number {
    return p.windowStartedAt + this.rules.batchFlushTimeoutSeconds * 1000;
  }

  /**
   * Cuts the batches that are due at time `t` into `out`: full batches at once; at a partition's
   * flush deadline a partial batch or a keep-alive (or, when `final`, everything buffered that the
   * allowance lets out, and no keep-alive).
   * @returns true when every active partition has now sent `stream_keep_alive_limit` keep-alives in a
   * row (never when the limit is 0 or `final`)
   */
  cut(out: BatchOutput, t: number, final: boolean): boolean {
    const { batchLimit, batchFlushTimeoutSeconds, streamKeepAliveLimit } = this.rules;
    const flushMs = batchFlushTimeoutSeconds * 1000;
    for (const p of this.partitions.values()) {
      if (!p.active) continue;
      // A batch is full at batch_limit, at what flow control or stream_limit still allow, or when an
      // event falls outside batch_timespan.
      for (let full = this.fullBatch(p); full > 0; full = this.fullBatch(p)) this.emit(out, p, full, t);
      if (!final && t - p.windowStartedAt < flushMs) continue;
      let count = Math.min(p.bufferedEvents, batchLimit, this.allowanceOf(p));
      if (count === 0 && !final) {
        if (p.bufferedEvents === 0 && p.skippedThrough > p.sent) {
          // Only skipped events since the last batch: the cursor moves past them.
          p.sent = p.skippedThrough;
          p.skippedThrough = -1;
          this.policy.skipped?.(p);
        }
        // Keep-alive. A stream paused by flow control with events waiting does not count it.
        out.keepAlive(p);
        if (p.bufferedEvents === 0) p.keepAlives += 1;
        p.windowStartedAt = t;
      }
      while (count > 0) {
        this.emit(out, p, count, t);
        count = final ? Math.min(p.bufferedEvents, batchLimit, this.allowanceOf(p)) : 0;
      }
    }
    if (streamKeepAliveLimit === 0 || final) return false;
    const active = [...this.partitions.values()].filter((p) => p.active);
    return active.length > 0 && active.every((p) => p.keepAlives >= streamKeepAliveLimit);
  }

  /** Events of a batch of `p` that is complete now (0 = none). */
  fullBatch(p: StreamPartition): number {
    const limit = Math.min(this.rules.batchLimit, this.allowanceOf(p));
    if (limit <= 0 || p.bufferedEvents === 0) return 0;
    // At the buffer cap no batch can grow any more: what is buffered goes now.
    if (p.bufferedEvents >= limit || this.atCap()) {
      if (p.bufferedEvents < limit) return p.bufferedEvents;
      const closedBySpan = this.spanBoundary(p, limit);
      return closedBySpan > 0 ? closedBySpan : limit;
    }
    return this.spanBoundary(p, p.bufferedEvents);
  }

  /** Events `p`'s next batch may carry now: the stream's allowance and the partition's own. */
  private allowanceOf(p: StreamPartition): number {
    const own = this.policy.partitionAllowance?.(p) ?? Number.POSITIVE_INFINITY;
    return Math.min(this.policy.allowance(), own);
  }

  /**
   * `batch_timespan`: the index of the first of the first `within` buffered events received more than
   * the timespan after the first one (so the batch before it is closed), or 0.
   */
  private spanBoundary(p: StreamPartition, within: number): number {
    const spanMs = this.rules.batchTimespanSeconds * 1000;
    if (spanMs === 0) return 0;
    // With a timespan, segments hold one event each (see PartitionReader.fill).
    const start = receivedAt(p.segments[0]?.data);
    if (Number.isNaN(start)) return 0;
    for (let i = 1; i < within && i < p.segments.length; i++) {
      if (receivedAt(p.segments[i]?.data) - start > spanMs) return i;
    }
    return 0;
  }

  /** Hands `out` one data batch of the first `count` buffered events of `p` and advances the partition. */
  private emit(out: BatchOutput, p: StreamPartition, count: number, t: number): void {
    const parts: Buffer[] = [];
    let left = count;
    while (left > 0) {
      const segment = p.segments[0];
      if (segment === undefined) break;
      if (segment.count <= left) {
        p.segments.shift();
        parts.push(segment.data);
        p.bufferBytes -= segment.data.length;
        this.buffered -= segment.data.length;
        left -= segment.count;
        p.sent = segment.first + segment.count - 1;
      } else {
        let position = 0;
        for (let i = 0; i < left; i++) position = segment.data.indexOf(NEWLINE, position) + 1;
        parts.push(segment.data.subarray(0, position - 1));
        p.segments[0] = { first: segment.first + left, count: segment.count - left, data: segment.data.subarray(position) };
        p.bufferBytes -= position;
        this.buffered -= position;
        p.sent = segment.first + left - 1;
        left = 0;
      }
    }
    p.bufferedEvents -= count - left;
    if (p.bufferedEvents === 0 && p.skippedThrough > p.sent) {
      p.sent = p.skippedThrough;
      p.skippedThrough = -1;
    }
    out.batch(p, parts, count - left);
    p.keepAlives = 0;
    p.windowStartedAt = t;
    this.policy.sent(p, count - left);
  }
}

const NEWLINE = 0x0a;

/** `metadata.received_at` of an event (its stored JSON text) in ms since the epoch, NaN when absent or unreadable. */
function receivedAt(data: Buffer | undefined): number {
  if (data === undefined) return Number.NaN;
  try {
    const metadata = (JSON.parse(data.toString()) as { metadata?: { received_at?: unknown } }).metadata;
    return typeof metadata?.received_at === 'string' ? Date.parse(metadata.received_at) : Number.NaN;
  } catch {
    return Number.NaN;
  }
}
