/**
 * Rules of repartitioning (spec "Event type registry": `POST /event-types/{name}/partition-count`,
 * "States and transitions": Repartition; spec "Limits"). Pure code: the service reads the counts.
 */

/** A parsed `partition-count` body, or why it was refused (400 shape, 422 rule). */
export type PartitionCountBody = { readonly ok: true; readonly count: number } | { readonly ok: false; readonly status: 400 | 422; readonly detail: string };

/** Largest count a partition id may reach (`keys.ts` accepts ids of at most six digits). */
export const PARTITION_ID_LIMIT = 1_000_000;

/**
 * Parses `{"partition_count": N}`: N must be an integer ≥ 1 (unknown properties are ignored, WIRE.md
 * "Conventions").
 * @returns 400 when the body is not a JSON object, 422 when `partition_count` is missing or not a positive integer
 */
export function parsePartitionCountBody(body: unknown): PartitionCountBody {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { ok: false, status: 400, detail: 'the body must be a JSON object {"partition_count": <integer>}' };
  const value = (body as Record<string, unknown>).partition_count;
  if (value === undefined || value === null) return { ok: false, status: 422, detail: 'Field "partition_count" may not be null' };
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) return { ok: false, status: 422, detail: 'Field "partition_count" must be an integer of at least 1' };
  return { ok: true, count: value };
}

/**
 * Whether an event type with `current` partitions may get `wanted` (spec: the count can only grow; the
 * same count is accepted and changes nothing).
 * @param max the installation's cap on partitions of an event type (`eventTypes.maxPartitionCount`)
 * @returns a 422 detail, or undefined when allowed
 */
export function growthProblem(current: number, wanted: number, max: number): string | undefined {
  if (wanted < current) return `partition_count can only grow: the event type has ${current} partitions, ${wanted} were requested`;
  if (wanted === current) return undefined;
  if (wanted > Math.min(max, PARTITION_ID_LIMIT)) return `partition_count must not be more than ${Math.min(max, PARTITION_ID_LIMIT)}`;
  return undefined;
}

/**
 * Subscriptions that would exceed the per-subscription partition cap (WIRE.md "Subscriptions":
 * `subscriptions.maxPartitions`) once the event type grows.
 * @param subscriptions each subscription's id and the partition counts of its event types after growing
 * @returns 422 detail lines, empty when every subscription stays within `max`
 */
export function subscriptionLimitProblems(subscriptions: readonly { readonly id: string; readonly partitionCounts: readonly number[] }[], max: number): string[] {
  return subscriptions.flatMap((s) => {
    const total = s.partitionCounts.reduce((sum, n) => sum + n, 0);
    return total > max ? [`subscription ${s.id} would have ${total} partitions over its event types; at most ${max} are allowed`] : [];
  });
}

/** Partition ids added when growing from `from` to `to` partitions ("from" .. String(to - 1)). */
export function addedPartitions(from: number, to: number): string[] {
  return Array.from({ length: Math.max(0, to - from) }, (_, i) => String(from + i));
}
