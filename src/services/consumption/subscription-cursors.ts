import { randomUUID } from 'node:crypto';
import { MAX_COMMIT_TIMEOUT_SECONDS } from '../../domain/stream/stream-parameters.js';
import { parseOffset, type PartitionRange } from '../../domain/cursor/offsets.js';
import { checkCursorBody, SubscriptionCursorsInputSchema, type SubscriptionCursorsInput } from '../../domain/cursor/cursor-input.js';
import type { PartitionStats, SubscriptionCursor } from '../../domain/subscription/subscription.js';
import { brokerError, invalidInput } from '../../errors/catalog.js';
import { scriptError } from '../../storage/script-failures.js';
import type { PartitionLogs } from '../../storage/partition-logs.js';
import { offsetField, type SubscriptionStateStore } from '../../storage/subscription-state-store.js';
import type { Subject } from '../../auth/subject.js';
import type { ResolvedSubscription, SubscriptionPartition, SubscriptionStreams } from './subscription-streams.js';
import { NO_CONSUMPTION_METER, type ConsumptionMeter } from '../../observability/meters.js';
import { lagSeconds, partitionLag } from './consumer-lag.js';
import { consumptionModeOf } from '../../domain/subscription/consumption-mode.js';
import type { QueueStateStore } from '../../storage/queue-state-store.js';
import type { ConsumerStatusMonitor } from './consumer-status-monitor.js';

/** The answer of `GET /subscriptions/{id}/scaling` (`SubscriptionScalingSchema`, src/http/api/wire/subscriptions.ts). */
export interface SubscriptionScaling {
  readonly subscription_id: string;
  readonly consumption_mode: 'stream' | 'queue';
  readonly partitions: number;
  readonly max_consumers?: number;
  readonly streams: number;
  readonly unconsumed_events: number;
  readonly consumer_lag_seconds: number;
  readonly drain_seconds?: number;
  readonly not_ok_partitions: number;
}

/** Answer of a commit: 204 when every cursor advanced, else 200 with a result per cursor. */
export type CommitAnswer = { status: 204 } | { status: 200; body: { items: { cursor: unknown; result: 'committed' | 'outdated' }[] } };

/** How often a cursor reset checks whether the streams are gone. */
const RESET_POLL_MS = 50;

/**
 * Commits, committed cursors, cursor reset and stats of a subscription (docs/consuming.md
 * "Commits"). Commits are fenced in Lua against the assignment and the
 * session's lease, so they are accepted on any node.
 */
export class SubscriptionCursors {
  constructor(
    private readonly streams: SubscriptionStreams,
    private readonly state: SubscriptionStateStore,
    private readonly partitions: PartitionLogs,
    /** Counts commits by result (`broker_subscription_commits_total`). */
    private readonly metrics: ConsumptionMeter = NO_CONSUMPTION_METER,
    /** The batches of queue-mode subscriptions (docs/consuming.md "Queue mode"). */
    private readonly queue?: Pick<QueueStateStore, 'settle' | 'clear' | 'partitions'>,
    /** The last consumer status of each partition (docs/consuming.md "Consumer status"). */
    private readonly consumerStatus?: Pick<ConsumerStatusMonitor, 'verdict'>,
  ) {}

