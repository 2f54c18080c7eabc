import { spawn } from 'node:child_process';

/** What a finished child process left: its exit code (null when killed) and its output. */
export interface ChildRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `command` with `args` to completion, collecting stdout and stderr as text; killed with SIGKILL
 * after `timeoutMs` (default 60 s), which then resolves with code null.
 * @param options.env the whole environment of the child (the caller merges `process.env` if it wants it)
 * @param options.input written to its stdin, which is then closed (absent: stdin is ignored)
 * @throws Error when the command cannot be started
 */
export function runChild(command: string, args: readonly string[], options: { env?: NodeJS.ProcessEnv; cwd?: string; input?: string; timeoutMs?: number } = {}): Promise<ChildRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: options.env, cwd: options.cwd, stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    if (options.input !== undefined) child.stdin?.end(options.input);
  });
}
