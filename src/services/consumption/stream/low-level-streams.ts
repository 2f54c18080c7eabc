import type { BrokerConfig } from '../../../config/config-schema.js';
import { partitionIds } from '../../../domain/event-type/event-type.js';
import { OFFSET_EXPIRED, parseOffset, type PartitionRange } from '../../../domain/cursor/offsets.js';
import type { TimelineMap } from '../../../domain/storages/timeline.js';
import { parseStreamParameters, type StreamParameters, type StreamQuery } from '../../../domain/stream/stream-parameters.js';
import { cursorSourcePart, lowLevelCursors, type CursorInput, type LowLevelCursorSource } from '../../../domain/cursor/cursor-input.js';
import { brokerError, invalidInput } from '../../../errors/catalog.js';
import type { StreamingAnswer, StreamSink } from '../../../domain/stream/stream-sink.js';
import type { Logger } from '../../../observability/logger.js';
import type { EventTypeStore } from '../../../storage/event-type-store.js';
import type { PartitionLogs } from '../../../storage/partition-logs.js';
import type { Subject } from '../../../auth/subject.js';
import { CONSUMPTION_BLOCKED, READERS_CHANGED, readersKey, type AccessControl } from '../../access-control.js';
import type { Settings } from '../../settings.js';
import { EventStreamLoop, type StreamedListener, type StreamPartition, type StreamPolicy, type TimelineSource } from './event-stream.js';
import { NO_STREAM_METER, type StreamMeter } from '../../../observability/meters.js';
import { negotiateStreamFormat, STREAM_CONTENT_TYPES, type StreamFormat } from '../../../domain/stream/stream-format.js';
import { streamClose, type StreamClose } from '../../../domain/stream/stream-close-reason.js';
import type { EventFilters } from '../../event-filters.js';
import type { EventFilter } from './partition-reader.js';

/** The `Warning` header of every low-level stream (docs/consuming.md "Low-level streams"). */
export const DEPRECATION_WARNING = '299 - "The low-level API is deprecated and will be removed; use subscriptions"';

/** The request headers a low-level stream reads, as received. */
export interface LowLevelStreamHeaders {
  /** `X-Broker-Cursors`. */
  readonly cursors?: string;
  /** `Last-Event-ID`: what an `EventSource` sends when it reconnects (the `id:` of the last event it got). */
  readonly lastEventId?: string;
  /** `Accept`: `text/event-stream` asks for server-sent events. */
  readonly accept?: string;
}

/** The query a low-level stream reads, as the pipeline checked it (the route table's `LowLevelStreamQuery`). */
export type LowLevelStreamQuery = StreamQuery & {
  /** The cursors as JSON, for clients that cannot send headers. */
  readonly cursors?: string;
  /** A filter as JSON text (docs/consuming.md "Filters"). */
  readonly filter?: string;
};

/** Where a low-level stream starts: the last consumed offset per partition. */
interface Start {
  readonly partition: string;
  readonly offset: number;
}

/**
 * Low-level streams `GET /event-types/{name}/events` (docs/consuming.md
 * "Low-level streams"): the client names its cursors in `X-Broker-Cursors` (absent = every
 * partition from its newest offset) and tracks offsets itself; there are no commits. Consuming needs
 * the event type's `readers` and a consumer not on the blacklist; a stream whose consumer gets blocked
 * ends at once; with an owner selector, events the consumer may not read are left out.
 */
export class LowLevelStreams {
  private readonly open = new Set<LowLevelPolicy>();

  /**
   * @param eventTypeChanges subscribes to event type changes (`EventTypeCache.onChange`): when the readers
   *   of its event type change (or it is gone), an open stream ends; its consumer reconnects if still a reader
   */
  constructor(
    private readonly access: AccessControl,
    settings: Settings,
    eventTypeChanges: (listener: (name: string | undefined) => void) => void,
    private readonly eventTypes: EventTypeStore,
    /** Partitions over all timelines of an event type (docs/concepts.md "Timelines and storages"). */
    private readonly logs: PartitionLogs,
    /** Current timelines of event types, and their changes (the event type cache). */
    private readonly timelineSource: TimelineSource,
    private readonly config: BrokerConfig['consumption'],
    private readonly logger: Logger,
    /** Counts low-level streams and what they send (`kind="low_level"`). */
    private readonly meter: StreamMeter = NO_STREAM_METER,
    /** Checks a stream's `filter` and tests events against it in the worker threads; absent = a `filter` is refused (422). */
    private readonly filters?: Pick<EventFilters, 'check' | 'matcher'>,
  ) {
    settings.onChange(() => {
      for (const policy of this.open) if (this.access.consumptionBlocked(policy.subject, [policy.eventType])) policy.block(streamClose('consumption_blocked', CONSUMPTION_BLOCKED));
    });
    eventTypeChanges((name) => {
      for (const policy of this.open) if (name === undefined || policy.eventType === name) void this.recheck(policy);
    });
  }

