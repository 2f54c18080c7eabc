/**
 * The consumption area (docs/consuming.md): low-level streams, subscription streams (stream and queue
 * mode) with their notices, cursors and dead letters, and the consumer lag the metrics show.
 */
import { DeadLetterQueue } from '../services/dead-letter-queue.js';
import { ConsumerLagReader } from '../services/consumption/consumer-lag.js';
import { ConsumerStatusMonitor } from '../services/consumption/consumer-status-monitor.js';
import { LowLevelStreams } from '../services/consumption/stream/low-level-streams.js';
import { SubscriptionCursors } from '../services/consumption/subscription-cursors.js';
import { SubscriptionNotices } from '../services/consumption/subscription-notices.js';
import { SubscriptionStreams } from '../services/consumption/subscription-streams.js';
import { duplicateForShardedSubscribe } from '../storage/redis/redis-connection.js';
import type { Foundation } from './foundation.js';
import type { Publishing } from './publishing.js';
import type { Registry } from './registry.js';

/** The consumption area's services. */
export interface Consumption {
  readonly lowLevelStreams: LowLevelStreams;
  readonly subscriptionStreams: SubscriptionStreams;
  readonly subscriptionNotices: SubscriptionNotices;
  readonly subscriptionCursors: SubscriptionCursors;
  readonly deadLetters: DeadLetterQueue;
  /** The consumer status of every subscription partition (docs/consuming.md "Consumer status"); started with the node. */
  readonly consumerStatus: ConsumerStatusMonitor;
}

/** Composes the consumption area; its subscription streams listen to their notices from now on. */
export function composeConsumption(f: Foundation, publishing: Publishing, registry: Registry): Consumption {
  const { config, logger, redis, keys, cache, settings, access, metrics, logs } = f;
  const lowLevelStreams = new LowLevelStreams(access, settings, (listener) => cache.onChange(listener), f.eventTypeStore, logs, cache, config.consumption, logger, metrics.stream('low_level'), f.eventFilters);
  // The dead-letter queue of subscriptions (docs/consuming.md "Dead letters"): its event type exists on every installation.
  const deadLetters = new DeadLetterQueue(publishing.publisher, settings, config.publish.maxEventBytes);
  const subscriptionStreams = new SubscriptionStreams({
    access,
    settings,
    eventTypeChanges: (listener) => cache.onChange(listener),
    subscriptions: registry.subscriptions,
    eventTypes: cache,
    state: registry.subscriptionState,
    logs,
    timelineSource: cache,
    config,
    logger,
    metrics,
    deadLetters,
    filters: f.eventFilters,
    queue: registry.queueState,
  });
  // Subscription notices: a sharded channel per subscription, subscribed only while this node streams
  // it, so a node hears only about the subscriptions it serves; its own connection, like the partition wake-ups'.
  const subscriptionNotices = new SubscriptionNotices(duplicateForShardedSubscribe(redis, logger, 'broker-subscription-notices'), keys, logger, config.redis.commandTimeoutMs);
  subscriptionStreams.start(subscriptionNotices);
  const lag = new ConsumerLagReader(redis, keys, registry.subscriptionStore, cache, logs, registry.subscriptionState, registry.queueState);
  metrics.observeLag(() => lag.read(), logger);
  // Sampled in rounds, read from memory by the stats, /metrics and the scaling endpoint.
  const consumerStatus = new ConsumerStatusMonitor(() => lag.read(false), registry.subscriptionState, config.consumerStatus, logger);
  metrics.observeConsumerStatus(() => consumerStatus.verdicts());
  const subscriptionCursors = new SubscriptionCursors(subscriptionStreams, registry.subscriptionState, logs, metrics, registry.queueState, consumerStatus);
  return { lowLevelStreams, subscriptionStreams, subscriptionNotices, subscriptionCursors, deadLetters, consumerStatus };
}
