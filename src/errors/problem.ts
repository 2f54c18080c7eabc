import { randomUUID } from 'node:crypto';
import { BrokerError, reasonPhrase, type Problem } from './catalog.js';

/** What the HTTP layer needs to answer a failure: status, problem body, extra headers, and whether it is a bug. */
export interface ProblemAnswer {
  readonly status: number;
  readonly problem: Problem;
  readonly headers: Readonly<Record<string, string>>;
  /** Set for unexpected errors: the id in `detail`, to be logged with the stack. */
  readonly traceId?: string;
}

/**
 * Maps any thrown value to the problem the client gets. {@link BrokerError}s keep their status and
 * detail; anything else is a 500 whose detail is an opaque trace id (WIRE.md "Conventions").
 */
export function toProblem(err: unknown): ProblemAnswer {
  if (err instanceof BrokerError) {
    return { status: err.status, problem: { title: reasonPhrase(err.status), status: err.status, detail: err.detail }, headers: err.headers };
  }
  const traceId = randomUUID();
  return {
    status: 500,
    problem: { title: reasonPhrase(500), status: 500, detail: `An internal error occurred; trace id ${traceId}` },
    headers: {},
    traceId,
  };
}
