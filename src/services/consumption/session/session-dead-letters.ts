import { deadLetterStart, type DeadLetterPolicy, type PartitionDeadLetterState } from '../../../domain/subscription/dead-letter.js';
import type { PartitionKey } from '../../../domain/subscription/rebalance.js';
import type { TimelineMap } from '../../../domain/storages/timeline.js';
import { brokerError } from '../../../errors/catalog.js';
import { offsetField } from '../../../storage/subscription-state-store.js';
import type { StreamPartition } from '../stream/event-stream.js';
import type { RunnerDeps } from './session-types.js';

/** What {@link SessionDeadLetters} works with. */
export interface SessionDeadLettersOptions {
  /** The subscription's dead-letter settings (docs/consuming.md "Dead letters"), from its annotations when the stream opened. */
  readonly policy: DeadLetterPolicy;
  /** The node's stores, dead-letter queue, meter and logger. */
  readonly deps: Pick<RunnerDeps, 'state' | 'logs' | 'deadLetters' | 'consumption' | 'logger'>;
  readonly subscriptionId: string;
  readonly streamId: string;
  /** The stream's `batch_limit` (the size of a dead-letter search window). */
  readonly batchLimit: number;
  /** The stream's committed offsets by offsets field (`SessionCommits.committed`): a skipped event's commit lands there. */
  readonly committed: Map<string, number>;
  /** Events of a partition the stream sent and that are not committed (`SessionCommits.uncommittedOf`). */
  readonly uncommittedOf: (partition: StreamPartition) => number;
  /** The timelines of an event type as the stream has them now. */
  readonly timelinesOf: (eventType: string) => TimelineMap;
}

/**
 * The dead-letter handling of one subscription stream (docs/consuming.md "Dead letters"; docs/architecture.md#44-dead-letter-queue-state): when it
 * takes a partition, per the policy and the partition's stored failed sends (`deadLetterStart`), it
 * streams it normally, searches it one event per batch, or first skips its poison event (stored in the
 * dead-letter queue with `DEAD_LETTER_QUEUE`, then committed by the broker); a commit resets the failed
 * sends; a stream that ends with sent events uncommitted counts one failed send per such partition.
 */
export class SessionDeadLetters {
  /** Per partition in dead-letter search: the last offset of its window (sent one event per batch until committed). */
  private readonly searching = new Map<string, number>();
  /** Per partition: failed sends stored when the stream took it; the first commit that moves it resets them. */
  private readonly failedSends = new Map<string, number>();
  /** Partitions whose dead-letter start runs (a refresh that meets one leaves it to that one). */
  private readonly starting = new Set<string>();

  constructor(private readonly options: SessionDeadLettersOptions) {}

  /**
   * Takes partition `a`, committed up to `committed`, under the policy (see {@link start}) — unless
   * another refresh is taking it now (refreshes can overlap: the first one, heartbeats, notices).
   * @returns the offset to stream after, or undefined when the partition is not taken now: another
   *   refresh takes it, or its dead-letter handling failed (logged; the next refresh tries again)
   */
  async take(a: PartitionKey, committed: number): Promise<number | undefined> {
    const field = offsetField(a.eventType, a.partition);
    if (this.starting.has(field)) return undefined;
    this.starting.add(field);
    try {
      return await this.start(a, committed);
    } catch (err) {
      // Not taken now (a skipped event could not be stored): the next refresh tries again.
      this.options.deps.logger.warn({ err: (err as Error).message, subscription: this.options.subscriptionId, partition: field }, 'dead-letter handling of a partition failed; it is not streamed until it succeeds');
      return undefined;
    } finally {
      this.starting.delete(field);
    }
  }

  /** Dead-letter search (docs/consuming.md "Dead letters"): one event per batch, each once everything sent before it is committed. */
  partitionAllowance(partition: StreamPartition): number {
    if (!this.searching.has(partition.key)) return Number.POSITIVE_INFINITY;
    return this.options.uncommittedOf(partition) === 0 ? 1 : 0;
  }

