/**
 * Scenario `demo`: `npm run demo` on a fresh node. Each round starts a fresh Redis and
 * broker node and runs the demo script (`node dist/scripts/demo-github.js --url …`, its defaults: batches
 * of 100, 4 event types at once) as a process twice: the first run registers the 58 GitHub webhook event
 * types and publishes their 329 payloads to a node that has never published anything (the figure with
 * the target), the second publishes them again to the now warm node (the same-run baseline). The MB/s are
 * the demo's own (MiB of request bodies ÷ the publishing phase's seconds, registration excluded), as a
 * user reads them off its last line. Median over {@link ROUNDS} rounds: one publishing phase lasts
 * 0.1–0.6 s, so single runs vary.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { Recorder, median, round, startStack, type Scenario } from './harness.js';
import { quickMode } from './stream-client.js';

const ROUNDS = quickMode() ? 1 : 3;
const TARGET_MB_PER_SECOND = 30;
const DEMO_SCRIPT = fileURLToPath(new URL('../scripts/demo-github.js', import.meta.url));
const run = promisify(execFile);

/** What one demo run printed on its last line. */
interface DemoRun {
  readonly accepted: number;
  readonly payloads: number;
  readonly rejected: number;
  readonly mbPerSecond: number;
  readonly seconds: number;
}

/**
 * Runs the demo against `url` and reads its summary line
 * (`329/329 events accepted, 0 rejected; 3.15 MB in 0.12 s: 25.30 MB/s, 2641 events/s`), also when it
 * exits 1 (some event not accepted: the counts say which).
 * @throws Error when the demo prints no summary (it could not run or reach the node)
 */
async function runDemo(url: string): Promise<DemoRun> {
  const stdout = await run(process.execPath, [DEMO_SCRIPT, '--url', url], { maxBuffer: 16 * 1024 * 1024 }).then(
    (done) => done.stdout,
    (err: unknown) => (typeof err === 'object' && err !== null && 'stdout' in err && typeof err.stdout === 'string' ? err.stdout : ''),
  );
  const match = /(\d+)\/(\d+) events accepted, (\d+) rejected; [\d.]+ MB in ([\d.]+) s: ([\d.]+) MB\/s/.exec(stdout);
  if (!match) throw new Error(`the demo printed no summary line:\n${stdout.slice(-2000)}`);
  const [, accepted, payloads, rejected, seconds, mbPerSecond] = match.map(Number) as [number, number, number, number, number, number];
  return { accepted, payloads, rejected, seconds, mbPerSecond };
}

async function demo(recorder: Recorder): Promise<void> {
  const fresh: number[] = [];
  const warm: number[] = [];
  let rejected = 0;
  let warnings = 0;
  for (let r = 0; r < ROUNDS; r++) {
    const stack = await startStack();
    // Each round's stop records its node's warn/error lines here; the rounds' sum is recorded once.
    const stopRecorder = new Recorder(recorder.scenario);
    try {
      const first = await runDemo(stack.broker.url);
      const second = await runDemo(stack.broker.url);
      recorder.log(`round ${r + 1}: fresh node ${first.mbPerSecond} MB/s (${first.seconds} s), warm ${second.mbPerSecond} MB/s (${second.seconds} s); ${first.accepted}/${first.payloads} accepted`);
      fresh.push(first.mbPerSecond);
      warm.push(second.mbPerSecond);
      rejected += first.rejected + second.rejected + (first.payloads - first.accepted - first.rejected) + (second.payloads - second.accepted - second.rejected);
    } finally {
      await stack.stop(stopRecorder);
      warnings += stopRecorder.figures.reduce((sum, f) => sum + f.value, 0);
    }
  }
  recorder.add('broker log lines at warn or above (all rounds)', warnings, 'lines');
  recorder.add('events not accepted (all runs)', rejected, 'events', { op: '<=', value: 0 });
  recorder.add(`npm run demo on a fresh node (median of ${ROUNDS})`, round(median(fresh), 2), 'MB/s', { op: '>=', value: TARGET_MB_PER_SECOND });
  recorder.add(`the same again on the warm node (median of ${ROUNDS}, baseline)`, round(median(warm), 2), 'MB/s');
  recorder.add('fresh ÷ warm', round(median(fresh) / median(warm), 2), '×');
}

export const demoScenario: Scenario = {
  name: 'demo',
  title: '`npm run demo` (58 GitHub event types, 329 payloads) on a fresh node, then warm',
  run: demo,
};
