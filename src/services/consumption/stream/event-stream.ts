import type { BrokerConfig } from '../../../config/config-schema.js';
import type { Subject } from '../../../auth/subject.js';
import type { StreamParameters } from '../../../domain/stream/stream-parameters.js';
import type { StreamSink } from '../../../domain/stream/stream-sink.js';
import type { TimelineMap } from '../../../domain/storages/timeline.js';
import type { PartitionLogs } from '../../../storage/partition-logs.js';
import { offsetField } from '../../../storage/subscription-state-store.js';
import { BrokerError } from '../../../errors/catalog.js';
import { NO_STREAM_METER, type StreamMeter } from '../../../observability/meters.js';
import type { StreamFormat } from '../../../domain/stream/stream-format.js';
import { streamClose, type StreamClose } from '../../../domain/stream/stream-close-reason.js';
import { BatchCutter, type CutPolicy } from './batch-cutter.js';
import { BatchWriter, type FramePolicy, type StreamTally } from './batch-writer.js';
import { PartitionReader, type ReadPolicy, type TimelineLookup } from './partition-reader.js';
import { StreamPartition } from './stream-partition.js';

export type { StreamPartition } from './stream-partition.js';

/**
 * What differs between the low-level stream and the subscription stream: flow control, end
 * conditions and the batch line. The loop asks the policy every round; its parts are declared where
 * they are used: what to read ({@link ReadPolicy}, partition-reader.ts), when a batch is due and who
 * hears that it went ({@link CutPolicy}, batch-cutter.ts), and the cursors and `info` of the batches
 * ({@link FramePolicy}, batch-writer.ts).
 */
export interface StreamPolicy extends ReadPolicy, CutPolicy, FramePolicy {
  /** A reason to end the stream now (the closing batch's `info.stream_close_reason` and `info.debug`), or undefined to go on. */
  endReason(): StreamClose | undefined;
  /**
   * In how many ms {@link endReason} may give a reason by time alone (a subscription's `commit_timeout`
   * running out), or undefined: the loop wakes by then even when nothing else happens.
   */
  msUntilEnd?(): number | undefined;
}

/**
 * Why a stream ended: a reason the broker gave (its closing batch's `info.stream_close_reason` and
 * `info.debug`), or `aborted` — the client left (or the node stopped after the client was gone).
 */
export type StreamEnd = ({ readonly kind: 'reason' } & StreamClose) | { readonly kind: 'aborted' };

/** The closing batch when `stream_timeout` passed (docs/consuming.md "Why a stream ended"). */
export const STREAM_TIMEOUT_REACHED = streamClose('stream_timeout_reached', 'Stream timeout reached');
/** The closing batch when every partition sent `stream_keep_alive_limit` empty batches. */
export const KEEP_ALIVE_LIMIT_REACHED = streamClose('keep_alive_limit_reached', 'Stream keep-alive limit reached');

/** The closing batch when the node stops (SIGTERM). */
export const NODE_SHUTTING_DOWN = streamClose('node_shutting_down', 'Node is shutting down');

const now = (): number => performance.now();

/**
 * How long reads may keep failing with `STORAGE_UNAVAILABLE` (a Redis Cluster failover, a reconnect)
 * before the stream fails, in ms; meanwhile the stream keeps sending keep-alives and reads again every
 * {@link READ_RETRY_MS}. Measured failover windows on the harness cluster: 2.4–2.5 s.
 */
export const READ_OUTAGE_TOLERANCE_MS = 10_000;
/** Pause between reads that failed with `STORAGE_UNAVAILABLE`, in ms. */
const READ_RETRY_MS = 200;

/**
 * Told once per ended stream what it sent (the KPI `broker.data.streamed`, docs/operations.md "The broker's own event types"): the consuming
 * subject, the subscription (absent for low-level streams) and the tallies per event type.
 */
export type StreamedListener = (report: { readonly subject: Subject; readonly subscription?: string; readonly streamed: ReadonlyMap<string, Readonly<StreamTally>> }) => void;

/**
 * Where a stream finds an event type's current timelines (the event type cache) and hears that an
 * event type changed (a timeline switch wakes the stream so it listens to the new timeline's notices).
 */
export interface TimelineSource extends TimelineLookup {
  onChange(listener: (name: string | undefined) => void): () => void;
}

