import { partitionIds } from '../domain/event-type/event-type.js';
import { parseOffset, shiftOffset, type PartitionRange } from '../domain/cursor/offsets.js';
import type { PartitionRecord } from '../domain/event-type/partition-record.js';
import type { TimelineMap } from '../domain/storages/timeline.js';
import { checkCursorBody, CursorDistancesInputSchema, CursorsLagInputSchema, PartitionCursorsSchema, repeatedPartition, ShiftedCursorsInputSchema } from '../domain/cursor/cursor-input.js';
import { checkInput } from '../domain/json/input-check.js';
import type { RuleResult } from '../domain/event-type/rule-problems.js';
import { brokerError, invalidInput } from '../errors/catalog.js';
import { parseUntrustedJson } from '../domain/json/json-limits.js';
import type { EventTypeStore, StoredEventType } from '../storage/event-type-store.js';
import type { PartitionLogs } from '../storage/partition-logs.js';
import { parseSeekTime } from '../domain/cursor/time-seek.js';

/** A cursor as clients send it (docs/concepts.md "Offsets and cursors"). */
export interface Cursor {
  partition: string;
  offset: string;
}

/** A cursor and how many events to move it by (`POST /event-types/{name}/shifted-cursors`; docs/consuming.md "Cursor tools"). */
export interface ShiftedCursor extends Cursor {
  /** Events; negative moves back. */
  shift: number;
}

/**
 * Partition records and cursor arithmetic: partitions, cursor-distances, cursors-lag, shifted cursors and
 * `unconsumed_events` on the partitions resource (docs/consuming.md "Cursor tools"; offsets and cursors:
 * docs/concepts.md "Offsets and cursors"). Every answer costs one counter read per partition:
 * offsets are dense (one sequence per partition across its timelines), so distance, lag and shifts
 * are integer arithmetic.
 */
export class CursorService {
  constructor(
    private readonly eventTypes: EventTypeStore,
    /** Partitions over all timelines: offsets and distances span timeline switches (docs/concepts.md "Timelines and storages"). */
    private readonly partitions: PartitionLogs,
  ) {}

  /**
   * All partitions of an event type with their offsets, in partition order. With `cursors` (the
   * `cursors` query parameter: a JSON array of cursors, at most one per partition), each partition
   * named there also gets `unconsumed_events` after its cursor, as `cursors-lag` counts them; an empty
   * text or `[]` is the same as none.
   * @throws BrokerError 404 for an unknown event type; 422 when `cursors` is not a JSON array of
   *   cursors, names a partition twice, or holds an invalid cursor (unknown partition, malformed,
   *   expired or beyond the newest offset)
   */
  async list(name: string, cursors?: string): Promise<PartitionRecord[]> {
    const given = cursors === undefined || cursors === '' ? [] : parseCursorList(cursors);
    const eventType = await this.load(name);
    const ranges = await this.rangesOf(eventType);
    const lags = new Map(given.map((cursor) => [cursor.partition, this.lagOf(cursor, ranges, eventType)]));
    return [...ranges].map(([id, range]) => lags.get(id) ?? record(id, range, eventType.timelines));
  }

  /**
   * One partition. With `consumedOffset` (the `consumed_offset` query parameter) it also gets
   * `unconsumed_events` after that offset, as `cursors-lag` counts them.
   * @throws BrokerError 404 for an unknown event type, or an unknown partition without `consumedOffset`;
   *   422 when the cursor `{partition, consumedOffset}` is invalid (unknown partition, malformed,
   *   expired or beyond the newest offset)
   */
  async get(name: string, partition: string, consumedOffset?: string): Promise<PartitionRecord> {
    const eventType = await this.load(name);
    if (consumedOffset !== undefined) return this.lagOf({ partition, offset: consumedOffset }, await this.rangesOf(eventType), eventType);
    if (!partitionIds(eventType.topology).includes(partition)) throw brokerError('PARTITION_NOT_FOUND');
    const [range] = await this.partitions.ranges(name, eventType.timelines, [partition]);
    return record(partition, range as PartitionRange, eventType.timelines);
  }

