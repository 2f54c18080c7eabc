/**
 * Prometheus text format 0.0.4 for the metric families a node writes itself rather than through
 * prom-client: those with a series per event type or per subscription and partition, which reach
 * hundreds of thousands of samples at 10,000 event types
 * (docs/decisions/0017-metrics-exposition-written-by-the-node.md). prom-client builds an object per
 * sample and formats every label set again at each scrape (about 1 µs and several allocations per
 * sample); here each series' label text is formatted once, when the series is made, and a scrape only
 * joins it with the values. The text is the same as prom-client's for the same values (escaping, number
 * formatting, label order, `le` first on buckets): test/unit/exposition.test.ts compares the two.
 */

/** Where a scrape's text goes, a line or a few at a time: an {@link ExpositionBuffer} (or an array, in tests). */
export interface ExpositionSink {
  push(text: string): void;
}

/** Bytes of each chunk an {@link ExpositionBuffer} fills (a longer text gets a chunk of its own size). */
const CHUNK_BYTES = 1024 * 1024;

/**
 * A scrape's text encoded to UTF-8 as it is written, into 1 MB chunks. At 10,000 event
 * types and subscriptions a scrape is ~400,000 lines and 37 MB: kept as strings until one join, every line
 * would live until the end of the scrape, so the young-generation collections would copy them and promote
 * them to old space, and garbage collection would take a third of the scrape's main-thread time (CPU
 * profile in docs/decisions/0017-metrics-exposition-written-by-the-node.md). Encoded at once, each line is garbage as soon as it is written.
 */
export class ExpositionBuffer implements ExpositionSink {
  private readonly full: Buffer[] = [];
  private chunk = Buffer.allocUnsafeSlow(CHUNK_BYTES);
  private used = 0;

  /** Appends `text` (UTF-8). */
  push(text: string): void {
    // A UTF-16 code unit takes at most 3 bytes in UTF-8: room for that means the whole text fits.
    if (this.used + text.length * 3 > this.chunk.length) {
      this.full.push(this.chunk.subarray(0, this.used));
      this.chunk = Buffer.allocUnsafeSlow(Math.max(CHUNK_BYTES, text.length * 3));
      this.used = 0;
    }
    this.used += this.chunk.write(text, this.used, 'utf8');
  }

  /** @returns everything written, as one buffer */
  toBuffer(): Buffer {
    return Buffer.concat([...this.full, this.chunk.subarray(0, this.used)]);
  }
}

/** A label value escaped as the text format wants it (backslash, double quote and line feed), as prom-client does. */
export function escapeLabelValue(value: string): string {
  if (!/[\\\n"]/.test(value)) return value;
  return value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

/** `name="value",…` for label names and values (values escaped), without braces; `values[i]` goes with `names[i]`. */
export function labelText(names: readonly string[], values: readonly string[]): string {
  return names.map((name, i) => `${name}="${escapeLabelValue(values[i] ?? '')}"`).join(',');
}

/** A sample value as prom-client writes it: `+Inf`, `-Inf`, `Nan`, otherwise JavaScript's own number text. */
export function sampleValue(value: number): string {
  if (Number.isNaN(value)) return 'Nan';
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return `${value}`;
}

/** A metric family as the text format declares it. */
export interface FamilyDeclaration {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
}

/**
 * A family's text before its samples: a blank line that separates it from the family before (as
 * prom-client separates its families), then its `# HELP` (help text escaped: backslash and line feed) and
 * `# TYPE` lines, each ending in `\n`.
 */
export function familyHeader({ name, help, type }: FamilyDeclaration): string {
  return `\n# HELP ${name} ${help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}\n# TYPE ${name} ${type}\n`;
}

/**
 * The values of one histogram series (prom-client's semantics): a value falls into the first bucket whose
 * upper bound it does not exceed (above the last bound only `+Inf` counts it); `sum` and `count` take
 * every value.
 */
export class HistogramValues {
  /** Observations per bucket, not cumulative (index = the bound's index). */
  private readonly counts: Float64Array;
  sum = 0;
  count = 0;

  /** @param bounds the buckets' upper bounds, ascending */
  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length);
  }

  /** Counts one value (same unit as the bounds). A value that is not a finite number is not counted (it would turn the sum into NaN for good). */
  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    this.sum += value;
    this.count += 1;
    for (let i = 0; i < this.bounds.length; i++) {
      if (value <= (this.bounds[i] as number)) {
        this.counts[i] = (this.counts[i] ?? 0) + 1;
        return;
      }
    }
  }

  /**
   * Appends the series' lines to `out`: the cumulative buckets (`le` first, then `labels`), `+Inf`,
   * `_sum` and `_count`.
   * @param name the family name
   * @param labels the series' label text ({@link labelText}); not empty
   */
  write(out: ExpositionSink, name: string, labels: string): void {
    let cumulative = 0;
    for (let i = 0; i < this.bounds.length; i++) {
      cumulative += this.counts[i] ?? 0;
      out.push(`${name}_bucket{le="${this.bounds[i] as number}",${labels}} ${cumulative}\n`);
    }
    out.push(`${name}_bucket{le="+Inf",${labels}} ${this.count}\n${name}_sum{${labels}} ${sampleValue(this.sum)}\n${name}_count{${labels}} ${this.count}\n`);
  }
}
