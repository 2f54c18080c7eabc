/**
 * What publishing needs to know about an event type (docs/architecture.md "Publish path"): built once per cache fill on the
 * main thread (src/services/event-types/event-type-cache.ts `buildPublishSpec`), read by the publish workers and
 * by the deleted-events planner. Plain data: structured-cloned to the workers. Types only.
 */
import type { Category, EventOwnerSelector, PartitionStrategy } from '../event-type/event-type.js';

/** What a worker needs to know about the event type; built once per cache fill on the main thread. */
export interface PublishSpec {
  readonly name: string;
  readonly category: Category;
  readonly enrich: boolean;
  readonly partitionStrategy: PartitionStrategy;
  /** Hash key fields, each as a path over the whole event (for `data`, prefixed with `data`). */
  readonly partitionKeyPaths: readonly (readonly string[])[];
  readonly partitionCount: number;
  readonly schemaVersion: string;
  /** Identifies the effective schema text (content hash): the worker's validator cache key. */
  readonly schemaKey: string;
  /** The effective schema as JSON text; compiled by a worker on its first use of `schemaKey`. */
  readonly effectiveSchema: string;
  /** The event type's owner selector: events whose owner value resolves to null are refused. */
  readonly ownerSelector?: EventOwnerSelector;
  /**
   * True for cleanup_policy `compact` / `compact_and_delete` (docs/concepts.md "Retention and
   * compaction"): the payloads then carry each event's `metadata.partition_compaction_key` (the effective
   * schema requires it). Absent = false.
   */
  readonly compacted?: boolean;
  /**
   * Idempotent publishing (docs/publishing.md "Idempotent publishing"): the event type's
   * `broker.io/idempotency-window-seconds`. The payloads then carry each event's `metadata.eid`, and
   * `random` partitioning derives the partition from the eid. Absent = off.
   */
  readonly idempotencyWindowSeconds?: number;
}
