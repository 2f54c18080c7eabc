import { brokerError, type BrokerError, type ErrorArgs, type ErrorCode } from '../errors/catalog.js';
import type { ScriptName } from './scripts.js';

/**
 * The expected failures a Lua script answers with, mapped to errors in this one place (after BullMQ's
 * `ErrorCode`): a negative
 * integer, alone or as the first element of a table reply; a success is never one. The same numbers are
 * defined in `lua/includes/failures.lua` (a unit test keeps the two in step).
 */
export const SCRIPT_FAILURES = {
  /** The resource the script works on does not exist. */
  NOT_FOUND: -1,
  /** Compare-and-set lost: the version, revision or timelines read earlier moved on. */
  VERSION_MOVED: -2,
  /** The resource to create exists already. */
  ALREADY_EXISTS: -3,
  /** A cursor reset of the subscription runs. */
  CURSOR_RESET_RUNNING: -4,
  /** The streaming session is gone or its lease expired. */
  SESSION_GONE: -5,
  /** The session does not hold a partition it commits (reply `{PARTITION_NOT_OWNED, 1-based index}`). */
  PARTITION_NOT_OWNED: -6,
  /** The partition's timeline was closed by a timeline switch. */
  TIMELINE_CLOSED: -7,
  /** A partition count below the current one (reply `{PARTITION_COUNT_SMALLER, current count}`). */
  PARTITION_COUNT_SMALLER: -8,
  /** Another holder has the lock. */
  LOCK_HELD: -9,
  /** The partition was never opened: its event type was deleted (or predates opening partitions at creation). */
  PARTITION_MISSING: -10,
  /** A queue-mode cursor names no batch the stream holds (reply `{BATCH_NOT_HELD, 1-based index}`). */
  BATCH_NOT_HELD: -11,
} as const;

/** The name of an expected script failure. */
export type ScriptFailure = keyof typeof SCRIPT_FAILURES;

const BY_NUMBER = new Map<number, ScriptFailure>(Object.entries(SCRIPT_FAILURES).map(([name, code]) => [code, name as ScriptFailure]));

/**
 * The failure a script's reply reports, or undefined for a success.
 * @throws Error for a negative integer no failure has (a script and this table disagree: a bug)
 */
export function scriptFailure(reply: unknown): ScriptFailure | undefined {
  const head: unknown = Array.isArray(reply) ? (reply as unknown[])[0] : reply;
  if (typeof head !== 'number' || head >= 0) return undefined;
  const failure = BY_NUMBER.get(head);
  if (failure === undefined) throw new Error(`a script answered the unknown failure code ${head}`);
  return failure;
}

/**
 * The failure of a script's reply, checked against the failures its header says it answers with.
 * @returns the failure, or undefined for a success
 * @throws Error for any other failure (a script and its caller disagree: a bug)
 */
export function failureOf<F extends ScriptFailure>(reply: unknown, expected: readonly F[]): F | undefined {
  const failure = scriptFailure(reply);
  if (failure === undefined) return undefined;
  if (!(expected as readonly ScriptFailure[]).includes(failure)) throw new Error(`a script answered ${failure}, expected ${expected.join(' or ')}`);
  return failure as F;
}

/**
 * The one place where script failures meet the error catalog: per script, the catalog code each of its
 * failures is answered with. `null`: the failure never reaches a client; the caller handles it (reads
 * again and retries, ends the session, leaves the lock to its holder, or retries the append on the new
 * timeline — after too many tries the catalog code in the comment is answered).
 */
export const scriptFailureErrors = {
  createEventType: { ALREADY_EXISTS: 'EVENT_TYPE_EXISTS' },
  updateEventType: { NOT_FOUND: 'EVENT_TYPE_NOT_FOUND', VERSION_MOVED: 'EVENT_TYPE_CHANGED_CONCURRENTLY' },
  deleteEventType: { NOT_FOUND: 'EVENT_TYPE_NOT_FOUND' },
  growPartitions: { NOT_FOUND: 'EVENT_TYPE_NOT_FOUND', PARTITION_COUNT_SMALLER: 'UNPROCESSABLE' },
  setTimelines: { NOT_FOUND: 'EVENT_TYPE_NOT_FOUND', VERSION_MOVED: 'TIMELINE_SWITCH_CONFLICT' },
  deleteSubscription: { NOT_FOUND: 'SUBSCRIPTION_NOT_FOUND' },
  /** VERSION_MOVED: read again and retry (ASSIGNMENT_CONTENDED after too many tries). */
  applyTopology: { VERSION_MOVED: null, CURSOR_RESET_RUNNING: 'CURSOR_RESET_RUNNING', NOT_FOUND: 'SUBSCRIPTION_NOT_FOUND' },
  commitCursors: { SESSION_GONE: 'SESSION_NOT_FOUND', PARTITION_NOT_OWNED: 'PARTITION_NOT_ASSIGNED' },
  /** SESSION_GONE: the queue stream ends (`session_lost`). */
  claimQueueBatches: { SESSION_GONE: null },
  settleQueueBatches: { BATCH_NOT_HELD: 'BATCH_NOT_HELD' },
  /** The stream ends (its partitions move on). */
  heartbeat: { SESSION_GONE: null },
  /** The other holder compacts or trims. */
  holdLock: { LOCK_HELD: null },
  /**
   * TIMELINE_CLOSED: the publisher retries on the new timeline (TIMELINE_SWITCHING while the switch lasts).
   * PARTITION_MISSING: the publisher reads the event type again (EVENT_TYPE_NOT_FOUND when it is gone).
   */
  publishBatch: { TIMELINE_CLOSED: null, PARTITION_MISSING: null },
  publishCompacted: { TIMELINE_CLOSED: null, PARTITION_MISSING: null },
  publishIdempotent: { TIMELINE_CLOSED: null, PARTITION_MISSING: null },
  publishCompactedIdempotent: { TIMELINE_CLOSED: null, PARTITION_MISSING: null },
  /** PARTITION_MISSING: the partition was deleted; there is nothing left to confirm. */
  confirmReplicated: { PARTITION_MISSING: null },
} as const satisfies { readonly [S in ScriptName]?: { readonly [F in ScriptFailure]?: ErrorCode | null } };

type FailingScript = keyof typeof scriptFailureErrors;

/** The failures of a script that reach clients, and the catalog code each is answered with. */
type AnsweredFailure<S extends FailingScript> = { [F in keyof (typeof scriptFailureErrors)[S]]: (typeof scriptFailureErrors)[S][F] extends ErrorCode ? F : never }[keyof (typeof scriptFailureErrors)[S]];
type CodeOf<S extends FailingScript, F extends AnsweredFailure<S>> = (typeof scriptFailureErrors)[S][F] & ErrorCode;

/**
 * The client error for a script's failure, from {@link scriptFailureErrors}, its template filled with
 * `values` (typed by the catalog code the failure maps to). E.g.
 * `scriptError('updateEventType', 'VERSION_MOVED', { name })` → EVENT_TYPE_CHANGED_CONCURRENTLY.
 */
export function scriptError<S extends FailingScript, F extends AnsweredFailure<S>>(script: S, failure: F, ...values: ErrorArgs<CodeOf<S, F>>): BrokerError {
  const code = scriptFailureErrors[script][failure] as CodeOf<S, F>;
  return brokerError(code, ...values);
}
