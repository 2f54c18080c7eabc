/**
 * `npm run test:coverage`: the whole test suite (or the vitest arguments given) with coverage of src/,
 * from every place the broker's code runs in a test run:
 * - the TypeScript that tests import and vitest compiles (unit tests above all): vitest's v8 provider
 *   (`coverage/tests/coverage-final.json`);
 * - the built node (dist/) in node processes the tests start, in their worker threads, in CLI processes,
 *   and in nodes started inside a test's process: V8's own coverage through `NODE_V8_COVERAGE`
 *   (processes write it as they exit; test/support/built-node-coverage.ts writes it for the test
 *   processes), mapped back to src/ through dist's source maps by c8 (`coverage/nodes/coverage-final.json`).
 * Both are merged and summed up per file; the summary of src/ (lines, functions, branches) is printed
 * and written to `coverage/summary.json`, the merged coverage of src/ to `coverage/coverage-final.json`
 * (istanbul's JSON: what scripts/coverage-diff.ts compares). A node killed by a test (SIGKILL) writes
 * nothing: what only it ran is missing. A run with failed tests still reports (its exit code is 1), and a
 * part that wrote nothing is named and left out. Needs a build (`npm run build`); docs/getting-started.md
 * "Run the tests".
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import libCoverage from 'istanbul-lib-coverage';
import { repoRoot } from './local-processes.js';

const out = path.join(repoRoot, 'coverage');
const v8Dir = path.join(out, 'v8');

function run(command: string, args: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number | null> {
  const child = spawn(command, args, { cwd: repoRoot, env, stdio: 'inherit' });
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

const bin = (name: string): string => path.join(repoRoot, 'node_modules', '.bin', name);

async function main(): Promise<void> {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(v8Dir, { recursive: true });
  const args = process.argv.slice(2);
  const tests = await run(bin('vitest'), ['run', '--coverage.enabled', '--coverage.reportOnFailure', '--coverage.reportsDirectory=coverage/tests', ...args], { ...process.env, NODE_V8_COVERAGE: v8Dir });
  // A test process wrote its built code's block counts itself (test/support/built-node-coverage.ts);
  // its exit file, written after precise coverage stopped, holds per-function counts only.
  const testProcesses = new Set(readdirSync(v8Dir).flatMap((name) => /^coverage-test-process-(\d+)-/.exec(name)?.[1] ?? []));
  for (const name of readdirSync(v8Dir)) {
    const pid = /^coverage-(\d+)-\d+-\d+\.json$/.exec(name)?.[1];
    if (pid !== undefined && testProcesses.has(pid)) rmSync(path.join(v8Dir, name));
  }
  // The built code's coverage, mapped to src/ (tsc writes dist's source maps).
  const nodes = await run(bin('c8'), ['report', '--temp-directory', v8Dir, '--reports-dir', path.join(out, 'nodes'), '--reporter', 'json', '--include', 'dist/src/**', '--include', 'dist/workers/**']);
  if (nodes !== 0) throw new Error(`c8 report failed (exit code ${String(nodes)})`);
  const map = libCoverage.createCoverageMap({});
  let missing = false;
  for (const part of ['tests', 'nodes']) {
    const file = path.join(out, part, 'coverage-final.json');
    if (existsSync(file)) map.merge(JSON.parse(readFileSync(file, 'utf8')) as libCoverage.CoverageMapData);
    else {
      missing = true;
      process.stderr.write(`coverage: ${path.relative(repoRoot, file)} was not written; the summary leaves that part out\n`);
    }
  }
  const inSrc = libCoverage.createCoverageMap({});
  for (const file of map.files()) if (path.relative(repoRoot, file).startsWith(`src${path.sep}`)) inSrc.addFileCoverage(map.fileCoverageFor(file));
  const summary = inSrc.getCoverageSummary().toJSON();
  writeFileSync(path.join(out, 'summary.json'), `${JSON.stringify({ files: inSrc.files().length, ...summary }, null, 2)}\n`);
  writeFileSync(path.join(out, 'coverage-final.json'), JSON.stringify(inSrc.toJSON()));
  const line = (name: string, s: libCoverage.CoverageSummaryData[keyof libCoverage.CoverageSummaryData]): string => `${name.padEnd(10)} ${String(s.pct).padStart(6)} % (${s.covered} of ${s.total})\n`;
  process.stdout.write(`\ncoverage of src/ (${inSrc.files().length} files; vitest exit code ${String(tests)}):\n`);
  process.stdout.write(line('lines', summary.lines) + line('functions', summary.functions) + line('branches', summary.branches));
  process.exitCode = tests === 0 && !missing ? 0 : 1;
}

await main();
