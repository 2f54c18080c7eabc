import { evaluateConsumer, trimSamples, type ConsumerSample, type ConsumerVerdict } from '../../domain/subscription/consumer-status.js';
import type { Logger } from '../../observability/logger.js';
import type { LagSnapshot } from '../../observability/meters.js';
import type { SubscriptionState, SubscriptionStateStore } from '../../storage/subscription-state-store.js';
import { PeriodicRounds } from '../periodic-rounds.js';

/** The verdict on one partition of a subscription, with the labels of its series. */
export interface PartitionVerdict extends ConsumerVerdict {
  readonly subscriptionId: string;
  readonly consumerGroup: string;
  readonly eventType: string;
  readonly partition: string;
}

/** The settings of the evaluation (`consumerStatus` in the configuration). */
export interface ConsumerStatusSettings {
  /** The sliding window a verdict looks at (ms). */
  readonly windowMs: number;
  /** How often the positions are sampled (ms). */
  readonly intervalMs: number;
}

/** One partition's history: its samples (oldest first) and its last verdict. */
interface History {
  readonly samples: ConsumerSample[];
  verdict: PartitionVerdict;
}

/**
 * Samples every subscription's committed offsets, lag and stream holders every `intervalMs` and
 * evaluates each partition's consumer over the last `windowMs` ({@link evaluateConsumer};
 * docs/consuming.md "Consumer status"). The stats, `/metrics` and the scaling endpoint read the last
 * verdicts from memory: no Redis work per request.
 *
 * Bounded: a partition keeps at most `windowMs ÷ intervalMs + 2` samples, and only partitions of
 * subscriptions that exist and were streamed (committed offsets) are kept; a round drops the history of
 * a subscription that is gone, {@link forget} drops it at once. A round costs one lag read without the
 * ages (`ConsumerLagReader.read(false)`: four steps of Redis round trips whatever the number of
 * subscriptions) and one state read per subscription, sent together.
 */
export class ConsumerStatusMonitor {
  private readonly histories = new Map<string, History>();
  private readonly rounds: PeriodicRounds;

  /**
   * @param readLag the positions of every subscription (`ConsumerLagReader.read(false)`: the counts, not the ages)
   * @param state who holds each partition
   * @param now a monotonic clock (ms)
   */
  constructor(
    private readonly readLag: () => Promise<LagSnapshot>,
    private readonly state: Pick<SubscriptionStateStore, 'read'>,
    private readonly settings: ConsumerStatusSettings,
    logger: Logger,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.rounds = new PeriodicRounds(settings.intervalMs, () => this.sample(), logger, 'consumer status');
  }

  /** Starts sampling every `intervalMs`. */
  start(): void {
    this.rounds.start();
  }

  /** Stops sampling; resolves when a running round finished. */
  stop(): Promise<void> {
    return this.rounds.stop();
  }

  /**
   * Takes one sample of every partition and evaluates it (what each tick does).
   * @throws BrokerError 503 when Redis fails (nothing is changed)
   */
  async sample(): Promise<void> {
    const snapshot = await this.readLag();
    const ids = [...new Set(snapshot.subscriptions.map((s) => s.subscriptionId))];
    const states = await Promise.all(ids.map((id) => this.state.read(id)));
    const held = new Map(ids.map((id, i) => [id, heldPartitions(states[i] as SubscriptionState)]));
    const atMs = this.now();
    const seen = new Set<string>();
    for (const s of snapshot.subscriptions) {
      const key = historyKey(s.subscriptionId, s.eventType, s.partition);
      seen.add(key);
      const holders = held.get(s.subscriptionId);
      // Queue mode (the lag read counts its in-flight events): every live stream reads every partition.
      const queueMode = s.inFlightEvents !== undefined;
      const sample: ConsumerSample = { atMs, committed: s.committed, unconsumed: s.unconsumedEvents, held: holders !== undefined && (queueMode ? holders.live : holders.partitions.has(`${s.eventType}\n${s.partition}`)) };
      let history = this.histories.get(key);
      if (history === undefined) {
        history = { samples: [], verdict: { subscriptionId: s.subscriptionId, consumerGroup: s.consumerGroup, eventType: s.eventType, partition: s.partition, status: 'ok', drainSeconds: undefined } };
        this.histories.set(key, history);
      }
      history.samples.push(sample);
      trimSamples(history.samples, this.settings.windowMs);
      history.verdict = { ...history.verdict, consumerGroup: s.consumerGroup, ...evaluateConsumer(history.samples, this.settings.windowMs) };
    }
    for (const key of [...this.histories.keys()]) if (!seen.has(key)) this.histories.delete(key);
  }

  /** The last verdict on a partition of a subscription; undefined before it was evaluated (never streamed, or just created). */
  verdict(subscriptionId: string, eventType: string, partition: string): ConsumerVerdict | undefined {
    return this.histories.get(historyKey(subscriptionId, eventType, partition))?.verdict;
  }

  /** The last verdicts on every partition of every subscription (the `/metrics` gauges). */
  verdicts(): PartitionVerdict[] {
    return [...this.histories.values()].map((h) => h.verdict);
  }

  /** Drops a deleted subscription's history at once (a round would drop it at its next tick). */
  forget(subscriptionId: string): void {
    for (const key of [...this.histories.keys()]) if (key.startsWith(`${subscriptionId}\n`)) this.histories.delete(key);
  }
}

function historyKey(subscriptionId: string, eventType: string, partition: string): string {
  return `${subscriptionId}\n${eventType}\n${partition}`;
}

/**
 * Whether a live stream reads the subscription, and the partitions a live stream holds
 * (`eventType\npartition`). A session whose stream ended and that only waits for its last commits (its
 * commit window) holds nothing: no stream reads for it any more.
 */
function heldPartitions(state: SubscriptionState): { live: boolean; partitions: Set<string> } {
  const live = new Set(state.sessions.filter((s) => s.expiresAt > state.nowMs && s.info.state === 'streaming').map((s) => s.id));
  const partitions = new Set<string>();
  for (const a of state.assignments) if (a.state !== 'unassigned' && live.has(a.session)) partitions.add(`${a.eventType}\n${a.partition}`);
  return { live: live.size > 0, partitions };
}
