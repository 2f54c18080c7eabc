import { randomUUID } from 'node:crypto';
import type { BrokerConfig } from '../../config/config-schema.js';
import type { Subject } from '../../auth/subject.js';
import { partitionIds, type EventType } from '../../domain/event-type/event-type.js';
import type { PartitionRange } from '../../domain/cursor/offsets.js';
import { completeReassignment, freeSlots, rebalance, validateDirectRequests, type Session } from '../../domain/subscription/rebalance.js';
import { parseStreamParameters, type StreamQuery } from '../../domain/stream/stream-parameters.js';
import type { Subscription } from '../../domain/subscription/subscription.js';
import { BrokerError, brokerError, invalidInput } from '../../errors/catalog.js';
import { scriptError } from '../../storage/script-failures.js';
import type { StreamingAnswer } from '../../domain/stream/stream-sink.js';
import type { Logger } from '../../observability/logger.js';
import type { EventTypeStore } from '../../storage/event-type-store.js';
import type { PartitionLogs } from '../../storage/partition-logs.js';
import type { SubscriptionRegistry } from '../subscription-registry.js';
import { readersKey, type AccessControl } from '../access-control.js';
import type { Settings } from '../settings.js';
import type { SessionInfo, SubscriptionState, SubscriptionStateStore } from '../../storage/subscription-state-store.js';
import { EventStreamLoop, type StreamedListener, type TimelineSource } from './stream/event-stream.js';
import { NO_CONSUMPTION_METER, type ConsumptionMeter } from '../../observability/meters.js';
import type { SubscriptionNotices } from './subscription-notices.js';
import { subscriptionStreamAnswer, type StreamFormat } from '../../domain/stream/stream-format.js';
import { REAL_CLOCK, type Clock } from './clock.js';
import { SessionRunner } from './session/session-runner.js';
import { QueueStreams } from './queue/queue-streams.js';
import type { QueueStateStore } from '../../storage/queue-state-store.js';
import { consumptionModeOf } from '../../domain/subscription/consumption-mode.js';
import { eventFilters, initializeOffsets, partitionRanges } from './session/subscription-start.js';
import { filterSpecOf } from '../../domain/subscription/event-filter.js';
import type { EventFilters } from '../event-filters.js';
import type { EventFilter } from './stream/partition-reader.js';
import { END_REASONS, type DeadLetterSink, type ResolvedSubscription, type RunnerDeps, type SessionChange, type SessionOwner, type SubscriptionPartition } from './session/session-types.js';

// The session's types, where the routes and the cursors have always found them.
export { END_REASONS, type DeadLetterSink, type ResolvedSubscription, type RunnerDeps, type SubscriptionPartition } from './session/session-types.js';

/** What {@link SubscriptionStreams} works with (one per node, built by the composition root). */
export interface SubscriptionStreamsOptions {
  readonly access: AccessControl;
  readonly settings: Settings;
  /** Subscribes to event type changes (`EventTypeCache.onChange`). */
  readonly eventTypeChanges: (listener: (name: string | undefined) => void) => void;
  readonly subscriptions: Pick<SubscriptionRegistry, 'get'>;
  /** The node's event type cache (invalidated on every change) or the store itself. */
  readonly eventTypes: Pick<EventTypeStore, 'get'>;
  readonly state: SubscriptionStateStore;
  /** Partitions over all timelines (docs/concepts.md "Timelines and storages"). */
  readonly logs: PartitionLogs;
  /** Current timelines of event types, and their changes (the event type cache). */
  readonly timelineSource: TimelineSource;
  readonly config: Pick<BrokerConfig, 'subscriptions' | 'consumption'>;
  readonly logger: Logger;
  /** Counts streams, rebalances (`broker_subscription_rebalances_total`), dead letters; default none. */
  readonly metrics?: ConsumptionMeter;
  /** The dead-letter queue skipped events go to (docs/consuming.md "Dead letters"); absent = they are only skipped. */
  readonly deadLetters?: DeadLetterSink;
  /** This node's id in its sessions' info; default a random UUID. */
  readonly nodeId?: string;
  /** Time and timers of the sessions; default the real clock. */
  readonly clock?: Clock;
  /** Tests events against a subscription's `filter` in the worker threads (docs/consuming.md "Filters"). */
  readonly filters: Pick<EventFilters, 'matcher'>;
  /** The batches of queue-mode subscriptions (docs/consuming.md "Queue mode"). */
  readonly queue: QueueStateStore;
}

