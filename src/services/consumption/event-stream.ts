import type { BrokerConfig } from '../../config/config-schema.js';
import type { Subject } from '../../auth/subject.js';
import type { StreamParameters } from '../../domain/stream-parameters.js';
import type { StreamSink } from '../../http/server.js';
import type { TimelineMap } from '../../domain/timeline.js';
import type { PartitionLogs } from '../../storage/partition-logs.js';
import type { EventSegment } from '../../storage/partition-store.js';
import { offsetField } from '../../storage/subscription-state-store.js';
import { NO_STREAM_METER, type StreamMeter } from '../../observability/meters.js';
import { SSE_KEEP_ALIVE, SSE_RETRY_MS, type StreamFormat } from '../../http/stream-format.js';
import { IDLE_POLL_FACTOR } from '../../storage/partition-wakeups.js';

/** One partition a stream reads: positions are offsets (last consumed = -1 before the first event). */
export class StreamPartition {
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
  /** When the current batch window started (ms, `performance.now()`): reset by every batch sent. */
  windowStartedAt: number;
  /** Empty batches sent in a row. */
  keepAlives = 0;
  /** `next` offset announced by the last notice, or Infinity before the first read (read at once). */
  knownNext = Number.POSITIVE_INFINITY;
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

  constructor(
    readonly eventType: string,
    readonly partition: string,
    /** The event type's timelines, refreshed every round (a switch adds one; issue 6 §3.2). */
    public timelines: TimelineMap,
    start: number,
    now: number,
  ) {
    this.key = offsetField(eventType, partition);
    this.sent = start;
    this.read = start;
    this.windowStartedAt = now;
  }
}

/**
 * What differs between the low-level stream and the subscription stream: flow control, end
 * conditions and the batch line. The loop asks the policy every round.
 */
export interface StreamPolicy {
  /** Events the stream may still send right now over all its partitions (`Infinity` = no limit). */
  allowance(): number;
  /**
   * Most events the next batch of one partition may carry (absent = no limit of its own): a subscription
   * partition in dead-letter search sends one event per batch, each once the previous one is committed.
   */
  partitionAllowance?(partition: StreamPartition): number;
  /** A reason to end the stream now (the closing batch's `info.debug`), or undefined to go on. */
  endReason(): string | undefined;
  /** Called after a batch with `count` events of `partition` went out; `partition.sent` is already advanced. */
  sent(partition: StreamPartition, count: number): void;
  /**
   * Whether an event goes to the client (per-event authorization, issue 4); skipped events are not
   * sent but the cursor moves past them. Absent = every event.
   */
  accept?(partition: StreamPartition, event: string): boolean;
  /** Called when the cursor of `partition` moved past skipped events only (`partition.sent` already moved). */
  skipped?(partition: StreamPartition): void;
  /**
   * The cursor (JSON text) of an opening keep-alive for a stream that has no partition to send yet
   * (undefined = none): that batch says `Stream started` so the header block goes out at once.
   */
  openingCursor?(): string | undefined;
  /** The cursor object of a batch of `partition` (JSON text), pointing at `partition.sent`. */
  cursor(partition: StreamPartition): string;
  /** Whether batches carry `info.debug` (the first and the closing batch). */
  readonly debugInfo: boolean;
  /**
   * What the `id:` of an `event-stream` event holds (README "Server-sent events"): `batch` (the
   * default) — the batch's cursor; `stream` — the JSON array of every partition's cursor after the
   * batch, which `X-Broker-Cursors` (or `Last-Event-ID`) takes to resume the stream right after it.
   */
  readonly eventIds?: 'batch' | 'stream';
  /** A stream id the first batch of an `event-stream` carries in `info.stream_id` (a page cannot read headers). */
  readonly streamId?: string;
}

/** Why a stream ended: a debug message for the closing batch, or the client left / the node stops. */
export type StreamEnd = { readonly kind: 'reason'; readonly debug: string } | { readonly kind: 'aborted' };

/** Debug message of the closing batch when `stream_timeout` passed (WIRE.md "Streaming"). */
export const STREAM_TIMEOUT_REACHED = 'Stream timeout reached';
/** Debug message of the closing batch when every partition sent `stream_keep_alive_limit` empty batches. */
export const KEEP_ALIVE_LIMIT_REACHED = 'Stream keep-alive limit reached';

