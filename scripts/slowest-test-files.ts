/**
 * Prints the slowest test files of the last run from `test-results/durations.json` (written by
 * test/support/durations-reporter.ts): `node dist/scripts/slowest-test-files.js [count]`, default 10.
 * `.ci/run` ends with it. Prints nothing when no run wrote the file.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './local-processes.js';

/** One test file's figures in `test-results/durations.json`. */
export interface FileDuration {
  readonly project: string;
  /** Path from the repository root. */
  readonly file: string;
  /** From the file's start to its end as the runner saw them (its import, hooks and tests), seconds. */
  readonly wallSeconds: number;
  /** Its tests and hooks added up (more than the wall time when tests run concurrently), seconds. */
  readonly testsSeconds: number;
  readonly tests: number;
  readonly state: string;
}

const file = path.join(repoRoot, 'test-results', 'durations.json');
const count = Number(process.argv[2] ?? 10);
if (existsSync(file)) {
  const rows = (JSON.parse(readFileSync(file, 'utf8')) as FileDuration[]).slice(0, count);
  process.stdout.write(`\nslowest ${rows.length} test files (wall seconds; tests and hooks added up; project):\n`);
  for (const r of rows) process.stdout.write(`${r.wallSeconds.toFixed(1).padStart(7)}  ${r.testsSeconds.toFixed(1).padStart(7)}  ${r.project.padEnd(11)} ${r.file} (${r.tests} tests, ${r.state})\n`);
}
