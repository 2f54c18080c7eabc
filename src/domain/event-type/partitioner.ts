/**
 * Partition choice (docs/concepts.md "Partitions").
 *
 * - `random`: uniformly random partition per event.
 * - `hash`: FNV-1a (32 bit) over the JSON text of the key values, modulo the partition count, so
 *   equal keys always land in the same partition while the count stays the same.
 * - `user_defined`: `metadata.partition`, which must name an existing partition.
 */

/** FNV-1a, 32 bit, over the UTF-16 code units of `text` (stable across nodes and versions). */
export function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** Reads a dot-separated path from a parsed event; `undefined` when any step is missing. */
export function readPath(event: unknown, path: readonly string[]): unknown {
  let node: unknown = event;
  for (const segment of path) {
    if (typeof node !== 'object' || node === null || Array.isArray(node) || !Object.hasOwn(node, segment)) return undefined;
    node = (node as Record<string, unknown>)[segment];
  }
  return node;
}

/**
 * The partition of an event under `hash`: FNV-1a of the JSON array of its key values.
 * @param keyPaths each key field split on dots, already made relative to the whole event
 * @returns the partition index, or a reason when a key is missing
 */
export function hashPartition(event: unknown, keyPaths: readonly (readonly string[])[], partitionCount: number): number | string {
  const values: unknown[] = [];
  for (const path of keyPaths) {
    const value = readPath(event, path);
    if (value === undefined) return `partition key field "${path.join('.')}" is missing`;
    values.push(value);
  }
  return fnv1a32(JSON.stringify(values)) % partitionCount;
}

/** The partition of an event under `user_defined`, or a reason when `metadata.partition` is absent or unknown. */
export function userDefinedPartition(event: unknown, partitionCount: number): number | string {
  const value = readPath(event, ['metadata', 'partition']);
  if (typeof value !== 'string') return 'metadata.partition is required for the user_defined partition strategy';
  if (!/^(0|[1-9][0-9]*)$/.test(value) || Number(value) >= partitionCount) return `partition "${value}" does not exist (partitions 0..${partitionCount - 1})`;
  return Number(value);
}
