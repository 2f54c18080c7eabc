import type { BrokerConfig } from '../../../config/config-schema.js';
import type { EventType } from '../../../domain/event-type/event-type.js';
import type { TimelineMap } from '../../../domain/storages/timeline.js';
import type { PartitionKey } from '../../../domain/subscription/rebalance.js';
import type { StreamParameters } from '../../../domain/stream/stream-parameters.js';
import type { Subscription } from '../../../domain/subscription/subscription.js';
import type { StreamSink } from '../../../domain/stream/stream-sink.js';
import type { StreamFormat } from '../../../domain/stream/stream-format.js';
import { streamClose, type StreamClose } from '../../../domain/stream/stream-close-reason.js';
import type { Subject } from '../../../auth/subject.js';
import type { Logger } from '../../../observability/logger.js';
import type { ConsumptionMeter } from '../../../observability/meters.js';
import type { PartitionLogs } from '../../../storage/partition-logs.js';
import type { SessionInfo, SubscriptionStateStore } from '../../../storage/subscription-state-store.js';
import { CONSUMPTION_BLOCKED, READERS_CHANGED } from '../../access-control.js';
import type { DeadLetterQueue } from '../../dead-letter-queue.js';
import type { Clock } from '../clock.js';
import type { EventFilter } from '../stream/partition-reader.js';
import type { EventStreamLoop, StreamedListener, StreamPolicy } from '../stream/event-stream.js';

/** One partition of a subscription with its event type's timelines (docs/concepts.md "Timelines and storages"). */
export interface SubscriptionPartition extends PartitionKey {
  readonly timelines: TimelineMap;
}

/** A subscription resolved for consumption: its record and every partition of its event types. */
export interface ResolvedSubscription {
  readonly record: Subscription;
  readonly partitions: readonly SubscriptionPartition[];
  /** The records of its event types that exist. */
  readonly eventTypes: readonly EventType[];
}

/**
 * Why a subscription stream ends: the `info.stream_close_reason` and `info.debug` of its closing batch
 * (docs/consuming.md "Why a stream ended"). The stream loop adds its own (event-stream.ts:
 * `STREAM_TIMEOUT_REACHED`, `KEEP_ALIVE_LIMIT_REACHED`, `NODE_SHUTTING_DOWN`).
 */
export const END_REASONS = {
  commitTimeout: streamClose('commit_timeout_reached', 'Commit timeout reached'),
  streamLimit: (n: number): StreamClose => streamClose('stream_limit_reached', `Stream limit in events reached: ${n}`),
  reset: streamClose('cursors_reset', 'Resetting subscription cursors'),
  sessionLost: streamClose('session_lost', 'Stream session ended: its lease expired or the subscription changed'),
  /** The subscription was deleted (also when its event type was: that deletes its subscriptions first). */
  subscriptionDeleted: streamClose('subscription_deleted', 'Subscription was deleted'),
  blocked: streamClose('consumption_blocked', CONSUMPTION_BLOCKED),
  authorizationChanged: streamClose('authorization_changed', 'Subscription authorization changed; reconnect'),
  readersChanged: streamClose('authorization_changed', READERS_CHANGED),
  /** An event type of the stream got more partitions (repartitioning): reconnect to get them too. */
  repartitioned: streamClose('event_type_repartitioned', 'The partitions of an event type of this stream changed (repartitioning); reconnect'),
} as const;

/**
 * A closed session (commit window open) is leased this long past its `commit_timeout`: the node removes
 * it itself when the window ends (after counting failed sends), so the lease only frees the partitions of
 * a node that died meanwhile, and must not run out first while a loaded node finishes the window.
 */
export const CLOSED_SESSION_LEASE_MARGIN_MS = 2_000;

/**
 * Overrides after which a stream's session is released at once, without a commit window: what was sent
 * may not be committed any more (reset, lost or deleted session) or the consumer may no longer read.
 */
export const RELEASE_AT_ONCE: ReadonlySet<StreamClose> = new Set([
  END_REASONS.reset,
  END_REASONS.sessionLost,
  END_REASONS.subscriptionDeleted,
  END_REASONS.blocked,
  END_REASONS.authorizationChanged,
  END_REASONS.readersChanged,
]);

/** Stores a skipped event in the dead-letter queue. @throws when it was not stored */
export type DeadLetterSink = Pick<DeadLetterQueue, 'publish'>;

/** What a session reads and writes of its subscription's state in Redis (`SubscriptionStateStore`). */
export type SessionStore = Pick<SubscriptionStateStore, 'read' | 'offsets' | 'heartbeat' | 'commit' | 'deadLetters' | 'setDeadLetter' | 'addFailedSends'>;

