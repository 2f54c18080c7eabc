import { formatBytes, type MasterMemory } from '../domain/storages/memory-budget.js';
import { brokerError, errorDetail, type BrokerError } from '../errors/catalog.js';
import type { StorageFullReason } from '../observability/meters.js';

/**
 * Why a write was refused for memory ({@link StorageFullReason}): the node refused it at the high-water
 * mark, or Redis refused it itself (`OOM command not allowed when used memory > 'maxmemory'`, from a
 * command or from a script's first write: a burst past the mark, another client).
 */
export type StorageFullCause = StorageFullReason;

/**
 * Whether a Redis error is Redis refusing a write for memory: a `noeviction` Redis at its `maxmemory`
 * answers `OOM command not allowed …` to a command that may grow memory, and to a script whose first
 * write is such a command (a script refused so has written nothing: Redis only refuses a script's write
 * while the script has not written yet, so its effects stay all or nothing).
 */
export function isOutOfMemory(err: unknown): boolean {
  const message = err instanceof Error ? err.message : String(err);
  return /^OOM\b/.test(message);
}

/** The master's state as a 507 names it: its address, what it uses and its mark or limit, in words. */
export function storageFullState(master: MasterMemory | undefined, cause: StorageFullCause): string {
  if (master === undefined) return 'Redis refused the write for lack of memory (used_memory above its maxmemory)';
  const limit =
    master.limitSource === 'maxmemory'
      ? `maxmemory ${formatBytes(master.limitBytes)}`
      : master.limitSource === 'system_memory'
        ? `the machine's ${formatBytes(master.limitBytes)} (the master has no maxmemory)`
        : 'an unknown limit';
  const percent = master.limitBytes > 0 ? Math.round((master.markBytes / master.limitBytes) * 100) : 0;
  if (cause === 'high_water_mark') {
    return `Redis master ${master.master} uses ${formatBytes(master.usedBytes)}, at or above its high-water mark of ${formatBytes(master.markBytes)} (${percent} % of ${limit})`;
  }
  return `Redis master ${master.master} refused the write for lack of memory (${limit}; ${formatBytes(master.usedBytes)} used when last read)`;
}

/**
 * The 507 `STORAGE_FULL` problem for a publish (or another write) refused for memory, naming the
 * master's state ({@link storageFullState}); `Retry-After` from the catalog. The one place where
 * both the node's refusal and Redis's OOM become the client's answer: Redis's text never reaches it.
 */
export function storageFull(master: MasterMemory | undefined, cause: StorageFullCause): BrokerError {
  return brokerError('STORAGE_FULL', { state: storageFullState(master, cause) });
}

/** The same text as the `detail` of a batch item that was not written for memory (a 207 on a Redis Cluster). */
export function storageFullDetail(master: MasterMemory | undefined, cause: StorageFullCause): string {
  return errorDetail('STORAGE_FULL', { state: storageFullState(master, cause) });
}
