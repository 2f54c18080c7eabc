import { randomUUID } from 'node:crypto';
import type { BrokerConfig } from '../../config/config-schema.js';
import type { Subject } from '../../auth/subject.js';
import { partitionIds, type EventType } from '../../domain/event-type.js';
import { parseOffset, type PartitionRange } from '../../domain/offsets.js';
import { timelineMapOf, type TimelineMap } from '../../domain/timeline.js';
import { completeReassignment, freeSlots, rebalance, validateDirectRequests, type PartitionAssignment, type PartitionKey, type Session } from '../../domain/rebalance.js';
import { parseStreamParameters, type StreamParameters } from '../../domain/stream-parameters.js';
import type { Subscription } from '../../domain/subscription.js';
import { brokerError } from '../../errors/catalog.js';
import { scriptError } from '../../storage/script-failures.js';
import type { StreamingAnswer, StreamSink } from '../../domain/stream-sink.js';
import type { Logger } from '../../observability/logger.js';
import type { EventTypeStore } from '../../storage/event-type-store.js';
import type { Keys } from '../../storage/keys.js';
import type { PartitionLogs } from '../../storage/partition-logs.js';
import type { SubscriptionRegistry } from '../subscription-registry.js';
import { CONSUMPTION_BLOCKED, READERS_CHANGED, readersKey, type AccessControl } from '../access-control.js';
import type { Settings } from '../settings.js';
import { offsetField, type SessionInfo, type SubscriptionState, type SubscriptionStateStore } from '../../storage/subscription-state-store.js';
import { EventStreamLoop, NODE_SHUTTING_DOWN, type StreamedListener, type StreamPartition, type StreamPolicy, type TimelineSource } from './event-stream.js';
import { NO_CONSUMPTION_METER, type ConsumptionMeter, type StreamMeter } from '../../observability/meters.js';
import { deadLetterPolicyOf, deadLetterStart, type DeadLetterPolicy, type PartitionDeadLetterState } from '../../domain/dead-letter.js';
import type { DeadLetterQueue } from '../dead-letter-queue.js';
import type { SubscriptionNotice, SubscriptionNotices } from './subscription-notices.js';
import { STREAM_CONTENT_TYPES, type StreamFormat } from '../../domain/stream-format.js';

/** One partition of a subscription with its event type's timelines (issue 6 §3.2). */
export interface SubscriptionPartition extends PartitionKey {
  readonly timelines: TimelineMap;
}

/** The stores, hub and settings a session runner works with (shared by all runners of a node). */
export interface RunnerDeps {
  readonly state: SubscriptionStateStore;
  readonly logs: PartitionLogs;
  readonly timelineSource: TimelineSource;
  readonly config: Pick<BrokerConfig, 'subscriptions' | 'consumption'>;
  readonly logger: Logger;
  /** Counts subscription streams and what they send (`kind="subscription"`). */
  readonly meter: StreamMeter;
  /** Counts skipped poison events (`broker_dead_letters_total`). */
  readonly consumption: ConsumptionMeter;
  /** Where skipped events go with `DEAD_LETTER_QUEUE` (issue 14 §3); absent = they are only skipped. */
  readonly deadLetters: DeadLetterSink | undefined;
}

/** Stores a skipped event in the dead-letter queue. @throws when it was not stored */
export type DeadLetterSink = Pick<DeadLetterQueue, 'publish'>;

/** A subscription resolved for consumption: its record and every partition of its event types. */
export interface ResolvedSubscription {
  readonly record: Subscription;
  readonly partitions: readonly SubscriptionPartition[];
  /** The records of its event types that exist. */
  readonly eventTypes: readonly EventType[];
}

/** Closing-batch debug messages (WIRE.md "Streaming"). */
export const END_REASONS = {
  commitTimeout: 'Commit timeout reached',
  streamLimit: (n: number) => `Stream limit in events reached: ${n}`,
  reset: 'Resetting subscription cursors',
  sessionLost: 'Stream session ended: its lease expired or the subscription changed',
  blocked: CONSUMPTION_BLOCKED,
  authorizationChanged: 'Subscription authorization changed; reconnect',
  readersChanged: READERS_CHANGED,
  /** An event type of the stream got more partitions (repartitioning): reconnect to get them too. */
  repartitioned: 'The partitions of an event type of this stream changed (repartitioning); reconnect',
} as const;

const MAX_APPLY_ATTEMPTS = 50;
/**
 * A stream re-reads its subscription's state at every this-many heartbeats (3: once per lease) while the
 * subscription's notices reach its node, and at every heartbeat while they do not (see `beat`).
 */
const SAFETY_NET_REFRESH_BEATS = 3;
/**
 * A closed session (commit window open) is leased this long past its `commit_timeout`: the node removes
 * it itself when the window ends (after counting failed sends), so the lease only frees the partitions of
 * a node that died meanwhile, and must not run out first while a loaded node finishes the window.
 */
const CLOSED_SESSION_LEASE_MARGIN_MS = 2_000;

/**
 * Subscription streams (spec "Subscriptions"; WIRE.md "Streaming", "Commits, cursor reset, stats",
 * "Rebalancing"; DESIGN.md §6). Every stream is a session in Redis with a lease renewed by heartbeat;
 * the partition assignment is recomputed by the pure `rebalance` whenever a session joins, leaves or
 * expires, and written with compare-and-set on its version. A node listens to the notice channel of
 * each subscription it streams (`SubscriptionNotices`): a change of assignment, a commit or a reset
 * reaches its streams at once, whichever node made it.
 */
