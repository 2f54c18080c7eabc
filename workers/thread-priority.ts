/**
 * The scheduling priority of a validation worker thread (docs/decisions/0027-worker-threads-yield-to-the-main-thread.md).
 * On Linux every thread has its own niceness: `setpriority(PRIO_PROCESS, tid)` — Node's `os.setPriority`
 * given the thread's id, read from `/proc/thread-self` — changes this thread alone, and raising one's own
 * niceness needs no privilege.
 */
import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/**
 * Sets the calling thread's niceness to `nice` (config `publish.workerThreadNice`), so that when the cores
 * are busy the node's main thread — health checks, streams, small batches, the control plane — runs before
 * the bulk validation of large batches. Never throws.
 * @param nice 0–19; 0 leaves the thread as it is
 * @returns the thread's niceness afterwards, or undefined where threads have no niceness of their own
 *   (systems without `/proc/thread-self`) or the system refused
 */
export function setThreadNiceness(nice: number): number | undefined {
  if (nice === 0) return undefined;
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isInteger(tid) || tid <= 0) return undefined;
    setPriority(tid, nice);
    return getPriority(tid);
  } catch {
    return undefined;
  }
}
