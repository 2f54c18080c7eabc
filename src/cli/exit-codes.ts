/**
 * Exit codes of the `broker` command line and the error that carries one. The table is documented in
 * docs/cli.md ("Exit codes"); scripts tell a mistake of theirs (2) from a refusal of the broker (3) and
 * from a broker that is down or failing (4).
 */

/** What a `broker` process exits with. */
export const EXIT = {
  /** Everything done. */
  ok: 0,
  /** Done, but some items failed: events of a publish that were not written, commits that were refused. */
  partial: 1,
  /** The command line or an input file is wrong (unknown option, missing argument, unreadable or non-JSON file). */
  usage: 2,
  /** The broker answered 4xx (not found, forbidden, unprocessable, conflict, ...). */
  clientError: 3,
  /** The broker answered 5xx, or could not be reached, or broke a stream off. */
  serverError: 4,
} as const;

/** One of {@link EXIT}'s values. */
export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** An error that ends the command with a message on stderr and the given exit code. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: ExitCode,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** A usage error (exit 2): a bad option value or an input file that cannot be used. */
export function usageError(message: string): CliError {
  return new CliError(message, EXIT.usage);
}

/**
 * The error of a broker answer that is not a success: its message is `title: detail` of the RFC 7807
 * problem (or `HTTP <status>: <start of the body>` when it is not a problem).
 * @param status the HTTP status (4xx → exit 3, everything else → exit 4)
 * @param body the answer's body text
 */
export function answerError(status: number, body: string): CliError {
  return new CliError(describeProblem(status, body), status >= 400 && status < 500 ? EXIT.clientError : EXIT.serverError);
}

/** `title: detail` of a problem+json body, or the start of any other body. */
export function describeProblem(status: number, body: string): string {
  try {
    const parsed: unknown = JSON.parse(body);
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
      const { title, detail } = parsed as { title?: unknown; detail?: unknown };
      const head = typeof title === 'string' ? title : `HTTP ${status}`;
      return typeof detail === 'string' && detail !== '' ? `${head}: ${detail}` : head;
    }
  } catch {
    // not JSON: fall through
  }
  const text = body.trim();
  return text === '' ? `HTTP ${status}` : `HTTP ${status}: ${text.slice(0, 300)}`;
}
