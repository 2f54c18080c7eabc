import type { Subject } from '../../../auth/subject.js';
import { deadLetterPolicyOf } from '../../../domain/subscription/dead-letter.js';
import type { PartitionAssignment } from '../../../domain/subscription/rebalance.js';
import type { StreamParameters } from '../../../domain/stream/stream-parameters.js';
import { timelineMapOf, type TimelineMap } from '../../../domain/storages/timeline.js';
import type { StreamSink } from '../../../domain/stream/stream-sink.js';
import type { StreamFormat } from '../../../domain/stream/stream-format.js';
import type { StreamClose } from '../../../domain/stream/stream-close-reason.js';
import { offsetField, type SessionInfo } from '../../../storage/subscription-state-store.js';
import { readersKey } from '../../access-control.js';
import type { Clock } from '../clock.js';
import { NODE_SHUTTING_DOWN, type StreamPartition, type StreamPolicy } from '../stream/event-stream.js';
import { heldPartitions, subscriptionCursorText } from '../stream/stream-partition.js';
import { SessionCommits } from './session-commits.js';
import type { EventFilter } from '../stream/partition-reader.js';
import { SessionDeadLetters } from './session-dead-letters.js';
import { LeaseKeeper } from './session-lease.js';
import { transition, type SessionState } from './session-states.js';
import { CLOSED_SESSION_LEASE_MARGIN_MS, END_REASONS, RELEASE_AT_ONCE, type ResolvedSubscription, type SessionLoop, type SessionOwner, type SessionRunnerOptions } from './session-types.js';
import type { SubscriptionNotice } from '../subscription-notices.js';

/**
 * One subscription stream on this node: the state machine starting → streaming → leaving → (closing →)
 * released of `SESSION_TRANSITIONS` (an explicit state machine, so every transition is named and
 * checked; docs/architecture.md#43-subscription-sessions). It follows the assignment (adds partitions it is
 * given, stops sending partitions that move away and hands them over once committed), applies flow
 * control (`max_uncommitted_events`), `commit_timeout` and `stream_limit` over committed events, and
 * renews its lease. It sends only while its lease is known valid on the local clock, so a node paused
 * past its lease sends nothing before a heartbeat confirms the session still exists (the heartbeat and
 * every commit are fenced in Lua). Its timers run on the node's {@link Clock} (`RunnerDeps.clock`).
 */
export class SessionRunner implements StreamPolicy {
  private sessionState: SessionState = 'starting';
  private loop: SessionLoop | undefined;
  private readonly commits: SessionCommits;
  private assignments: readonly PartitionAssignment[] = [];
  private lastOffsets: ReadonlyMap<string, number> = new Map();
  private readonly lease: LeaseKeeper;
  /** Why the stream ends, once something outside the loop decided it should. */
  private override: StreamClose | undefined;
  /** True once the session was found gone: nothing more is sent while the stream finds out why. */
  private gone = false;
  private refreshing: Promise<void> = Promise.resolve();
  private refreshQueued = false;
  private fullRefreshQueued = false;
  /**
   * Settles once the batch loop returned: its last batches were handed to the client's socket, or
   * dropped (client gone, session lost). The session is never released before: a stopping
   * node must not deliver offsets the partition's next holder already has.
   */
  private loopEnded: Promise<unknown> = Promise.resolve();
  private readonly commitTimeoutMs: number;
  private readonly clock: Clock;
  private readonly owner: SessionOwner;
  private readonly subscription: ResolvedSubscription;
  private readonly params: StreamParameters;
  private readonly format: StreamFormat;
  /** The subscription's dead-letter handling (docs/consuming.md "Dead letters"), when its annotations set a policy. */
  private readonly deadLetters: SessionDeadLetters | undefined;

