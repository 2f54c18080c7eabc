/** Cancels a timer set by a {@link Clock}; calling it again, or after the timer fired, does nothing. */
export type CancelTimer = () => void;

/**
 * The time and the timers of a subscription stream's session (heartbeat, lease fence, commit timeout,
 * commit window): the session asks this instead of the globals, so a test can drive
 * them with a fake clock.
 */
export interface Clock {
  /** Milliseconds on a monotonic clock (`performance.now()`): only differences mean something. */
  now(): number;
  /** Calls `callback` once after `ms` milliseconds. */
  setTimeout(callback: () => void, ms: number): CancelTimer;
  /** Calls `callback` every `ms` milliseconds until cancelled. */
  setInterval(callback: () => void, ms: number): CancelTimer;
}

/** The real clock: `performance.now()` and Node's timers (which keep the process alive while set). */
export const REAL_CLOCK: Clock = {
  now: () => performance.now(),
  setTimeout: (callback, ms) => {
    const timer = setTimeout(callback, ms);
    return () => clearTimeout(timer);
  },
  setInterval: (callback, ms) => {
    const timer = setInterval(callback, ms);
    return () => clearInterval(timer);
  },
};
