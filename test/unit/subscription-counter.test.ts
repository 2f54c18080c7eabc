import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { SubscriptionCounter } from '../../src/observability/subscription-counter.js';

/**
 * The counters by subscription and event type (src/observability/subscription-counter.ts): forgetting
 * an event type removes exactly its series, and a subscription left without series is forgotten too.
 */

const NAME = 'broker_test_events_total';

/** The series of the counter in `registry` as `subscription/event type = value`, sorted. */
async function seriesOf(registry: Registry): Promise<string[]> {
  const metric = registry.getSingleMetric(NAME);
  if (metric === undefined) throw new Error(`${NAME} is not registered`);
  const { values } = await metric.get();
  return values.map((v) => `${String(v.labels.subscription_id)}/${String(v.labels.event_type)} = ${v.value}`).sort();
}

describe('SubscriptionCounter', () => {
  it('forgetting an event type removes its series of every subscription, and a subscription left without series', async () => {
    const registry = new Registry();
    const counter = new SubscriptionCounter(NAME, 'test', [registry]);
    counter.inc('s1', 'orders');
    counter.inc('s1', 'payments', 3);
    counter.inc('s2', 'orders', 2);
    counter.inc('s3', 'payments');
    expect(await seriesOf(registry)).toEqual(['s1/orders = 1', 's1/payments = 3', 's2/orders = 2', 's3/payments = 1']);

    counter.forgetEventType('orders');
    expect(await seriesOf(registry)).toEqual(['s1/payments = 3', 's3/payments = 1']);
    expect([...counter.subscriptions()].sort()).toEqual(['s1', 's3']);

    counter.forgetEventType('payments');
    expect(await seriesOf(registry)).toEqual([]);
    expect([...counter.subscriptions()]).toEqual([]);
  });

  it('forgetting an event type no subscription has a series of changes nothing', async () => {
    const registry = new Registry();
    const counter = new SubscriptionCounter(NAME, 'test', [registry]);
    counter.inc('s1', 'orders');
    counter.forgetEventType('unknown');
    expect(await seriesOf(registry)).toEqual(['s1/orders = 1']);
    expect([...counter.subscriptions()]).toEqual(['s1']);
  });

  it('forgetting a subscription removes all its series', async () => {
    const registry = new Registry();
    const counter = new SubscriptionCounter(NAME, 'test', [registry]);
    counter.inc('s1', 'orders');
    counter.inc('s1', 'payments');
    counter.inc('s2', 'orders');
    counter.forgetSubscription('s1');
    expect(await seriesOf(registry)).toEqual(['s2/orders = 1']);
    expect([...counter.subscriptions()]).toEqual(['s2']);
  });
});