  /**
   * What to do with a partition this stream takes at `committed` under the subscription's dead-letter
   * policy (docs/consuming.md "Dead letters"; `deadLetterStart`): stream it normally, search it one event per batch, or first
   * skip its poison event (stored in the dead-letter queue with `DEAD_LETTER_QUEUE`, then committed by
   * the broker). Writes the partition's new state.
   * @returns the offset to stream after
   * @throws BrokerError 503 (Redis, or the dead-letter event was not stored: then nothing was skipped)
   */
  private async start(a: PartitionKey, committed: number): Promise<number> {
    const { policy, subscriptionId, batchLimit } = this.options;
    const { state: store } = this.options.deps;
    const field = offsetField(a.eventType, a.partition);
    const stored: PartitionDeadLetterState = (await store.deadLetters(subscriptionId, [field])).get(field) ?? { failedSends: 0, searchUntil: undefined };
    this.failedSends.set(field, stored.failedSends);
    const decision = deadLetterStart(policy, stored, committed, batchLimit);
    if (decision.kind === 'normal') {
      this.searching.delete(field);
      if (stored.searchUntil !== undefined) await store.setDeadLetter(subscriptionId, field, { failedSends: stored.failedSends, searchUntil: undefined });
      return committed;
    }
    let start = committed;
    if (decision.kind === 'skip') start = await this.skipPoisonEvent(a, committed, stored.failedSends);
    const searchUntil = start < decision.until ? decision.until : undefined;
    if (decision.kind === 'skip' || decision.enter) {
      await store.setDeadLetter(subscriptionId, field, { failedSends: 0, searchUntil });
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
  private async skipPoisonEvent(a: PartitionKey, committed: number, failedSends: number): Promise<number> {
    const { policy, subscriptionId, streamId } = this.options;
    const { state: store, logs, deadLetters, consumption, logger } = this.options.deps;
    const timelines = this.options.timelinesOf(a.eventType);
    const slice = await logs.read(a.eventType, timelines, a.partition, committed, 1);
    const segment = slice.segments[0];
    if (segment === undefined) return committed;
    const newline = segment.data.indexOf(0x0a);
    const event = (newline < 0 ? segment.data : segment.data.subarray(0, newline)).toString();
    const offset = segment.first;
    const wireOffset = timelines.format(a.partition, offset);
    if (policy.unprocessableEventPolicy === 'DEAD_LETTER_QUEUE' && deadLetters) {
      await deadLetters.publish({ subscriptionId, eventType: a.eventType, partition: a.partition, offset: wireOffset, failedSends, event });
    }
    const field = offsetField(a.eventType, a.partition);
    const outcome = await store.commit(subscriptionId, streamId, [{ field, offset }]);
    if (outcome.kind !== 'ok') throw brokerError('SKIPPED_EVENT_NOT_COMMITTED', { offset: wireOffset, outcome: outcome.kind });
    this.options.committed.set(field, offset);
    consumption.deadLettered(subscriptionId, a.eventType);
    logger.warn({ subscription: subscriptionId, event_type: a.eventType, partition: a.partition, offset: wireOffset, failed_sends: failedSends, policy: policy.unprocessableEventPolicy }, 'skipped an event its consumer did not commit in a single-event batch');
    return offset;
  }

  /** A commit moved `field` to `offset`: its failed sends start again at 0; a committed search window ends. */
  committedTo(field: string, offset: number): void {
    const until = this.searching.get(field);
    const windowDone = until !== undefined && offset >= until;
    if ((this.failedSends.get(field) ?? 0) === 0 && !windowDone) return;
    this.failedSends.set(field, 0);
    if (windowDone) this.searching.delete(field);
    const state: PartitionDeadLetterState = { failedSends: 0, searchUntil: windowDone ? undefined : until };
    const { deps, subscriptionId } = this.options;
    deps.state.setDeadLetter(subscriptionId, field, state).catch((err: unknown) => {
      deps.logger.warn({ err: (err as Error).message, subscription: subscriptionId, partition: field }, 'could not store the dead-letter state after a commit');
    });
  }

  /** The stream ends with events of some of `partitions` sent and not committed: each counts one failed send. */
  async countFailedSends(partitions: Iterable<StreamPartition>): Promise<void> {
    const { uncommittedOf, deps, subscriptionId } = this.options;
    const fields = [...partitions].filter((p) => uncommittedOf(p) > 0).map((p) => p.key);
    await deps.state.addFailedSends(subscriptionId, fields);
  }
}
