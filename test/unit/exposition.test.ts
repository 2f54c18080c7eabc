import { Counter, Gauge, Histogram, Registry, type OpenMetricsContentType } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { seeded } from '../support/seeded.js';
import type { LagSnapshot, PublishBatchResult, PublishCounts } from '../../src/observability/meters.js';
import { BATCH_SIZE_BUCKETS_EVENTS, BrokerMetrics, LATENCY_BUCKETS_SECONDS } from '../../src/observability/metrics.js';
import { escapeLabelValue, ExpositionBuffer, familyHeader, HistogramValues, openMetricsText } from '../../src/observability/exposition.js';

/**
 * The families BrokerMetrics writes itself (src/observability/exposition.ts; per event type and per
 * subscription partition) give the same text as prom-client gives for the same updates: prom-client is
 * the oracle, fed the way BrokerMetrics fed it before it wrote these families itself.
 */

const SUBSCRIPTION_PARTITION_LABELS = ['subscription_id', 'consumer_group', 'event_type', 'partition'];

/** prom-client's families with the names, help, labels and buckets of BrokerMetrics', updated as BrokerMetrics did with them. */
class Reference {
  readonly registry = new Registry();
  private readonly registers = [this.registry];
  readonly batches = new Counter({ name: 'broker_publish_batches_total', help: 'x', labelNames: ['event_type', 'result'], registers: this.registers });
  readonly events = new Counter({ name: 'broker_publish_events_total', help: 'x', labelNames: ['event_type', 'result'], registers: this.registers });
  readonly bytes = new Counter({ name: 'broker_publish_bytes_total', help: 'x', labelNames: ['event_type'], registers: this.registers });
  readonly duration = new Histogram({ name: 'broker_publish_duration_seconds', help: 'x', labelNames: ['event_type'], buckets: [...LATENCY_BUCKETS_SECONDS], registers: this.registers });
  readonly size = new Histogram({ name: 'broker_publish_batch_size_events', help: 'x', labelNames: ['event_type'], buckets: [...BATCH_SIZE_BUCKETS_EVENTS], registers: this.registers });
  readonly lagEvents = new Gauge({ name: 'broker_subscription_lag_events', help: 'x', labelNames: SUBSCRIPTION_PARTITION_LABELS, registers: this.registers });
  readonly lagEventsSum = new Gauge({ name: 'broker_subscription_event_type_lag_events', help: 'x', labelNames: ['subscription_id', 'consumer_group', 'event_type'], registers: this.registers });
  readonly lagSeconds = new Gauge({ name: 'broker_subscription_lag_seconds', help: 'x', labelNames: SUBSCRIPTION_PARTITION_LABELS, registers: this.registers });
  readonly committed = new Gauge({ name: 'broker_subscription_committed_offset', help: 'x', labelNames: SUBSCRIPTION_PARTITION_LABELS, registers: this.registers });
  readonly newest = new Gauge({ name: 'broker_partition_newest_offset', help: 'x', labelNames: ['event_type', 'partition'], registers: this.registers });

  batch(eventType: string | undefined, result: PublishBatchResult, seconds: number, counts?: PublishCounts): void {
    this.batches.labels(eventType ?? '', result).inc();
    if (eventType === undefined) return;
    this.duration.labels(eventType).observe(seconds);
    if (counts === undefined) return;
    this.size.labels(eventType).observe(counts.submitted + counts.failed + counts.invalid + counts.aborted);
    for (const r of ['submitted', 'failed', 'invalid', 'aborted'] as const) if (counts[r] > 0) this.events.labels(eventType, r).inc(counts[r]);
    if (counts.bytes > 0) this.bytes.labels(eventType).inc(counts.bytes);
  }

  forget(eventType: string): void {
    for (const result of ['submitted', 'partially_failed', 'rejected', 'refused', 'failed']) this.batches.remove(eventType, result);
    for (const result of ['submitted', 'failed', 'invalid', 'aborted']) this.events.remove(eventType, result);
    this.bytes.remove(eventType);
    this.duration.remove(eventType);
    this.size.remove(eventType);
  }