  /**
   * Commits cursors for the stream `streamId`.
   * @param streamId `X-Broker-StreamId`, required and non-empty by the route's header schema (400)
   * @param body `{items: [SubscriptionCursor]}` (`SubscriptionCursorsInputSchema`, src/domain/cursor/cursor-input.ts)
   * @param subject must be a reader of the subscription and of each of its event types (docs/security.md "Authorization: what a subject may do")
   * @throws BrokerError 400 (body shape), 403, 404, 422 (too many cursors, a cursor without its string
   *   fields, unknown or expired stream, partition not held by that stream, invalid cursor), 503
   */
  async commit(id: string, streamId: string, body: unknown, subject: Subject): Promise<CommitAnswer> {
    const subscription = await this.streams.resolveForConsumer(id, subject);
    if (this.queue && consumptionModeOf(subscription.record.annotations) === 'queue') return this.settleBatches(subscription, streamId, body, 'ack');
    const items = itemsOf(body);
    const byField = new Map(subscription.partitions.map((p) => [offsetField(p.eventType, p.partition), p]));
    const ranges = await this.streams.rangesOf([...new Set(items.map((c) => byField.get(offsetField(c.event_type, c.partition))).filter((p) => p !== undefined))]);
    const cursors = items.map((c, i) => {
      const field = offsetField(c.event_type, c.partition);
      const partition = byField.get(field);
      if (!partition) throw brokerError('PARTITION_NOT_IN_SUBSCRIPTION', { index: i, eventType: c.event_type, partition: c.partition });
      // A cursor the stream delivered commits whether or not retention removed its events since: only
      // malformed, foreign and future offsets are invalid here (docs/consuming.md "Events removed before they were read").
      const range = ranges.get(field);
      return { field, offset: this.offsetOf(c, partition, range && { oldest: 0, newest: range.newest }, i) };
    });
    const outcome = await this.state.commit(id, streamId, cursors);
    if (outcome.kind !== 'ok') this.metrics.commits('refused', cursors.length);
    else {
      const committed = outcome.committed.filter(Boolean).length;
      this.metrics.commits('committed', committed);
      this.metrics.commits('outdated', outcome.committed.length - committed);
    }
    if (outcome.kind === 'no_session') throw scriptError('commitCursors', 'SESSION_GONE', { streamId });
    if (outcome.kind === 'not_owned') {
      const c = items[outcome.index];
      throw scriptError('commitCursors', 'PARTITION_NOT_OWNED', { eventType: c?.event_type ?? '', partition: c?.partition ?? '', streamId });
    }
    if (outcome.committed.every(Boolean)) return { status: 204 };
    return { status: 200, body: { items: items.map((cursor, i) => ({ cursor, result: outcome.committed[i] ? 'committed' : 'outdated' })) } };
  }

  /**
   * Hands batches of a queue-mode stream back without processing them (docs/consuming.md "Queue mode"):
   * each cursor names a batch the stream holds (the cursor of its batch); they are handed out again at once,
   * the delivery counted.
   * @param streamId `X-Broker-StreamId`
   * @param body `{items: [SubscriptionCursor]}`
   * @throws BrokerError 400 (body shape), 403, 404, 422 (not a queue-mode subscription, a cursor naming no
   *   batch the stream holds, an invalid cursor), 503
   */
  async handBack(id: string, streamId: string, body: unknown, subject: Subject): Promise<void> {
    const subscription = await this.streams.resolveForConsumer(id, subject);
    if (!this.queue || consumptionModeOf(subscription.record.annotations) !== 'queue') throw brokerError('UNPROCESSABLE', { reason: 'Only batches of a queue-mode subscription can be handed back' });
    await this.settleBatches(subscription, streamId, body, 'release');
  }

  /** Acknowledges or hands back batches of a queue-mode stream (`QueueStateStore.settle`). */
  private async settleBatches(subscription: ResolvedSubscription, streamId: string, body: unknown, how: 'ack' | 'release'): Promise<CommitAnswer> {
    const queue = this.queue as Pick<QueueStateStore, 'settle'>;
    const items = itemsOf(body);
    const byField = new Map(subscription.partitions.map((p) => [offsetField(p.eventType, p.partition), p]));
    const cursors = items.map((c, i) => {
      const field = offsetField(c.event_type, c.partition);
      const partition = byField.get(field);
      if (!partition) throw brokerError('PARTITION_NOT_IN_SUBSCRIPTION', { index: i, eventType: c.event_type, partition: c.partition });
      return { field, offset: this.offsetOf(c, partition, { oldest: 0, newest: Number.MAX_SAFE_INTEGER }, i) };
    });
    const outcome = await queue.settle(subscription.record.id, streamId, how, cursors);
    if (outcome.kind === 'not_held') {
      if (how === 'ack') this.metrics.commits('refused', cursors.length);
      const c = items[outcome.index];
      throw brokerError('BATCH_NOT_HELD', { eventType: c?.event_type ?? '', partition: c?.partition ?? '', offset: c?.offset ?? '', streamId });
    }
    const settled = outcome.settled.filter(Boolean).length;
    if (how === 'ack') {
      this.metrics.commits('committed', settled);
      this.metrics.commits('outdated', outcome.settled.length - settled);
    }
    if (settled === outcome.settled.length) return { status: 204 };
    return { status: 200, body: { items: items.map((cursor, i) => ({ cursor, result: outcome.settled[i] ? 'committed' : 'outdated' })) } };
  }

