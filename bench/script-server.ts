/**
 * Starts one of the benchmarks' reference servers (bench/baseline-parse-server.ts, bench/null-node.ts)
 * as a child process on a free port of 127.0.0.1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freePort } from '../scripts/local-processes.js';

/** A reference server running as a child process. */
export interface ScriptServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly child: ChildProcess;
  /** Sends SIGTERM and resolves once it exited. */
  readonly stop: () => Promise<void>;
}

/**
 * Runs `node dist/bench/<script> <port>` and waits for its `listening` line.
 * @param script the compiled file's name beside this one, e.g. `null-node.js`
 * @param env variables added to this process's environment for the child
 * @throws Error when it exits or has not printed the line within 10 s
 */
export async function startScriptServer(script: string, env: Readonly<Record<string, string>> = {}): Promise<ScriptServer> {
  const port = await freePort();
  const path = fileURLToPath(new URL(`./${script}`, import.meta.url));
  const child = spawn(process.execPath, [path, String(port)], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } });
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`${script} did not start within 10 s`)), 10_000);
    child.stdout.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      if (seen.includes('listening')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${script} exited with code ${String(code)}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    child,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) resolve();
        else {
          child.once('exit', () => resolve());
          child.kill('SIGTERM');
        }
      }),
  };
}