  /** Ends `policy`'s stream when the readers of its event type changed (docs/security.md "Authorization: what a subject may do"). */
  private async recheck(policy: LowLevelPolicy): Promise<void> {
    try {
      const stored = await this.eventTypes.get(policy.eventType);
      if (!stored) policy.block(streamClose('event_type_deleted', `EventType "${policy.eventType}" was deleted`));
      else if (readersKey(stored.record) !== policy.readers) policy.block(streamClose('authorization_changed', READERS_CHANGED));
    } catch (err) {
      this.logger.warn({ err, eventType: policy.eventType }, 'could not re-check read access of a low-level stream; it goes on');
    }
  }

  /**
   * Checks everything that can fail before the first byte, then answers with the stream: JSON lines,
   * or server-sent events when `Accept` asks for `text/event-stream` (docs/server-sent-events.md "Low-level streams").
   * The cursors come from `X-Broker-Cursors`, else `Last-Event-ID` (an `EventSource` reconnecting:
   * the `id:` of an event is the stream's cursors after it), else the query parameter `cursors` (same
   * JSON; for clients that cannot send headers); none = every partition from its newest offset.
   * @param headers the raw header values, if sent
   * @param query the query checked against the route's schema (integers of the declared range)
   * @throws BrokerError 400 (malformed cursors, or both the header and the `cursors` parameter), 403
   *   (not a reader, or blocked), 404 (event type), 412 (invalid cursor), 422 (parameter rules, an unusable `filter`), 503 (storage)
   */
  async start(name: string, headers: LowLevelStreamHeaders, query: LowLevelStreamQuery, subject: Subject): Promise<StreamingAnswer> {
    const parsed = parseStreamParameters(query, undefined, 'low-level');
    if (!parsed.ok) throw invalidInput(parsed.status, [parsed.detail], parsed.errors, 'query');
    const requested = requestedCursors(headers, query);
    const format = negotiateStreamFormat(headers.accept);
    const eventType = await this.eventTypes.get(name);
    if (!eventType) throw brokerError('EVENT_TYPE_NOT_FOUND', { name });
    this.access.requireEventType(subject, eventType.record, 'read');
    if (this.access.consumptionBlocked(subject, [name])) throw brokerError('CONSUMPTION_BLOCKED');
    const filter = this.access.eventFilter(subject, eventType.record);
    const eventFilter = query.filter === undefined ? undefined : await this.eventFilterOf(query.filter);
    const { timelines } = eventType;
    const ids = partitionIds(eventType.topology);
    const ranges = new Map<string, PartitionRange>();
    (await this.logs.ranges(name, timelines, ids)).forEach((range, i) => ranges.set(ids[i] as string, range));

    const starts: Start[] = [];
    if (requested === undefined) {
      for (const id of ids) starts.push({ partition: id, offset: (ranges.get(id) as PartitionRange).newest });
    } else {
      for (const cursor of requested) {
        const range = ranges.get(cursor.partition);
        const described = JSON.stringify(cursor);
        if (!range) throw brokerError('INVALID_START_CURSOR', { cursor: described, reason: 'partition not found' });
        const offset = parseOffset(cursor.offset);
        if (!offset) throw brokerError('INVALID_START_CURSOR', { cursor: described, reason: 'malformed offset' });
        const resolved = timelines.resolve(offset, cursor.partition, range);
        if (!resolved.ok) throw resolved.reason === OFFSET_EXPIRED ? brokerError('CURSOR_EXPIRED', { cursor: described }) : brokerError('INVALID_START_CURSOR', { cursor: described, reason: resolved.reason });
        starts.push({ partition: cursor.partition, offset: resolved.offset });
      }
    }
    return {
      status: 200,
      contentType: STREAM_CONTENT_TYPES[format],
      headers: format === 'event-stream' ? { Warning: DEPRECATION_WARNING, 'Cache-Control': 'no-cache' } : { Warning: DEPRECATION_WARNING },
      stream: (sink) => this.stream(new LowLevelPolicy(subject, name, readersKey(eventType.record), parsed.value.streamLimit, filter, eventFilter), timelines, starts, parsed.value, sink, format),
    };
  }

  /** The test of the query parameter `filter`, checked as an event type's schema (docs/consuming.md "Filters"). @throws BrokerError 422 */
  private async eventFilterOf(text: string): Promise<EventFilter> {
    const where = 'Query parameter "filter"';
    if (this.filters === undefined) throw brokerError('UNPROCESSABLE', { reason: `${where} is not supported by this node` });
    return this.filters.matcher(await this.filters.check(text, where));
  }

  private streamedListener: StreamedListener | undefined;

  /** Tells `listener` what each low-level stream sent when it ends (KPI `broker.data.streamed`). */
  onStreamEnd(listener: StreamedListener): void {
    this.streamedListener = listener;
  }