/** Debug message of the closing batch when the node stops (SIGTERM). */
export const NODE_SHUTTING_DOWN = 'Node is shutting down';

const now = (): number => performance.now();

/** What a stream sent of one event type: events, bytes of the batch lines that carried them, data batches. */
export interface StreamTally {
  events: number;
  bytes: number;
  batches: number;
}

/**
 * Told once per ended stream what it sent (the KPI `broker.data.streamed`, issue 6 §4.1): the consuming
 * subject, the subscription (absent for low-level streams) and the tallies per event type.
 */
export type StreamedListener = (report: { readonly subject: Subject; readonly subscription?: string; readonly streamed: ReadonlyMap<string, Readonly<StreamTally>> }) => void;

/**
 * Where a stream finds an event type's current timelines (the event type cache) and hears that an
 * event type changed (a timeline switch wakes the stream so it listens to the new timeline's notices).
 */
export interface TimelineSource {
  get(name: string): Promise<{ readonly timelines: TimelineMap } | undefined>;
  onChange(listener: (name: string | undefined) => void): () => void;
}

/**
 * The batch loop shared by the low-level and the subscription streams (spec "Stream parameters";
 * WIRE.md "Low-level stream", "Streaming"; DESIGN.md §6).
 *
 * Per partition it reads stream entries after the last read offset into a buffer, cuts batches of at
 * most `batch_limit` events, flushes a batch as soon as it is full or when `batch_flush_timeout`
 * passed since the partition's last batch (an empty batch is a keep-alive), and counts keep-alives in
 * a row for `stream_keep_alive_limit`. It reads only while the stream's buffered bytes (its own plus
 * the client socket's) stay under `consumption.maxStreamBufferBytes`, and writes only after the client
 * drained what it had, so a slow reader costs at most that much memory. It wakes on a publish notice
 * for one of its partitions, on a flush deadline, on `poke()` (a commit, a topology change), or on the
 * slow safety-net poll. Each round takes the event types' current timelines, so a reader that reaches
 * the end of a closed timeline continues on the next (issue 6 §3.2).
 */
export class EventStreamLoop {
  private readonly partitions = new Map<string, StreamPartition>();
  /** Bytes in every partition's buffer (kept with each change, read on every round). */
  private bufferedBytes = 0;
  /** Events in batches cut since the last write (reported to the meter with the write). */
  private unmeteredEvents = 0;
  /** What the stream sent so far per event type (data batches only; the KPI `broker.data.streamed`). */
  private readonly tallies = new Map<string, StreamTally>();
  private wake: (() => void) | undefined;
  private woken = false;
  private first = true;
  private readonly deadline: number;

  constructor(
    private readonly params: StreamParameters,
    private readonly sink: StreamSink,
    private readonly policy: StreamPolicy,
    private readonly logs: PartitionLogs,
    private readonly eventTypes: TimelineSource,
    private readonly config: BrokerConfig['consumption'],
    /** Counts the stream while it runs and what it sends (once per write, never per event). */
    private readonly meter: StreamMeter = NO_STREAM_METER,
    /** How batches are framed: JSON lines, or server-sent events (src/http/stream-format.ts). */
    private readonly format: StreamFormat = 'json-stream',
  ) {
    this.deadline = now() + params.streamTimeoutSeconds * 1000;
    sink.signal.addEventListener('abort', () => this.poke());
  }

  /** Events, bytes and data batches sent so far, per event type. */
  get streamed(): ReadonlyMap<string, Readonly<StreamTally>> {
    return this.tallies;
  }

  /** The partitions currently in the stream (active or leaving). */
  get current(): Iterable<StreamPartition> {
    return this.partitions.values();
  }

  /**
   * Adds a partition starting after internal offset `start` (it listens to its notices from the next
   * round on). Replaces an entry with the same key.
   */
  add(eventType: string, partition: string, timelines: TimelineMap, start: number): StreamPartition {
    this.remove(eventType, partition);
    const p = new StreamPartition(eventType, partition, timelines, start, now());
    this.partitions.set(p.key, p);
    this.poke();
    return p;
  }