  lag(snapshot: LagSnapshot): void {
    for (const gauge of [this.lagEvents, this.lagEventsSum, this.lagSeconds, this.committed, this.newest]) gauge.reset();
    for (const p of snapshot.partitions) this.newest.labels(p.eventType, p.partition).set(p.newest);
    const sums = new Map<string, { labels: [string, string, string]; sum: number }>();
    for (const s of snapshot.subscriptions) {
      const labels = [s.subscriptionId, s.consumerGroup, s.eventType, s.partition];
      this.lagEvents.labels(...labels).set(s.unconsumedEvents);
      this.committed.labels(...labels).set(s.committed);
      if (s.lagSeconds !== undefined) this.lagSeconds.labels(...labels).set(s.lagSeconds);
      const key = `${s.subscriptionId}\n${s.eventType}`;
      const sum = sums.get(key);
      if (sum === undefined) sums.set(key, { labels: [s.subscriptionId, s.consumerGroup, s.eventType], sum: s.unconsumedEvents });
      else sum.sum += s.unconsumedEvents;
    }
    for (const { labels, sum } of sums.values()) this.lagEventsSum.labels(...labels).set(sum);
  }
}

/** A prom-client registry that writes OpenMetrics. */
function openMetricsRegistry(): Registry<OpenMetricsContentType> {
  const registry = new Registry<OpenMetricsContentType>();
  registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
  return registry;
}

/**
 * prom-client's publish families in its own OpenMetrics output (a registry of that content type, the
 * duration histogram with exemplars), fed as {@link Reference} is: the oracle of the node's OpenMetrics text.
 */
class OpenMetricsReference {
  readonly registry = openMetricsRegistry();
  private readonly registers = [this.registry];
  readonly batches = new Counter({ name: 'broker_publish_batches_total', help: 'x', labelNames: ['event_type', 'result'], registers: this.registers });
  readonly events = new Counter({ name: 'broker_publish_events_total', help: 'x', labelNames: ['event_type', 'result'], registers: this.registers });
  readonly bytes = new Counter({ name: 'broker_publish_bytes_total', help: 'x', labelNames: ['event_type'], registers: this.registers });
  readonly duration = new Histogram({ name: 'broker_publish_duration_seconds', help: 'x', labelNames: ['event_type'], buckets: [...LATENCY_BUCKETS_SECONDS], registers: this.registers, enableExemplars: true });
  readonly size = new Histogram({ name: 'broker_publish_batch_size_events', help: 'x', labelNames: ['event_type'], buckets: [...BATCH_SIZE_BUCKETS_EVENTS], registers: this.registers });

  batch(eventType: string | undefined, result: PublishBatchResult, seconds: number, counts: PublishCounts | undefined, traceId: string | undefined): void {
    this.batches.labels(eventType ?? '', result).inc();
    if (eventType === undefined) return;
    // prom-client's types give exemplar labels the metric's label names; its code takes any (OpenMetrics' trace_id).
    const exemplarLabels = (traceId === undefined ? {} : { trace_id: traceId }) as unknown as Partial<Record<'event_type', string>>;
    this.duration.observe({ labels: { event_type: eventType }, value: seconds, exemplarLabels });
    if (counts === undefined) return;
    this.size.labels(eventType).observe(counts.submitted + counts.failed + counts.invalid + counts.aborted);
    for (const r of ['submitted', 'failed', 'invalid', 'aborted'] as const) if (counts[r] > 0) this.events.labels(eventType, r).inc(counts[r]);
    if (counts.bytes > 0) this.bytes.labels(eventType).inc(counts.bytes);
  }
}