export class SubscriptionStreams {
  private readonly runners = new Map<string, SessionRunner>();
  private shuttingDown = false;
  /** Where the notices of the subscriptions streamed here arrive (set by `start`). */
  private notices: SubscriptionNotices | undefined;

  /** What the session runners use; built once. */
  readonly deps: RunnerDeps;

  /** @param eventTypeChanges subscribes to event type changes (`EventTypeCache.onChange`) */
  constructor(
    private readonly access: AccessControl,
    private readonly settings: Settings,
    private readonly eventTypeChanges: (listener: (name: string | undefined) => void) => void,
    private readonly subscriptions: Pick<SubscriptionRegistry, 'get'>,
    /** The node's event type cache (invalidated on every change) or the store itself. */
    private readonly eventTypes: Pick<EventTypeStore, 'get'>,
    private readonly state: SubscriptionStateStore,
    /** Partitions over all timelines (issue 6 §3.2). */
    private readonly logs: PartitionLogs,
    /** Current timelines of event types, and their changes (the event type cache). */
    timelineSource: TimelineSource,
    private readonly keys: Keys,
    private readonly config: Pick<BrokerConfig, 'subscriptions' | 'consumption'>,
    private readonly logger: Logger,
    /** Counts streams, rebalances (`broker_subscription_rebalances_total`), dead letters. */
    private readonly metrics: ConsumptionMeter = NO_CONSUMPTION_METER,
    /** The dead-letter queue skipped events go to (issue 14 §3). */
    deadLetters: DeadLetterSink | undefined = undefined,
    readonly nodeId: string = randomUUID(),
  ) {
    this.deps = { state, logs, timelineSource, config, logger, meter: metrics.stream('subscription'), consumption: metrics, deadLetters };
  }

  /** Told what each stream sent when it ends (KPI `broker.data.streamed`); see {@link onStreamEnd}. */
  streamedListener: StreamedListener | undefined;

  /** Tells `listener` what each subscription stream sent when it ends. */
  onStreamEnd(listener: StreamedListener): void {
    this.streamedListener = listener;
  }

  /** True once the node shuts down: no new streams, sessions are released at once. */
  get stopping(): boolean {
    return this.shuttingDown;
  }

  /**
   * Whether the change notices of subscription `id` reach this node now (see `SubscriptionNotices.live`);
   * false before `start`.
   */
  noticesLive(id: string): boolean {
    return this.notices?.live(id) === true;
  }

  /**
   * Starts following changes: subscription notices come through `notices` (each stream listens to its
   * own subscription's channel while its session lives), settings and event type changes through
   * their caches.
   */
  start(notices: SubscriptionNotices): void {
    this.notices = notices;
    // Blocking a consumer ends its live streams (WIRE.md "Settings").
    this.settings.onChange(() => {
      for (const runner of this.runners.values()) {
        if (this.access.consumptionBlocked(runner.subject, runner.eventTypes)) runner.end(END_REASONS.blocked);
      }
    });
    // When the readers of one of its event types change, a stream ends; its consumer reconnects if still
    // authorized (spec "Authentication" 9).
    this.eventTypeChanges((name) => {
      for (const runner of this.runners.values()) if (name === undefined || runner.eventTypes.includes(name)) void this.recheck(runner);
    });
  }

  /**
   * Ends `runner`'s stream when the readers of one of the subscription's event types changed, or when
   * one of them was repartitioned (its partition count differs from the one the stream opened with).
   */
  private async recheck(runner: SessionRunner): Promise<void> {
    try {
      for (const name of runner.eventTypes) {
        const stored = await this.eventTypes.get(name);
        if (stored && readersKey(stored.record) !== runner.readers.get(name)) return runner.end(END_REASONS.readersChanged);
        if (stored && stored.topology.partitionCount !== (runner.partitionCounts.get(name) ?? 0)) return runner.end(END_REASONS.repartitioned);
      }
    } catch (err) {
      this.logger.warn({ err, subscription: runner.subscriptionId }, 'could not re-check read access of a subscription stream; it goes on');
    }
  }

  /** The subscription, its partitions and event types. @throws BrokerError 404, 503 */
  async resolve(id: string): Promise<ResolvedSubscription> {
    const record = await this.subscriptions.get(id);
    return { record, ...(await this.partitionsOf(record)) };
  }

  /**
   * The partitions of `record`'s event types as this node's event type cache has them now (they grow
   * when an event type is repartitioned), and the records of the event types that exist.
   * @throws BrokerError 503
   */
  private async partitionsOf(record: Subscription): Promise<{ partitions: SubscriptionPartition[]; eventTypes: EventType[] }> {
    const partitions: SubscriptionPartition[] = [];
    const eventTypes: EventType[] = [];
    for (const name of record.event_types) {
      const eventType = await this.eventTypes.get(name);
      if (!eventType) continue;
      eventTypes.push(eventType.record);
      for (const partition of partitionIds(eventType.topology)) partitions.push({ eventType: name, partition, timelines: eventType.timelines });
    }
    return { partitions, eventTypes };
  }