  /** The session's id (`X-Broker-StreamId`). */
  readonly streamId: string;
  /** Who consumes. */
  readonly subject: Subject;
  /** The names of the subscription's event types (blacklist checks). */
  readonly eventTypes: readonly string[];
  /** {@link readersKey} of each event type when the stream opened. */
  readonly readers: ReadonlyMap<string, string>;
  /** Partition count of each event type when the stream opened (a change ends the stream). */
  readonly partitionCounts: ReadonlyMap<string, number>;
  readonly accept: ((partition: StreamPartition, event: string) => boolean) | undefined;
  /** The subscription's filter (docs/consuming.md "Filters"): events it does not match are passed over and committed like skipped ones. */
  readonly filter: EventFilter | undefined;

  constructor(options: SessionRunnerOptions) {
    const { owner, subscription, params, filters } = options;
    this.owner = owner;
    this.subscription = subscription;
    this.streamId = options.streamId;
    this.params = params;
    this.subject = options.subject;
    this.format = options.format ?? 'json-stream';
    this.clock = owner.deps.clock;
    this.eventTypes = subscription.record.event_types;
    this.readers = new Map(subscription.eventTypes.map((e) => [e.name, readersKey(e)]));
    const counts = new Map<string, number>();
    for (const p of subscription.partitions) counts.set(p.eventType, (counts.get(p.eventType) ?? 0) + 1);
    this.partitionCounts = counts;
    this.accept = filters.size === 0 ? undefined : (partition, event) => filters.get(partition.eventType)?.(event) ?? true;
    this.filter = options.eventFilter;
    this.released = new Promise<void>((resolve) => (this.markReleased = resolve));
    this.commitTimeoutMs = params.commitTimeoutSeconds * 1000;
    const { state, logger } = owner.deps;
    const ids = { subscriptionId: this.subscriptionId, streamId: this.streamId };
    this.lease = new LeaseKeeper({
      ...ids,
      store: state,
      logger,
      clock: this.clock,
      leaseMs: owner.deps.config.subscriptions.leaseTtlMs,
      onGone: () => void this.sessionGone(),
      onExpired: async () => {
        await owner.applyChange(subscription, {});
      },
      noticesLive: () => owner.noticesLive(this.subscriptionId),
      onRefreshDue: () => this.scheduleRefresh(),
    });
    const partitions = (): Iterable<StreamPartition> => this.loop?.current ?? [];
    const onCommitted = (field: string, offset: number): void => this.deadLetters?.committedTo(field, offset);
    const onExpiredPassed = (partition: { readonly key: string; readonly eventType: string }, expired: number): void => owner.expiredPassed(this.subscriptionId, partition, expired);
    this.commits = new SessionCommits({ ...ids, store: state, logger, clock: this.clock, partitions, onCommitted, onExpiredPassed });
    const policy = deadLetterPolicyOf(subscription.record.annotations);
    const timelinesOf = (eventType: string): TimelineMap => this.timelinesOf(eventType);
    const uncommittedOf = (p: StreamPartition): number => this.commits.uncommittedOf(p);
    this.deadLetters = policy && new SessionDeadLetters({ ...ids, policy, deps: owner.deps, batchLimit: params.batchLimit, committed: this.commits.committed, uncommittedOf, timelinesOf });
  }

  /** Where the session stands (see `SESSION_TRANSITIONS`). */
  get state(): SessionState {
    return this.sessionState;
  }

  /** Moves the session to `next`. @throws IllegalSessionTransition when the table does not allow it (a bug) */
  private moveTo(next: SessionState): void {
    this.sessionState = transition(this.sessionState, next);
  }

  /** The timelines of an event type: the loop's current ones, else those the stream opened with. */
  private timelinesOf(eventType: string): TimelineMap {
    const live = this.loop === undefined ? undefined : [...this.loop.current].find((p) => p.eventType === eventType);
    return live?.timelines ?? this.subscription.partitions.find((p) => p.eventType === eventType)?.timelines ?? timelineMapOf(undefined, new Date(0).toISOString());
  }

  get subscriptionId(): string {
    return this.subscription.record.id;
  }

