import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/config/load-config.js';

// V8 flags are process-wide, so a main thread's `--max-semi-space-size=64` (npm start and the Dockerfile
// once had it; an operator may add it) also let every worker thread's young
// generation grow to ~134 MB of semi-spaces: most of the churn benchmark's RSS growth then. WorkerPool clears the flag for the threads created after it. A child node
// run with the flag starts a thread before and one after constructing the pool (from dist/, built by
// `npm test`); each allocates short-lived objects and reports the size its new space reached.

const script = `
import { Worker } from 'node:worker_threads';
const { WorkerPool } = await import(process.argv[1]);
const churn = "const v8 = require('node:v8'); const { parentPort } = require('node:worker_threads'); let keep = []; for (let i = 0; i < 3e6; i++) { keep.push({ i, s: 'x' + i }); if (keep.length > 20000) keep = []; } parentPort.postMessage(v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size);";
const newSpace = () => new Promise((resolve, reject) => new Worker(churn, { eval: true, execArgv: [] }).once('message', resolve).once('error', reject));
const before = await newSpace();
const pool = new WorkerPool({ workerThreads: 1 });
const after = await newSpace();
await pool.close();
process.stdout.write(JSON.stringify({ before, after }));
`;

describe('worker threads young generation', () => {
  it('is not sized by the main thread\'s --max-semi-space-size and --min-semi-space-size', () => {
    const poolModule = pathToFileURL(path.join(projectRoot, 'dist', 'src', 'services', 'worker-pool.js')).href;
    const output = execFileSync(process.execPath, ['--max-semi-space-size=64', '--min-semi-space-size=64', '--input-type=module', '-e', script, poolModule], { encoding: 'utf8', timeout: 60_000 });
    const { before, after } = JSON.parse(output) as { before: number; after: number };
    const mb = 1024 * 1024;
    expect(before, 'the flag sizes a thread started before the pool').toBeGreaterThan(60 * mb);
    expect(after, "a thread started after the pool has V8's default young generation").toBeLessThanOrEqual(40 * mb);
  });
});