  /**
   * The subscription, if `subject` may consume it and commit to it (spec "Authentication" 5, 9): reader
   * rights on it and read rights on each event type, not blocked. @throws BrokerError 403, 404, 503
   */
  async resolveForConsumer(id: string, subject: Subject): Promise<ResolvedSubscription> {
    const subscription = await this.resolve(id);
    this.access.requireSubscriptionConsumer(subject, subscription.record, subscription.eventTypes);
    return subscription;
  }

  /** Tells every node to end the streams of subscription `id` (its readers changed): they must reconnect. */
  async disconnectAll(id: string): Promise<void> {
    await this.deps.state.announce(id, 'authz');
  }

  /**
   * Opens a stream: checks parameters, joins the subscription as a new session (rebalancing its
   * partitions), and answers with the stream (`X-Broker-StreamId` in the headers): JSON lines, or
   * server-sent events whose first event also carries the stream id in `info.stream_id` (README
   * "Server-sent events").
   * @param format the framing the client asked for with `Accept` (`negotiateStreamFormat`)
   * @throws BrokerError 400/422 (parameters, foreign or duplicated partitions), 403 (not a reader of it or
   *   of one of its event types, or blocked), 404, 409 (no free slot, partition requested by another
   *   stream, cursor reset running), 503
   */
  async open(id: string, query: URLSearchParams, body: unknown, subject: Subject, format: StreamFormat = 'json-stream'): Promise<StreamingAnswer> {
    if (this.shuttingDown) throw brokerError('SHUTTING_DOWN');
    const parsed = parseStreamParameters(query, body, 'subscription');
    if (!parsed.ok) throw parsed.status === 400 ? brokerError('BAD_REQUEST', { reason: parsed.detail }) : brokerError('UNPROCESSABLE', { reason: parsed.detail });
    const params = parsed.value;
    const subscription = await this.resolveForConsumer(id, subject);
    const streamId = randomUUID();
    const session: Session = { id: streamId, requested: params.partitions };
    const current = await this.state.read(id);
    if (current.resetRunning) throw brokerError('CURSOR_RESET_RUNNING');
    const live = streamingSessions(current);
    const check = validateDirectRequests(subscription.partitions, live, session);
    if (!check.ok) throw check.status === 409 ? brokerError('PARTITION_TAKEN', check.taken) : brokerError('UNPROCESSABLE', { reason: check.detail });
    if (session.requested.length === 0 && freeSlots(subscription.partitions, live) <= 0) throw brokerError('NO_FREE_SLOT');
    await this.initialize(subscription);
    if (!this.notices) throw new Error('subscription streams were not started');
    // Listening before joining: every change after the join reaches the stream. A notice before the
    // runner exists needs nothing: the runner reads the state when it starts.
    const target: { runner?: SessionRunner } = {};
    const unlisten = await this.notices.listen(id, (notice) => target.runner?.notice(notice));
    let runner: SessionRunner;
    try {
      const info: SessionInfo = { requested: params.partitions, state: 'streaming', node: this.nodeId };
      const joined = await this.applyChange(subscription, { upsert: { id: streamId, info, leaseMs: this.config.subscriptions.leaseTtlMs }, refuseDuringReset: true });
      if (joined !== 'ok') throw scriptError('applyTopology', joined);
      runner = new SessionRunner(this, subscription, streamId, params, subject, eventFilters(this.access, subject, subscription.eventTypes), format);
    } catch (err) {
      unlisten();
      throw err;
    }
    target.runner = runner;
    this.runners.set(streamId, runner);
    // Notices are heard until the session left Redis (after the commit window, when there is one).
    const forget = (): void => {
      unlisten();
      this.runners.delete(streamId);
    };
    return {
      status: 200,
      contentType: STREAM_CONTENT_TYPES[format],
      headers: format === 'event-stream' ? { 'X-Broker-StreamId': streamId, 'Cache-Control': 'no-cache' } : { 'X-Broker-StreamId': streamId },
      stream: async (sink) => {
        try {
          await runner.run(sink);
        } finally {
          void runner.released.finally(forget);
        }
      },
    };
  }

  /**
   * Lazy `read_from` (WIRE.md "Subscriptions"): partitions without a committed offset get one now —
   * `end` = the newest offset at this moment, `begin` = before the oldest, `cursors` = the initial
   * cursor (before the oldest if it expired meanwhile). Racing nodes keep the first value.
   */
  async initialize(subscription: ResolvedSubscription): Promise<void> {
    const { record } = subscription;
    const existing = await this.state.offsets(record.id);
    const missing = subscription.partitions.filter((p) => !existing.has(offsetField(p.eventType, p.partition)));
    if (missing.length === 0) return;
    const ranges = await this.rangesOf(missing);
    const initial = new Map<string, number>();
    // Partitions missing from an initialized subscription were added by repartitioning: from their beginning.
    const readFrom = existing.size > 0 ? 'begin' : record.read_from;
    for (const p of missing) {
      const field = offsetField(p.eventType, p.partition);
      const range = ranges.get(field) as PartitionRange;
      let offset = readFrom === 'begin' ? range.oldest - 1 : range.newest;
      if (readFrom === 'cursors') {
        const cursor = record.initial_cursors.find((c) => c.event_type === p.eventType && c.partition === p.partition);
        const parsed = cursor ? parseOffset(cursor.offset) : { kind: 'begin' as const };
        const resolved = parsed ? p.timelines.resolve(parsed, p.partition, range) : undefined;
        offset = resolved?.ok ? resolved.offset : range.oldest - 1;
      }
      initial.set(field, offset);
    }
    await this.state.initOffsets(record.id, initial);
  }

