import { Type, type Static } from '@sinclair/typebox';
import { formatOffset, MAX_OFFSET, OFFSET_EXPIRED, type ParsedOffset, type PartitionRange } from '../cursor/offsets.js';
import { NODE_STORAGE_ID } from './storage.js';
import { Closed, Timestamp, type DeepReadonly } from '../json/wire-parts.js';

/**
 * Timelines (docs/concepts.md "Timelines and storages").
 *
 * An event type's events live on a sequence of timelines, each on one storage; publishing goes to the
 * newest (active) one. Inside the broker a partition's offsets are ONE dense sequence over all its
 * timelines: a new timeline's partition continues where the previous one ended (its first event gets
 * the previous timeline's last offset + 1), so committed offsets, lag and distances stay plain integer
 * arithmetic. On the wire an offset names its timeline and counts from that timeline's start, as the
 * reference does: `001-0002-000000000000000000` is the first event of timeline 2,
 * `001-0002--1` the position just before it (the same position as the last event of timeline 1).
 * This module maps between the two and finds the timeline that holds an offset.
 */

/** One timeline as stored beside its event type (field `timelines` of the event type hash). */
export interface StoredTimeline {
  /** uuid */
  readonly id: string;
  /** 1, 2, 3, ... (the `<timeline>` part of offsets, 4 hex digits on the wire) */
  readonly order: number;
  /** The storage holding this timeline's partitions (docs/operations.md "Storages and timelines"). */
  readonly storageId: string;
  /** RFC 3339 */
  readonly createdAt: string;
  /** RFC 3339: when publishing moved to this timeline. */
  readonly switchedAt: string;
  /** RFC 3339: when its data was deleted (closed timelines only, after their retention). */
  readonly cleanedUpAt?: string;
  /**
   * Per partition (index = partition id), the internal offset of the first event on this timeline.
   * Partitions beyond the array (created later by repartitioning) start at 0.
   */
  readonly firstOffsets: readonly number[];
  /**
   * Set when a newer timeline took over: per partition, the internal offset of the last event written
   * to this timeline's storage (first offset - 1 when none). Partitions beyond the array did not exist
   * while this timeline was active.
   */
  readonly lastOffsets?: readonly number[];
}

/** The timeline as served (docs/concepts.md "Timelines and storages"; `GET /event-types/{name}/timelines`). */
export const TimelineSchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    event_type: Type.String(),
    order: Type.Integer({ minimum: 1 }),
    storage_id: Type.String(),
    topic: Type.String(),
    created_at: Timestamp,
    switched_at: Timestamp,
    cleaned_up_at: Type.Optional(Timestamp),
    /** The last offset per partition in this timeline's storage (-1 = unused; 0 = one event). Closed timelines only. */
    latest_position: Type.Optional(Type.Object({ offsets: Type.Array(Type.Integer({ minimum: -1 })) }, Closed)),
  },
  Closed,
);
/** The timeline as served, derived from {@link TimelineSchema}. */
export type TimelineView = DeepReadonly<Static<typeof TimelineSchema>>;

/** The timeline every event type had before timelines existed: order 1 on the node's storage. */
export function legacyTimeline(createdAt: string): StoredTimeline {
  return { id: '00000000-0000-4000-8000-000000000001', order: 1, storageId: NODE_STORAGE_ID, createdAt, switchedAt: createdAt, firstOffsets: [] };
}

/** How a timeline is served; `topic` names its partition logs' keys (`<key prefix>{et:<name>:<partition>}:t<order>`). */
export function timelineView(name: string, keyPrefix: string, t: StoredTimeline): TimelineView {
  return {
    id: t.id,
    event_type: name,
    order: t.order,
    storage_id: t.storageId,
    topic: `${keyPrefix}{et:${name}:*}:t${t.order}`,
    created_at: t.createdAt,
    switched_at: t.switchedAt,
    ...(t.cleanedUpAt !== undefined ? { cleaned_up_at: t.cleanedUpAt } : {}),
    ...(t.lastOffsets !== undefined ? { latest_position: { offsets: t.lastOffsets.map((last, p) => last - firstOffset(t, p)) } } : {}),
  };
}

/** The internal offset of the first event of partition `p` (index) on timeline `t`. */
export function firstOffset(t: StoredTimeline, p: number): number {
  return t.firstOffsets[p] ?? 0;
}

/**
 * The timelines of one event type, oldest first, with the lookups streams, cursors and publishing
 * need. Immutable: a switch produces a new map (the event type is re-read from the cache).
 */
export class TimelineMap {
  /** Oldest first; never empty. */
  readonly all: readonly StoredTimeline[];