  /**
   * Committed cursors (`{items}`; empty before the subscription was first streamed or reset).
   * @param authorize runs once the subscription is known, before anything is read (the route checks read access to its event types there)
   * @throws BrokerError 403 (from `authorize`), 404, 503
   */
  async committed(id: string, authorize?: (subscription: ResolvedSubscription) => void): Promise<{ items: SubscriptionCursor[] }> {
    const subscription = await this.streams.resolve(id);
    authorize?.(subscription);
    const offsets = await this.state.offsets(id);
    const items: SubscriptionCursor[] = [];
    for (const p of subscription.partitions) {
      const offset = offsets.get(offsetField(p.eventType, p.partition));
      if (offset !== undefined) items.push({ event_type: p.eventType, partition: p.partition, offset: p.timelines.format(p.partition, offset), cursor_token: randomUUID() });
    }
    return { items };
  }

  /**
   * Cursor reset (docs/consuming.md "Commits"): refuses new streams, closes the open ones
   * (`Resetting subscription cursors`), waits until they are gone (at most the commit timeout), then
   * initializes missing offsets and writes the given ones. At most `MAX_CURSORS_PER_REQUEST` (src/domain/cursor/offsets.ts) cursors (422).
   * @param authorize runs once the subscription is known, before anything changes (the route checks admin
   *   rights on it and read access to its event types there)
   * @throws BrokerError 400 (shape), 403 (from `authorize`), 404, 409 (a reset runs), 422 (invalid cursor), 503
   */
  async reset(id: string, body: unknown, authorize: (subscription: ResolvedSubscription) => void): Promise<void> {
    const subscription = await this.streams.resolve(id);
    authorize(subscription);
    const items = itemsOf(body);
    const byField = new Map(subscription.partitions.map((p) => [offsetField(p.eventType, p.partition), p]));
    const ranges = await this.streams.rangesOf(subscription.partitions);
    const offsets = new Map<string, number>();
    items.forEach((c, i) => {
      const field = offsetField(c.event_type, c.partition);
      const partition = byField.get(field);
      if (!partition) throw brokerError('PARTITION_NOT_IN_SUBSCRIPTION', { index: i, eventType: c.event_type, partition: c.partition });
      offsets.set(field, this.offsetOf(c, partition, ranges.get(field), i));
    });
    const windowMs = MAX_COMMIT_TIMEOUT_SECONDS * 1000;
    if (!(await this.state.startReset(id, windowMs + 10_000))) throw brokerError('CURSOR_RESET_ALREADY_RUNNING');
    try {
      const deadline = Date.now() + windowMs;
      for (;;) {
        const state = await this.state.read(id);
        const live = state.sessions.filter((s) => s.expiresAt > state.nowMs && s.info.state === 'streaming');
        if (live.length === 0 || Date.now() > deadline) break;
        await new Promise((resolve) => setTimeout(resolve, RESET_POLL_MS));
      }
      const state = await this.state.read(id);
      await this.streams.initialize(subscription);
      await this.state.writeOffsets(id, offsets);
      // Queue mode: batches handed out before the reset are forgotten; offsets are handed out from the new cursors.
      await this.queue?.clear(id);
      // A reset starts the dead-letter counting over (docs/consuming.md "Dead letters").
      await this.state.clearDeadLetters(id);
      // Every session is gone now (closed ones lose their commit window): partitions are unassigned.
      await this.state.apply(id, {
        expectedVersion: state.version,
        assignments: subscription.partitions.map((p) => ({ eventType: p.eventType, partition: p.partition, state: 'unassigned', session: '', nextSession: '', assignmentType: 'auto' })),
        removeSessions: state.sessions.map((s) => s.id),
        refuseDuringReset: false,
      });
    } finally {
      await this.state.endReset(id);
    }
  }