  /** Partition ranges by offsets field: one pipelined read per event type. @throws BrokerError 503 */
  async rangesOf(partitions: readonly SubscriptionPartition[]): Promise<Map<string, PartitionRange>> {
    const byEventType = new Map<string, SubscriptionPartition[]>();
    for (const p of partitions) byEventType.set(p.eventType, [...(byEventType.get(p.eventType) ?? []), p]);
    const out = new Map<string, PartitionRange>();
    await Promise.all(
      [...byEventType.values()].map(async (list) => {
        const first = list[0] as SubscriptionPartition;
        const ranges = await this.logs.ranges(first.eventType, first.timelines, list.map((p) => p.partition));
        list.forEach((p, i) => out.set(offsetField(p.eventType, p.partition), ranges[i] ?? { oldest: 0, newest: -1 }));
      }),
    );
    return out;
  }

  /**
   * Recomputes and writes the assignment with compare-and-set, retrying on a concurrent change:
   * expired sessions and `remove` leave, `upsert` joins or changes; streaming sessions get partitions,
   * closed ones inside their commit window keep theirs as `reassigning` (see `rebalance`).
   * @returns 'ok', or 'CURSOR_RESET_RUNNING' when `refuseDuringReset` and a cursor reset runs
   * @throws BrokerError 503 when the assignment keeps changing under it
   */
  async applyChange(
    subscription: ResolvedSubscription,
    change: { remove?: readonly string[]; upsert?: { id: string; info: SessionInfo; leaseMs: number }; complete?: PartitionKey & { from: string }; refuseDuringReset?: boolean },
  ): Promise<'ok' | 'CURSOR_RESET_RUNNING'> {
    const id = subscription.record.id;
    // The partitions now, not when the stream opened: a stream that outlived a repartitioning must not
    // write an assignment that drops the new partitions.
    const { partitions } = await this.partitionsOf(subscription.record);
    for (let attempt = 0; attempt < MAX_APPLY_ATTEMPTS; attempt++) {
      const state = await this.state.read(id);
      const removed = new Set(change.remove ?? []);
      for (const s of state.sessions) if (s.expiresAt <= state.nowMs && s.id !== change.upsert?.id) removed.add(s.id);
      const remaining = state.sessions.filter((s) => !removed.has(s.id) && s.id !== change.upsert?.id).map((s) => ({ id: s.id, info: s.info }));
      if (change.upsert) remaining.push({ id: change.upsert.id, info: change.upsert.info });
      const streaming = remaining.filter((s) => s.info.state === 'streaming').map((s) => ({ id: s.id, requested: s.info.requested }));
      let assignments = state.assignments;
      const completing = change.complete;
      if (completing) {
        const current = assignments.find((a) => a.eventType === completing.eventType && a.partition === completing.partition);
        if (current?.state === 'reassigning' && current.session === completing.from) assignments = completeReassignment(assignments, completing);
      }
      assignments = rebalance(partitions, streaming, assignments, new Set(remaining.map((s) => s.id)));
      const outcome = await this.state.apply(id, {
        expectedVersion: state.version,
        assignments,
        removeSessions: [...removed],
        upsertSession: change.upsert,
        refuseDuringReset: change.refuseDuringReset ?? false,
      });
      if (outcome === 'ok' && JSON.stringify(assignments) !== JSON.stringify(state.assignments)) this.metrics.rebalanced();
      if (outcome !== 'VERSION_MOVED') return outcome;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * (attempt + 1)));
    }
    throw brokerError('ASSIGNMENT_CONTENDED');
  }

  /** Refuses new streams and ends the open ones at once; their sessions are released (DESIGN.md §6). */
  async close(): Promise<void> {
    this.shuttingDown = true;
    await Promise.all([...this.runners.values()].map(async (r) => {
      await r.stop();
      await r.released;
    }));
  }

}

/** Per event type with an owner selector, the test of which events `subject` may read (spec "Authentication" 10). */
function eventFilters(access: AccessControl, subject: Subject, eventTypes: readonly EventType[]): Map<string, (event: string) => boolean> {
  const filters = new Map<string, (event: string) => boolean>();
  for (const eventType of eventTypes) {
    const filter = access.eventFilter(subject, eventType);
    if (filter) filters.set(eventType.name, filter);
  }
  return filters;
}

/** Streaming sessions whose lease has not expired, as `rebalance` sees them. */
export function streamingSessions(state: SubscriptionState): Session[] {
  return state.sessions.filter((s) => s.expiresAt > state.nowMs && s.info.state === 'streaming').map((s) => ({ id: s.id, requested: s.info.requested }));
}

/**
 * One subscription stream on this node: the state machine streaming → closing → done (STYLE.md
 * habit 6). It follows the assignment (adds partitions it is given, stops sending partitions that
 * move away and hands them over once committed), applies flow control (`max_uncommitted_events`),
 * `commit_timeout` and `stream_limit` over committed events, and renews its lease. It sends only while
 * its lease is known valid on the local clock, so a node paused past its lease sends nothing before a
 * heartbeat confirms the session still exists (the heartbeat and every commit are fenced in Lua).
 */
