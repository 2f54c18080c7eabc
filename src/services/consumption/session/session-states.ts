/**
 * The states of one subscription stream's session on its node (an explicit state machine, so every transition is named and
 * checked; docs/architecture.md#43-subscription-sessions), in the order a session goes through them:
 * - `starting`: the session joined the subscription in Redis; its batch loop does not run yet.
 * - `streaming`: the batch loop runs; heartbeats renew the lease every third of it.
 * - `leaving`: the loop returned (heartbeats stopped); the session leaves Redis at once — with nothing
 *   uncommitted, or a reason to release now (shutdown, reset, lost session, blocking, authorization) —
 *   or else moves on to `closing`.
 * - `closing`: the session is `closed` in Redis, leased for `commit_timeout` + 2 s; the client may still
 *   commit until `commit_timeout` ends (the commit window), then failed sends are counted (dead-letter
 *   queue) and the session leaves Redis.
 * - `released`: the session left Redis, or could not and expires with its lease. Final.
 */
export const SESSION_STATES = ['starting', 'streaming', 'leaving', 'closing', 'released'] as const;

/** One of {@link SESSION_STATES}. */
export type SessionState = (typeof SESSION_STATES)[number];

/** The moves each session state allows: every transition of a session goes through {@link transition}. */
export const SESSION_TRANSITIONS: { readonly [S in SessionState]: readonly SessionState[] } = {
  starting: ['streaming'],
  streaming: ['leaving'],
  leaving: ['closing', 'released'],
  closing: ['released'],
  released: [],
};

/** A transition the table does not allow: a programming error in the session, never a client's. */
export class IllegalSessionTransition extends Error {
  constructor(
    readonly from: SessionState,
    readonly to: SessionState,
  ) {
    super(`illegal subscription session transition ${from} → ${to}`);
    this.name = 'IllegalSessionTransition';
  }
}

/**
 * The state after moving from `from` to `to`.
 * @returns `to`
 * @throws IllegalSessionTransition when {@link SESSION_TRANSITIONS} does not allow the move
 */
export function transition(from: SessionState, to: SessionState): SessionState {
  if (!SESSION_TRANSITIONS[from].includes(to)) throw new IllegalSessionTransition(from, to);
  return to;
}
