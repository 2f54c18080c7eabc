/**
 * `POST /event-types/{name}/deleted-events` (docs/concepts.md "Retention and compaction"): which compaction
 * keys get a tombstone in which partition. Pure: no I/O.
 *
 * The events are not validated; each needs only what key and partition selection read:
 * `metadata.partition_compaction_key` (a non-empty string, which under `hash` also decides the partition:
 * the publish spec's hash key paths point at it for compacted event types), and for `user_defined` `metadata.partition`. Under `random` the partition of earlier events is unknown,
 * so the tombstone goes to every partition.
 */
import { Type, type Static } from '@sinclair/typebox';
import type { InputProblem } from '../json/input-check.js';
import { checkBody } from '../event-type/rule-problems.js';
import type { BatchItemResponse, PublishStep } from '../batch/batch-item-response.js';
import type { PublishSpec } from '../batch/publish-spec.js';
import { rejectedItems } from '../batch/batch-items.js';
import { hashPartition, readPath, userDefinedPartition } from '../event-type/partitioner.js';

/**
 * The body of `POST /event-types/{name}/deleted-events`: a JSON array of events, each a JSON object
 * (anything else is 400). What an event must carry is checked per event by {@link planTombstones}
 * (422 items, as for publishing).
 */
export const DeletedEventsInputSchema = Type.Array(
  Type.Object({}, { 'x-messages': { type: 'must be a JSON object (an event)' }, description: 'an event: its compaction key and partition data are read' }),
  { 'x-messages': { type: 'must be a JSON array of events' } },
);

/** The events of a body that passed {@link DeletedEventsInputSchema}. */
export type DeletedEventsInput = Static<typeof DeletedEventsInputSchema>;

/** The tombstones to write, or the 422 answer (one item per event, as for publishing; docs/publishing.md "Answers"). */
export type TombstonePlan =
  | { readonly kind: 'malformed'; readonly details: readonly string[]; readonly errors?: readonly InputProblem[] }
  | { readonly kind: 'rejected'; readonly items: BatchItemResponse[] }
  | {
      readonly kind: 'planned';
      /** `metadata.eid` per input event ('' when absent), in input order. */
      readonly eids: string[];
      /** Partition indexes per input event (all of them under `random`). */
      readonly itemPartitions: number[][];
      /** Partition index → distinct compaction keys to mark deleted there. */
      readonly partitions: Map<number, Set<string>>;
    };

/**
 * Plans the tombstones of a deleted-events body.
 * @param body the parsed request body
 * @param spec the event type's publish spec (strategy, absolute hash key paths, partition count)
 * @returns `malformed` (answer 400) when the body breaks {@link DeletedEventsInputSchema} (not an array
 *   of objects); `rejected` (answer 422) when an event lacks its compaction key (step `validating`) or
 *   its partition data (step `partitioning`), every other event then `aborted`; otherwise `planned`
 */
export function planTombstones(body: unknown, spec: Pick<PublishSpec, 'partitionStrategy' | 'partitionKeyPaths' | 'partitionCount'>): TombstonePlan {
  const checked = checkBody(DeletedEventsInputSchema, body);
  if (!checked.ok) return { kind: 'malformed', details: checked.details, ...(checked.errors ? { errors: checked.errors } : {}) };
  const events: DeletedEventsInput = checked.value;
  const failures = new Map<number, { step: PublishStep; detail: string }>();
  const eids: string[] = [];
  const itemPartitions: number[][] = [];
  const partitions = new Map<number, Set<string>>();
  const all = Array.from({ length: spec.partitionCount }, (_, p) => p);
  events.forEach((event, i) => {
    const eid = readPath(event, ['metadata', 'eid']);
    eids.push(typeof eid === 'string' ? eid : '');
    const key = readPath(event, ['metadata', 'partition_compaction_key']);
    if (typeof key !== 'string' || key.length === 0) {
      failures.set(i, { step: 'validating', detail: 'metadata.partition_compaction_key is required (a non-empty string)' });
      itemPartitions.push([]);
      return;
    }
    let targets: number[];
    if (spec.partitionStrategy === 'random') targets = all;
    else {
      const partition = spec.partitionStrategy === 'hash' ? hashPartition(event, spec.partitionKeyPaths, spec.partitionCount) : userDefinedPartition(event, spec.partitionCount);
      if (typeof partition === 'string') {
        failures.set(i, { step: 'partitioning', detail: partition });
        itemPartitions.push([]);
        return;
      }
      targets = [partition];
    }
    itemPartitions.push(targets);
    for (const p of targets) {
      const keys = partitions.get(p) ?? new Set<string>();
      keys.add(key);
      partitions.set(p, keys);
    }
  });
  if (failures.size > 0) {
    return { kind: 'rejected', items: rejectedItems(eids, failures) };
  }
  return { kind: 'planned', eids, itemPartitions, partitions };
}
