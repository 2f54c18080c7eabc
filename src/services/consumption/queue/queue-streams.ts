import { randomUUID } from 'node:crypto';
import type { Subject } from '../../../auth/subject.js';
import { deadLetterPolicyOf } from '../../../domain/subscription/dead-letter.js';
import type { StreamParameters } from '../../../domain/stream/stream-parameters.js';
import { subscriptionStreamAnswer, type StreamFormat } from '../../../domain/stream/stream-format.js';
import type { StreamingAnswer } from '../../../domain/stream/stream-sink.js';
import { brokerError } from '../../../errors/catalog.js';
import type { PartitionLogs } from '../../../storage/partition-logs.js';
import type { QueueStateStore } from '../../../storage/queue-state-store.js';
import type { SessionInfo, SubscriptionStateStore } from '../../../storage/subscription-state-store.js';
import type { TimelineLookup } from '../stream/partition-reader.js';
import { QueueGroup } from './queue-group.js';
import { QueueStreamRunner, type QueueStreamDeps } from './queue-stream.js';
import type { StreamedListener } from '../stream/event-stream.js';
import type { ResolvedSubscription } from '../session/session-types.js';
import type { SubscriptionNotice, SubscriptionNotices } from '../subscription-notices.js';

/** What {@link QueueStreams} works with (one per node, made by `SubscriptionStreams`). */
export interface QueueStreamsOptions {
  readonly deps: QueueStreamDeps;
  readonly queue: Pick<QueueStateStore, 'join' | 'leave' | 'claim' | 'settle'>;
  readonly state: Pick<SubscriptionStateStore, 'read'>;
  readonly logs: PartitionLogs;
  readonly timelines: TimelineLookup;
  /** This node's id, written in the info of its sessions. */
  readonly nodeId: string;
  /** Whether subscription `id` still exists (true when it cannot tell). */
  readonly subscriptionExists: (id: string) => Promise<boolean>;
  /** Whether the notices of subscription `id` reach this node now. */
  readonly noticesLive: (id: string) => boolean;
  /** Told what each stream sent when it ends. */
  readonly streamedListener: () => StreamedListener | undefined;
  /** `consumption.pollIntervalMs`: the groups poll `IDLE_POLL_FACTOR` times slower (publishes and queue notices wake streams at once). */
  readonly pollIntervalMs: number;
}

/** The streams of one subscription on a node: their group, each by stream id, and their one notice listener (settles once subscribed). */
interface GroupEntry {
  readonly group: QueueGroup;
  readonly members: Map<string, QueueStreamRunner>;
  readonly listening: Promise<() => void>;
}

/** What a queue-mode stream needs that `SubscriptionStreams.open` checked already. */
export interface QueueOpen {
  readonly subscription: ResolvedSubscription;
  readonly params: StreamParameters;
  readonly subject: Subject;
  readonly format: StreamFormat;
  readonly notices: SubscriptionNotices;
  /** Whether some of the subject's events are hidden from it (per-event authorization). */
  readonly perEventAuthorization: boolean;
}

/**
 * The queue-mode streams of a node (docs/consuming.md "Queue mode"): opens them (any number per
 * subscription, no partition assignment), shares one {@link QueueGroup} among the streams of a subscription
 * on the node, and ends them on shutdown.
 */
export class QueueStreams {
  private readonly runners = new Map<string, QueueStreamRunner>();
  private readonly groups = new Map<string, GroupEntry>();

  constructor(private readonly options: QueueStreamsOptions) {}

