/**
 * Rules of repartitioning, `POST /event-types/{name}/partition-count` (docs/operations.md
 * "Repartitioning"): the request body's schema, then the bounds.
 * Pure code: the service reads the counts.
 */
import { Type } from '@sinclair/typebox';
import type { InputProblem } from '../json/input-check.js';
import { checkBody } from './rule-problems.js';

/** A parsed `partition-count` body, or why it was refused (400 shape, 422 rule) with one line and the JSON pointer per problem. */
export type PartitionCountBody =
  | { readonly ok: true; readonly count: number }
  | { readonly ok: false; readonly status: 400 | 422; readonly details: readonly string[]; readonly errors?: readonly InputProblem[] };

/** Largest count a partition id may reach (`keys.ts` accepts ids of at most six digits). */
export const PARTITION_ID_LIMIT = 1_000_000;

const COUNT_TEXT = 'must be an integer of at least 1';

/**
 * The body of `POST`/`PUT /event-types/{name}/partition-count`: `{"partition_count": N}` with N an
 * integer ≥ 1 (unknown properties are ignored, docs/http-api.md "Requests"). A body that is not an object is
 * a 400; a count that is missing or not a positive integer a 422. The bounds that depend on the event
 * type and the installation are {@link growthProblem} and {@link subscriptionLimitProblems}.
 */
export const PartitionCountInputSchema = Type.Object(
  {
    partition_count: Type.Integer({
      minimum: 1,
      'x-status': 422,
      'x-messages': { required: 'may not be null', type: COUNT_TEXT, minimum: COUNT_TEXT, fraction: COUNT_TEXT },
      description: 'the new partition count (it only grows; the same count changes nothing)',
    }),
  },
  { 'x-messages': { type: 'must be a JSON object {"partition_count": <integer>}' } },
);

/**
 * Checks a `partition-count` body against {@link PartitionCountInputSchema}.
 * @returns the count, or 400 when the body is not a JSON object, 422 when `partition_count` is missing or not a positive integer
 */
export function parsePartitionCountBody(body: unknown): PartitionCountBody {
  const checked = checkBody(PartitionCountInputSchema, body);
  if (!checked.ok) return { ok: false, status: checked.status, details: checked.details, ...(checked.errors ? { errors: checked.errors } : {}) };
  return { ok: true, count: checked.value.partition_count };
}

/**
 * Whether an event type with `current` partitions may get `wanted`: the count can only grow, since
 * removing a partition would lose its events and the cursors on it; the same count is accepted and
 * changes nothing.
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
 * Subscriptions that would exceed the per-subscription partition cap (docs/concepts.md "Subscriptions":
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