  /**
   * A notice of the subscription: `reset` and `authz` end the stream; `commit` reads the offsets again,
   * `topology` and `resubscribed` (notices may have been missed) the whole state.
   */
  notice(kind: SubscriptionNotice): void {
    if (kind === 'reset') return this.end(END_REASONS.reset);
    if (kind === 'authz') return this.end(END_REASONS.authorizationChanged);
    // A commit only moves offsets; the assignment is read again only when a partition is leaving this
    // stream (its hand-over waits for commits) or the stream is closing.
    const leaving = this.sessionState === 'released' || this.sessionState === 'closing' || this.loop === undefined || [...this.loop.current].some((p) => !p.active);
    this.scheduleRefresh(kind === 'commit' && !leaving);
  }

  /**
   * Streams until an end condition. Returns when the HTTP stream may end: a session released at once has
   * left Redis by then, so a consumer reopening at once finds its partitions free (else 409); with
   * uncommitted events it stays for the commit window, released in the background (`released`).
   */
  async run(sink: StreamSink): Promise<void> {
    this.moveTo('streaming');
    const loop = this.owner.deps.openLoop(this.params, sink, this, this.format);
    this.loop = loop;
    this.lease.start();
    let releaseNow = true;
    try {
      await this.refresh();
      const running = loop.run(true);
      this.loopEnded = running.catch(() => undefined);
      const end = await running;
      releaseNow = this.owner.stopping || (this.override !== undefined && RELEASE_AT_ONCE.has(this.override)) || (end.kind === 'reason' && end.reason === NODE_SHUTTING_DOWN.reason);
      this.owner.deps.logger.debug({ subscription: this.subscriptionId, stream: this.streamId, stream_close_reason: end.kind === 'reason' ? end.reason : undefined }, 'subscription stream ended');
    } finally {
      this.lease.stop();
      this.moveTo('leaving');
      this.owner.streamedListener?.({ subject: this.subject, subscription: this.subscriptionId, streamed: loop.streamed });
      const releasing = this.leave(releaseNow).finally(() => {
        try {
          this.moveTo('released');
        } finally {
          this.markReleased();
        }
      });
      // Bounded: leave() gives up (the session then expires with its lease) when Redis does not answer.
      if (releaseNow || this.commits.uncommitted() === 0) await releasing; // as leave() decides
    }
  }

  /** Settles once the session left Redis (at once, or after its commit window). */
  readonly released: Promise<void>;
  private markReleased: () => void = () => undefined;

  /** Ends the stream at its next turn with `reason` in the closing batch; the session is released at once. */
  end(reason: StreamClose): void {
    this.override ??= reason;
    this.loop?.poke();
  }

  /**
   * The session is gone from Redis: nothing more is sent, and the stream ends with `subscription_deleted`
   * when the subscription is gone too, else (also when Redis cannot tell) with `session_lost`.
   * @param subscriptionKnown the subscription is known to exist (its state still lists the session)
   */
  private async sessionGone(subscriptionKnown = false): Promise<void> {
    this.gone = true;
    this.loop?.poke();
    const exists = subscriptionKnown || (await this.owner.subscriptionExists(this.subscriptionId).catch(() => true));
    if (this.sessionState !== 'released') this.end(exists ? END_REASONS.sessionLost : END_REASONS.subscriptionDeleted);
  }

  /**
   * Node shutdown: end the stream now and release the session (also one inside its commit window).
   * Resolves once the loop wrote its last batches (or dropped them); the release follows in `leave`,
   * never before (docs/operations.md "Graceful stops").
   */
  async stop(): Promise<void> {
    this.override ??= NODE_SHUTTING_DOWN;
    this.loop?.poke();
    this.commits.recheck();
    await this.refreshing;
    await this.loopEnded;
  }

  // ---- StreamPolicy ----

  allowance(): number {
    if (!this.lease.valid) return 0;
    // The session is gone: its partitions may be another stream's already, so the closing flush drops
    // what is buffered instead of sending it.
    if (this.gone) return 0;
    const byCommits = this.params.maxUncommittedEvents - this.commits.uncommitted();
    const byLimit = this.params.streamLimit === 0 ? Number.POSITIVE_INFINITY : this.params.streamLimit - this.commits.sentInStream;
    return Math.max(0, Math.min(byCommits, byLimit));
  }

