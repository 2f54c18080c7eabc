import type { Metric, Registry } from 'prom-client';

/**
 * Counters and histograms for the hot paths (publish requests, stream writes, commits; DESIGN.md §5,
 * §8). prom-client's own `inc`/`observe` validate and hash the labels on every call (about 0.4 µs
 * each, measured here); these keep one child per label set, made once and held by the caller, whose
 * `inc`/`observe` only add to numbers (a few ns). They are registered in a prom-client registry and
 * serialized by it like its own metrics (same `get()` shape: `values` of `{labels, value, metricName}`),
 * so the text format, `# HELP`/`# TYPE` lines and `registry.getMetricsAsJSON()` are unchanged.
 */

/** A counter of one label set. */
export class CounterChild {
  /** The count so far. */
  value = 0;

  /** Adds `n` (≥ 0; default 1). */
  inc(n = 1): void {
    this.value += n;
  }
}

/** A histogram of one label set: per-bucket counts (not cumulative), sum and count. */
export class HistogramChild {
  readonly buckets: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.buckets = new Float64Array(bounds.length + 1);
  }

  /** Records one value (seconds, events, …): a linear scan of the bucket bounds. */
  observe(value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > (bounds[i] as number)) i++;
    this.buckets[i] = (this.buckets[i] ?? 0) + 1;
    this.sum += value;
    this.count++;
  }
}

interface Labelled<C> {
  readonly labels: Record<string, string>;
  readonly child: C;
}

/** What prom-client's registry reads from a metric (`Metric.get()`). */
interface MetricValues {
  name: string;
  help: string;
  type: string;
  aggregator: 'sum';
  values: { labels: Record<string, string | number>; value: number; metricName?: string }[];
}

abstract class LightMetric<C> {
  readonly aggregator = 'sum';
  protected readonly children = new Map<string, Labelled<C>>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    registry: Registry,
  ) {
    registry.registerMetric(this as unknown as Metric);
  }

  abstract readonly type: string;
  protected abstract make(): C;
  protected abstract valuesOf(entry: Labelled<C>): MetricValues['values'];
  /** Zeroes the values (prom-client `registry.resetMetrics()`). */
  abstract reset(): void;

  /**
   * The child of one label set, in the order of `labelNames`; made on the first call. Callers keep it
   * (a map lookup per call otherwise).
   * @throws Error when the number of values is not the number of labels
   */
  labels(...values: string[]): C {
    if (values.length !== this.labelNames.length) throw new Error(`${this.name} has labels ${this.labelNames.join(', ')}; got ${values.length} values`);
    const key = values.join('\u0000');
    let entry = this.children.get(key);
    if (entry === undefined) {
      const labels: Record<string, string> = {};
      this.labelNames.forEach((name, i) => (labels[name] = values[i] as string));
      entry = { labels, child: this.make() };
      this.children.set(key, entry);
    }
    return entry.child;
  }

  /** The values in prom-client's shape (read by the registry when it serializes). */
  get(): Promise<MetricValues> {
    const values: MetricValues['values'] = [];
    for (const entry of this.children.values()) values.push(...this.valuesOf(entry));
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }
}

/** A counter (`_total` name) with cheap children. */
export class LightCounter extends LightMetric<CounterChild> {
  readonly type = 'counter';

  protected make(): CounterChild {
    return new CounterChild();
  }

  protected valuesOf({ labels, child }: Labelled<CounterChild>): MetricValues['values'] {
    return [{ labels, value: child.value }];
  }

  reset(): void {
    for (const { child } of this.children.values()) child.value = 0;
  }
}

/** A histogram with fixed bucket bounds (ascending) and cheap children; `+Inf` is implied. */
export class LightHistogram extends LightMetric<HistogramChild> {
  readonly type = 'histogram';

  constructor(name: string, help: string, labelNames: readonly string[], readonly bounds: readonly number[], registry: Registry) {
    super(name, help, labelNames, registry);
  }

  protected make(): HistogramChild {
    return new HistogramChild(this.bounds);
  }

  protected valuesOf({ labels, child }: Labelled<HistogramChild>): MetricValues['values'] {
    const out: MetricValues['values'] = [];
    let cumulative = 0;
    this.bounds.forEach((le, i) => {
      cumulative += child.buckets[i] ?? 0;
      out.push({ labels: { le, ...labels }, value: cumulative, metricName: `${this.name}_bucket` });
    });
    out.push({ labels: { le: '+Inf', ...labels }, value: child.count, metricName: `${this.name}_bucket` });
    out.push({ labels, value: child.sum, metricName: `${this.name}_sum` });
    out.push({ labels, value: child.count, metricName: `${this.name}_count` });
    return out;
  }

  reset(): void {
    for (const { child } of this.children.values()) {
      child.buckets.fill(0);
      child.sum = 0;
      child.count = 0;
    }
  }
}