  /**
   * Per-partition statistics (docs/consuming.md "Commits"): assignment state, stream,
   * `unconsumed_events` once initialized, the dead-letter state (`failed_send_count`,
   * `dead_letter_search_until`; docs/consuming.md "Dead letters") when there is one, `consumer_lag_seconds` with `showTimeLag` (age of the oldest
   * unconsumed event from its `metadata.received_at`, 0 when nothing is unconsumed; omitted when that
   * cannot be told, e.g. category `undefined` without metadata).
   * @param authorize runs once the subscription is known, before anything is read (the route checks read
   *   access to its event types there: `unconsumed_events` counts their events)
   * @throws BrokerError 403 (from `authorize`), 404, 503
   */
  async stats(id: string, showTimeLag: boolean, authorize?: (subscription: ResolvedSubscription) => void): Promise<{ items: { event_type: string; partitions: PartitionStats[] }[] }> {
    const subscription = await this.streams.resolve(id);
    authorize?.(subscription);
    const fields = subscription.partitions.map((p) => offsetField(p.eventType, p.partition));
    const queueMode = this.queue !== undefined && consumptionModeOf(subscription.record.annotations) === 'queue';
    const [state, offsets, ranges, deadLetters, expired, queued] = await Promise.all([
      this.state.read(id),
      this.state.offsets(id),
      this.streams.rangesOf(subscription.partitions),
      this.state.deadLetters(id, fields),
      this.state.expiredEvents(id),
      queueMode ? this.queue?.partitions(id) : undefined,
    ]);
    // Queue mode: every live stream reads every partition; a partition shows as assigned while one does.
    const queueStreams = state.sessions.some((s) => s.expiresAt > state.nowMs);
    const live = new Set(state.sessions.filter((s) => s.expiresAt > state.nowMs).map((s) => s.id));
    const byEventType = new Map<string, PartitionStats[]>(subscription.record.event_types.map((name) => [name, []]));
    await Promise.all(
      subscription.partitions.map(async (p) => {
        const field = offsetField(p.eventType, p.partition);
        const a = state.assignments.find((x) => x.eventType === p.eventType && x.partition === p.partition);
        const owner = a && a.state !== 'unassigned' && live.has(a.session) ? a : undefined;
        const entry: PartitionStats = {
          partition: p.partition,
          state: owner ? owner.state : 'unassigned',
          stream_id: owner ? owner.session : '',
          assignment_type: a?.assignmentType ?? 'auto',
        };
        const committed = offsets.get(field);
        const range = ranges.get(field);
        if (committed !== undefined && range) {
          const lag = partitionLag(committed, range);
          entry.unconsumed_events = lag.unconsumed;
          if (showTimeLag) {
            const seconds = await lagSeconds(this.partitions, p, lag, state.nowMs);
            if (seconds !== undefined) entry.consumer_lag_seconds = seconds;
          }
        }
        const deadLetter = deadLetters.get(field);
        if (deadLetter !== undefined && deadLetter.failedSends > 0) entry.failed_send_count = deadLetter.failedSends;
        if (deadLetter?.searchUntil !== undefined && deadLetter.searchUntil > (committed ?? -1)) entry.dead_letter_search_until = p.timelines.format(p.partition, deadLetter.searchUntil);
        const verdict = this.consumerStatus?.verdict(id, p.eventType, p.partition);
        if (verdict !== undefined) {
          entry.consumer_status = verdict.status;
          if (verdict.drainSeconds !== undefined) entry.drain_seconds = verdict.drainSeconds;
        }
        const expiredEvents = expired.get(field) ?? 0;
        if (expiredEvents > 0) entry.expired_events = expiredEvents;
        if (queued) {
          entry.state = queueStreams ? 'assigned' : 'unassigned';
          const q = queued.get(field);
          entry.in_flight_events = q?.inFlight ?? 0;
          entry.redelivery_events = q?.waiting ?? 0;
          const handedOut = q?.dispatched ?? committed ?? range?.newest ?? -1;
          entry.undelivered_events = range ? Math.max(0, range.newest - Math.max(handedOut, range.oldest - 1)) : 0;
        }
        byEventType.get(p.eventType)?.push(entry);
      }),
    );
    return {
      items: [...byEventType].map(([event_type, partitions]) => ({ event_type, partitions: partitions.sort((x, y) => Number(x.partition) - Number(y.partition)) })),
    };
  }