  /** Dead-letter search (docs/consuming.md "Dead letters"): one event per batch, each once everything sent before it is committed. */
  partitionAllowance(partition: StreamPartition): number {
    return this.deadLetters?.partitionAllowance(partition) ?? Number.POSITIVE_INFINITY;
  }

  /** The commit timeout: the loop wakes when it runs out even if no commit, notice or poll wakes it first. */
  msUntilEnd(): number | undefined {
    return this.commits.msUntilTimeout(this.commitTimeoutMs);
  }

  endReason(): StreamClose | undefined {
    if (this.override !== undefined) return this.override;
    if (this.commits.timedOut(this.commitTimeoutMs)) return END_REASONS.commitTimeout;
    if (this.params.streamLimit !== 0 && this.commits.committedInStream >= this.params.streamLimit) return END_REASONS.streamLimit(this.params.streamLimit);
    return undefined;
  }

  sent(partition: StreamPartition, count: number): void {
    this.commits.sent(partition, count);
  }

  /** Skipped events are committed by the broker once everything sent before them is (docs/consuming.md "Commits"). */
  skipped(partition: StreamPartition): void {
    this.commits.skipped(partition);
  }

  /**
   * Offsets removed before the stream read them (docs/consuming.md "Events removed before they were
   * read") are committed by the broker like skipped events, once everything sent before them is.
   */
  passedOver(partition: StreamPartition, expired: number): void {
    this.commits.skipped(partition, expired);
  }

  /** Before this stream holds a partition: the cursor of a partition it is about to get (or any), at its committed offset. */
  openingCursor(): string | undefined {
    const a = this.assignments.find((x) => x.nextSession === this.streamId) ?? this.assignments[0];
    if (!a) return undefined;
    const field = offsetField(a.eventType, a.partition);
    return subscriptionCursorText(a.eventType, a.partition, this.timelinesOf(a.eventType), this.commits.committed.get(field) ?? this.lastOffsets.get(field) ?? -1);
  }

  /** Subscription batches say why a stream starts and ends (docs/consuming.md "Subscription streams"). */
  readonly debugInfo = true;

  cursor(p: StreamPartition): string {
    return subscriptionCursorText(p.eventType, p.partition, p.timelines, p.sent);
  }

  // ---- state ----

  /** Queues a refresh (at most one waiting); `offsetsOnly` reads the committed offsets alone. */
  private scheduleRefresh(offsetsOnly = false): void {
    if (!offsetsOnly) this.fullRefreshQueued = true;
    if (this.refreshQueued) return;
    this.refreshQueued = true;
    this.refreshing = this.refreshing.then(async () => {
      this.refreshQueued = false;
      const full = this.fullRefreshQueued;
      this.fullRefreshQueued = false;
      const work = full ? this.refresh() : this.refreshOffsets();
      await work.catch((err: unknown) => this.owner.deps.logger.warn({ err: (err as Error).message, subscription: this.subscriptionId }, 'cannot refresh the stream state; retrying on the next heartbeat'));
    });
  }

  /** Reads the committed offsets and follows them (flow control, skip-ahead, stream limit). */
  private async refreshOffsets(): Promise<void> {
    const offsets = await this.owner.deps.state.offsets(this.subscriptionId);
    this.lastOffsets = offsets;
    this.applyOffsets(offsets);
    this.loop?.poke();
    this.commits.recheck();
  }