/** What a session uses of its batch loop (`EventStreamLoop`). */
export type SessionLoop = Pick<EventStreamLoop, 'current' | 'streamed' | 'get' | 'add' | 'remove' | 'deactivate' | 'skipTo' | 'poke' | 'run'>;

/**
 * Builds the batch loop of one subscription stream (`EventStreamLoop` over the node's partition logs,
 * timelines and stream meter), asking `policy` every round.
 */
export type OpenSessionLoop = (params: StreamParameters, sink: StreamSink, policy: StreamPolicy, format: StreamFormat) => SessionLoop;

/** The stores, clock and settings a session runner works with (shared by all runners of a node). */
export interface RunnerDeps {
  readonly state: SessionStore;
  /** Reads the event a dead-letter skip stores (docs/consuming.md "Dead letters"). */
  readonly logs: Pick<PartitionLogs, 'read'>;
  /** Builds a stream's batch loop. */
  readonly openLoop: OpenSessionLoop;
  /** `subscriptions.leaseTtlMs`: the lease a heartbeat renews. */
  readonly config: { readonly subscriptions: Pick<BrokerConfig['subscriptions'], 'leaseTtlMs'> };
  readonly logger: Logger;
  /** Counts skipped poison events (`broker_dead_letters_total`). */
  readonly consumption: ConsumptionMeter;
  /** Where skipped events go with `DEAD_LETTER_QUEUE` (docs/consuming.md "Dead letters"); absent = they are only skipped. */
  readonly deadLetters: DeadLetterSink | undefined;
  /** Time and timers of the sessions: heartbeat, lease fence, commit timeout, commit window. */
  readonly clock: Clock;
}

/**
 * A change of a subscription's sessions or assignment (`SubscriptionStreams.applyChange`): `remove`
 * sessions, `upsert` one (joins or changes, leased `leaseMs` from Redis's now), `complete` a partition's
 * hand-over from session `from`; `refuseDuringReset` refuses the change while a cursor reset runs.
 * An empty change only sweeps expired sessions.
 */
export interface SessionChange {
  readonly remove?: readonly string[];
  readonly upsert?: { readonly id: string; readonly info: SessionInfo; readonly leaseMs: number };
  readonly complete?: PartitionKey & { readonly from: string };
  readonly refuseDuringReset?: boolean;
}

/** What a session asks of the node's subscription streams (`SubscriptionStreams`). */
export interface SessionOwner {
  /** What the session runners use. */
  readonly deps: RunnerDeps;
  /** This node's id, written in the info of its sessions. */
  readonly nodeId: string;
  /** True once the node shuts down: sessions are released at once. */
  readonly stopping: boolean;
  /** Told what each stream sent when it ends (KPI `broker.data.streamed`). */
  readonly streamedListener: StreamedListener | undefined;
  /** Whether the change notices of subscription `id` reach this node now. */
  noticesLive(id: string): boolean;
  /**
   * Whether subscription `id` still exists (a stream whose session is gone tells a deleted subscription
   * from a lost session). Never throws: true when it cannot tell.
   */
  subscriptionExists(id: string): Promise<boolean>;
  /**
   * Recomputes and writes the assignment with `change` (compare-and-set, retried).
   * @returns 'ok', or 'CURSOR_RESET_RUNNING' when `refuseDuringReset` and a cursor reset runs
   * @throws BrokerError 503
   */
  applyChange(subscription: ResolvedSubscription, change: SessionChange): Promise<'ok' | 'CURSOR_RESET_RUNNING' | 'NOT_FOUND'>;
  /**
   * The broker's commit moved `partition` (its offsets field `key` and its event type) of subscription
   * `subscriptionId` past `expired` events that retention removed before they were read: counted in Redis
   * (the stats) and in the node's metric.
   * Never throws (a failure is logged).
   */
  expiredPassed(subscriptionId: string, partition: { readonly key: string; readonly eventType: string }, expired: number): void;
}

/** What a `SessionRunner` is made of: one stream of a subscription, its session already joined. */
export interface SessionRunnerOptions {
  /** The node's subscription streams: stores, clock, assignment changes. */
  readonly owner: SessionOwner;
  readonly subscription: ResolvedSubscription;
  /** The session's id (`X-Broker-StreamId`). */
  readonly streamId: string;
  readonly params: StreamParameters;
  /** Who consumes (access re-checks, the streamed KPI). */
  readonly subject: Subject;
  /** Per event type name, the per-event authorization test (absent = every event). */
  readonly filters: ReadonlyMap<string, (event: string) => boolean>;
  /** The subscription's `filter` as its reader tests it (docs/consuming.md "Filters"); absent = every event. */
  readonly eventFilter?: EventFilter;
  /** How batches are framed (JSON lines or server-sent events); default JSON lines. */
  readonly format?: StreamFormat;
}
