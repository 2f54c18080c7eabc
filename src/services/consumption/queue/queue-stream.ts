import type { Subject } from '../../../auth/subject.js';
import type { DeadLetterPolicy } from '../../../domain/subscription/dead-letter.js';
import type { StreamParameters } from '../../../domain/stream/stream-parameters.js';
import type { StreamSink } from '../../../domain/stream/stream-sink.js';
import type { StreamFormat } from '../../../domain/stream/stream-format.js';
import type { StreamClose } from '../../../domain/stream/stream-close-reason.js';
import type { Logger } from '../../../observability/logger.js';
import type { ConsumptionMeter, StreamMeter } from '../../../observability/meters.js';
import type { QueueBatch, QueueStateStore } from '../../../storage/queue-state-store.js';
import { BatchWriter, type FramePolicy } from '../stream/batch-writer.js';
import type { Clock } from '../clock.js';
import { KEEP_ALIVE_LIMIT_REACHED, NODE_SHUTTING_DOWN, STREAM_TIMEOUT_REACHED, type StreamedListener } from '../stream/event-stream.js';
import type { QueueGroup } from './queue-group.js';
import { LeaseKeeper } from '../session/session-lease.js';
import { transition, type SessionState } from '../session/session-states.js';
import { END_REASONS, type DeadLetterSink, type ResolvedSubscription, type SessionStore } from '../session/session-types.js';
import { StreamPartition, subscriptionCursorText } from '../stream/stream-partition.js';

/** How long after a batch's deadline (on the local clock) a stream claims again, ms. */
const DEADLINE_MARGIN_MS = 20;
/** Batches one claim asks for at most (each up to `batch_limit` events, together up to `max_uncommitted_events`). */
const BATCHES_PER_CLAIM = 8;

/** What the queue-mode streams of a node share (`SubscriptionStreams` builds it once). */
export interface QueueStreamDeps {
  readonly queue: Pick<QueueStateStore, 'claim' | 'settle' | 'leave'>;
  /** Heartbeats (`heartbeat-1.lua`: queue-mode sessions live in the same sorted set as the others). */
  readonly state: Pick<SessionStore, 'heartbeat'>;
  readonly logger: Logger;
  readonly clock: Clock;
  /** `subscriptions.leaseTtlMs`. */
  readonly leaseMs: number;
  readonly consumption: ConsumptionMeter;
  readonly meter: StreamMeter;
  readonly deadLetters: DeadLetterSink | undefined;
}

/** One queue-mode stream (see {@link QueueStreamRunner}). */
export interface QueueStreamOptions {
  readonly deps: QueueStreamDeps;
  readonly group: QueueGroup;
  readonly subscription: ResolvedSubscription;
  readonly streamId: string;
  readonly params: StreamParameters;
  readonly subject: Subject;
  readonly format: StreamFormat;
  /** The subscription's dead-letter policy, when its annotations set one. */
  readonly deadLetterPolicy: DeadLetterPolicy | undefined;
  /** Whether the subscription's notices reach this node now (the lease keeper's safety-net reads; queue-mode streams need none but their claims). */
  readonly noticesLive: () => boolean;
  /** Whether the subscription still exists (tells a deleted subscription from a lost session); true when it cannot tell. */
  readonly subscriptionExists: () => Promise<boolean>;
  /** Told what the stream sent when it ends (KPI `broker.data.streamed`). */
  readonly streamedListener: StreamedListener | undefined;
}

/**
 * One stream of a queue-mode subscription (docs/consuming.md "Queue mode"): any number of them read the
 * same partitions at once. Each round it claims batches in Redis (`QueueStateStore.claim`: waiting batches
 * first, then new offsets; fenced by its session, bounded by `max_uncommitted_events` over the events it
 * holds), reads their events through its {@link QueueGroup} and sends them; it sleeps until a publish notice,
 * a queue notice (a batch was handed back or timed out), an acknowledgement of its own, the earliest
 * deadline of a held batch (the claim says when), a keep-alive, or its group's safety-net poll. It ends like a stream-mode stream (limits, timeouts, its session lost, a reset) and with
 * `commit_timeout_reached` when a batch it holds passed its deadline; batches it holds when it ends stay
 * acknowledgeable until their deadlines, then go to other streams.
 */
