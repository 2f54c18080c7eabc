/**
 * Prometheus text format 0.0.4 for the metric families a node writes itself rather than through
 * prom-client: those with a series per event type or per subscription and partition, which reach
 * hundreds of thousands of samples at 10,000 event types
 * (docs/decisions/0017-metrics-exposition-written-by-the-node.md). prom-client builds an object per
 * sample and formats every label set again at each scrape (its cost per sample: the decision record's
 * "Figures the code relies on"); here each series' label text is formatted once, when the series is made, and a scrape only
 * joins it with the values. The text is the same as prom-client's for the same values (escaping, number
 * formatting, label order, `le` first on buckets): test/unit/exposition.test.ts compares the two.
 */

/** Where a scrape's text goes, a line or a few at a time: an {@link ExpositionBuffer} (or an array, in tests). */
export interface ExpositionSink {
  push(text: string): void;
  /**
   * True when the text is OpenMetrics 1.0 (asked for with `Accept: application/openmetrics-text` on a node
   * with tracing): histograms then write their exemplars. Absent or false: Prometheus text format 0.0.4.
   */
  readonly openMetrics?: boolean;
}

/** Content-Type of an OpenMetrics 1.0 scrape. */
export const OPENMETRICS_CONTENT_TYPE = 'application/openmetrics-text; version=1.0.0; charset=utf-8';

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

  /**
   * @param openMetrics write OpenMetrics 1.0: every family header pushed ({@link familyHeader}, which starts
   *   with the blank line the text format puts between families) is turned into OpenMetrics' form (no blank
   *   line; a counter family named without `_total`), so writers need not know the format
   */
  constructor(readonly openMetrics = false) {}

  /** Appends `text` (UTF-8). */
  push(text: string): void {
    if (this.openMetrics && text.charCodeAt(0) === LINE_FEED) text = openMetricsText(text);
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

const LINE_FEED = 0x0a;

/**
 * Prometheus text (format 0.0.4) as OpenMetrics 1.0 text, without the closing `# EOF`: blank lines
 * dropped, a counter family's `# HELP` and `# TYPE` named without the `_total` its samples keep, `untyped`
 * written `unknown`. Samples are the same in both formats. Used for prom-client's part of a scrape (its own
 * OpenMetrics output renames counter metrics for good, which would break the text format's next scrape)
 * and for the family headers the node writes.
 * @param text whole lines, each ending in `\n`
 */
export function openMetricsText(text: string): string {
  const lines = text.split('\n');
  const out: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    if (line === '') continue;
    if (!line.startsWith('# HELP ') && !line.startsWith('# TYPE ')) {
      out.push(line);
      continue;
    }
    // A family's HELP comes before its TYPE: the type decides both names.
    const typeLine = line.startsWith('# HELP ') ? lines[i + 1] : line;
    const typed = typeLine === undefined ? undefined : TYPE_LINE.exec(typeLine);
    const name = NAME_OF_COMMENT.exec(line)?.[1] ?? '';
    const counter = typed?.[1] === name && typed[2] === 'counter' && name.endsWith('_total');
    // `# HELP ` and `# TYPE ` are 7 characters, then the name.
    let converted = counter ? `${line.slice(0, 7)}${name.slice(0, -'_total'.length)}${line.slice(7 + name.length)}` : line;
    if (converted.startsWith('# TYPE ') && converted.endsWith(' untyped')) converted = `${converted.slice(0, -'untyped'.length)}unknown`;
    out.push(converted);
  }
  return out.length === 0 ? '' : `${out.join('\n')}\n`;
}

const TYPE_LINE = /^# TYPE (\S+) (\S+)$/;
const NAME_OF_COMMENT = /^# (?:HELP|TYPE) (\S+)/;

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
  /** The latest exemplar of each bucket (index = the bound's index; `+Inf` last), made on the first observation that brings one. */
  private exemplars: (Exemplar | undefined)[] | undefined;
  sum = 0;
  count = 0;

  /** @param bounds the buckets' upper bounds, ascending */
  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length);
  }

  /**
   * Counts one value (same unit as the bounds). A value that is not a finite number is not counted (it would turn the sum into NaN for good).
   * @param traceId a sampled trace's id (32 hex digits): kept, with the value and the time, as its bucket's exemplar (replacing the one before)
   */
  observe(value: number, traceId?: string): void {
    if (!Number.isFinite(value)) return;
    this.sum += value;
    this.count += 1;
    let bucket = 0;
    while (bucket < this.bounds.length && value > (this.bounds[bucket] as number)) bucket++;
    if (bucket < this.bounds.length) this.counts[bucket] = (this.counts[bucket] ?? 0) + 1;
    if (traceId !== undefined) (this.exemplars ??= [])[bucket] = { traceId, value, timestampSeconds: Date.now() / 1000 };
  }

  /**
   * Appends the series' lines to `out`: the cumulative buckets (`le` first, then `labels`), `+Inf`,
   * `_sum` and `_count`; in OpenMetrics each bucket with an exemplar carries it
   * (` # {trace_id="…"} <value> <timestamp>`).
   * @param name the family name
   * @param labels the series' label text ({@link labelText}); not empty
   */
  write(out: ExpositionSink, name: string, labels: string): void {
    const exemplars = out.openMetrics === true ? this.exemplars : undefined;
    let cumulative = 0;
    for (let i = 0; i < this.bounds.length; i++) {
      cumulative += this.counts[i] ?? 0;
      out.push(`${name}_bucket{le="${this.bounds[i] as number}",${labels}} ${cumulative}${exemplarText(exemplars?.[i])}\n`);
    }
    out.push(`${name}_bucket{le="+Inf",${labels}} ${this.count}${exemplarText(exemplars?.[this.bounds.length])}\n${name}_sum{${labels}} ${sampleValue(this.sum)}\n${name}_count{${labels}} ${this.count}\n`);
  }
}

/** An observation that links a histogram bucket to a trace (OpenMetrics exemplar). */
interface Exemplar {
  readonly traceId: string;
  readonly value: number;
  /** When it was observed, seconds since the epoch. */
  readonly timestampSeconds: number;
}

/** An exemplar as OpenMetrics writes it after a bucket's value, or '' for none. */
function exemplarText(exemplar: Exemplar | undefined): string {
  return exemplar === undefined ? '' : ` # {trace_id="${exemplar.traceId}"} ${sampleValue(exemplar.value)} ${exemplar.timestampSeconds.toFixed(3)}`;
}