class SessionRunner implements StreamPolicy {
  private loop: EventStreamLoop | undefined;
  private readonly committed = new Map<string, number>();
  /** Per partition: the cursor of the last batch with events sent. */
  private readonly acceptedThrough = new Map<string, number>();
  /** Per partition: skipped events up to this offset wait for the auto-commit. */
  private readonly autoCommits = new Map<string, number>();
  private assignments: readonly PartitionAssignment[] = [];
  private lastOffsets: ReadonlyMap<string, number> = new Map();
  private sentInStream = 0;
  private committedInStream = 0;
  private uncommittedSince: number | undefined;
  private leaseUntil: number;
  private override: string | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  /** Heartbeats since the last one that re-read the state (see `beat`). */
  private beatsSinceRefresh = 0;
  private refreshing: Promise<void> = Promise.resolve();
  private refreshQueued = false;
  private fullRefreshQueued = false;
  /** Set once the stream ended and the session waits for commits before it leaves. */
  private closing = false;
  private commitsSeen: (() => void) | undefined;
  private finished = false;
  /**
   * Settles once the batch loop returned: its last batches were handed to the client's socket, or
   * dropped (client gone, session lost). The session is never released before (issue 15 §5.2).
   */
  private loopEnded: Promise<unknown> = Promise.resolve();
  private readonly leaseMs: number;
  private readonly commitTimeoutMs: number;
  /** The subscription's dead-letter settings (issue 14 §3), from its annotations when the stream opened. */
  private readonly deadLetter: DeadLetterPolicy | undefined;
  /** Per partition in dead-letter search: the last offset of its window (sent one event per batch until committed). */
  private readonly searching = new Map<string, number>();
  /** Per partition: failed sends stored when the stream took it; the first commit that moves it resets them. */
  private readonly failedSends = new Map<string, number>();
  /** Partitions whose dead-letter start runs (a refresh that meets one leaves it to that one). */
  private readonly starting = new Set<string>();

  /** The names of the subscription's event types (blacklist checks). */
  readonly eventTypes: readonly string[];
  /** {@link readersKey} of each event type when the stream opened. */
  readonly readers: ReadonlyMap<string, string>;
  /** Partition count of each event type when the stream opened (a change ends the stream). */
  readonly partitionCounts: ReadonlyMap<string, number>;
  readonly accept: ((partition: StreamPartition, event: string) => boolean) | undefined;

  /**
   * @param filters per event type name, the per-event authorization test (absent = every event)
   * @param format how batches are framed (JSON lines or server-sent events)
   */
  constructor(
    private readonly owner: SubscriptionStreams,
    private readonly subscription: ResolvedSubscription,
    readonly streamId: string,
    private readonly params: StreamParameters,
    readonly subject: Subject,
    filters: ReadonlyMap<string, (event: string) => boolean>,
    private readonly format: StreamFormat = 'json-stream',
  ) {
    this.eventTypes = subscription.record.event_types;
    this.readers = new Map(subscription.eventTypes.map((e) => [e.name, readersKey(e)]));
    const counts = new Map<string, number>();
    for (const p of subscription.partitions) counts.set(p.eventType, (counts.get(p.eventType) ?? 0) + 1);
    this.partitionCounts = counts;
    this.accept = filters.size === 0 ? undefined : (partition, event) => filters.get(partition.eventType)?.(event) ?? true;
    this.released = new Promise<void>((resolve) => (this.markReleased = resolve));
    this.leaseMs = owner.deps.config.subscriptions.leaseTtlMs;
    this.commitTimeoutMs = params.commitTimeoutSeconds * 1000;
    this.leaseUntil = performance.now() + this.leaseMs;
    this.deadLetter = deadLetterPolicyOf(subscription.record.annotations);
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
    const leaving = this.finished || this.closing || this.loop === undefined || [...this.loop.current].some((p) => !p.active);
    this.scheduleRefresh(kind === 'commit' && !leaving);
  }

  /**
   * Streams until an end condition. Returns when the HTTP stream may end; the session is released in
   * the background (`released`), after the commit window when events are uncommitted.
   */
  async run(sink: StreamSink): Promise<void> {
    const { logs, timelineSource, config, meter } = this.owner.deps;
    this.loop = new EventStreamLoop(this.params, sink, this, logs, timelineSource, config.consumption, meter, this.format);
    this.heartbeat = setInterval(() => void this.beat(), Math.max(100, Math.floor(this.leaseMs / 3)));
    let releaseNow = true;
    try {
      await this.refresh();
      const running = this.loop.run(true);
      this.loopEnded = running.catch(() => undefined);
      const end = await running;
      releaseNow =
        this.owner.stopping ||
        this.override === END_REASONS.reset ||
        this.override === END_REASONS.sessionLost ||
        this.override === END_REASONS.blocked ||
        this.override === END_REASONS.authorizationChanged ||
        this.override === END_REASONS.readersChanged ||
        (end.kind === 'reason' && end.debug === NODE_SHUTTING_DOWN);
    } finally {
      clearInterval(this.heartbeat);
      this.owner.streamedListener?.({ subject: this.subject, subscription: this.subscriptionId, streamed: this.loop.streamed });
      void this.leave(releaseNow).finally(() => {
        this.finished = true;
        this.markReleased();
      });
    }
  }

