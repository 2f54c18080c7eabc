/**
 * The registry area (docs/concepts.md): event types (with their schemas, partition count and
 * timelines) and subscriptions.
 */
import { EventTypeRegistry } from '../services/event-types/event-type-registry.js';
import { Repartitioning } from '../services/event-types/repartitioning.js';
import { Timelines } from '../services/event-types/timelines.js';
import { SubscriptionRegistry } from '../services/subscription-registry.js';
import { QueueStateStore } from '../storage/queue-state-store.js';
import { SubscriptionStateStore } from '../storage/subscription-state-store.js';
import { SubscriptionStore } from '../storage/subscription-store.js';
import type { Foundation } from './foundation.js';
import type { Publishing } from './publishing.js';

/** The registry area's services and the subscription stores consumption shares. */
export interface Registry {
  readonly eventTypes: EventTypeRegistry;
  readonly subscriptions: SubscriptionRegistry;
  readonly repartitioning: Repartitioning;
  readonly timelines: Timelines;
  readonly subscriptionStore: SubscriptionStore;
  readonly subscriptionState: SubscriptionStateStore;
  readonly queueState: QueueStateStore;
}

/** Composes the registry area: a created or changed event type's validators are prepared by the publisher. */
export function composeRegistry(f: Foundation, publishing: Publishing): Registry {
  const { config, redis, scripts, keys, eventTypeStore, cache, logs } = f;
  const eventTypes = new EventTypeRegistry({
    store: eventTypeStore,
    cache,
    pool: f.pool,
    config: config.eventTypes,
    logs,
    defaultStorage: async () => (await f.storages.list()).defaultId,
    prepare: (name) => publishing.publisher.prepare(name, true),
  });
  const subscriptionStore = new SubscriptionStore(redis, scripts, keys);
  const subscriptionState = new SubscriptionStateStore(redis, scripts, keys);
  const queueState = new QueueStateStore(redis, scripts, keys);
  const subscriptions = new SubscriptionRegistry(subscriptionStore, eventTypeStore, logs, config.subscriptions, f.eventFilters);
  // Repartitioning (docs/operations.md "Repartitioning"): grows the partition count; nodes follow through the event type cache.
  const repartitioning = new Repartitioning(eventTypeStore, cache, subscriptionState, logs, (name) => subscriptions.list({ eventTypes: [name] }, { offset: 0, limit: Number.MAX_SAFE_INTEGER }), {
    maxPartitionCount: config.eventTypes.maxPartitionCount,
    maxSubscriptionPartitions: config.subscriptions.maxPartitions,
  });
  const timelines = new Timelines(eventTypeStore, cache, logs, f.storages, f.logger);
  return { eventTypes, subscriptions, repartitioning, timelines, subscriptionStore, subscriptionState, queueState };
}