export class QueueStreamRunner implements FramePolicy {
  readonly streamId: string;
  readonly subject: Subject;
  readonly eventTypes: readonly string[];
  readonly debugInfo = true;
  private readonly options: QueueStreamOptions;
  private readonly partitions = new Map<string, StreamPartition>();
  private readonly lease: LeaseKeeper;
  private override: StreamClose | undefined;
  private wakeUp: (() => void) | undefined;
  private woken = false;
  private sentInStream = 0;
  /** Its last claim found nothing while it had room: new events should wake it. */
  private hungry = false;
  /**
   * A claim is in flight: it reads the newest offsets the group knew when it was sent, so events
   * announced meanwhile must wake the stream to claim again (else it would sleep past them).
   */
  private claiming = false;
  /** When to claim again without a wake-up (a held batch's deadline), clock ms. */
  private claimAgainAt = Number.POSITIVE_INFINITY;
  private rotate = 0;
  /** Settles when the stream ended and its session left Redis. */
  readonly released: Promise<void>;
  private markReleased: () => void = () => undefined;
  private runEnded: Promise<void> = Promise.resolve();
  /**
   * Where the session stands, under the same transition table as a stream-mode session
   * (`SESSION_TRANSITIONS`): starting → streaming → leaving → released. A queue stream never passes
   * through `closing`: the batches it holds stay in Redis, acknowledgeable until their deadlines, so its
   * end waits for no commit window.
   */
  private sessionState: SessionState = 'starting';

  constructor(options: QueueStreamOptions) {
    this.options = options;
    this.streamId = options.streamId;
    this.subject = options.subject;
    this.eventTypes = options.subscription.record.event_types;
    this.released = new Promise<void>((resolve) => (this.markReleased = resolve));
    const now = options.deps.clock.now();
    for (const p of options.subscription.partitions) {
      const sp = new StreamPartition({ eventType: p.eventType, partition: p.partition, timelines: p.timelines, start: -1, now });
      this.partitions.set(sp.key, sp);
    }
    const { deps } = options;
    this.lease = new LeaseKeeper({
      store: deps.state,
      logger: deps.logger,
      clock: deps.clock,
      subscriptionId: this.subscriptionId,
      streamId: this.streamId,
      leaseMs: deps.leaseMs,
      onGone: () => void this.sessionGone(),
      onExpired: () => deps.queue.leave(this.subscriptionId, undefined),
      noticesLive: options.noticesLive,
      onRefreshDue: () => undefined,
    });
  }

  get subscriptionId(): string {
    return this.options.subscription.record.id;
  }

  /** Where the session stands (see `SESSION_TRANSITIONS`). */
  get state(): SessionState {
    return this.sessionState;
  }

  /** A batch's cursor: its partition at `p.sent` (the batch's last offset; for opening and keep-alive batches, the last one this stream sent of it). */
  cursor(p: StreamPartition): string {
    return subscriptionCursorText(p.eventType, p.partition, p.timelines, p.sent);
  }

  /** A notice of the subscription (see `SubscriptionNotices`): `reset` and `authz` end the stream; the others may let it claim more. */
  notice(kind: string): void {
    if (kind === 'reset') return this.end(END_REASONS.reset);
    if (kind === 'authz') return this.end(END_REASONS.authorizationChanged);
    if (kind === 'topology') void this.options.subscriptionExists().then((exists) => (exists ? undefined : this.end(END_REASONS.subscriptionDeleted)));
    // Its own acknowledgements reach it through `wake` (`QueueStreams` routes them); other streams' free nothing of its room.
    if (kind === 'commit' || kind.startsWith('ack ')) return;
    this.wake();
  }

  /** Ends the stream at its next turn with `reason` in the closing batch. */
  end(reason: StreamClose): void {
    this.override ??= reason;
    this.wake();
  }

  /** Node shutdown: ends the stream now; resolves once it wrote its last batch. */
  async stop(): Promise<void> {
    this.end(NODE_SHUTTING_DOWN);
    await this.runEnded;
  }

  /** Wakes the loop (a notice, an acknowledgement of its own, new events). */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  private async sessionGone(): Promise<void> {
    const exists = await this.options.subscriptionExists().catch(() => true);
    this.end(exists ? END_REASONS.sessionLost : END_REASONS.subscriptionDeleted);
  }

