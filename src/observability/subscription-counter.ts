import { Counter, type Registry } from 'prom-client';

/**
 * A counter by `subscription_id` and `event_type` whose series end with the subscription or the event
 * type they describe (docs/metrics.md "Metric reference"): it remembers which series it created, so
 * {@link forgetSubscription} and {@link forgetEventType} remove exactly those.
 */
export class SubscriptionCounter {
  private readonly counter: Counter<'subscription_id' | 'event_type'>;
  /** Event types with a series, per subscription. */
  private readonly series = new Map<string, Set<string>>();

  /**
   * @param name the metric name (`broker_*_total`)
   * @param help its help text
   * @param registers the registries it is exposed in
   */
  constructor(name: string, help: string, registers: Registry[]) {
    this.counter = new Counter({ name, help, labelNames: ['subscription_id', 'event_type'], registers });
  }

  /** Adds `count` (default 1) to the series of `subscriptionId` and `eventType`. */
  inc(subscriptionId: string, eventType: string, count = 1): void {
    this.counter.labels(subscriptionId, eventType).inc(count);
    let eventTypes = this.series.get(subscriptionId);
    if (!eventTypes) this.series.set(subscriptionId, (eventTypes = new Set()));
    eventTypes.add(eventType);
  }

  /** Removes every series of the subscription. */
  forgetSubscription(subscriptionId: string): void {
    for (const eventType of this.series.get(subscriptionId) ?? []) this.counter.remove(subscriptionId, eventType);
    this.series.delete(subscriptionId);
  }

  /** Removes every series of the event type. */
  forgetEventType(eventType: string): void {
    for (const [subscriptionId, eventTypes] of this.series) {
      if (!eventTypes.delete(eventType)) continue;
      this.counter.remove(subscriptionId, eventType);
      if (eventTypes.size === 0) this.series.delete(subscriptionId);
    }
  }

  /** The subscriptions that have a series. */
  subscriptions(): IterableIterator<string> {
    return this.series.keys();
  }
}
