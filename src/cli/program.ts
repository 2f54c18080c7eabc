/**
 * The `broker` command line: the commander program with its global options and command groups, and
 * `runCli`, which runs one command line and answers its exit code (see {@link EXIT}).
 */
import { readFileSync } from 'node:fs';
import type { Writable } from 'node:stream';
import { Command, CommanderError, Option } from 'commander';
import { CliSession } from './context.js';
import { registerEventTypes } from './event-types.js';
import { CliError, EXIT } from './exit-codes.js';
import { registerPublish } from './publish.js';
import { registerQuotas } from './quotas.js';
import { registerSubscriptions } from './subscriptions.js';
import { registerTail } from './tail.js';

/** The default of `--url` when `BROKER_URL` is not set either. */
export const DEFAULT_URL = 'http://localhost:8080';

/** The package's version, from the package.json two levels up (`src/cli`) or three (`dist/src/cli`). */
function packageVersion(): string {
  for (const candidate of ['../../package.json', '../../../package.json']) {
    try {
      const parsed: unknown = JSON.parse(readFileSync(new URL(candidate, import.meta.url), 'utf8'));
      if (typeof parsed === 'object' && parsed !== null && (parsed as Record<string, unknown>).name === 'event-broker') {
        const version = (parsed as Record<string, unknown>).version;
        if (typeof version === 'string') return version;
      }
    } catch {
      // not there: try the next
    }
  }
  return 'unknown';
}

/** The commander program, writing through `session`'s streams. Commander's own exits become {@link CommanderError}s. */
export function buildProgram(session: CliSession, stdout: Writable, stderr: Writable): Command {
  const program = new Command('broker')
    .description('command line of the event broker: event types, publishing, tailing streams, subscriptions, lag and cursors, publishing quotas')
    .version(packageVersion())
    .addOption(new Option('--url <url>', 'URL of a broker node or balancer').env('BROKER_URL').default(DEFAULT_URL))
    .addOption(new Option('--token <token>', 'bearer token (auth modes jwt and tokeninfo)').env('BROKER_TOKEN'))
    .option('--json', 'machine-readable output: JSON (NDJSON for tail) on stdout')
    .exitOverride()
    .showSuggestionAfterError()
    .configureOutput({ writeOut: (text) => stdout.write(text), writeErr: (text) => stderr.write(text) });
  registerEventTypes(program, session);
  registerPublish(program, session);
  registerTail(program, session);
  registerSubscriptions(program, session);
  registerQuotas(program, session);
  program.addHelpText(
    'after',
    `
Exit codes: 0 done; 1 done but some items failed (events not published, commits refused);
2 usage error; 3 the broker answered 4xx; 4 the broker answered 5xx or could not be reached.`,
  );
  return program;
}

/**
 * Runs one command line.
 * @param args the arguments after the program name (`process.argv.slice(2)`)
 * @returns the exit code: {@link EXIT}
 */
export async function runCli(args: readonly string[], stdout: Writable = process.stdout, stderr: Writable = process.stderr): Promise<number> {
  const session = new CliSession(stdout, stderr);
  const program = buildProgram(session, stdout, stderr);
  try {
    await program.parseAsync([...args], { from: 'user' });
    return session.exitCode;
  } catch (err) {
    // Commander printed its message already (help and version exit 0).
    if (err instanceof CommanderError) return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    if (err instanceof CliError) {
      stderr.write(`broker: ${err.message}\n`);
      return err.exitCode;
    }
    stderr.write(`broker: internal error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return EXIT.partial;
  } finally {
    session.close();
  }
}
