import { randomUUID } from 'node:crypto';
import { BrokerError, brokerError, reasonPhrase, type Problem } from './catalog.js';

/** What the HTTP layer needs to answer a failure: status, problem body, extra headers, and whether it is a bug. */
export interface ProblemAnswer {
  readonly status: number;
  readonly problem: Problem;
  readonly headers: Readonly<Record<string, string>>;
  /** Set for unexpected errors: the id in `detail`, to be logged with the stack. */
  readonly traceId?: string;
}

/**
 * Maps any thrown value to the problem the client gets. {@link BrokerError}s keep their status, detail
 * and headers and add their code's `type`; anything else is the catalog's `INTERNAL` (500) whose detail
 * is an opaque trace id, also logged, so no internals reach the client (docs/errors.md).
 */
export function toProblem(err: unknown): ProblemAnswer {
  if (err instanceof BrokerError) return answer(err);
  const traceId = randomUUID();
  return { ...answer(brokerError('INTERNAL', { traceId })), traceId };
}

function answer(err: BrokerError): ProblemAnswer {
  const problem: Problem = err.errors === undefined
    ? { title: reasonPhrase(err.status), status: err.status, detail: err.detail, type: err.type }
    : { title: reasonPhrase(err.status), status: err.status, detail: err.detail, errors: err.errors, type: err.type };
  return { status: err.status, problem, headers: err.headers };
}