const MAX_APPLY_ATTEMPTS = 50;
/**
 * Subscription streams (docs/consuming.md "Subscription streams", "Commits",
 * "Rebalancing"; docs/architecture.md#43-subscription-sessions). Every stream is a session in Redis with a lease renewed by heartbeat;
 * the partition assignment is recomputed by the pure `rebalance` whenever a session joins, leaves or
 * expires, and written with compare-and-set on its version. A node listens to the notice channel of
 * each subscription it streams (`SubscriptionNotices`): a change of assignment, a commit or a reset
 * reaches its streams at once, whichever node made it.
 */
export class SubscriptionStreams implements SessionOwner {
  private readonly runners = new Map<string, SessionRunner>();
  private shuttingDown = false;
  /** Where the notices of the subscriptions streamed here arrive (set by `start`). */
  private notices: SubscriptionNotices | undefined;

  /** What the session runners use; built once. */
  readonly deps: RunnerDeps;

  /** This node's id, written in the info of its sessions. */
  readonly nodeId: string;
  private readonly access: AccessControl;
  private readonly settings: Settings;
  private readonly eventTypeChanges: (listener: (name: string | undefined) => void) => void;
  private readonly subscriptions: Pick<SubscriptionRegistry, 'get'>;
  private readonly eventTypes: Pick<EventTypeStore, 'get'>;
  private readonly state: SubscriptionStateStore;
  private readonly logs: PartitionLogs;
  private readonly config: Pick<BrokerConfig, 'subscriptions' | 'consumption'>;
  private readonly logger: Logger;
  private readonly metrics: ConsumptionMeter;
  private readonly filters: Pick<EventFilters, 'matcher'>;

  constructor(options: SubscriptionStreamsOptions) {
    this.access = options.access;
    this.settings = options.settings;
    this.eventTypeChanges = options.eventTypeChanges;
    this.subscriptions = options.subscriptions;
    this.eventTypes = options.eventTypes;
    this.state = options.state;
    this.logs = options.logs;
    this.config = options.config;
    this.logger = options.logger;
    this.metrics = options.metrics ?? NO_CONSUMPTION_METER;
    this.nodeId = options.nodeId ?? randomUUID();
    this.filters = options.filters;
    const { state, logs, config, logger, metrics } = this;
    const meter = metrics.stream('subscription');
    this.deps = {
      state,
      logs,
      openLoop: (params, sink, policy, format) => new EventStreamLoop({ params, sink, policy, logs, eventTypes: options.timelineSource, config: config.consumption, meter, format }),
      config,
      logger,
      consumption: metrics,
      deadLetters: options.deadLetters,
      clock: options.clock ?? REAL_CLOCK,
    };
    this.queueStreams = new QueueStreams({
      deps: { queue: options.queue, state, logger, clock: this.deps.clock, leaseMs: config.subscriptions.leaseTtlMs, consumption: metrics, meter, deadLetters: options.deadLetters },
      pollIntervalMs: config.consumption.pollIntervalMs,
      queue: options.queue,
      state,
      logs,
      timelines: options.timelineSource,
      nodeId: this.nodeId,
      subscriptionExists: (id) => this.subscriptionExists(id),
      noticesLive: (id) => this.noticesLive(id),
      streamedListener: () => this.streamedListener,
    });
  }

  /** The node's queue-mode streams (docs/consuming.md "Queue mode"). */
  private readonly queueStreams: QueueStreams;

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

  /** See {@link SessionOwner.subscriptionExists}: false only when the registry answers 404. */
  async subscriptionExists(id: string): Promise<boolean> {
    try {
      await this.subscriptions.get(id);
      return true;
    } catch (err) {
      return !(err instanceof BrokerError && err.status === 404);
    }
  }

