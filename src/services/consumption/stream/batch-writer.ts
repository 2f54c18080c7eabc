import type { StreamSink } from '../../../domain/stream/stream-sink.js';
import { NO_STREAM_METER, type StreamMeter } from '../../../observability/meters.js';
import { SSE_KEEP_ALIVE, SSE_RETRY_MS, type StreamFormat } from '../../../domain/stream/stream-format.js';
import type { StreamClose } from '../../../domain/stream/stream-close-reason.js';
import type { BatchOutput } from './batch-cutter.js';
import type { StreamPartition } from './stream-partition.js';
import { deliveryMarks } from '../../../domain/subscription/delivery-marks.js';

/** What writing asks of the stream's policy (part of `StreamPolicy`, event-stream.ts): cursors and `info`. */
export interface FramePolicy {
  /**
   * The cursor (JSON text) of an opening keep-alive for a stream that has no partition to send yet
   * (undefined = none): that batch says `Stream started` so the header block goes out at once.
   */
  openingCursor?(): string | undefined;
  /** The cursor object of a batch of `partition` (JSON text), pointing at `partition.sent`. */
  cursor(partition: StreamPartition): string;
  /**
   * Whether batches carry `info.debug` on the first batch (`Stream started`) and `info.expired_events`.
   * The closing batch carries its `info.debug` and `info.stream_close_reason` either way.
   */
  readonly debugInfo: boolean;
  /**
   * What the `id:` of an `event-stream` event holds (docs/server-sent-events.md "Low-level streams", "Subscription streams"): `batch` (the
   * default) — the batch's cursor; `stream` — the JSON array of every partition's cursor after the
   * batch, which `X-Broker-Cursors` (or `Last-Event-ID`) takes to resume the stream right after it.
   */
  readonly eventIds?: 'batch' | 'stream';
  /** A stream id the first batch of an `event-stream` carries in `info.stream_id` (a page cannot read headers). */
  readonly streamId?: string;
}

/** What a stream sent of one event type: events, bytes of the batch lines that carried them, data batches. */
export interface StreamTally {
  events: number;
  bytes: number;
  batches: number;
}

/** What a {@link BatchWriter} writes to and how. */
export interface BatchWriterOptions {
  readonly sink: StreamSink;
  readonly policy: FramePolicy;
  /** The stream's partitions by key (the loop's map; read for stream-wide cursors and the opening batch). */
  readonly partitions: ReadonlyMap<string, StreamPartition>;
  /** How batches are framed: JSON lines, or server-sent events (src/domain/stream/stream-format.ts). */
  readonly format?: StreamFormat;
  /** Counts what the stream sends (once per write, never per event). */
  readonly meter?: StreamMeter;
}

/**
 * Writing of one stream: frames each batch the cutter hands it in the stream's format (copying the
 * stored event bytes once), collects the frames of a round, and writes them to the sink in one write
 * (with compression, the sink compresses and flushes each write; docs/compression.md), then waits
 * until the client drained them (backpressure). Keeps the per event type tallies of what was sent.
 */
export class BatchWriter implements BatchOutput {
  private readonly sink: StreamSink;
  private readonly policy: FramePolicy;
  private readonly partitions: ReadonlyMap<string, StreamPartition>;
  private readonly format: StreamFormat;
  private readonly meter: StreamMeter;
  /** Frames not yet written. */
  private pending: Buffer[] = [];
  /** Events in the pending frames (reported to the meter with the write). */
  private unmeteredEvents = 0;
  /** What the stream sent so far per event type (data batches only; the KPI `broker.data.streamed`). */
  private readonly tallies = new Map<string, StreamTally>();
  /** True until the first frame was built (it says `Stream started`; on an `event-stream` it carries `retry:`). */
  private first = true;

  constructor(options: BatchWriterOptions) {
    this.sink = options.sink;
    this.policy = options.policy;
    this.partitions = options.partitions;
    this.format = options.format ?? 'json-stream';
    this.meter = options.meter ?? NO_STREAM_METER;
  }

  /** Events, bytes and data batches sent so far, per event type. */
  get streamed(): ReadonlyMap<string, Readonly<StreamTally>> {
    return this.tallies;
  }

  /** True when frames wait for {@link flush}. */
  get hasPending(): boolean {
    return this.pending.length > 0;
  }