/** What an {@link EventStreamLoop} streams, from where, to whom. */
export interface EventStreamLoopOptions {
  /** The stream's parameters (docs/consuming.md "Stream parameters"; durations in seconds). */
  readonly params: StreamParameters;
  readonly sink: StreamSink;
  readonly policy: StreamPolicy;
  readonly logs: PartitionLogs;
  readonly eventTypes: TimelineSource;
  readonly config: BrokerConfig['consumption'];
  /** Counts the stream while it runs and what it sends (once per write, never per event; default: none). */
  readonly meter?: StreamMeter;
  /** How batches are framed: JSON lines (the default), or server-sent events (src/domain/stream/stream-format.ts). */
  readonly format?: StreamFormat;
}

/**
 * The batch loop shared by the low-level and the subscription streams (docs/consuming.md "Stream parameters",
 * "Low-level streams", "Subscription streams"; docs/architecture.md#41-the-batch-loop-eventstreamloop).
 *
 * Per partition it reads stream entries after the last read offset into a buffer (PartitionReader,
 * partition-reader.ts), cuts batches of at most `batch_limit` events, flushes a batch as soon as it is
 * full or when `batch_flush_timeout` passed since the partition's last batch (an empty batch is a
 * keep-alive), and counts keep-alives in a row for `stream_keep_alive_limit` (BatchCutter,
 * batch-cutter.ts); it frames the batches and writes them (BatchWriter, batch-writer.ts). It reads only
 * while the stream's buffered bytes (its own plus the client socket's) stay under
 * `consumption.maxStreamBufferBytes`, and writes only after the client drained what it had, so a slow
 * reader costs at most that much memory. It wakes on a publish notice for one of its partitions, on a
 * flush deadline, on `poke()` (a commit, a topology change), or on the slow safety-net poll. Each round
 * takes the event types' current timelines, so a reader that reaches the end of a closed timeline
 * continues on the next (docs/concepts.md "Timelines and storages").
 */
export class EventStreamLoop {
  private readonly sink: StreamSink;
  private readonly policy: StreamPolicy;
  private readonly eventTypes: TimelineSource;
  private readonly meter: StreamMeter;
  private readonly partitions = new Map<string, StreamPartition>();
  private readonly reader: PartitionReader;
  private readonly cutter: BatchCutter;
  private readonly writer: BatchWriter;
  private wake: (() => void) | undefined;
  private woken = false;
  private readonly deadline: number;
  /** When reads started failing with `STORAGE_UNAVAILABLE` (`performance.now()` ms), undefined while they succeed. */
  private readFailingSince: number | undefined;
  /** The partition removed last: the closing batch of a stream that holds none any more is one of it. */
  private lastRemoved: StreamPartition | undefined;

  constructor(options: EventStreamLoopOptions) {
    const { params, sink, policy, logs, eventTypes, config } = options;
    this.sink = sink;
    this.policy = policy;
    this.eventTypes = eventTypes;
    this.meter = options.meter ?? NO_STREAM_METER;
    this.deadline = now() + params.streamTimeoutSeconds * 1000;
    const partitions = this.partitions;
    this.cutter = new BatchCutter({ rules: params, policy, partitions, maxBufferBytes: config.maxStreamBufferBytes });
    this.writer = new BatchWriter({ sink, policy, partitions, format: options.format, meter: this.meter });
    this.reader = new PartitionReader({
      rules: params,
      logs,
      eventTypes,
      config,
      policy,
      partitions,
      buffers: this.cutter,
      clientBufferedBytes: () => sink.bufferedBytes,
      wake: () => this.poke(),
    });
    sink.signal.addEventListener('abort', () => this.poke());
  }

  /** Events, bytes and data batches sent so far, per event type. */
  get streamed(): ReadonlyMap<string, Readonly<StreamTally>> {
    return this.writer.streamed;
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
    const p = new StreamPartition({ eventType, partition, timelines, start, now: now() });
    this.partitions.set(p.key, p);
    this.poke();
    return p;
  }

  /** Drops a partition and its buffered events. */
  remove(eventType: string, partition: string): void {
    const p = this.partitions.get(offsetField(eventType, partition));
    if (!p) return;
    p.unlisten();
    this.cutter.release(p);
    this.partitions.delete(p.key);
    this.lastRemoved = p;
  }