  /** Reads assignment and offsets and follows them. */
  private async refresh(): Promise<void> {
    const loop = this.loop;
    if (!loop) return;
    const { state: store, logger } = this.owner.deps;
    // What the stream reads before and after, logged at debug when it changed (operators and tests
    // see when a node applied an assignment).
    const heldBefore = logger.isLevelEnabled('debug') ? heldPartitions(loop.current) : undefined;
    const [state, offsets] = await Promise.all([store.read(this.subscriptionId), store.offsets(this.subscriptionId)]);
    this.assignments = state.assignments;
    this.lastOffsets = offsets;
    this.applyOffsets(offsets);
    // A reset whose notice was missed (the subscriber connection was down) still ends the stream.
    if (state.resetRunning && this.sessionState !== 'released') this.override ??= END_REASONS.reset;
    const me = state.sessions.find((s) => s.id === this.streamId);
    if (!me || me.expiresAt <= state.nowMs) {
      await this.sessionGone(me !== undefined);
      this.commits.recheck();
      return;
    }
    const seen = new Set<string>();
    for (const a of state.assignments) {
      const field = offsetField(a.eventType, a.partition);
      seen.add(field);
      const p = loop.get(a.eventType, a.partition);
      if (a.state === 'assigned' && a.session === this.streamId) {
        if (!p || !p.active) {
          let start = offsets.get(field) ?? -1;
          this.commits.begin(field, start);
          if (this.deadLetters) {
            const taken = await this.deadLetters.take(a, start);
            if (taken === undefined) continue;
            start = taken;
            if (loop.get(a.eventType, a.partition)?.active === true) continue;
          }
          loop.add(a.eventType, a.partition, this.timelinesOf(a.eventType), start);
        }
      } else if (a.state === 'reassigning' && a.session === this.streamId) {
        if (p?.active) loop.deactivate(p);
        // Hand over once everything sent of it is committed. Without `p` this stream holds it without
        // ever having read it (it moved on again before this stream's refresh took it, or a hand-over
        // failed after `remove`): nothing is uncommitted, so the hand-over completes at once — waiting
        // would keep the partition from every stream until this one ends.
        if (!p || this.commits.uncommittedOf(p) === 0) {
          if (p) loop.remove(a.eventType, a.partition);
          await this.owner.applyChange(this.subscription, { complete: { eventType: a.eventType, partition: a.partition, from: this.streamId } });
        }
      } else if (p) {
        loop.remove(a.eventType, a.partition);
      }
    }
    for (const p of loop.current) if (!seen.has(p.key)) loop.remove(p.eventType, p.partition);
    loop.poke();
    this.commits.recheck();
    if (heldBefore !== undefined) {
      const held = heldPartitions(loop.current);
      if (held.join() !== heldBefore.join()) logger.debug({ subscription: this.subscriptionId, stream: this.streamId, partitions: held }, 'stream partitions changed');
    }
  }

  /** Takes new committed offsets: flow control, stream limit, skip-ahead, commit timeout. */
  private applyOffsets(offsets: ReadonlyMap<string, number>): void {
    if (this.loop) this.commits.apply(offsets, this.loop);
  }

  /**
   * Leaves the subscription (state `leaving`). With uncommitted events and no reason to release at
   * once, the session moves to `closing`: it stays as `closed` in Redis for `commit_timeout` so the
   * client can still commit (docs/consuming.md "Commits"); its partitions move to other streams when committed or
   * when the window ends.
   */
  private async leave(releaseNow: boolean): Promise<void> {
    const { logger } = this.owner.deps;
    // Partitions move only after this stream's last batch went to its socket or was dropped: a stopping
    // node must not deliver offsets the partition's next holder already has.
    await this.loopEnded;
    try {
      if (releaseNow || this.commits.uncommitted() === 0) {
        await this.owner.applyChange(this.subscription, { remove: [this.streamId] });
        return;
      }
      this.moveTo('closing');
      const info: SessionInfo = { requested: [], state: 'closed', node: this.owner.nodeId };
      await this.owner.applyChange(this.subscription, { upsert: { id: this.streamId, info, leaseMs: this.commitTimeoutMs + CLOSED_SESSION_LEASE_MARGIN_MS } });
      const deadline = this.clock.now() + this.commitTimeoutMs;
      await this.commits.waitForCommits(deadline, () => this.owner.stopping);
      if (this.deadLetters && !this.owner.stopping) await this.deadLetters.countFailedSends(this.loop?.current ?? []);
      await this.owner.applyChange(this.subscription, { remove: [this.streamId] });
    } catch (err) {
      logger.warn({ err: (err as Error).message, subscription: this.subscriptionId }, 'could not release a stream session; it expires with its lease');
    }
  }
}
