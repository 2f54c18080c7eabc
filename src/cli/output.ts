/**
 * Where the `broker` command line writes: results on stdout (human text, or JSON with `--json`),
 * progress and diagnostics on stderr. Writes wait for a full pipe to drain, so a slow reader of
 * `broker tail` slows the stream down instead of filling memory.
 */
import type { Writable } from 'node:stream';

/** The two output channels of a command. */
export interface Output {
  /** Whether results are JSON (`--json`) rather than text for people. */
  readonly json: boolean;
  /** Writes to stdout; resolves once the text is handed over (after a drain when the pipe was full). */
  out(text: string): Promise<void>;
  /** Writes a line to stderr (diagnostics; never awaited by callers). */
  err(line: string): void;
  /** Whether stderr is a terminal (progress lines are drawn only there). */
  readonly errIsTty: boolean;
  /** Writes a raw string to stderr (progress redraws). */
  errRaw(text: string): void;
}

/** An {@link Output} on the given streams (process.stdout/stderr by default). */
export function createOutput(json: boolean, stdout: Writable & { isTTY?: boolean } = process.stdout, stderr: Writable & { isTTY?: boolean } = process.stderr): Output {
  return {
    json,
    errIsTty: stderr.isTTY === true,
    out: (text) =>
      new Promise<void>((resolve, reject) => {
        const done = (err?: Error | null): void => (err ? reject(err) : resolve());
        if (stdout.write(text)) {
          done();
          return;
        }
        stdout.once('drain', () => done());
      }),
    err: (line) => {
      stderr.write(`${line}\n`);
    },
    errRaw: (text) => {
      stderr.write(text);
    },
  };
}

/** Left-aligned columns separated by two spaces, with a header row; cells are shown as given. */
export function formatTable(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n') + '\n';
}

/** A count with thousands separators (`10,000`). */
export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** A JSON object's property as a string ('' when absent or not a string). */
export function stringField(value: unknown, key: string): string {
  if (typeof value !== 'object' || value === null) return '';
  const field = (value as Record<string, unknown>)[key];
  return typeof field === 'string' ? field : typeof field === 'number' || typeof field === 'boolean' ? String(field) : '';
}

/** The array a JSON answer holds directly, or under `items` (`{"items": [...]}`); [] otherwise. */
export function itemsOf(value: unknown): unknown[] {
  if (Array.isArray(value)) return value as unknown[];
  if (typeof value === 'object' && value !== null) {
    const items = (value as Record<string, unknown>).items;
    if (Array.isArray(items)) return items as unknown[];
  }
  return [];
}