/** The sample lines of `family` in an exposition (its samples and, for a histogram, `_bucket`/`_sum`/`_count`), sorted. */
function samplesOf(text: string, family: string): string[] {
  return text
    .split('\n')
    .filter((line) => !line.startsWith('#') && new RegExp(`^${family}(_bucket|_sum|_count)?[{ ]`).test(line))
    .sort();
}

/** The `# TYPE` line of `family`. */
function typeOf(text: string, family: string): string | undefined {
  return text.split('\n').find((line) => line.startsWith(`# TYPE ${family} `));
}

const FAMILIES = [
  'broker_publish_batches_total',
  'broker_publish_events_total',
  'broker_publish_bytes_total',
  'broker_publish_duration_seconds',
  'broker_publish_batch_size_events',
  'broker_subscription_lag_events',
  'broker_subscription_event_type_lag_events',
  'broker_subscription_lag_seconds',
  'broker_subscription_committed_offset',
  'broker_partition_newest_offset',
];

/** Label values that need escaping, and ordinary ones. */
const AWKWARD = ['quote " inside', 'back\\slash', 'line\nfeed', 'all \\ " \n three', 'Grüße', ''];

describe('the families BrokerMetrics writes itself', () => {
  it('write exactly the samples and types prom-client writes for the same random updates, before and after event types are forgotten', async () => {
    const random = seeded(1717);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
    const eventTypes = [...Array.from({ length: 12 }, (_, i) => `order.e${i}`), ...AWKWARD.slice(0, 4)];
    const results: PublishBatchResult[] = ['submitted', 'partially_failed', 'rejected', 'refused', 'failed'];
    const metrics = new BrokerMetrics();
    const reference = new Reference();
    for (let i = 0; i < 2000; i++) {
      const eventType = random() < 0.05 ? undefined : pick(eventTypes);
      // Latencies across every bucket and beyond the last; sizes likewise (some exactly on a bound).
      const seconds = random() < 0.1 ? pick(LATENCY_BUCKETS_SECONDS) : Math.exp(random() * 12 - 9);
      const total = random() < 0.1 ? pick(BATCH_SIZE_BUCKETS_EVENTS) : Math.floor(Math.exp(random() * 10));
      const counts: PublishCounts | undefined =
        random() < 0.1 ? undefined : { submitted: Math.floor(total * random()), failed: random() < 0.2 ? 1 : 0, invalid: random() < 0.2 ? 2 : 0, aborted: random() < 0.1 ? total : 0, bytes: random() < 0.3 ? 0 : Math.floor(random() * 1e6) };
      const result = pick(results);
      metrics.batch(eventType, result, seconds, counts);
      reference.batch(eventType, result, seconds, counts);
    }
    const subscriptions = Array.from({ length: 30 }, (_, i) => ({
      subscriptionId: `sub-${i % 7}`,
      consumerGroup: pick(AWKWARD),
      eventType: pick(eventTypes),
      partition: String(i % 4),
      committed: Math.floor(random() * 1000) - 1,
      unconsumedEvents: Math.floor(random() * 50),
      lagSeconds: random() < 0.2 ? undefined : Math.floor(random() * 100),
    }));
    const snapshot: LagSnapshot = {
      partitions: eventTypes.flatMap((eventType) => ['0', '1', '2', '3'].map((partition) => ({ eventType, partition, newest: Math.floor(random() * 2000) - 1 }))),
      subscriptions,
      eventTypes,
      subscriptionIds: [...new Set(subscriptions.map((s) => s.subscriptionId))],
    };
    metrics.observeLag(() => Promise.resolve(snapshot), { warn: () => undefined } as never);
    reference.lag(snapshot);

    const compare = async (): Promise<void> => {
      const ours = (await metrics.scrape()).toString();
      const theirs = await reference.registry.metrics();
      for (const family of FAMILIES) {
        expect(samplesOf(ours, family), family).toEqual(samplesOf(theirs, family));
        expect(typeOf(ours, family), family).toBe(typeOf(theirs, family));
      }
      return undefined;
    };
    await compare();
    expect(samplesOf((await metrics.scrape()).toString(), 'broker_publish_duration_seconds').length).toBeGreaterThan(eventTypes.length * 16);

    for (const gone of [eventTypes[0] as string, AWKWARD[1] as string]) {
      metrics.forgetEventType(gone);
      reference.forget(gone);
    }
    await compare();
    const after = (await metrics.scrape()).toString();
    expect(after.includes('broker_publish_duration_seconds_count{event_type="order.e0"}')).toBe(false);
    expect(after.includes('broker_publish_duration_seconds_count{event_type="order.e1"}')).toBe(true);
  });

  it('write a family that has no samples as its HELP and TYPE lines only, and every line ends with a line feed', async () => {
    const text = (await new BrokerMetrics().scrape()).toString();
    for (const family of FAMILIES) {
      expect(typeOf(text, family), family).toBeDefined();
      expect(samplesOf(text, family), family).toEqual([]);
    }
    expect(text.endsWith('\n')).toBe(true);
    expect(text).not.toMatch(/\n\n\n/);
  });

  it('count a histogram value in the first bucket whose bound it does not exceed, and skip values that are not finite', () => {
    const values = new HistogramValues([1, 2, 5]);
    for (const v of [0, 1, 1.5, 2, 5, 5.01, 100, Number.NaN, Number.POSITIVE_INFINITY]) values.observe(v);
    const out: string[] = [];
    values.write(out, 'h', 'a="b"');
    expect(out.join('')).toBe(['h_bucket{le="1",a="b"} 2', 'h_bucket{le="2",a="b"} 4', 'h_bucket{le="5",a="b"} 5', 'h_bucket{le="+Inf",a="b"} 7', 'h_sum{a="b"} 114.51', 'h_count{a="b"} 7', ''].join('\n'));
  });

  it('encode what is pushed to an ExpositionBuffer as UTF-8, in order, across chunk ends and with texts longer than a chunk', () => {
    const random = seeded(7);
    const pieces = ['é', '日本', '😀', 'a'.repeat(1000), 'x\n', 'broker_subscription_lag_events{event_type="naïve"} 3\n'];
    const long = `${'ü'.repeat(700_000)}\n`;
    // First a chunk (1 MB) filled to 3 bytes short of its end, then a text of 2 characters and 6 bytes.
    const texts: string[] = ['a'.repeat(1024 * 1024 - 3), '日本'];
    const out = new ExpositionBuffer();
    for (const text of texts) out.push(text);
    // ~7 MB: several 1 MB chunks, a 1.4 MB text that needs a chunk of its own (in the middle and last),
    // multi-byte characters at every offset.
    for (let i = 0; i < 30_000; i++) {
      const text = i === 15_000 ? long : (pieces[Math.floor(random() * pieces.length)] as string);
      texts.push(text);
      out.push(text);
    }
    out.push(long);
    texts.push(long);
    const expected = Buffer.from(texts.join(''), 'utf8');
    expect(expected.length).toBeGreaterThan(4 * 1024 * 1024);
    expect(out.toBuffer().equals(expected)).toBe(true);
    expect(new ExpositionBuffer().toBuffer().length).toBe(0);
  });

  it('in OpenMetrics, write the samples, exemplars and types prom-client writes in OpenMetrics for the same updates', async () => {
    const random = seeded(4242);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
    const eventTypes = ['order.a', 'order.b', AWKWARD[0] as string];
    const results: PublishBatchResult[] = ['submitted', 'partially_failed', 'rejected', 'refused', 'failed'];
    const metrics = new BrokerMetrics({ exemplars: true });
    const reference = new OpenMetricsReference();
    for (let i = 0; i < 600; i++) {
      const eventType = random() < 0.05 ? undefined : pick(eventTypes);
      const seconds = random() < 0.1 ? pick(LATENCY_BUCKETS_SECONDS) : Math.exp(random() * 12 - 9);
      const counts: PublishCounts | undefined = random() < 0.1 ? undefined : { submitted: Math.floor(random() * 100), failed: 0, invalid: random() < 0.2 ? 2 : 0, aborted: 0, bytes: Math.floor(random() * 1e5) };
      const traceId = random() < 0.3 ? Array.from({ length: 32 }, () => Math.floor(random() * 16).toString(16)).join('') : undefined;
      const result = pick(results);
      metrics.batch(eventType, result, seconds, counts, traceId);
      reference.batch(eventType, result, seconds, counts, traceId);
    }
    const ours = (await metrics.scrape(true)).toString();
    const theirs = await reference.registry.metrics();
    // Exemplar timestamps are the times of the observations: equal to the millisecond at best.
    const untimed = (lines: string[]): string[] => lines.map((line) => line.replace(/ [0-9.]+$/, (t) => (line.includes(' # {') ? '' : t)));
    for (const family of FAMILIES.slice(0, 5)) {
      const name = family.replace(/_total$/, '');
      expect(untimed(samplesOf(ours, family)), family).toEqual(untimed(samplesOf(theirs, family)));
      expect(typeOf(ours, name), family).toBe(typeOf(theirs, name));
    }
    expect(ours.match(/ # \{trace_id="[0-9a-f]{32}"\} /g)?.length).toBeGreaterThan(10);
    expect(ours.endsWith('\n# EOF\n')).toBe(true);
    expect(ours).not.toMatch(/\n\n/);
    // The text format of the same node carries no exemplar.
    expect((await metrics.scrape(false)).toString()).not.toContain('trace_id');
  });

  it('turn text-format families into OpenMetrics: no blank lines, counter families named without _total, untyped as unknown', () => {
    const text = ['# HELP a_total counts', '# TYPE a_total counter', 'a_total{x="1"} 2', '', '# HELP g_total a gauge named so', '# TYPE g_total gauge', 'g_total 1', '', '# HELP u something', '# TYPE u untyped', 'u 3', ''].join('\n');
    expect(openMetricsText(text)).toBe(['# HELP a counts', '# TYPE a counter', 'a_total{x="1"} 2', '# HELP g_total a gauge named so', '# TYPE g_total gauge', 'g_total 1', '# HELP u something', '# TYPE u unknown', 'u 3', ''].join('\n'));
    const out = new ExpositionBuffer(true);
    out.push(familyHeader({ name: 'c_total', help: 'x', type: 'counter' }));
    out.push('c_total 1\n');
    expect(out.toBuffer().toString()).toBe('# HELP c x\n# TYPE c counter\nc_total 1\n');
  });

  it('keep the latest exemplar of each bucket, +Inf included, and write them in OpenMetrics only', () => {
    const values = new HistogramValues([1, 2]);
    const trace = (digit: string): string => digit.repeat(32);
    values.observe(0.5, trace('a'));
    values.observe(0.7, trace('b'));
    values.observe(1.5);
    values.observe(9, trace('c'));
    const text: string[] = [];
    values.write(text, 'h', 'k="v"');
    expect(text.join('')).not.toContain('#');
    const open = Object.assign([] as string[], { openMetrics: true });
    values.write(open, 'h', 'k="v"');
    const lines = open.join('').split('\n');
    expect(lines[0]).toMatch(new RegExp(`^h_bucket\\{le="1",k="v"\\} 2 # \\{trace_id="${trace('b')}"\\} 0.7 \\d+\\.\\d{3}$`));
    expect(lines[1]).toBe('h_bucket{le="2",k="v"} 3');
    expect(lines[2]).toMatch(new RegExp(`^h_bucket\\{le="\\+Inf",k="v"\\} 4 # \\{trace_id="${trace('c')}"\\} 9 `));
  });

  it('escape label values as the text format wants', () => {
    expect(escapeLabelValue('plain')).toBe('plain');
    expect(escapeLabelValue('a"b\\c\nd')).toBe('a\\"b\\\\c\\nd');
  });
});
