/**
 * What every command of the `broker` command line gets: a client of the broker named by the global
 * options (`--url`/`BROKER_URL`, `--token`/`BROKER_TOKEN`), the output channels (`--json`), and a way
 * to say the command partly failed (exit 1).
 */
import type { Writable } from 'node:stream';
import type { Command } from 'commander';
import { EXIT, type ExitCode } from './exit-codes.js';
import { BrokerClient } from './http-client.js';
import { createOutput, type Output } from './output.js';

/** The global options, as commander parses them. */
export interface GlobalOptions {
  readonly url: string;
  readonly token?: string;
  readonly json?: boolean;
}

/** A command's view of the run. */
export interface CommandContext {
  readonly client: BrokerClient;
  readonly output: Output;
  /** Marks the run as partly failed: the process exits 1 unless something worse happens. */
  partial(): void;
}

/** One run of the command line: holds the client (closed at the end) and the exit code so far. */
export class CliSession {
  /** The exit code the run ends with when no error escapes a command. */
  exitCode: ExitCode = EXIT.ok;
  private client: BrokerClient | undefined;

  constructor(
    private readonly stdout: Writable = process.stdout,
    private readonly stderr: Writable = process.stderr,
  ) {}

  /**
   * The context of a command about to run, from its options and its parents' (the global options).
   * @throws CliError (exit 2) for a bad `--url`
   */
  contextOf(command: Command): CommandContext {
    const options = command.optsWithGlobals<GlobalOptions>();
    this.client ??= new BrokerClient({ url: options.url, token: options.token });
    return {
      client: this.client,
      output: createOutput(options.json === true, this.stdout, this.stderr),
      partial: () => {
        if (this.exitCode === EXIT.ok) this.exitCode = EXIT.partial;
      },
    };
  }

  /** The output channels without a client (for reporting errors). */
  outputOf(json: boolean): Output {
    return createOutput(json, this.stdout, this.stderr);
  }

  /** Frees the client's sockets. */
  close(): void {
    this.client?.close();
  }
}
