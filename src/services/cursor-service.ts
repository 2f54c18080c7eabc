import { partitionIds } from '../domain/event-type.js';
import { cursorCountProblem, parseOffset, type PartitionRange } from '../domain/offsets.js';
import type { TimelineMap } from '../domain/timeline.js';
import { BrokerError, errors } from '../errors/catalog.js';
import type { EventTypeStore, StoredEventType } from '../storage/event-type-store.js';
import type { PartitionLogs } from '../storage/partition-logs.js';

/** A partition record (spec "Partition record"). */
export interface PartitionRecord {
  partition: string;
  oldest_available_offset: string;
  newest_available_offset: string;
  unconsumed_events?: number;
}

/** A cursor as clients send it (spec "Cursor"). */
export interface Cursor {
  partition: string;
  offset: string;
}

/**
 * Partition records and cursor arithmetic (spec "Event type registry": partitions, cursor-distances,
 * cursors-lag; WIRE.md "Offsets and cursors"). Every answer costs one counter read per partition:
 * offsets are dense, so distance and lag are subtraction.
 */
export class CursorService {
  constructor(
    private readonly eventTypes: EventTypeStore,
    /** Partitions over all timelines: offsets and distances span timeline switches (issue 6 §3.2). */
    private readonly partitions: PartitionLogs,
  ) {}

  /** All partitions of an event type with their offsets. @throws BrokerError 404 */
  async list(name: string): Promise<PartitionRecord[]> {
    const eventType = await this.load(name);
    const ids = partitionIds(eventType.topology);
    const ranges = await this.partitions.ranges(name, eventType.timelines, ids);
    return ids.map((id, i) => record(id, ranges[i] as PartitionRange, eventType.timelines));
  }

  /** One partition. @throws BrokerError 404 for an unknown event type or partition */
  async get(name: string, partition: string): Promise<PartitionRecord> {
    const eventType = await this.load(name);
    if (!partitionIds(eventType.topology).includes(partition)) throw new BrokerError('NOT_FOUND', 'partition not found');
    const [range] = await this.partitions.ranges(name, eventType.timelines, [partition]);
    return record(partition, range as PartitionRange, eventType.timelines);
  }

  /**
   * Distances between cursor pairs: events after `initial_cursor` up to and including `final_cursor`.
   * @throws BrokerError 400 when the body is not an array of pairs, 422 for an invalid or expired cursor
   */
  async distances(name: string, body: unknown): Promise<{ initial_cursor: Cursor; final_cursor: Cursor; distance: number }[]> {
    if (!Array.isArray(body)) throw errors.badRequest('the body must be a JSON array of {initial_cursor, final_cursor}');
    const tooMany = cursorCountProblem(body.length, 'the body');
    if (tooMany !== undefined) throw errors.unprocessable(tooMany);
    const queries = body.map((q: unknown, i) => {
      if (typeof q !== 'object' || q === null) throw errors.unprocessable(`item ${i} must be an object with initial_cursor and final_cursor`);
      const { initial_cursor: initial, final_cursor: final } = q as Record<string, unknown>;
      return { initial: asCursor(initial, `item ${i} initial_cursor`), final: asCursor(final, `item ${i} final_cursor`) };
    });
    const eventType = await this.load(name);
    const ranges = await this.rangesOf(eventType);
    return queries.map(({ initial, final }) => ({
      initial_cursor: initial,
      final_cursor: final,
      distance: resolve(final, ranges, eventType) - resolve(initial, ranges, eventType),
    }));
  }

  /**
   * Unconsumed events after each cursor (zero at the newest offset).
   * @throws BrokerError 400 when the body is not an array, 422 for an invalid or expired cursor
   */
  async lag(name: string, body: unknown): Promise<PartitionRecord[]> {
    if (!Array.isArray(body)) throw errors.badRequest('the body must be a JSON array of cursors');
    const tooMany = cursorCountProblem(body.length, 'the body');
    if (tooMany !== undefined) throw errors.unprocessable(tooMany);
    const cursors = body.map((c: unknown, i) => asCursor(c, `cursor ${i}`));
    const eventType = await this.load(name);
    const ranges = await this.rangesOf(eventType);
    return cursors.map((cursor) => {
      const offset = resolve(cursor, ranges, eventType);
      const range = ranges.get(cursor.partition) as PartitionRange;
      return { ...record(cursor.partition, range, eventType.timelines), unconsumed_events: Math.max(0, range.newest - offset) };
    });
  }

  private async load(name: string): Promise<StoredEventType> {
    const eventType = await this.eventTypes.get(name);
    if (!eventType) throw errors.eventTypeNotFound(name);
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

function asCursor(value: unknown, where: string): Cursor {
  if (typeof value !== 'object' || value === null) throw errors.unprocessable(`${where} must be an object with partition and offset`);
  const { partition, offset } = value as Record<string, unknown>;
  if (typeof partition !== 'string' || typeof offset !== 'string') throw errors.unprocessable(`${where} must have string fields partition and offset`);
  return { partition, offset };
}

/** The last consumed offset a cursor stands for. @throws BrokerError 422 naming the cursor and the reason */
function resolve(cursor: Cursor, ranges: ReadonlyMap<string, PartitionRange>, eventType: StoredEventType): number {
  const range = ranges.get(cursor.partition);
  if (!range) throw errors.unprocessable(`invalid cursor ${JSON.stringify(cursor)}: partition not found`);
  const parsed = parseOffset(cursor.offset);
  if (!parsed) throw errors.unprocessable(`invalid cursor ${JSON.stringify(cursor)}: malformed offset`);
  const resolved = eventType.timelines.resolve(parsed, cursor.partition, range);
  if (!resolved.ok) throw errors.unprocessable(`invalid cursor ${JSON.stringify(cursor)}: ${resolved.reason}`);
  return resolved.offset;
}