  /**
   * Frames a data batch of `p` (see {@link frame}) and counts it; the age of its first event (from its
   * `metadata.received_at`) goes to the delivery latency histogram, with the event's trace context for an exemplar.
   */
  batch(p: StreamPartition, events: readonly Buffer[], count: number): void {
    const first = count > 0 ? events[0] : undefined;
    const marks = first === undefined ? undefined : deliveryMarks(first, this.meter.exemplars === true);
    if (marks !== undefined) this.meter.delivered((Date.now() - marks.receivedAtMs) / 1000, marks.traceparent);
    const line = this.line(p, events);
    this.pending.push(line);
    let tally = this.tallies.get(p.eventType);
    if (!tally) this.tallies.set(p.eventType, (tally = { events: 0, bytes: 0, batches: 0 }));
    tally.events += count;
    tally.bytes += line.length;
    tally.batches++;
    this.unmeteredEvents += count;
  }

  /** Frames an empty batch of `p`. */
  keepAlive(p: StreamPartition): void {
    this.pending.push(this.line(p));
  }

  /**
   * Before the stream's first frame, when the round cut nothing: an opening keep-alive lets the header
   * block out now (uWS ends it only with the first chunk, and clients such as fetch wait for it; see
   * HttpServer.sendStream). It is a batch of the first active partition or, with none, one at the
   * policy's opening cursor (none when the policy has none).
   */
  opening(): void {
    if (!this.first) return;
    const opening = [...this.partitions.values()].find((p) => p.active);
    const cursor = opening === undefined ? this.policy.openingCursor?.() : undefined;
    if (opening) this.pending.push(this.line(opening));
    else if (cursor !== undefined) this.pending.push(this.frame(cursor, undefined));
  }

  /** Frames the closing batch: empty, of `p`, its `info.stream_close_reason` and `info.debug` saying why the stream ends. */
  closing(p: StreamPartition, close: StreamClose): void {
    this.pending.push(this.line(p, undefined, close));
  }

  /** Frames the closing batch of a stream that holds no partition any more, at `cursor` (JSON text). */
  closingAt(cursor: string, close: StreamClose): void {
    this.pending.push(this.frame(cursor, undefined, undefined, close));
  }

  /**
   * Writes the pending frames in one write and waits until the client drained them.
   * @returns false when the client is gone
   */
  async flush(): Promise<boolean> {
    const lines = this.pending;
    this.pending = [];
    if (this.sink.closed) return false;
    let bytes = 0;
    for (const line of lines) bytes += line.length;
    this.meter.sent(this.unmeteredEvents, bytes);
    this.unmeteredEvents = 0;
    if (!this.sink.write(lines)) await this.sink.drained();
    return !this.sink.closed;
  }

  /** One batch of `p` (see {@link frame}), its cursor pointing at `p.sent`. */
  private line(p: StreamPartition, events?: readonly Buffer[], close?: StreamClose): Buffer {
    return this.frame(this.policy.cursor(p), p, events, close);
  }

  /** The JSON array of every partition's cursor as they stand now (the `id:` of `eventIds: 'stream'`). */
  private streamCursors(): string {
    const cursors: string[] = [];
    for (const p of this.partitions.values()) cursors.push(this.policy.cursor(p));
    return `[${cursors.join(',')}]`;
  }

  /**
   * One batch as bytes, framed for the stream's format. `json-stream`: the line
   * `{"cursor":…,"events":[…],"info":{"debug":…,"stream_close_reason":…,"expired_events":…}}\n` (`info`
   * only when it has a field; `stream_close_reason` only on the closing batch). `event-stream`: the same JSON as one event,
   * `id: <id>\ndata: <JSON>\n\n` (the first batch's `info` also carries `stream_id` when the policy has
   * one), or the comment `: keep-alive\n\n` for a batch with neither events nor info; the first frame
   * starts with `retry: <SSE_RETRY_MS>`. The events are copied once, as stored (events of an entry are
   * joined by `\n`, which JSON text never contains raw, so each becomes a `,`).
   * @param p the batch's partition (absent for an opening or closing batch while the stream holds none)
   * @param close why the stream ends, on the closing batch
   */
  private frame(cursor: string, p: StreamPartition | undefined, events?: readonly Buffer[], close?: StreamClose): Buffer {
    const first = this.first;
    this.first = false;
    let info = '';
    if (close !== undefined) info = `"debug":${JSON.stringify(close.debug)},"stream_close_reason":${JSON.stringify(close.reason)}`;
    else if (first && this.policy.debugInfo) info = '"debug":"Stream started"';
    if (p !== undefined && p.expiredEvents > 0 && this.policy.debugInfo) {
      // The first batch of the partition after a jump over events retention removed unread says how many.
      info += `${info === '' ? '' : ','}"expired_events":${p.expiredEvents}`;
      p.expiredEvents = 0;
    }
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
}

const NEWLINE = 0x0a;
const COMMA = 0x2c;