  /** @throws Error when `timelines` is empty or not ordered 1, 2, 3, ... (a registry bug) */
  constructor(timelines: readonly StoredTimeline[]) {
    if (timelines.length === 0) throw new Error('an event type has at least one timeline');
    timelines.forEach((t, i) => {
      if (i > 0 && t.order !== (timelines[i - 1] as StoredTimeline).order + 1) throw new Error(`timeline orders must follow each other, got ${timelines.map((x) => x.order).join(',')}`);
    });
    this.all = timelines;
  }

  /** The timeline publishing writes to (the newest). */
  get active(): StoredTimeline {
    return this.all[this.all.length - 1] as StoredTimeline;
  }

  /** The timeline with this order, or undefined. */
  byOrder(order: number): StoredTimeline | undefined {
    const first = (this.all[0] as StoredTimeline).order;
    return this.all[order - first];
  }

  /** Whether partition `p` (index) existed while timeline `t` was active. */
  holds(t: StoredTimeline, p: number): boolean {
    return t.lastOffsets === undefined || p < t.lastOffsets.length;
  }

  /** The timelines that hold partition `p` and still have their data, oldest first (the active one always). */
  live(p: number): StoredTimeline[] {
    return this.all.filter((t) => t === this.active || (t.cleanedUpAt === undefined && this.holds(t, p)));
  }

  /**
   * The timeline that holds the event at internal offset `offset` of partition `p`: the newest
   * timeline holding `p` whose first offset is at or below it; the first timeline holding `p` for
   * offsets before any event (e.g. -1).
   */
  timelineOf(p: number, offset: number): StoredTimeline {
    const holding = this.all.filter((t) => this.holds(t, p));
    let found = holding[0] ?? this.active;
    for (const t of holding) if (firstOffset(t, p) <= offset) found = t;
    return found;
  }

  /** The wire form of internal offset `offset` of partition `p`, e.g. `001-0002-000000000000000003`. */
  format(partition: string, offset: number): string {
    const p = Number(partition);
    const t = this.timelineOf(p, offset);
    return formatOffset(t.order, offset - firstOffset(t, p));
  }

  /**
   * Resolves a parsed cursor of partition `partition` to an internal "last consumed" offset, checking
   * it against the partition's available range (docs/concepts.md "Offsets and cursors": expired, beyond the
   * newest, unknown timeline are invalid). `BEGIN` is just before the oldest available event.
   */
  resolve(parsed: ParsedOffset, partition: string, range: PartitionRange): { ok: true; offset: number } | { ok: false; reason: string } {
    if (parsed.kind === 'begin') return { ok: true, offset: range.oldest - 1 };
    const p = Number(partition);
    const { timeline: order, offset: local } = parsed.position;
    const t = this.byOrder(order);
    if (t === undefined || !this.holds(t, p)) return { ok: false, reason: `timeline ${order} does not exist` };
    const offset = firstOffset(t, p) + local;
    if (offset > MAX_OFFSET) return { ok: false, reason: 'offset is beyond the newest available offset' };
    const last = t.lastOffsets?.[p];
    if (last !== undefined && offset > last) return { ok: false, reason: `offset is beyond the end of timeline ${order}` };
    if (offset < range.oldest - 1) return { ok: false, reason: OFFSET_EXPIRED };
    if (offset > range.newest) return { ok: false, reason: 'offset is beyond the newest available offset' };
    return { ok: true, offset };
  }

  /**
   * The timeline to read after internal offset `after` of partition `p`: the one holding `after + 1`.
   * `end` is that timeline's last offset when it is closed (a read that reaches it continues on the next).
   */
  readAt(p: number, after: number): { timeline: StoredTimeline; end?: number } {
    const t = this.timelineOf(p, after + 1);
    const end = t.lastOffsets?.[p];
    return end === undefined ? { timeline: t } : { timeline: t, end };
  }
}

/** The map of a topology's timelines; topologies stored before timelines existed have timeline 1 on the node storage. */
export function timelineMapOf(timelines: readonly StoredTimeline[] | undefined, createdAt: string): TimelineMap {
  return new TimelineMap(timelines !== undefined && timelines.length > 0 ? timelines : [legacyTimeline(createdAt)]);
}

/**
 * The body of `POST /event-types/{name}/timelines` (docs/operations.md "Storages and timelines"): the storage the event
 * type switches to. A body that is not an object is a 400; a missing, empty or non-string `storage_id`
 * a 422 (whether that storage is registered is looked up by the service, 422 too).
 */
export const TimelineInputSchema = Type.Object(
  { storage_id: Type.String({ minLength: 1, 'x-status': 422, description: 'the id of a registered storage' }) },
  { 'x-messages': { type: 'must be an object with storage_id' } },
);