  private async stream(policy: LowLevelPolicy, timelines: TimelineMap, starts: readonly Start[], params: StreamParameters, sink: StreamSink, format: StreamFormat): Promise<void> {
    const loop = new EventStreamLoop({ params, sink, policy, logs: this.logs, eventTypes: this.timelineSource, config: this.config, meter: this.meter, format });
    policy.loop = loop;
    for (const start of starts) loop.add(policy.eventType, start.partition, timelines, start.offset);
    this.open.add(policy);
    try {
      // Why the broker ended the stream (docs/consuming.md "Why a stream ended"): a last batch on a
      // server-sent event stream; JSON lines keep the low-level wire clients count on (only cursors and
      // events, no closing line), so there the node logs it.
      const end = await loop.run(format === 'event-stream');
      this.logger.info({ eventType: policy.eventType, format, stream_close_reason: end.kind === 'reason' ? end.reason : undefined }, 'low-level stream ended');
    } finally {
      this.open.delete(policy);
      this.streamedListener?.({ subject: policy.subject, streamed: loop.streamed });
    }
  }
}

/** `stream_limit` over all partitions; cursors `{"partition","offset"}` (docs/concepts.md "Offsets and cursors"); per-event filter; blocking. */
class LowLevelPolicy implements StreamPolicy {
  private sentEvents = 0;
  private ended: StreamClose | undefined;
  loop: EventStreamLoop | undefined;
  readonly accept: ((partition: StreamPartition, event: string) => boolean) | undefined;
  /** The query parameter `filter` (docs/consuming.md "Filters"): events it does not match are passed over. */
  readonly filter: EventFilter | undefined;

  /** @param readers {@link readersKey} of the event type when the stream opened */
  constructor(
    readonly subject: Subject,
    readonly eventType: string,
    readonly readers: string,
    private readonly streamLimit: number,
    filter: ((event: string) => boolean) | undefined,
    eventFilter: EventFilter | undefined,
  ) {
    this.accept = filter && ((_partition, event) => filter(event));
    this.filter = eventFilter;
  }

  /** The consumer was blocked or lost access, or the event type is gone: the stream ends at its next turn. */
  block(reason: StreamClose): void {
    this.ended ??= reason;
    this.loop?.poke();
  }

  allowance(): number {
    if (this.ended !== undefined) return 0;
    return this.streamLimit === 0 ? Number.POSITIVE_INFINITY : this.streamLimit - this.sentEvents;
  }

  endReason(): StreamClose | undefined {
    if (this.ended !== undefined) return this.ended;
    return this.streamLimit !== 0 && this.sentEvents >= this.streamLimit ? streamClose('stream_limit_reached', `Stream limit in events reached: ${this.streamLimit}`) : undefined;
  }

  sent(_partition: StreamPartition, count: number): void {
    this.sentEvents += count;
  }

  /** Low-level batches carry no `info`, except the closing batch (`debug` and `stream_close_reason`). */
  readonly debugInfo = false;

  /** An SSE event's id is every partition's cursor after it: `Last-Event-ID` resumes right after it. */
  readonly eventIds = 'stream';

  cursor(p: StreamPartition): string {
    return `{"partition":${JSON.stringify(p.partition)},"offset":"${p.timelines.format(p.partition, p.sent)}"}`;
  }
}

/**
 * The cursors a low-level stream was asked to start after (docs/server-sent-events.md "Low-level streams"):
 * `X-Broker-Cursors`, else `Last-Event-ID`, else the query parameter `cursors`; undefined when none
 * is given. An `EventSource` reconnecting sends its URL again (with any `cursors`) and `Last-Event-ID`,
 * which is newer, so it wins over the parameter.
 * @param query the checked query: its `cursors` (the JSON text)
 * @throws BrokerError 400 when the one used is malformed, or when both `X-Broker-Cursors` and `cursors` are given
 */
export function requestedCursors(headers: LowLevelStreamHeaders, query: { readonly cursors?: string }): CursorInput[] | undefined {
  const param = query.cursors;
  if (headers.cursors !== undefined) {
    if (param !== undefined) throw brokerError('BAD_REQUEST', { reason: 'give the cursors either in X-Broker-Cursors or in the query parameter cursors, not both' });
    return parseCursorsHeader(headers.cursors);
  }
  if (headers.lastEventId !== undefined && headers.lastEventId !== '') return parseCursorsHeader(headers.lastEventId, 'Last-Event-ID');
  return param === undefined ? undefined : parseCursorsHeader(param, 'cursors');
}

/**
 * Parses `X-Broker-Cursors` (or the same JSON from `Last-Event-ID` or the `cursors` parameter): a
 * non-empty JSON array of `{partition, offset}` with string values, each partition at most once
 * (`lowLevelCursors`, src/domain/cursor/cursor-input.ts).
 * @param source where the text came from, named by the 400 details
 * @throws BrokerError 400 when it is not that
 */
export function parseCursorsHeader(text: string, source: LowLevelCursorSource = 'X-Broker-Cursors'): CursorInput[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw brokerError('BAD_REQUEST', { reason: `${source === 'cursors' ? 'the query parameter cursors' : source} is not valid JSON` });
  }
  const cursors = lowLevelCursors(value, source);
  if (!cursors.ok) throw invalidInput(400, cursors.details, cursors.errors, cursorSourcePart(source));
  return cursors.value;
}