  /** Settles once the session left Redis (at once, or after its commit window). */
  readonly released: Promise<void>;
  private markReleased: () => void = () => undefined;

  /** Ends the stream at its next turn with `reason` in the closing batch; the session is released at once. */
  end(reason: string): void {
    this.override ??= reason;
    this.loop?.poke();
  }

  /**
   * Node shutdown: end the stream now and release the session (also one inside its commit window).
   * Resolves once the loop wrote its last batches (or dropped them); the release follows in `leave`,
   * never before (issue 15 §5.2).
   */
  async stop(): Promise<void> {
    this.override ??= NODE_SHUTTING_DOWN;
    this.loop?.poke();
    this.commitsSeen?.();
    await this.refreshing;
    await this.loopEnded;
  }

  // ---- StreamPolicy ----

  allowance(): number {
    if (performance.now() > this.leaseUntil) return 0;
    // The session is gone: its partitions may be another stream's already, so the closing flush drops
    // what is buffered instead of sending it (issue 15 §5.2).
    if (this.override === END_REASONS.sessionLost) return 0;
    const byCommits = this.params.maxUncommittedEvents - this.uncommitted();
    const byLimit = this.params.streamLimit === 0 ? Number.POSITIVE_INFINITY : this.params.streamLimit - this.sentInStream;
    return Math.max(0, Math.min(byCommits, byLimit));
  }

  /** Dead-letter search (issue 14 §3): one event per batch, each once everything sent before it is committed. */
  partitionAllowance(partition: StreamPartition): number {
    if (!this.searching.has(partition.key)) return Number.POSITIVE_INFINITY;
    return (this.committed.get(partition.key) ?? -1) >= partition.sent ? 1 : 0;
  }

  endReason(): string | undefined {
    if (this.override !== undefined) return this.override;
    if (this.uncommittedSince !== undefined && performance.now() - this.uncommittedSince >= this.commitTimeoutMs && this.uncommitted() > 0) return END_REASONS.commitTimeout;
    if (this.params.streamLimit !== 0 && this.committedInStream >= this.params.streamLimit) return END_REASONS.streamLimit(this.params.streamLimit);
    return undefined;
  }

  sent(partition: StreamPartition, count: number): void {
    this.sentInStream += count;
    this.acceptedThrough.set(partition.key, partition.sent);
    this.uncommittedSince ??= performance.now();
  }

  /** Skipped events are committed by the broker once everything sent before them is (issue 3 §2.7). */
  skipped(partition: StreamPartition): void {
    this.autoCommits.set(partition.key, partition.sent);
    this.uncommittedSince ??= performance.now();
    this.autoCommit();
  }

  /** Commits pending skipped ranges whose preceding sent events are committed (fenced like a client commit). */
  private autoCommit(): void {
    const due: { field: string; offset: number }[] = [];
    for (const [field, offset] of this.autoCommits) {
      if ((this.committed.get(field) ?? -1) >= (this.acceptedThrough.get(field) ?? -1)) {
        due.push({ field, offset });
        this.autoCommits.delete(field);
      }
    }
    if (due.length === 0) return;
    this.owner.deps.state.commit(this.subscriptionId, this.streamId, due).catch((err: unknown) => {
      this.owner.deps.logger.warn({ err: (err as Error).message, subscription: this.subscriptionId }, 'auto-commit of skipped events failed; they are redelivered after a rebalance');
    });
  }

  /** Before this stream holds a partition: the cursor of a partition it is about to get (or any), at its committed offset. */
  openingCursor(): string | undefined {
    const a = this.assignments.find((x) => x.nextSession === this.streamId) ?? this.assignments[0];
    if (!a) return undefined;
    const field = offsetField(a.eventType, a.partition);
    return `{"partition":${JSON.stringify(a.partition)},"offset":"${this.timelinesOf(a.eventType).format(a.partition, this.committed.get(field) ?? this.lastOffsets.get(field) ?? -1)}","event_type":${JSON.stringify(a.eventType)},"cursor_token":"${randomUUID()}"}`;
  }

  /** Subscription batches say why a stream starts and ends (WIRE.md "Streaming"). */
  readonly debugInfo = true;

  cursor(p: StreamPartition): string {
    return `{"partition":${JSON.stringify(p.partition)},"offset":"${p.timelines.format(p.partition, p.sent)}","event_type":${JSON.stringify(p.eventType)},"cursor_token":"${randomUUID()}"}`;
  }

  // ---- state ----