  /**
   * Distances between cursor pairs: events after `initial_cursor` up to and including `final_cursor`.
   * @param body `CursorDistancesInputSchema` (src/domain/cursor/cursor-input.ts)
   * @throws BrokerError 400 when the body is not an array, 422 for too many pairs, an item that is not
   *   a pair of cursors, or an invalid or expired cursor
   */
  async distances(name: string, body: unknown): Promise<{ initial_cursor: Cursor; final_cursor: Cursor; distance: number }[]> {
    const queries = checked(checkCursorBody(CursorDistancesInputSchema, body, 'body')).map((q) => ({ initial: cursorOf(q.initial_cursor), final: cursorOf(q.final_cursor) }));
    const eventType = await this.load(name);
    const ranges = await this.rangesOf(eventType);
    return queries.map(({ initial, final }) => ({
      initial_cursor: initial,
      final_cursor: final,
      distance: resolve(final, ranges, eventType).offset - resolve(initial, ranges, eventType).offset,
    }));
  }

  /**
   * Unconsumed events after each cursor (zero at the newest offset).
   * @param body `CursorsLagInputSchema` (src/domain/cursor/cursor-input.ts)
   * @throws BrokerError 400 when the body is not an array, 422 for too many cursors, an item that is
   *   not a cursor, or an invalid or expired cursor
   */
  async lag(name: string, body: unknown): Promise<PartitionRecord[]> {
    const cursors = checked(checkCursorBody(CursorsLagInputSchema, body, 'body'));
    const eventType = await this.load(name);
    const ranges = await this.rangesOf(eventType);
    return cursors.map((cursor) => this.lagOf(cursor, ranges, eventType));
  }

  /**
   * Each cursor moved by its `shift` events (negative: back), across timelines: the answer names the
   * timeline holding the new position, as any offset the broker writes. A missing
   * `shift` is 0: that cursor stays where it is. Answers `[{partition, offset}]` in request order.
   * @param body `ShiftedCursorsInputSchema` (src/domain/cursor/cursor-input.ts)
   * @throws BrokerError 400 when the body is not an array; 404 for an unknown event type; 422 for an
   *   item that is not a cursor with an integer `shift`, an invalid or expired cursor, or a result before
   *   the oldest available offset (just before the oldest event, like `BEGIN`, is still available) or
   *   after the newest one
   */
  async shift(name: string, body: unknown): Promise<Cursor[]> {
    const items = checked(checkCursorBody(ShiftedCursorsInputSchema, body, 'body')).map((c): ShiftedCursor => ({ partition: c.partition, offset: c.offset, shift: c.shift ?? 0 }));
    const eventType = await this.load(name);
    const ranges = await this.rangesOf(eventType);
    return items.map(({ partition, offset: text, shift }) => {
      const cursor = { partition, offset: text };
      const { offset, range } = resolve(cursor, ranges, eventType);
      const moved = shiftOffset(offset, shift, range);
      if (!moved.ok) throw brokerError('INVALID_SHIFT', { cursor: JSON.stringify(cursor), reason: moved.reason });
      return { partition: cursor.partition, offset: eventType.timelines.format(cursor.partition, moved.offset) };
    });
  }

  /**
   * One cursor per partition, in partition order, from which a stream starts with the first event
   * received at or after `time` (docs/consuming.md "Seeking by time"): the offset before that event;
   * the offset before the oldest retained event (as `BEGIN`) when every retained event is later; the
   * newest offset when none is at or after it. Exact to the millisecond by `metadata.received_at`;
   * category `undefined` events (no `received_at`) at the one-second granularity of the time index.
   * @param time RFC 3339 date-time (the route checked its form)
   * @throws BrokerError 404 for an unknown event type; 422 when `time` names no moment; 503 when a storage fails
   */
  async atTime(name: string, time: string): Promise<Cursor[]> {
    const atMs = parseSeekTime(time);
    if (atMs === undefined) throw brokerError('UNPROCESSABLE', { reason: `Field "time" must be an RFC 3339 date-time: ${JSON.stringify(time)}` });
    const eventType = await this.load(name);
    const ranges = await this.rangesOf(eventType);
    const exact = eventType.record.category !== 'undefined';
    return Promise.all(
      [...ranges].map(async ([partition, range]) => ({
        partition,
        offset: eventType.timelines.format(partition, await this.partitions.cursorAtTime(name, eventType.timelines, partition, range, atMs, exact)),
      })),
    );
  }