  /** Drops a partition and its buffered events. */
  remove(eventType: string, partition: string): void {
    const p = this.partitions.get(offsetField(eventType, partition));
    if (!p) return;
    p.unlisten();
    this.bufferedBytes -= p.bufferBytes;
    this.partitions.delete(p.key);
  }

  /** The partition entry, if the stream has it. */
  get(eventType: string, partition: string): StreamPartition | undefined {
    return this.partitions.get(offsetField(eventType, partition));
  }

  /** Stops sending a partition (it is leaving): its buffered events are dropped, reading stops. */
  deactivate(p: StreamPartition): void {
    p.active = false;
    this.clear(p);
    p.read = p.sent;
  }

  private clear(p: StreamPartition): void {
    this.bufferedBytes -= p.bufferBytes;
    p.segments = [];
    p.bufferedEvents = 0;
    p.bufferBytes = 0;
    p.skippedThrough = -1;
  }

  /** Moves a partition's position (a commit beyond what was sent skips ahead): buffered events are dropped. */
  skipTo(p: StreamPartition, offset: number): void {
    if (offset <= p.sent) return;
    p.sent = offset;
    p.read = offset;
    this.clear(p);
    this.poke();
  }

  /** Wakes the loop to re-check its conditions (commit, topology change, abort). */
  poke(): void {
    this.woken = true;
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  /**
   * Runs until an end condition: `stream_timeout`, keep-alive limit, the policy's end reason, or the
   * client leaving. On a reason, buffered events are flushed (within the policy's allowance) and, when
   * `closingBatch` is set, a last empty batch carries the reason. Every partition's listener is removed.
   * @throws BrokerError 503 when Redis fails while reading
   */
  async run(closingBatch: boolean): Promise<StreamEnd> {
    this.meter.opened();
    const unwatch = this.eventTypes.onChange((name) => {
      if (name === undefined || [...this.partitions.values()].some((p) => p.eventType === name)) this.poke();
    });
    try {
      for (;;) {
        this.woken = false;
        if (this.sink.signal.aborted) return await this.finish(this.sink.closed ? undefined : NODE_SHUTTING_DOWN, closingBatch);
        const reason = this.policy.endReason() ?? (now() >= this.deadline ? STREAM_TIMEOUT_REACHED : undefined);
        if (reason !== undefined) return await this.finish(reason, closingBatch);

        await this.fill();
        const out: Buffer[] = [];
        const keepAliveLimitReached = this.cut(out, false);
        if (this.first && out.length === 0) {
          // Nothing to send yet: an opening keep-alive lets the header block out now (uWS ends it only
          // with the first chunk, and clients such as fetch wait for it; see HttpServer.sendStream).
          const opening = [...this.partitions.values()].find((p) => p.active);
          const cursor = opening === undefined ? this.policy.openingCursor?.() : undefined;
          if (opening) out.push(this.line(opening));
          else if (cursor !== undefined) out.push(this.frame(cursor, undefined));
        }
        if (out.length > 0 && !(await this.write(out))) return { kind: 'aborted' };
        if (keepAliveLimitReached) return await this.finish(KEEP_ALIVE_LIMIT_REACHED, closingBatch);
        if (!this.woken && !this.hasWork()) await this.sleep();
      }
    } finally {
      unwatch();
      for (const p of this.partitions.values()) p.unlisten();
      this.meter.closed();
    }
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
        this.poke();
      });
      p.noticesLive = () => wakeups.live(channel);
      // A publish may have landed on the new timeline before the subscription: read at once.
      p.knownNext = Number.POSITIVE_INFINITY;
    }
  }

  /** Reads more events for partitions that have room and something new (or are due a poll). */
  private async fill(): Promise<void> {
    await this.refreshTimelines();
    const capBytes = this.config.maxStreamBufferBytes;
    const buffered = this.sink.bufferedBytes + this.bufferedBytes;
    if (buffered >= capBytes) return;
    const t = now();
    const due = [...this.partitions.values()].filter(
      (p) => p.active && p.bufferedEvents < this.params.batchLimit && (p.knownNext - 1 > p.read || t - p.lastReadAt >= this.pollIntervalOf(p)),
    );
    // Entries vary in size (one publish request's share each): ask for as many as the room left
    // should hold at the partition's average entry size, so one read overshoots the cap by one entry at most.
    const room = capBytes - buffered;
    const slices = await Promise.all(
      due.map((p) => {
        p.lastReadAt = t;
        // Unknown entry size: one entry first. Reads stay near READ_TARGET_BYTES so one large reply
        // never holds the event loop (and the commits waiting on it) for long.
        const budget = Math.min(room / due.length, READ_TARGET_BYTES);
        const count = p.entryBytes === 0 ? 1 : Math.max(1, Math.min(this.config.readEntries, Math.floor(budget / p.entryBytes)));
        return this.logs.read(p.eventType, p.timelines, p.partition, p.read, count);
      }),
    );
    // Filtering and batch_timespan look at single events; otherwise whole entries travel as they are.
    const perEvent = this.policy.accept !== undefined || this.params.batchTimespanSeconds > 0;
    due.forEach((p, i) => {
      const slice = slices[i];
      if (!slice || !p.active || this.partitions.get(p.key) !== p) return;
      const head = slice.segments[0];
      const tail = slice.segments[slice.segments.length - 1];
      if (head === undefined || tail === undefined) {
        if (p.knownNext - 1 > p.read) p.knownNext = p.read + 1;
        return;
      }
      if (head.first > p.read + 1 && p.bufferedEvents === 0) {
        // Retention removed events the stream had not reached: continue at the oldest kept one.
        p.sent = head.first - 1;
      }
      let bytes = 0;
      for (const segment of slice.segments) {
        bytes += segment.data.length;
        if (perEvent) this.addEvents(p, segment);
        else this.push(p, segment);
      }
      p.entryBytes = bytes / slice.segments.length;
      p.read = tail.first + tail.count - 1;
      // A read cut at readEntries leaves more behind: read again without waiting for a notice.
      if (slice.more) p.knownNext = Number.POSITIVE_INFINITY;
      else if (p.knownNext - 1 <= p.read) p.knownNext = p.read + 1;
    });
  }

  private push(p: StreamPartition, segment: EventSegment): void {
    p.segments.push(segment);
    p.bufferedEvents += segment.count;
    p.bufferBytes += segment.data.length;
    this.bufferedBytes += segment.data.length;
    p.skippedThrough = -1;
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
      if (this.policy.accept !== undefined && !this.policy.accept(p, data.toString())) p.skippedThrough = offset;
      else this.push(p, { first: offset, count: 1, data });
    }
  }

  /**
   * Cuts the batches that are due into `out`: full batches at once; at a partition's flush deadline a
   * partial batch or a keep-alive (or everything buffered when `final`).
   * @returns true when every partition has now sent `stream_keep_alive_limit` keep-alives in a row
   */
  private cut(out: Buffer[], final: boolean): boolean {
    const { batchLimit, batchFlushTimeoutSeconds, streamKeepAliveLimit } = this.params;
    const flushMs = batchFlushTimeoutSeconds * 1000;
    const t = now();
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
        out.push(this.line(p));
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

  /** Events `p`'s next batch may carry now: the stream's allowance and the partition's own. */
  private allowanceOf(p: StreamPartition): number {
    const own = this.policy.partitionAllowance?.(p) ?? Number.POSITIVE_INFINITY;
    return Math.min(this.policy.allowance(), own);
  }

  /** Events of a batch that is complete now (0 = none). */
  private fullBatch(p: StreamPartition): number {
    const limit = Math.min(this.params.batchLimit, this.allowanceOf(p));
    if (limit <= 0 || p.bufferedEvents === 0) return 0;
    // At the buffer cap no batch can grow any more: what is buffered goes now.
    if (p.bufferedEvents >= limit || this.atCap()) {
      if (p.bufferedEvents < limit) return p.bufferedEvents;
      const closedBySpan = this.spanBoundary(p, limit);
      return closedBySpan > 0 ? closedBySpan : limit;
    }
    return this.spanBoundary(p, p.bufferedEvents);
  }

  /**
   * `batch_timespan`: the index of the first of the first `within` buffered events received more than
   * the timespan after the first one (so the batch before it is closed), or 0.
   */
  private spanBoundary(p: StreamPartition, within: number): number {
    const spanMs = this.params.batchTimespanSeconds * 1000;
    if (spanMs === 0) return 0;
    // With a timespan, segments hold one event each (see fill).
    const start = receivedAt(p.segments[0]?.data);
    if (Number.isNaN(start)) return 0;
    for (let i = 1; i < within && i < p.segments.length; i++) {
      if (receivedAt(p.segments[i]?.data) - start > spanMs) return i;
    }
    return 0;
  }

  /** Appends one data batch of the first `count` buffered events and advances the partition. */
  private emit(out: Buffer[], p: StreamPartition, count: number, t: number): void {
    const parts: Buffer[] = [];
    let left = count;
    while (left > 0) {
      const segment = p.segments[0];
      if (segment === undefined) break;
      if (segment.count <= left) {
        p.segments.shift();
        parts.push(segment.data);
        p.bufferBytes -= segment.data.length;
        this.bufferedBytes -= segment.data.length;
        left -= segment.count;
        p.sent = segment.first + segment.count - 1;
      } else {
        let position = 0;
        for (let i = 0; i < left; i++) position = segment.data.indexOf(NEWLINE, position) + 1;
        parts.push(segment.data.subarray(0, position - 1));
        p.segments[0] = { first: segment.first + left, count: segment.count - left, data: segment.data.subarray(position) };
        p.bufferBytes -= position;
        this.bufferedBytes -= position;
        p.sent = segment.first + left - 1;
        left = 0;
      }
    }
    p.bufferedEvents -= count - left;
    if (p.bufferedEvents === 0 && p.skippedThrough > p.sent) {
      p.sent = p.skippedThrough;
      p.skippedThrough = -1;
    }
    const line = this.line(p, parts);
    out.push(line);
    let tally = this.tallies.get(p.eventType);
    if (!tally) this.tallies.set(p.eventType, (tally = { events: 0, bytes: 0, batches: 0 }));
    tally.events += count - left;
    tally.bytes += line.length;
    tally.batches++;
    p.keepAlives = 0;
    p.windowStartedAt = t;
    this.policy.sent(p, count - left);
    this.unmeteredEvents += count - left;
  }

  /** One batch of `p` (see {@link frame}), its cursor pointing at `p.sent`. */
  private line(p: StreamPartition, events?: readonly Buffer[], debug?: string): Buffer {
    return this.frame(this.policy.cursor(p), p, events, debug);
  }

  /** The JSON array of every partition's cursor as they stand now (the `id:` of `eventIds: 'stream'`). */
  private streamCursors(): string {
    const cursors: string[] = [];
    for (const p of this.partitions.values()) cursors.push(this.policy.cursor(p));
    return `[${cursors.join(',')}]`;
  }

  /**
   * One batch as bytes, framed for the stream's format. `json-stream`: the line
   * `{"cursor":…,"events":[…],"info":{"debug":…}}\n`. `event-stream`: the same JSON as one event,
   * `id: <id>\ndata: <JSON>\n\n` (the first batch's `info` also carries `stream_id` when the policy has
   * one), or the comment `: keep-alive\n\n` for a batch with neither events nor info; the first frame
   * starts with `retry: <SSE_RETRY_MS>`. The events are copied once, as stored (events of an entry are
   * joined by `\n`, which JSON text never contains raw, so each becomes a `,`).
   * @param p the batch's partition (absent for an opening batch before the stream holds one)
   */
  private frame(cursor: string, p: StreamPartition | undefined, events?: readonly Buffer[], debug?: string): Buffer {
    const first = this.first;
    this.first = false;
    const debugText = debug ?? (first ? 'Stream started' : undefined);
    let info = debugText !== undefined && this.policy.debugInfo ? `"debug":${JSON.stringify(debugText)}` : '';
    let prefix = '';
    let end = '\n';
    if (this.format === 'event-stream') {
      if (first && this.policy.streamId !== undefined) info += `${info === '' ? '' : ','}"stream_id":${JSON.stringify(this.policy.streamId)}`;
      const retry = first ? `retry: ${SSE_RETRY_MS}\n` : '';
      if (events === undefined && info === '') return Buffer.from(retry + SSE_KEEP_ALIVE);
      const id = p !== undefined && this.policy.eventIds === 'stream' ? this.streamCursors() : cursor;
      prefix = `${retry}id: ${id}\ndata: `;
      end = '\n\n';
    }
    if (info !== '') info = `,"info":{${info}}`;
    const open = `${prefix}{"cursor":${cursor}`;
    if (events === undefined) return Buffer.from(`${open}${info}}${end}`);
    const head = `${open},"events":[`;
    const tail = `]${info}}${end}`;
    let size = Buffer.byteLength(head) + Buffer.byteLength(tail) + Math.max(0, events.length - 1);
    for (const e of events) size += e.length;
    const line = Buffer.allocUnsafe(size);
    let at = line.write(head);
    const from = at;
    events.forEach((e, i) => {
      if (i > 0) line[at++] = COMMA;
      at += e.copy(line, at);
    });
    for (let nl = line.indexOf(NEWLINE, from); nl >= 0 && nl < at; nl = line.indexOf(NEWLINE, nl + 1)) line[nl] = COMMA;
    line.write(tail, at);
    return line;
  }

  /** Writes lines; waits until the client drained them. @returns false when the client is gone */
  private async write(lines: readonly Buffer[]): Promise<boolean> {
    if (this.sink.closed) return false;
    let bytes = 0;
    for (const line of lines) bytes += line.length;
    this.meter.sent(this.unmeteredEvents, bytes);
    this.unmeteredEvents = 0;
    if (!this.sink.write(lines)) await this.sink.drained();
    return !this.sink.closed;
  }

  /** Flushes buffered events (unless the client left) and sends the closing batch. */
  private async finish(reason: string | undefined, closingBatch: boolean): Promise<StreamEnd> {
    if (reason === undefined || this.sink.closed) return { kind: 'aborted' };
    const out: Buffer[] = [];
    this.cut(out, true);
    if (closingBatch) {
      const any = [...this.partitions.values()][0];
      if (any) out.push(this.line(any, undefined, reason));
    }
    if (out.length > 0) await this.write(out);
    return { kind: 'reason', debug: reason };
  }

  /** True when the stream's read buffers hold `consumption.maxStreamBufferBytes` or more: reading stopped. */
  private atCap(): boolean {
    return this.bufferedBytes >= this.config.maxStreamBufferBytes;
  }

  /** True when the next round can make progress at once: a full batch to send, or known data to read with room for it. */
  private hasWork(): boolean {
    if (this.policy.endReason() !== undefined) return true;
    const buffered = this.sink.bufferedBytes + this.bufferedBytes;
    for (const p of this.partitions.values()) {
      if (!p.active) continue;
      if (this.fullBatch(p) > 0) return true;
      if (p.knownNext - 1 > p.read && p.bufferedEvents < this.params.batchLimit && buffered < this.config.maxStreamBufferBytes) return true;
    }
    return false;
  }

  /** ms between safety-net reads of a partition: slower while its notices reach this node. */
  private pollIntervalOf(p: StreamPartition): number {
    return p.noticesLive() ? this.config.pollIntervalMs * IDLE_POLL_FACTOR : this.config.pollIntervalMs;
  }

  /** Waits for a notice, a poke, a drain, the next flush deadline or the next poll. */
  private async sleep(): Promise<void> {
    const t = now();
    let until = this.deadline;
    const flushMs = this.params.batchFlushTimeoutSeconds * 1000;
    for (const p of this.partitions.values()) {
      if (!p.active) continue;
      until = Math.min(until, p.windowStartedAt + flushMs, p.lastReadAt + this.pollIntervalOf(p));
    }
    const ms = Math.max(1, Math.ceil(until - t));
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.wake = undefined;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

const NEWLINE = 0x0a;
const COMMA = 0x2c;
/** Bytes one partition read aims at (at least one entry is always read). */
const READ_TARGET_BYTES = 1 << 20;

/** `metadata.received_at` of an event in ms, NaN when absent. */
function receivedAt(data: Buffer | undefined): number {
  if (data === undefined) return Number.NaN;
  try {
    const metadata = (JSON.parse(data.toString()) as { metadata?: { received_at?: unknown } }).metadata;
    return typeof metadata?.received_at === 'string' ? Date.parse(metadata.received_at) : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

