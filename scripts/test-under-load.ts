/**
 * `npm run test:stress`: the streaming and consumption integration tests with the machine's cores kept
 * busy, several times over, for timing races that a quiet machine hides (a wake-up a reader misses, a
 * bound that holds only when nothing else runs). Per run it starts CPU burners (one busy-looping
 * `node` process per core by default, at normal priority, so the broker, Redis and the tests compete
 * with them), runs vitest on the lane's files in one project, stops the burners and reports which tests
 * failed; at the end a summary of every run. Exits 1 when any run had a failure.
 *
 * Options: `--runs <n>` (default 3), `--burners <n>` (default: the number of cores), `--project
 * <integration|cluster>` (default integration); file paths after the options replace the lane's list.
 * Needs a build (`npm run build`); docs/getting-started.md "Run the tests".
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { repoRoot } from './local-processes.js';

/** The lane: every integration file whose tests stream or consume (their timing depends on wake-ups, polls and leases). */
const STRESS_LANE_FILES = [
  'test/integration/stream-wakeups.test.ts',
  'test/integration/subscription-streams.test.ts',
  'test/integration/low-level-streams.test.ts',
  'test/integration/queue-mode.test.ts',
  'test/integration/server-sent-events.test.ts',
  'test/integration/stream-close-reasons.test.ts',
  'test/integration/stream-head.test.ts',
  'test/integration/subscription-notices.test.ts',
  'test/integration/rebalance-handover.test.ts',
  'test/integration/dead-letter-queue.test.ts',
  'test/integration/filters.test.ts',
  'test/integration/removed-events.test.ts',
  'test/integration/cursors-at-time.test.ts',
  'test/integration/event-stream-loop.test.ts',
];

/** One test that failed in a run: its file, its full name and the first line of its failure. */
interface Failure {
  readonly file: string;
  readonly test: string;
  readonly message: string;
}

/** The part of vitest's JSON report read here. */
interface JsonReport {
  readonly numTotalTests: number;
  readonly numFailedTests: number;
  readonly testResults: readonly { readonly name: string; readonly message?: string; readonly assertionResults: readonly { readonly fullName: string; readonly status: string; readonly failureMessages: readonly string[] }[] }[];
}

function startBurners(count: number): ChildProcess[] {
  return Array.from({ length: count }, () => spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }));
}

async function runVitest(project: string, files: readonly string[], report: string): Promise<number | null> {
  const child = spawn(process.execPath, [path.join(repoRoot, 'node_modules', 'vitest', 'vitest.mjs'), 'run', '--project', project, '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...files], { cwd: repoRoot, stdio: 'inherit' });
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

/** The first line of a failure that says something (vitest puts a placeholder line before a timeout's message). */
function firstLine(message: string): string {
  return message.split('\n').find((line) => line.trim() !== '' && !line.includes('STACK_TRACE_ERROR'))?.trim() ?? '';
}

function failuresOf(report: JsonReport): Failure[] {
  const out: Failure[] = [];
  for (const file of report.testResults) {
    const name = path.relative(repoRoot, file.name);
    const failed = file.assertionResults.filter((t) => t.status === 'failed');
    for (const t of failed) out.push({ file: name, test: t.fullName, message: firstLine(t.failureMessages.join('\n')) });
    // A file that failed outside its tests (a hook, an import) has no failed test to name.
    if (failed.length === 0 && file.message) out.push({ file: name, test: '(file)', message: firstLine(file.message) });
  }
  return out;
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { runs: { type: 'string', default: '3' }, burners: { type: 'string', default: String(os.availableParallelism()) }, project: { type: 'string', default: 'integration' } },
  });
  const runs = Number(values.runs);
  const burners = Number(values.burners);
  if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(burners) || burners < 0) throw new Error('--runs must be a positive integer and --burners a non-negative one');
  const files = positionals.length > 0 ? positionals : STRESS_LANE_FILES;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'broker-stress-'));
  const summary: { run: number; tests: number; failures: Failure[]; seconds: number; load: string }[] = [];
  try {
    for (let run = 1; run <= runs; run++) {
      process.stdout.write(`\n== stress run ${run} of ${runs}: ${files.length} files, project ${values.project}, ${burners} CPU burners ==\n`);
      const report = path.join(dir, `run-${run}.json`);
      const burning = startBurners(burners);
      const started = performance.now();
      try {
        await runVitest(values.project, files, report);
      } finally {
        for (const b of burning) b.kill('SIGKILL');
      }
      const parsed = JSON.parse(readFileSync(report, 'utf8')) as JsonReport;
      // The 5-minute load average at the run's end: burners, the lane, and whatever else ran on the machine.
      const load = os.loadavg()[1]?.toFixed(1) ?? '?';
      summary.push({ run, tests: parsed.numTotalTests, failures: failuresOf(parsed), seconds: Math.round((performance.now() - started) / 1000), load });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write('\n== stress lane summary ==\n');
  for (const { run, tests, failures, seconds, load } of summary) {
    process.stdout.write(`run ${run}: ${tests} tests, ${failures.length} failed, ${seconds} s, load average ${load} (${os.availableParallelism()} cores)\n`);
    for (const f of failures) process.stdout.write(`  ${f.file} > ${f.test}: ${f.message}\n`);
  }
  process.exitCode = summary.some((s) => s.failures.length > 0) ? 1 : 0;
}

await main();
