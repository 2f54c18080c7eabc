/** One line of a diff: kept (` `), removed (`-`) or added (`+`). */
export interface DiffLine {
  readonly op: ' ' | '-' | '+';
  readonly text: string;
}

/**
 * A line diff of `before` and `after` (longest common subsequence, O(n·m); schemas are a few hundred
 * lines at most). Common lines first at equal places, so removals come before additions.
 */
export function diffLines(before: string, after: string): DiffLine[] {
  const a = before.split('\n');
  const b = after.split('\n');
  const n = a.length;
  const m = b.length;
  // lcs[i][j]: length of the longest common subsequence of a[i..] and b[j..], in one flat array.
  const lcs = new Uint32Array((n + 1) * (m + 1));
  const at = (i: number, j: number): number => lcs[i * (m + 1) + j] ?? 0;
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) lcs[i * (m + 1) + j] = a[i] === b[j] ? at(i + 1, j + 1) + 1 : Math.max(at(i + 1, j), at(i, j + 1));
  }
  const out: DiffLine[] = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      out.push({ op: ' ', text: a[i] ?? '' });
      i++;
      j++;
    } else if (at(i + 1, j) >= at(i, j + 1)) out.push({ op: '-', text: a[i++] ?? '' });
    else out.push({ op: '+', text: b[j++] ?? '' });
  }
  while (i < n) out.push({ op: '-', text: a[i++] ?? '' });
  while (j < m) out.push({ op: '+', text: b[j++] ?? '' });
  return out;
}

/** A JSON text pretty-printed with 2 spaces (the text itself when it is not JSON). */
export function prettyJson(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