  /**
   * One subscription's lag and how many consumers it can use, for an autoscaler (`GET
   * /subscriptions/{id}/scaling`; docs/operations.md "Autoscaling consumers"): the stats summed over its
   * partitions (unconsumed events summed, lag seconds and drain time their maximum), its consumption
   * mode, its live streams and, in stream mode, its partition count as the most consumers it can use.
   * @param authorize as for {@link stats}
   * @throws BrokerError 403 (from `authorize`), 404, 503
   */
  async scaling(id: string, authorize?: (subscription: ResolvedSubscription) => void): Promise<SubscriptionScaling> {
    let mode: 'stream' | 'queue' = 'stream';
    const [stats, state] = await Promise.all([
      this.stats(id, true, (subscription) => {
        authorize?.(subscription);
        mode = this.queue !== undefined && consumptionModeOf(subscription.record.annotations) === 'queue' ? 'queue' : 'stream';
      }),
      this.state.read(id),
    ]);
    const partitions = stats.items.flatMap((i) => i.partitions);
    const drains = partitions.filter((p) => (p.unconsumed_events ?? 0) > 0).map((p) => p.drain_seconds);
    const known = drains.filter((d): d is number => d !== undefined);
    return {
      subscription_id: id,
      consumption_mode: mode,
      partitions: partitions.length,
      ...(mode === 'stream' ? { max_consumers: partitions.length } : {}),
      streams: state.sessions.filter((s) => s.expiresAt > state.nowMs && s.info.state === 'streaming').length,
      unconsumed_events: partitions.reduce((sum, p) => sum + (p.unconsumed_events ?? 0), 0),
      consumer_lag_seconds: partitions.reduce((max, p) => Math.max(max, p.consumer_lag_seconds ?? 0), 0),
      ...(known.length > 0 && known.length === drains.length ? { drain_seconds: Math.max(...known) } : drains.length === 0 ? { drain_seconds: 0 } : {}),
      not_ok_partitions: partitions.filter((p) => p.consumer_status !== undefined && p.consumer_status !== 'ok').length,
    };
  }

  /** Partition status for `GET /subscriptions?show_status=true`: state, stream and assignment type per partition. @throws BrokerError 404, 503 */
  async status(id: string): Promise<{ event_type: string; partitions: { partition: string; state: string; stream_id: string; assignment_type: string }[] }[]> {
    const { items } = await this.stats(id, false);
    return items.map((i) => ({
      event_type: i.event_type,
      partitions: i.partitions.map((p) => ({ partition: p.partition, state: p.state, stream_id: p.stream_id, assignment_type: p.assignment_type })),
    }));
  }

  /** The last consumed offset a cursor names. @throws BrokerError 422 for a malformed, foreign-timeline, expired or future offset */
  private offsetOf(c: { readonly offset: string }, partition: SubscriptionPartition, range: PartitionRange | undefined, i: number): number {
    const parsed = parseOffset(c.offset);
    if (!parsed) throw brokerError('INVALID_COMMIT_CURSOR', { index: i, offset: c.offset, reason: 'malformed' });
    const resolved = partition.timelines.resolve(parsed, partition.partition, range ?? { oldest: 0, newest: -1 });
    if (!resolved.ok) throw brokerError('INVALID_COMMIT_CURSOR', { index: i, offset: c.offset, reason: `invalid: ${resolved.reason}` });
    return resolved.offset;
  }
}

/**
 * The cursors of a commit or reset body (`SubscriptionCursorsInputSchema`): at most
 * `MAX_CURSORS_PER_REQUEST` (422, before the items are looked at).
 * @throws BrokerError 400 for a body or `items` of the wrong JSON type, 422 for too many cursors or a cursor without its string fields
 */
function itemsOf(body: unknown): SubscriptionCursorsInput['items'] {
  const checked = checkCursorBody(SubscriptionCursorsInputSchema, body, 'items');
  if (!checked.ok) throw invalidInput(checked.status, checked.details, checked.errors);
  return checked.value.items;
}
