import { randomUUID } from 'node:crypto';
import type { TimelineMap } from '../../../domain/storages/timeline.js';
import type { EventSegment } from '../../../storage/partition-store.js';
import { offsetField } from '../../../storage/subscription-state-store.js';

/** Where a partition enters a stream (see {@link StreamPartition}). */
export interface StreamPartitionStart {
  readonly eventType: string;
  readonly partition: string;
  /** The event type's timelines when the partition joins. */
  readonly timelines: TimelineMap;
  /** Internal offset the stream starts after (-1 = before the first event). */
  readonly start: number;
  /** When the partition's first batch window starts (ms, `performance.now()`). */
  readonly now: number;
}

/**
 * One partition a stream reads: positions are offsets (last consumed = -1 before the first event).
 * The reader (partition-reader.ts) fills it, the cutter (batch-cutter.ts) empties it into batches.
 */
export class StreamPartition {
  readonly eventType: string;
  readonly partition: string;
  /** The event type's timelines, refreshed every round (a timeline switch adds one). */
  timelines: TimelineMap;
  /** Last offset handed to the client (or the start cursor). */
  sent: number;
  /** Last offset read from Redis into `segments`. */
  read: number;
  /** Read events not yet sent, as raw bytes (ascending offsets; gaps where the policy skipped events). */
  segments: EventSegment[] = [];
  /** Events in `segments`. */
  bufferedEvents = 0;
  /** Bytes in `segments`; they count against the stream's cap. */
  bufferBytes = 0;
  /** Average size of the stream entries read last (bytes), to size the next read. */
  entryBytes = 0;
  /** Highest offset read and skipped after the last buffered event (-1 = none): the cursor may move there. */
  skippedThrough = -1;
  /**
   * Events retention removed before the stream read them, passed over since the partition's last batch:
   * the next batch of the partition reports them (`info.expired_events` on subscription streams), then 0.
   */
  expiredEvents = 0;
  /** When the current batch window started (ms, `performance.now()`): reset by every batch sent. */
  windowStartedAt: number;
  /** Empty batches sent in a row. */
  keepAlives = 0;
  /** `next` offset announced by the last notice, or Infinity before the first read (read at once). */
  knownNext = Number.POSITIVE_INFINITY;
  /**
   * Notices heard so far (each one sets `knownNext`). A read that comes back empty may lower `knownNext`
   * only when no notice arrived while it was in flight: its reply can reach the node after the notice of
   * a publish that Redis ran after the read.
   */
  notices = 0;
  lastReadAt = Number.NEGATIVE_INFINITY;
  /** False while the partition leaves the stream (reassigning): nothing is read or sent. */
  active = true;
  unlisten: () => void = () => undefined;
  /** Whether the partition's notices reach this node now (then its safety-net poll is slower). */
  noticesLive: () => boolean = () => false;
  /** The active timeline whose notices the partition listens to (0 = not listening yet). */
  listening = 0;
  /** `<event type>:<partition>`, the partition's key in the stream and in a subscription's offsets. */
  readonly key: string;

  constructor(start: StreamPartitionStart) {
    this.eventType = start.eventType;
    this.partition = start.partition;
    this.timelines = start.timelines;
    this.key = offsetField(start.eventType, start.partition);
    this.sent = start.start;
    this.read = start.start;
    this.windowStartedAt = start.now;
  }
}

/** The partitions a stream reads (active ones), as sorted `<event type>:<partition>` strings (for logs). */
export function heldPartitions(partitions: Iterable<StreamPartition>): string[] {
  return [...partitions].filter((p) => p.active).map((p) => `${p.eventType}:${p.partition}`).sort();
}

/**
 * A subscription batch's cursor as JSON text (docs/consuming.md "Commits"): `partition`, `offset` (the
 * wire form of internal offset `offset` on `timelines`), `event_type` and a fresh `cursor_token`.
 */
export function subscriptionCursorText(eventType: string, partition: string, timelines: TimelineMap, offset: number): string {
  return `{"partition":${JSON.stringify(partition)},"offset":"${timelines.format(partition, offset)}","event_type":${JSON.stringify(eventType)},"cursor_token":"${randomUUID()}"}`;
}