  /** Streams until an end condition; the session leaves Redis when it returns (held batches stay until their deadlines). */
  async run(sink: StreamSink): Promise<void> {
    let finished: () => void = () => undefined;
    this.runEnded = new Promise<void>((resolve) => (finished = resolve));
    const { deps, group, params } = this.options;
    const unwake = group.onWake(
      () => this.wake(),
      () => this.hungry || this.claiming,
    );
    const writer = new BatchWriter({ sink, policy: this, partitions: this.partitions, format: this.options.format, meter: deps.meter });
    deps.meter.opened();
    this.lease.start();
    this.sessionState = transition(this.sessionState, 'streaming');
    try {
      await group.ready;
      // Opening, keep-alive and closing batches carry the cursor of the first partition's last batch this
      // stream sent (before any, the start): committing it changes nothing.
      const first = [...this.partitions.values()][0];
      writer.opening();
      if (!(await writer.flush())) return;
      const clock = deps.clock;
      const flushMs = params.batchFlushTimeoutSeconds * 1000;
      const deadline = clock.now() + params.streamTimeoutSeconds * 1000;
      let keepAliveAt = clock.now() + flushMs;
      let keepAlives = 0;
      for (;;) {
        const end = this.endReason(sink, deadline);
        if (end !== undefined) {
          if (end !== 'gone' && first) {
            writer.closing(first, end);
            await writer.flush();
          }
          return;
        }
        this.woken = false;
        const sent = this.lease.valid ? await this.claimAndSend(writer) : 0;
        if (sent < 0) continue;
        const now = clock.now();
        if (sent > 0) {
          keepAlives = 0;
          keepAliveAt = now + flushMs;
          if (!(await writer.flush())) return;
          continue;
        }
        if (now >= keepAliveAt && first) {
          writer.keepAlive(first);
          if (!(await writer.flush())) return;
          keepAlives++;
          keepAliveAt = now + flushMs;
          if (params.streamKeepAliveLimit > 0 && keepAlives >= params.streamKeepAliveLimit) {
            this.override ??= KEEP_ALIVE_LIMIT_REACHED;
            continue;
          }
        }
        if (this.woken || now >= this.claimAgainAt) continue;
        await this.sleep(Math.max(1, Math.min(keepAliveAt, deadline, this.claimAgainAt) - now), sink);
      }
    } catch (err) {
      deps.logger.warn({ err: (err as Error).message, subscription: this.subscriptionId, stream: this.streamId }, 'queue stream failed');
      throw err;
    } finally {
      this.sessionState = transition(this.sessionState, 'leaving');
      unwake();
      this.lease.stop();
      deps.meter.closed();
      this.options.streamedListener?.({ subject: this.subject, subscription: this.subscriptionId, streamed: writer.streamed });
      finished();
      void deps.queue
        .leave(this.subscriptionId, this.streamId)
        .catch((err: unknown) => deps.logger.warn({ err: (err as Error).message, subscription: this.subscriptionId, stream: this.streamId }, 'could not remove a queue stream session; it expires with its lease'))
        .finally(() => {
          this.sessionState = transition(this.sessionState, 'released');
          this.markReleased();
        });
    }
  }

  /** Why the stream ends now, if it does: `gone` when the client left (nothing more is written). */
  private endReason(sink: StreamSink, deadline: number): StreamClose | 'gone' | undefined {
    if (sink.closed) return 'gone';
    if (this.override !== undefined) return this.override;
    if (sink.signal.aborted) return NODE_SHUTTING_DOWN;
    if (this.options.deps.clock.now() >= deadline) return STREAM_TIMEOUT_REACHED;
    const limit = this.options.params.streamLimit;
    if (limit !== 0 && this.sentInStream >= limit) return END_REASONS.streamLimit(limit);
    return undefined;
  }

