/**
 * Runs one load of bench/load-generator.ts in a process of its own, so that a scenario can give the load
 * generator a scheduling priority apart from its own and its probes' (the `overload` scenario's pass
 * with the generator at the lowest priority: what the node does when it has first call on the cores).
 * Used by {@link runLoadElsewhere}; as a child process:
 *
 *   node dist/bench/load-child.js <options.json>
 *
 * `options.json`: {@link ChildLoadOptions}. Prints one line of JSON, a {@link MeasuredLoad}.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runMeasuredLoad, type LoadRequest, type MeasuredLoad } from './load-generator.js';

/** What the child runs: {@link runLoad}'s options, each body in a file. */
interface ChildLoadOptions {
  readonly url: string;
  readonly connections: number;
  readonly durationSeconds: number;
  readonly requests: readonly { path: string; file: string; events: number; eventBytes: number }[];
}

/**
 * Runs {@link runLoad} with `requests` at `connections` for `durationSeconds` in a child process at
 * niceness `nice` (Linux; 0–19, lower priority as it grows).
 * @returns what the child measured
 * @throws Error when the child fails or prints no result
 */
export async function runLoadElsewhere(url: string, requests: readonly LoadRequest[], connections: number, durationSeconds: number, nice: number): Promise<MeasuredLoad> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-load-'));
  try {
    const options: ChildLoadOptions = {
      url,
      connections,
      durationSeconds,
      requests: requests.map((request, i) => {
        const file = join(dir, `body-${i}`);
        writeFileSync(file, request.body);
        return { path: request.path, file, events: request.events, eventBytes: request.eventBytes };
      }),
    };
    const optionsFile = join(dir, 'options.json');
    writeFileSync(optionsFile, JSON.stringify(options));
    const child = spawn('nice', ['-n', String(nice), process.execPath, fileURLToPath(import.meta.url), optionsFile], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', resolve);
    });
    if (code !== 0) throw new Error(`the load child exited with code ${String(code)}`);
    return JSON.parse(out) as MeasuredLoad;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const options = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as ChildLoadOptions;
  const requests: LoadRequest[] = options.requests.map((r) => ({ path: r.path, body: readFileSync(r.file), events: r.events, eventBytes: r.eventBytes }));
  const answer = await runMeasuredLoad({ url: options.url, requests, connections: options.connections, durationSeconds: options.durationSeconds });
  process.stdout.write(`${JSON.stringify(answer)}\n`);
}