  /** The partition record of a cursor's partition with the events after it. @throws BrokerError 422 for an invalid cursor */
  private lagOf(cursor: Cursor, ranges: ReadonlyMap<string, PartitionRange>, eventType: StoredEventType): PartitionRecord {
    const { offset, range } = resolve(cursor, ranges, eventType);
    return { ...record(cursor.partition, range, eventType.timelines), unconsumed_events: Math.max(0, range.newest - offset) };
  }

  private async load(name: string): Promise<StoredEventType> {
    const eventType = await this.eventTypes.get(name);
    if (!eventType) throw brokerError('EVENT_TYPE_NOT_FOUND', { name });
    return eventType;
  }

  private async rangesOf(eventType: StoredEventType): Promise<Map<string, PartitionRange>> {
    const ids = partitionIds(eventType.topology);
    const ranges = await this.partitions.ranges(eventType.record.name, eventType.timelines, ids);
    return new Map(ids.map((id, i) => [id, ranges[i] as PartitionRange]));
  }
}

function record(partition: string, range: PartitionRange, timelines: TimelineMap): PartitionRecord {
  return { partition, oldest_available_offset: timelines.format(partition, range.oldest), newest_available_offset: timelines.format(partition, range.newest) };
}

/** Just the cursor of a checked input (unknown fields are not echoed). */
function cursorOf(c: Cursor): Cursor {
  return { partition: c.partition, offset: c.offset };
}

/** The value of a body check. @throws BrokerError 400/422 with the body's problems */
function checked<T>(result: RuleResult<T>): T {
  if (!result.ok) throw invalidInput(result.status, result.details, result.errors);
  return result.value;
}

/**
 * The cursors of the `cursors` query parameter of `GET /event-types/{name}/partitions`: a JSON array
 * of cursors (`PartitionCursorsSchema`), each partition at most once. @throws BrokerError 422 (the
 * reference's answer for a malformed parameter as well as for an invalid cursor)
 */
function parseCursorList(text: string): Cursor[] {
  const parsed = parseUntrustedJson(Buffer.from(text), { maxDepth: 3 });
  if (!parsed.ok) throw brokerError('UNPROCESSABLE', { reason: `malformed cursors: ${parsed.reason}` });
  // Checked as parsed JSON (no coercion of numbers to strings); the answer names the query parameter.
  const list = checkInput(PartitionCursorsSchema, { cursors: parsed.value }, 'body');
  if (!list.ok) throw invalidInput(422, list.problems.map((p) => p.detail), list.problems, 'query');
  const twice = repeatedPartition(list.value.cursors);
  if (twice !== undefined) throw brokerError('UNPROCESSABLE', { reason: `duplicate partition ids provided in cursors: "${twice}"` });
  return list.value.cursors;
}

/**
 * The last consumed offset a cursor stands for, and its partition's range.
 * @throws BrokerError 422 naming the cursor and the reason (unknown partition, malformed, expired, beyond the newest)
 */
function resolve(cursor: Cursor, ranges: ReadonlyMap<string, PartitionRange>, eventType: StoredEventType): { offset: number; range: PartitionRange } {
  const range = ranges.get(cursor.partition);
  if (!range) throw brokerError('INVALID_CURSOR', { cursor: JSON.stringify(cursor), reason: 'partition not found' });
  const parsed = parseOffset(cursor.offset);
  if (!parsed) throw brokerError('INVALID_CURSOR', { cursor: JSON.stringify(cursor), reason: 'malformed offset' });
  const resolved = eventType.timelines.resolve(parsed, cursor.partition, range);
  if (!resolved.ok) throw brokerError('INVALID_CURSOR', { cursor: JSON.stringify(cursor), reason: resolved.reason });
  return { offset: resolved.offset, range };
}