  /** The partition entry, if the stream has it. */
  get(eventType: string, partition: string): StreamPartition | undefined {
    return this.partitions.get(offsetField(eventType, partition));
  }

  /** Stops sending a partition (it is leaving): its buffered events are dropped, reading stops. */
  deactivate(p: StreamPartition): void {
    p.active = false;
    this.cutter.clear(p);
    p.read = p.sent;
  }

  /** Moves a partition's position (a commit beyond what was sent skips ahead): buffered events are dropped. */
  skipTo(p: StreamPartition, offset: number): void {
    if (offset <= p.sent) return;
    p.sent = offset;
    p.read = offset;
    this.cutter.clear(p);
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
   * `closingBatch` is set, a last empty batch carries the reason (`info.stream_close_reason` and
   * `info.debug`): a batch of one of the stream's partitions or, when it holds none any more, of the
   * partition it removed last, else one at the policy's opening cursor (none when the policy has none).
   * Every partition's listener is removed.
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

        const readFailed = await this.read();
        const keepAliveLimitReached = this.cutter.cut(this.writer, now(), false);
        // Nothing sent yet and nothing cut: an opening keep-alive lets the header block out now.
        this.writer.opening();
        if (this.writer.hasPending && !(await this.writer.flush())) return { kind: 'aborted' };
        if (keepAliveLimitReached) return await this.finish(KEEP_ALIVE_LIMIT_REACHED, closingBatch);
        if (readFailed) await new Promise((resolve) => setTimeout(resolve, READ_RETRY_MS));
        else if (!this.woken && !this.hasWork()) await this.sleep();
      }
    } finally {
      unwatch();
      for (const p of this.partitions.values()) p.unlisten();
      this.meter.closed();
    }
  }

  /**
   * One round of reading. A read that fails with `STORAGE_UNAVAILABLE` reads nothing (no partition
   * moves: what other partitions read in that round is read again) and is retried; the stream fails only
   * when reads keep failing for {@link READ_OUTAGE_TOLERANCE_MS}.
   * @returns whether the round failed (then the loop pauses {@link READ_RETRY_MS})
   * @throws BrokerError 503 after the tolerance, or any other error at once
   */
  private async read(): Promise<boolean> {
    try {
      await this.reader.fill();
      this.readFailingSince = undefined;
      return false;
    } catch (err) {
      if (!(err instanceof BrokerError && err.code === 'STORAGE_UNAVAILABLE')) throw err;
      this.readFailingSince ??= now();
      if (now() - this.readFailingSince > READ_OUTAGE_TOLERANCE_MS) throw err;
      return true;
    }
  }

  /** Flushes buffered events (unless the client left) and sends the closing batch. */
  private async finish(close: StreamClose | undefined, closingBatch: boolean): Promise<StreamEnd> {
    if (close === undefined || this.sink.closed) return { kind: 'aborted' };
    this.cutter.cut(this.writer, now(), true);
    if (closingBatch) {
      const any = [...this.partitions.values()][0] ?? this.lastRemoved;
      const cursor = any === undefined ? this.policy.openingCursor?.() : undefined;
      if (any) this.writer.closing(any, close);
      else if (cursor !== undefined) this.writer.closingAt(cursor, close);
    }
    if (this.writer.hasPending) await this.writer.flush();
    return { kind: 'reason', ...close };
  }

  /** True when the next round can make progress at once: a full batch to send, or known data to read with room for it. */
  private hasWork(): boolean {
    if (this.policy.endReason() !== undefined) return true;
    const buffered = this.sink.bufferedBytes + this.cutter.bufferedBytes;
    for (const p of this.partitions.values()) {
      if (!p.active) continue;
      if (this.cutter.fullBatch(p) > 0) return true;
      if (this.reader.hasNews(p, buffered)) return true;
    }
    return false;
  }

  /** Waits for a notice, a poke, a drain, the next flush deadline or the next poll. */
  private async sleep(): Promise<void> {
    const t = now();
    const policyEnd = this.policy.msUntilEnd?.();
    let until = policyEnd === undefined ? this.deadline : Math.min(this.deadline, t + policyEnd);
    const buffered = this.sink.bufferedBytes + this.cutter.bufferedBytes;
    for (const p of this.partitions.values()) {
      if (!p.active) continue;
      until = Math.min(until, this.cutter.flushDeadline(p), this.reader.pollDeadline(p, buffered));
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
