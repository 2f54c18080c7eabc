/**
 * Compares two coverage runs of src/ (istanbul JSON: the `coverage/coverage-final.json` that
 * `npm run test:coverage` writes, scripts/test-coverage.ts), each read against the source files it
 * measured, which must still be where it measured them (a checkout of the earlier commit beside this
 * one). It lists the lines the first run covered that the second does not, matched by their text rather
 * than their file and line number, so that code moved, split or re-indented between the runs still
 * matches: a line counts as lost when the second run leaves it uncovered, the first covered a line of
 * the same text, and the second covers no line of that text anywhere. Lines whose text says too little
 * to match (under 16 characters once trimmed, only brackets and punctuation, or a comment) are left out. A report,
 * not a check: the exit code is 0 whatever it finds (docs/getting-started.md "Run the tests").
 *
 *   node dist/scripts/coverage-diff.js <first/coverage-final.json> <second/coverage-final.json>
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import libCoverage from 'istanbul-lib-coverage';

/** Shortest trimmed text a line needs to be matched by it. */
const MIN_TEXT = 16;

/** One run: per source file, its lines' hit counts (1-based) and its text. */
interface Run {
  readonly files: readonly { readonly file: string; readonly hits: Readonly<Record<string, number>>; readonly lines: readonly string[] }[];
  readonly summary: libCoverage.CoverageSummaryData;
}

/** Reads a coverage JSON and the sources it names. @throws Error when a source file is gone */
function readRun(jsonPath: string): Run {
  const map = libCoverage.createCoverageMap(JSON.parse(readFileSync(jsonPath, 'utf8')) as libCoverage.CoverageMapData);
  const files = map.files().map((file) => ({ file, hits: map.fileCoverageFor(file).getLineCoverage(), lines: readFileSync(file, 'utf8').split('\n') }));
  return { files, summary: map.getCoverageSummary().toJSON() };
}

/** The text a line is matched by, or undefined when it says too little. */
function matchText(line: string | undefined): string | undefined {
  const text = (line ?? '').trim().replace(/\s+/g, ' ');
  // Comments: V8's coverage (the nodes' part) marks the lines of a range, comments included.
  if (text.length < MIN_TEXT || !/[A-Za-z0-9]/.test(text) || /^(\/\/|\/\*|\*)/.test(text)) return undefined;
  return text;
}

/** Texts of the lines a run covered (hit at least once) or left uncovered. */
function texts(run: Run, covered: boolean): Set<string> {
  const found = new Set<string>();
  for (const { hits, lines } of run.files) {
    for (const [line, count] of Object.entries(hits)) {
      const text = matchText(lines[Number(line) - 1]);
      if (text !== undefined && count > 0 === covered) found.add(text);
    }
  }
  return found;
}

function main(): void {
  const [firstPath, secondPath] = process.argv.slice(2);
  if (firstPath === undefined || secondPath === undefined) {
    process.stderr.write('usage: node dist/scripts/coverage-diff.js <first/coverage-final.json> <second/coverage-final.json>\n');
    process.exitCode = 2;
    return;
  }
  const first = readRun(firstPath);
  const second = readRun(secondPath);
  const coveredBefore = texts(first, true);
  const coveredNow = texts(second, true);
  let lost = 0;
  const cwd = process.cwd();
  for (const { file, hits, lines } of second.files) {
    const found: string[] = [];
    for (const [line, count] of Object.entries(hits)) {
      const text = matchText(lines[Number(line) - 1]);
      if (count === 0 && text !== undefined && coveredBefore.has(text) && !coveredNow.has(text)) found.push(`  ${line}: ${text.slice(0, 140)}`);
    }
    if (found.length === 0) continue;
    lost += found.length;
    process.stdout.write(`${path.relative(cwd, file)}\n${found.join('\n')}\n`);
  }
  const figure = (name: string, run: Run): string =>
    `${name}: lines ${run.summary.lines.pct} % (${run.summary.lines.covered} of ${run.summary.lines.total}), functions ${run.summary.functions.pct} % (${run.summary.functions.covered} of ${run.summary.functions.total}), branches ${run.summary.branches.pct} % (${run.summary.branches.covered} of ${run.summary.branches.total}); ${run.files.length} files`;
  process.stdout.write(`\n${figure('first', first)}\n${figure('second', second)}\n`);
  process.stdout.write(`${lost} line(s) the first run covered and the second covers nowhere (matched by text; ${texts(second, false).size} distinct uncovered texts in the second)\n`);
}

main();