  /**
   * Opens a stream of a queue-mode subscription: joins it as a session (no assignment: every stream reads
   * every partition) and answers with the stream (`X-Broker-StreamId`).
   * @throws BrokerError 409 (a cursor reset runs), 422 (partitions requested directly, or per-event
   *   authorization hides events from the subject), 503
   */
  async open(o: QueueOpen): Promise<StreamingAnswer> {
    const { subscription, params, format } = o;
    const id = subscription.record.id;
    if (params.partitions.length > 0) throw brokerError('UNPROCESSABLE', { reason: 'A queue-mode subscription hands batches of every partition to every stream: partitions cannot be requested directly' });
    if (o.perEventAuthorization) throw brokerError('UNPROCESSABLE', { reason: 'Queue-mode streams cannot hide events of their batches: a consumer that may read only some events of an event type cannot stream a queue-mode subscription of it' });
    if ((await this.options.state.read(id)).resetRunning) throw brokerError('CURSOR_RESET_RUNNING');
    const streamId = randomUUID();
    const entry = this.groupOf(subscription, o.notices);
    const runner = new QueueStreamRunner({
      deps: this.options.deps,
      group: entry.group,
      subscription,
      streamId,
      params,
      subject: o.subject,
      format,
      deadLetterPolicy: deadLetterPolicyOf(subscription.record.annotations),
      noticesLive: () => this.options.noticesLive(id),
      subscriptionExists: () => this.options.subscriptionExists(id),
      streamedListener: this.options.streamedListener(),
    });
    entry.members.set(streamId, runner);
    try {
      await entry.listening;
      const info: SessionInfo = { requested: [], state: 'streaming', node: this.options.nodeId };
      await this.options.queue.join(id, streamId, JSON.stringify(info), this.options.deps.leaseMs);
      // A reset that started meanwhile would not wait for this stream: leave and refuse.
      if ((await this.options.state.read(id)).resetRunning) {
        await this.options.queue.leave(id, streamId);
        throw brokerError('CURSOR_RESET_RUNNING');
      }
    } catch (err) {
      this.dropGroup(id, streamId);
      throw err;
    }
    this.runners.set(streamId, runner);
    return subscriptionStreamAnswer(streamId, format, async (sink) => {
      try {
        await runner.run(sink);
      } finally {
        this.runners.delete(streamId);
        this.dropGroup(id, streamId);
      }
    });
  }

  /**
   * The group of the subscription's streams on this node, made with its first stream, which also starts
   * listening to the subscription's notices for all of them: `ack <stream id>` goes to that stream alone
   * (a node hears every acknowledgement of the subscription), the others to every stream.
   */
  private groupOf(subscription: ResolvedSubscription, notices: SubscriptionNotices): GroupEntry {
    const id = subscription.record.id;
    let entry = this.groups.get(id);
    if (!entry) {
      const members = new Map<string, QueueStreamRunner>();
      const dispatch = (notice: SubscriptionNotice): void => {
        if (notice.startsWith('ack ')) members.get(notice.slice(4))?.wake();
        else for (const member of members.values()) member.notice(notice);
      };
      const created: GroupEntry = { group: new QueueGroup(subscription.partitions, this.options.logs, this.options.timelines, this.options.deps.logger, this.options.pollIntervalMs), members, listening: notices.listen(id, dispatch) };
      created.group.ready.catch(() => undefined);
      created.listening.catch(() => undefined);
      this.groups.set(id, created);
      entry = created;
    }
    return entry;
  }

  /** Stream `streamId` of the subscription left this node; the last one closes the group and stops listening. */
  private dropGroup(id: string, streamId: string): void {
    const entry = this.groups.get(id);
    if (!entry) return;
    entry.members.delete(streamId);
    if (entry.members.size > 0) return;
    this.groups.delete(id);
    entry.group.close();
    void entry.listening.then((unlisten) => unlisten(), () => undefined);
  }

  /** The queue-mode streams open on this node. */
  get streams(): Iterable<QueueStreamRunner> {
    return this.runners.values();
  }

  /** Ends every queue-mode stream of the node (shutdown); resolves once each wrote its last batch and left. */
  async close(): Promise<void> {
    await Promise.all([...this.runners.values()].map(async (r) => {
      await r.stop();
      await r.released;
    }));
  }
}
