import { spawnSync } from 'node:child_process';

/**
 * Whether promtool (Debian's `prometheus` package) can be run here, for the tests of the alert rules and of
 * the `/metrics` text. CI installs it (.ci/run) and must have it: there a missing promtool throws.
 */
export function promtoolAvailable(): boolean {
  const found = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0;
  if (!found && process.env.CI !== undefined) throw new Error('promtool is required in CI (apt-get install prometheus; see .ci/run)');
  return found;
}

/**
 * `promtool check metrics` of an exposition text (read on stdin).
 * @returns its exit status and what it printed (one line per lint problem)
 */
export function promtoolCheckMetrics(text: string): { status: number | null; output: string } {
  const run = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}