  /**
   * Starts following changes: subscription notices come through `notices` (each stream listens to its
   * own subscription's channel while its session lives), settings and event type changes through
   * their caches.
   */
  start(notices: SubscriptionNotices): void {
    this.notices = notices;
    // Blocking a consumer ends its live streams (docs/security.md "Blacklist and feature toggles").
    this.settings.onChange(() => {
      for (const runner of this.runners.values()) {
        if (this.access.consumptionBlocked(runner.subject, runner.eventTypes)) runner.end(END_REASONS.blocked);
      }
      for (const runner of this.queueStreams.streams) if (this.access.consumptionBlocked(runner.subject, runner.eventTypes)) runner.end(END_REASONS.blocked);
    });
    // When the readers of one of its event types change, a stream ends; its consumer reconnects if still
    // authorized (docs/security.md "Authorization: what a subject may do").
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
   * The subscription, if `subject` may consume it and commit to it (docs/security.md "Authorization: what a subject may do"): reader
   * rights on it and read rights on each event type, not blocked. @throws BrokerError 403, 404, 503
   */
  async resolveForConsumer(id: string, subject: Subject): Promise<ResolvedSubscription> {
    const subscription = await this.resolve(id);
    this.access.requireSubscriptionConsumer(subject, subscription.record, subscription.eventTypes);
    return subscription;
  }

  /** Tells every node to end the streams of subscription `id` (its readers changed): they must reconnect. */
  async disconnectAll(id: string): Promise<void> {
    await this.state.announce(id, 'authz');
  }

  /**
   * Opens a stream: checks parameters, joins the subscription as a new session (rebalancing its
   * partitions), and answers with the stream (`X-Broker-StreamId` in the headers): JSON lines, or
   * server-sent events whose first event also carries the stream id in `info.stream_id` (docs/server-sent-events.md
   * "Subscription streams").
   * @param query the query as the pipeline checked it (route table: `SubscriptionStreamQuerySchema`)
   * @param body the parsed JSON body of a `POST` (checked here: `StreamParametersBodySchema`), else undefined
   * @param format the framing the client asked for with `Accept` (`negotiateStreamFormat`)
   * @throws BrokerError 400/422 (parameters, foreign or duplicated partitions), 403 (not a reader of it or
   *   of one of its event types, or blocked), 404, 409 (no free slot, partition requested by another
   *   stream, cursor reset running), 503
   */
  async open(id: string, query: StreamQuery, body: unknown, subject: Subject, format: StreamFormat = 'json-stream'): Promise<StreamingAnswer> {
    if (this.shuttingDown) throw brokerError('SHUTTING_DOWN');
    const parsed = parseStreamParameters(query, body, 'subscription');
    if (!parsed.ok) throw invalidInput(parsed.status, [parsed.detail], parsed.errors);
    const params = parsed.value;
    const subscription = await this.resolveForConsumer(id, subject);
    if (!this.notices) throw new Error('subscription streams were not started');
    if (consumptionModeOf(subscription.record.annotations) === 'queue') {
      await this.initialize(subscription);
      const perEventAuthorization = eventFilters(this.access, subject, subscription.eventTypes).size > 0;
      return this.queueStreams.open({ subscription, params, subject, format, notices: this.notices, perEventAuthorization });
    }
    const eventFilter = this.eventFilterOf(subscription.record);
    const streamId = randomUUID();
    const session: Session = { id: streamId, requested: params.partitions };
    const current = await this.state.read(id);
    if (current.resetRunning) throw brokerError('CURSOR_RESET_RUNNING');
    const live = streamingSessions(current);
    const check = validateDirectRequests(subscription.partitions, live, session);
    if (!check.ok) throw check.status === 409 ? brokerError('PARTITION_TAKEN', check.taken) : brokerError('UNPROCESSABLE', { reason: check.detail });
    if (session.requested.length === 0 && freeSlots(subscription.partitions, live) <= 0) throw brokerError('NO_FREE_SLOT');
    await this.initialize(subscription);
    // Listening before joining: every change after the join reaches the stream. A notice before the
    // runner exists needs nothing: the runner reads the state when it starts.
    const target: { runner?: SessionRunner } = {};
    const unlisten = await this.notices.listen(id, (notice) => target.runner?.notice(notice));
    let runner: SessionRunner;
    try {
      const info: SessionInfo = { requested: params.partitions, state: 'streaming', node: this.nodeId };
      const joined = await this.applyChange(subscription, { upsert: { id: streamId, info, leaseMs: this.config.subscriptions.leaseTtlMs }, refuseDuringReset: true });
      if (joined === 'NOT_FOUND') throw scriptError('applyTopology', joined, { id });
      if (joined !== 'ok') throw scriptError('applyTopology', joined);
      runner = new SessionRunner({ owner: this, subscription, streamId, params, subject, filters: eventFilters(this.access, subject, subscription.eventTypes), eventFilter, format });
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
    return subscriptionStreamAnswer(streamId, format, async (sink) => {
      try {
        await runner.run(sink);
      } finally {
        void runner.released.finally(forget);
      }
    });
  }

  /** Lazy `read_from`: see {@link initializeOffsets}. */
  async initialize(subscription: ResolvedSubscription): Promise<void> {
    await initializeOffsets(this.state, this.logs, subscription);
  }

  /** Partition ranges by offsets field: see {@link partitionRanges}. @throws BrokerError 503 */
  async rangesOf(partitions: readonly SubscriptionPartition[]): Promise<Map<string, PartitionRange>> {
    return partitionRanges(this.logs, partitions);
  }

  /**
   * Recomputes and writes the assignment with compare-and-set, retrying on a concurrent change:
   * expired sessions and `remove` leave, `upsert` joins or changes; streaming sessions get partitions,
   * closed ones inside their commit window keep theirs as `reassigning` (see `rebalance`).
   * @returns 'ok', 'CURSOR_RESET_RUNNING' when `refuseDuringReset` and a cursor reset runs, or 'NOT_FOUND'
   *   when the subscription was deleted (nothing written)
   * @throws BrokerError 503 when the assignment keeps changing under it
   */
  async applyChange(subscription: ResolvedSubscription, change: SessionChange): Promise<'ok' | 'CURSOR_RESET_RUNNING' | 'NOT_FOUND'> {
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

  /** See {@link SessionOwner.expiredPassed}. */
  expiredPassed(subscriptionId: string, partition: { readonly key: string; readonly eventType: string }, expired: number): void {
    this.metrics.expiredPassed(subscriptionId, partition.eventType, expired);
    this.state.addExpiredEvents(subscriptionId, partition.key, expired).catch((err: unknown) => {
      this.logger.warn({ err: (err as Error).message, subscription: subscriptionId }, 'could not count events that expired unread in the subscription stats');
    });
  }

  /** The test of a subscription's `filter` (docs/consuming.md "Filters"), checked when the subscription was created; undefined when it has none. */
  private eventFilterOf(record: Subscription): EventFilter | undefined {
    if (record.filter === undefined) return undefined;
    const spec = filterSpecOf(JSON.stringify(record.filter));
    if (spec === undefined) throw new Error(`the stored filter of subscription ${record.id} is not JSON`);
    return this.filters.matcher(spec);
  }

  /** Refuses new streams and ends the open ones at once; their sessions are released (docs/operations.md "Graceful stops"). */
  async close(): Promise<void> {
    this.shuttingDown = true;
    await Promise.all([
      ...[...this.runners.values()].map(async (r) => {
        await r.stop();
        await r.released;
      }),
      this.queueStreams.close(),
    ]);
  }
}

/** Streaming sessions whose lease has not expired, as `rebalance` sees them. */
export function streamingSessions(state: SubscriptionState): Session[] {
  return state.sessions.filter((s) => s.expiresAt > state.nowMs && s.info.state === 'streaming').map((s) => ({ id: s.id, requested: s.info.requested }));
}
