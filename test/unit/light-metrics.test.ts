import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { LightCounter, LightHistogram } from '../../src/observability/light-metrics.js';

/** The hot-path metrics serialize exactly like prom-client's own counter and histogram. */
describe('light metrics', () => {
  const bounds = [0.001, 0.01, 0.1, 1];
  const values = [0.0005, 0.001, 0.002, 0.05, 0.5, 3, 0.01];

  it('serialize a histogram like prom-client (le inclusive, cumulative buckets, +Inf, sum, count)', async () => {
    const light = new Registry();
    const reference = new Registry();
    const mine = new LightHistogram('x_seconds', 'help text', ['route', 'status'], bounds, light);
    const theirs = new Histogram({ name: 'x_seconds', help: 'help text', labelNames: ['route', 'status'], buckets: bounds, registers: [reference] });
    for (const v of values) {
      mine.labels('/a/:id', '200').observe(v);
      theirs.labels('/a/:id', '200').observe(v);
    }
    mine.labels('/b', '404').observe(0.02);
    theirs.labels('/b', '404').observe(0.02);
    expect(await light.metrics()).toBe(await reference.metrics());
    // As JSON too, except prom-client's exemplar slots (null without exemplars).
    const withoutExemplars = (json: unknown): unknown => JSON.parse(JSON.stringify(json, (key, value: unknown) => (key === 'exemplar' ? undefined : value)));
    expect(withoutExemplars(await light.getMetricsAsJSON())).toEqual(withoutExemplars(await reference.getMetricsAsJSON()));
  });

  it('serialize a counter like prom-client, keep one child per label set, and reset', async () => {
    const light = new Registry();
    const reference = new Registry();
    const mine = new LightCounter('y_total', 'help', ['kind'], light);
    const theirs = new Counter({ name: 'y_total', help: 'help', labelNames: ['kind'], registers: [reference] });
    mine.labels('a').inc(3);
    mine.labels('a').inc();
    mine.labels('b').inc(0.5);
    theirs.labels('a').inc(4);
    theirs.labels('b').inc(0.5);
    expect(mine.labels('a')).toBe(mine.labels('a'));
    expect(await light.metrics()).toBe(await reference.metrics());
    expect(() => mine.labels('a', 'b')).toThrow(/labels kind/);
    light.resetMetrics();
    expect(await light.metrics()).toContain('y_total{kind="a"} 0');
    expect(() => new LightCounter('y_total', 'again', [], light)).toThrow(/already been registered/);
  });
});
