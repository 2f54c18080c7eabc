/** One sample of a Prometheus text exposition: `name{labels} value`. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** A parsed exposition: the samples and the declared type of each metric family (`# TYPE`). */
export interface Exposition {
  readonly samples: readonly Sample[];
  readonly types: ReadonlyMap<string, string>;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/**
 * Parses the Prometheus text format 0.0.4 (what prom-client writes): `# TYPE` lines and samples; label
 * values are unescaped. @throws Error on a line that is neither a comment nor a sample
 */
export function parseExposition(text: string): Exposition {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    if (line.startsWith('#')) {
      const type = /^# TYPE (\S+) (\S+)$/.exec(line);
      if (type) types.set(type[1] as string, type[2] as string);
      continue;
    }
    const match = SAMPLE.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(LABEL)) labels[key as string] = (value as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    const raw = match[3] as string;
    const value = raw === '+Inf' ? Number.POSITIVE_INFINITY : raw === '-Inf' ? Number.NEGATIVE_INFINITY : Number(raw);
    samples.push({ name: match[1] as string, labels, value });
  }
  return { samples, types };
}

/**
 * Every sample name a metric family declares: the family itself, or `_bucket`/`_sum`/`_count` of a
 * histogram and `_sum`/`_count` (and the family) of a summary.
 */
export function sampleNames(exposition: Exposition): Set<string> {
  const names = new Set<string>();
  for (const [family, type] of exposition.types) {
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(family + suffix);
    else if (type === 'summary') for (const suffix of ['', '_sum', '_count']) names.add(family + suffix);
    else names.add(family);
  }
  return names;
}

/**
 * The value of the one sample named `name` whose labels include `labels`.
 * @returns undefined when there is none
 * @throws Error when several samples match (the test named too few labels)
 */
export function valueOf(exposition: Exposition, name: string, labels: Readonly<Record<string, string>> = {}): number | undefined {
  const matching = exposition.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (matching.length > 1) throw new Error(`${matching.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return matching[0]?.value;
}