  /**
   * Claims batches and frames them. @returns events framed (0: nothing to send now), or -1 when the stream
   * must end (its session is gone, or one of its batches passed its deadline)
   */
  private async claimAndSend(writer: BatchWriter): Promise<number> {
    const { deps, group, params, deadLetterPolicy } = this.options;
    const limit = params.streamLimit === 0 ? Number.POSITIVE_INFINITY : params.streamLimit - this.sentInStream;
    const fields = group.fields;
    this.claiming = true;
    const outcome = await deps.queue
      .claim(this.subscriptionId, {
        streamId: this.streamId,
        commitTimeoutMs: params.commitTimeoutSeconds * 1000,
        maxHeld: Math.min(params.maxUncommittedEvents, limit),
        batchLimit: params.batchLimit,
        maxBatches: BATCHES_PER_CLAIM,
        deliveryLimit: deadLetterPolicy?.maxEventSendCount ?? 0,
        isolate: deadLetterPolicy !== undefined,
        rotate: this.rotate++ % Math.max(1, fields.length),
        newest: group.newest(),
      })
      .finally(() => (this.claiming = false));
    if (outcome.kind === 'session_gone') {
      await this.sessionGone();
      return -1;
    }
    if (outcome.timedOut) {
      this.end(END_REASONS.commitTimeout);
      return -1;
    }
    // Nothing handed out: claim again when the earliest deadline passes (its batch may then be this
    // stream's to take, or this stream's own that timed out), a little after, so Redis's clock passed it too.
    this.claimAgainAt = outcome.batches.length === 0 && outcome.msUntilDeadline !== undefined ? deps.clock.now() + outcome.msUntilDeadline + DEADLINE_MARGIN_MS : Number.POSITIVE_INFINITY;
    const room = Math.min(params.maxUncommittedEvents, limit);
    this.hungry = outcome.batches.length === 0 && outcome.held < room;
    // Full before the events ran out, maybe: another waiting stream of the node takes over.
    if (outcome.batches.length > 0 && outcome.held >= room) group.wakeAll(1);
    let framed = 0;
    for (const batch of outcome.batches) {
      if (batch.dead) {
        await this.deadLetter(batch, deadLetterPolicy);
        continue;
      }
      const p = this.partitions.get(batch.field);
      if (!p) continue;
      const { slices, count } = await group.read(batch.field, batch.from, batch.to);
      p.timelines = group.timelinesOf(batch.field) ?? p.timelines;
      p.sent = batch.to;
      // Events retention removed before the batch was read: the batch carries what is left (maybe nothing,
      // a keep-alive whose cursor still acknowledges the batch).
      if (count > 0) writer.batch(p, slices, count);
      else writer.keepAlive(p);
      framed += Math.max(count, 1);
      this.sentInStream += count;
    }
    return framed;
  }

  /**
   * A batch whose one event reached the delivery limit: stored in the dead-letter queue (policy
   * `DEAD_LETTER_QUEUE`) or only skipped, then acknowledged by the broker (docs/consuming.md "Dead letters").
   */
  private async deadLetter(batch: QueueBatch, policy: DeadLetterPolicy | undefined): Promise<void> {
    const { deps, group } = this.options;
    const p = this.partitions.get(batch.field);
    if (!p || !policy) return;
    const { slices } = await group.read(batch.field, batch.from, batch.to);
    const event = slices[0]?.toString();
    const offset = p.timelines.format(p.partition, batch.from);
    if (event !== undefined && policy.unprocessableEventPolicy === 'DEAD_LETTER_QUEUE' && deps.deadLetters) {
      await deps.deadLetters.publish({ subscriptionId: this.subscriptionId, eventType: p.eventType, partition: p.partition, offset, failedSends: batch.deliveries, event });
    }
    await deps.queue.settle(this.subscriptionId, this.streamId, 'ack', [{ field: batch.field, offset: batch.to }]);
    deps.consumption.deadLettered(this.subscriptionId, p.eventType);
    deps.logger.warn({ subscription: this.subscriptionId, event_type: p.eventType, partition: p.partition, offset, deliveries: batch.deliveries, policy: policy.unprocessableEventPolicy }, 'skipped an event of a queue subscription delivered as often as its policy allows');
  }

  /** Sleeps until a wake-up, `ms` passed, or the client left. */
  private async sleep(ms: number, sink: StreamSink): Promise<void> {
    if (this.woken) return;
    await new Promise<void>((resolve) => {
      const cancel = this.options.deps.clock.setTimeout(() => done(), ms);
      const onAbort = (): void => done();
      sink.signal.addEventListener('abort', onAbort, { once: true });
      const done = (): void => {
        cancel();
        sink.signal.removeEventListener('abort', onAbort);
        this.wakeUp = undefined;
        resolve();
      };
      this.wakeUp = done;
    });
  }
}