  /** Events sent on this stream and not committed, over all its partitions. */
  private uncommitted(): number {
    let n = 0;
    for (const p of this.loop?.current ?? []) n += Math.max(0, p.sent - (this.committed.get(p.key) ?? p.sent));
    return n;
  }

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
    this.commitsSeen?.();
  }

  /** Reads assignment and offsets and follows them. */
  private async refresh(): Promise<void> {
    const loop = this.loop;
    if (!loop) return;
    const { state: store } = this.owner.deps;
    const [state, offsets] = await Promise.all([store.read(this.subscriptionId), store.offsets(this.subscriptionId)]);
    this.assignments = state.assignments;
    this.lastOffsets = offsets;
    this.applyOffsets(offsets);
    // A reset whose notice was missed (the subscriber connection was down) still ends the stream.
    if (state.resetRunning && !this.finished) this.override ??= END_REASONS.reset;
    const me = state.sessions.find((s) => s.id === this.streamId);
    if (!me || me.expiresAt <= state.nowMs) {
      if (!this.finished) this.override ??= END_REASONS.sessionLost;
      loop.poke();
      this.commitsSeen?.();
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
          this.committed.set(field, start);
          if (this.deadLetter) {
            // Refreshes can overlap (the first one, heartbeats, notices): one takes the partition.
            if (this.starting.has(field)) continue;
            this.starting.add(field);
            try {
              start = await this.startDeadLetter(this.deadLetter, a, start);
            } catch (err) {
              // Not taken now (a skipped event could not be stored): the next refresh tries again.
              this.owner.deps.logger.warn({ err: (err as Error).message, subscription: this.subscriptionId, partition: field }, 'dead-letter handling of a partition failed; it is not streamed until it succeeds');
              continue;
            } finally {
              this.starting.delete(field);
            }
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
        if (!p || (this.committed.get(field) ?? -1) >= p.sent) {
          if (p) loop.remove(a.eventType, a.partition);
          await this.owner.applyChange(this.subscription, { complete: { eventType: a.eventType, partition: a.partition, from: this.streamId } });
        }
      } else if (p) {
        loop.remove(a.eventType, a.partition);
      }
    }
    for (const p of loop.current) if (!seen.has(p.key)) loop.remove(p.eventType, p.partition);
    loop.poke();
    this.commitsSeen?.();
  }

  /** Takes new committed offsets: flow control, stream limit, skip-ahead, commit timeout. */
  private applyOffsets(offsets: ReadonlyMap<string, number>): void {
    const loop = this.loop;
    if (!loop) return;
    let progressed = false;
    for (const p of loop.current) {
      const field = p.key;
      const before = this.committed.get(field) ?? -1;
      const now = offsets.get(field) ?? before;
      if (now <= before) continue;
      progressed = true;
      this.committedInStream += Math.min(now, p.sent) - before > 0 ? Math.min(now, p.sent) - before : 0;
      this.committed.set(field, now);
      if (this.deadLetter) this.deadLetterCommitted(field, now);
      if (p.active && now > p.sent) loop.skipTo(p, now);
    }
    if (this.uncommitted() === 0) this.uncommittedSince = undefined;
    else if (progressed) this.uncommittedSince = performance.now();
    if (progressed) this.autoCommit();
  }

  /**
   * Heartbeat: renews the lease (fenced), sweeps expired sessions, and re-reads the state as a safety
   * net — at every heartbeat while the subscription's notices do not reach this node (not subscribed
   * yet, subscribing failed, or the connection closed), else at every `SAFETY_NET_REFRESH_BEATS`th, so
   * once per lease: every change comes with a notice, and after a reconnect every stream re-reads anyway.
   * Measured (500 idle streams, one node, 10 s lease): the per-heartbeat state read was about half of
   * the node's idle CPU.
   */
  private async beat(): Promise<void> {
    const { state, logger } = this.owner.deps;
    const sentAt = performance.now();
    try {
      const expired = await state.heartbeat(this.subscriptionId, this.streamId, this.leaseMs);
      if (expired === 'SESSION_GONE') {
        this.override ??= END_REASONS.sessionLost;
        this.loop?.poke();
        return;
      }
      this.leaseUntil = sentAt + this.leaseMs;
      if (expired > 0) await this.owner.applyChange(this.subscription, {});
      this.beatsSinceRefresh++;
      if (this.beatsSinceRefresh >= SAFETY_NET_REFRESH_BEATS || !this.owner.noticesLive(this.subscriptionId)) {
        this.beatsSinceRefresh = 0;
        this.scheduleRefresh();
      }
    } catch (err) {
      logger.warn({ err: (err as Error).message, subscription: this.subscriptionId }, 'heartbeat failed; the stream pauses until one succeeds');
    }
  }

  /**
   * What to do with a partition this stream takes at `committed` under the subscription's dead-letter
   * policy (issue 14 §3; `deadLetterStart`): stream it normally, search it one event per batch, or first
   * skip its poison event (stored in the dead-letter queue with `DEAD_LETTER_QUEUE`, then committed by
   * the broker). Writes the partition's new state.
   * @returns the offset to stream after
   * @throws BrokerError 503 (Redis, or the dead-letter event was not stored: then nothing was skipped)
   */
  private async startDeadLetter(policy: DeadLetterPolicy, a: PartitionKey, committed: number): Promise<number> {
    const { state: store } = this.owner.deps;
    const field = offsetField(a.eventType, a.partition);
    const stored: PartitionDeadLetterState = (await store.deadLetters(this.subscriptionId, [field])).get(field) ?? { failedSends: 0, searchUntil: undefined };
    this.failedSends.set(field, stored.failedSends);
    const decision = deadLetterStart(policy, stored, committed, this.params.batchLimit);
    if (decision.kind === 'normal') {
      this.searching.delete(field);
      if (stored.searchUntil !== undefined) await store.setDeadLetter(this.subscriptionId, field, { failedSends: stored.failedSends, searchUntil: undefined });
      return committed;
    }
    let start = committed;
    if (decision.kind === 'skip') start = await this.skipPoisonEvent(policy, a, committed, stored.failedSends);
    const searchUntil = start < decision.until ? decision.until : undefined;
    if (decision.kind === 'skip' || decision.enter) {
      await store.setDeadLetter(this.subscriptionId, field, { failedSends: 0, searchUntil });
      this.failedSends.set(field, 0);
    }
    if (searchUntil !== undefined) this.searching.set(field, searchUntil);
    else this.searching.delete(field);
    return start;
  }

  /**
   * Skips the first event after `committed`: stores it in the dead-letter queue (policy
   * `DEAD_LETTER_QUEUE`), then commits it (fenced like a client commit; this stream holds the partition).
   * @returns its offset (or `committed` when the partition has nothing after it)
   */
  private async skipPoisonEvent(policy: DeadLetterPolicy, a: PartitionKey, committed: number, failedSends: number): Promise<number> {
    const { state: store, logs, deadLetters, consumption, logger } = this.owner.deps;
    const timelines = this.timelinesOf(a.eventType);
    const slice = await logs.read(a.eventType, timelines, a.partition, committed, 1);
    const segment = slice.segments[0];
    if (segment === undefined) return committed;
    const newline = segment.data.indexOf(0x0a);
    const event = (newline < 0 ? segment.data : segment.data.subarray(0, newline)).toString();
    const offset = segment.first;
    const wireOffset = timelines.format(a.partition, offset);
    if (policy.unprocessableEventPolicy === 'DEAD_LETTER_QUEUE' && deadLetters) {
      await deadLetters.publish({ subscriptionId: this.subscriptionId, eventType: a.eventType, partition: a.partition, offset: wireOffset, failedSends, event });
    }
    const field = offsetField(a.eventType, a.partition);
    const outcome = await store.commit(this.subscriptionId, this.streamId, [{ field, offset }]);
    if (outcome.kind !== 'ok') throw brokerError('SKIPPED_EVENT_NOT_COMMITTED', { offset: wireOffset, outcome: outcome.kind });
    this.committed.set(field, offset);
    consumption.deadLettered(this.subscriptionId, a.eventType);
    logger.warn({ subscription: this.subscriptionId, event_type: a.eventType, partition: a.partition, offset: wireOffset, failed_sends: failedSends, policy: policy.unprocessableEventPolicy }, 'skipped an event its consumer did not commit in a single-event batch');
    return offset;
  }

  /** A commit moved `field` to `offset`: its failed sends start again at 0; a committed search window ends. */
  private deadLetterCommitted(field: string, offset: number): void {
    const until = this.searching.get(field);
    const windowDone = until !== undefined && offset >= until;
    if ((this.failedSends.get(field) ?? 0) === 0 && !windowDone) return;
    this.failedSends.set(field, 0);
    if (windowDone) this.searching.delete(field);
    const state: PartitionDeadLetterState = { failedSends: 0, searchUntil: windowDone ? undefined : until };
    this.owner.deps.state.setDeadLetter(this.subscriptionId, field, state).catch((err: unknown) => {
      this.owner.deps.logger.warn({ err: (err as Error).message, subscription: this.subscriptionId, partition: field }, 'could not store the dead-letter state after a commit');
    });
  }

  /** The stream ends with events of some partitions sent and not committed: each counts one failed send. */
  private async countFailedSends(): Promise<void> {
    const fields = [...(this.loop?.current ?? [])].filter((p) => p.sent > (this.committed.get(p.key) ?? p.sent)).map((p) => p.key);
    await this.owner.deps.state.addFailedSends(this.subscriptionId, fields);
  }

  /**
   * Leaves the subscription. With uncommitted events and no reason to release at once, the session
   * stays as `closed` for `commit_timeout` so the client can still commit (WIRE.md "Commits"); its
   * partitions move to other streams when committed or when the window ends.
   */
  private async leave(releaseNow: boolean): Promise<void> {
    const { logger } = this.owner.deps;
    // Partitions move only after this stream's last batch went to its socket or was dropped (issue 15
    // §5.2): a stopping node must not deliver offsets the partition's next holder already has.
    await this.loopEnded;
    try {
      if (releaseNow || this.uncommitted() === 0) {
        await this.owner.applyChange(this.subscription, { remove: [this.streamId] });
        return;
      }
      this.closing = true;
      const info: SessionInfo = { requested: [], state: 'closed', node: this.owner.nodeId };
      await this.owner.applyChange(this.subscription, { upsert: { id: this.streamId, info, leaseMs: this.commitTimeoutMs + CLOSED_SESSION_LEASE_MARGIN_MS } });
      const deadline = performance.now() + this.commitTimeoutMs;
      while (this.uncommitted() > 0 && performance.now() < deadline && !this.owner.stopping) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.max(1, deadline - performance.now()));
          this.commitsSeen = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.commitsSeen = undefined;
      }
      if (this.deadLetter && !this.owner.stopping) await this.countFailedSends();
      await this.owner.applyChange(this.subscription, { remove: [this.streamId] });
    } catch (err) {
      logger.warn({ err: (err as Error).message, subscription: this.subscriptionId }, 'could not release a stream session; it expires with its lease');
    }
  }
}
