/**
 * The publish hot path inside a worker (docs/architecture.md "Inline or worker"; docs/publishing.md "Validation and new event types"):
 * parse the batch, validate every event against the effective schema, check sizes, choose partitions,
 * enrich metadata and serialize, grouped per partition. Pure apart from the validator cache, so it is
 * unit-tested without threads. The validators live in validator-cache.ts, the stored texts and
 * partition payloads are built in stored-texts.ts.
 */
import type { ValidateFunction } from 'ajv';
import { describeValidationError } from '../src/domain/schema/schema-compiler.js';
import { hashPartition, userDefinedPartition } from '../src/domain/event-type/partitioner.js';
import { eventOwner } from '../src/domain/event-type/event-owner.js';
import { parseEventBatch } from '../src/domain/batch/event-batch-parse.js';
import type { EventBatchLayout } from '../src/domain/batch/event-batch-scan.js';
import { rejectedItems } from '../src/domain/batch/batch-items.js';
import { EID_KEY_BYTES, eidHash, writeEidKey } from '../src/domain/batch/idempotency.js';
import type { PublishStep } from '../src/domain/batch/batch-item-response.js';
import { encodeEntries, ZSTD_FIELD } from '../src/domain/batch/entry-codec.js';
import { eidOf, isEvent, metadataOf, type BatchEvent } from './batch-event.js';
import { MAX_EVENT_LINKS, type PartitionPayload, type PublishResult, type PublishTask, type PublishTaskSpec, type SchemaCost } from './publish-protocol.js';
import type { SpanContextHeaders } from '../src/observability/traces.js';
import { StoredTexts } from './stored-texts.js';
import type { ValidatorCache } from './validator-cache.js';

const SERVICE_SET_FIELDS = ['received_at', 'published_by', 'version'] as const;

/** Checks one business/data event; returns the failure detail or undefined. */
function validationFailure(event: BatchEvent, spec: PublishTaskSpec, validate: ValidateFunction): string | undefined {
  const metadata = metadataOf(event);
  if (metadata) {
    for (const field of SERVICE_SET_FIELDS) {
      if (field in metadata) return `metadata.${field} is set by the service and must not be sent`;
    }
    if (metadata.event_type !== undefined && metadata.event_type !== spec.name) {
      return `metadata.event_type ${JSON.stringify(metadata.event_type)} does not match the event type "${spec.name}"`;
    }
  }
  if (!validate(event)) return describeValidationError(validate.errors);
  return undefined;
}

function choosePartition(event: BatchEvent, spec: PublishTaskSpec): number | string {
  switch (spec.partitionStrategy) {
    case 'random': {
      // Idempotent publishing: a retried event must land where its first attempt did, so its partition
      // follows from its eid (docs/publishing.md "Idempotent publishing").
      const eid = spec.idempotencyWindowSeconds === undefined ? '' : eidOf(event);
      return eid === '' ? Math.floor(Math.random() * spec.partitionCount) : eidHash(eid) % spec.partitionCount;
    }
    case 'hash':
      return hashPartition(event, spec.partitionKeyPaths, spec.partitionCount);
    case 'user_defined':
      return userDefinedPartition(event, spec.partitionCount);
  }
}

/** The 422 answer (see {@link rejectedItems}). */
function rejection(events: readonly BatchEvent[], failures: ReadonlyMap<number, { step: PublishStep; detail: string }>, schemaCost: SchemaCost | undefined): PublishResult {
  const items = rejectedItems(events.map(eidOf), failures);
  return schemaCost ? { kind: 'rejected', items, schemaCost } : { kind: 'rejected', items };
}

/**
 * Processes one batch.
 * @returns `malformed` (answer 400) when the body is not a UTF-8 JSON array of objects nested at most
 *   `MAX_JSON_DEPTH` levels (src/domain/json/json-limits.ts); `rejected`
 *   (answer 422) when any event fails validation, size or partitioning, listing every failure;
 *   otherwise `accepted` with the serialized events grouped per partition, in input order.
 * @throws Error when the effective schema does not compile (a registry bug; answered 500)
 */
export function processBatch(task: PublishTask, validators: ValidatorCache): PublishResult {
  const { spec } = task;
  // Strict UTF-8, nesting depth, JSON (docs/architecture.md "Hostile input and the schema cost budget"). Keys like `__proto__` stay plain own properties of
  // the event (JSON.parse never sets a prototype) and are stored as sent: nothing here merges objects.
  const body = parseEventBatch(task.body);
  if (!body.ok) return { kind: 'malformed', detail: body.reason };
  const parsed = body.value;
  if (!Array.isArray(parsed)) return { kind: 'malformed', detail: 'body must be a JSON array of events' };
  const events = parsed as unknown[];
  for (let i = 0; i < events.length; i++) {
    if (!isEvent(events[i])) return { kind: 'malformed', detail: `item ${i} of the body is not a JSON object` };
  }
  const batch = events as BatchEvent[];
  const compiled = spec.category === 'undefined' ? undefined : validators.get(spec);
  const validate = compiled?.validate;
  const schemaCost = compiled?.cost;

  const failures = new Map<number, { step: PublishStep; detail: string }>();
  const itemPartitions = new Uint32Array(batch.length);
  for (let i = 0; i < batch.length; i++) {
    const event = batch[i] as BatchEvent;
    const invalid = validate ? validationFailure(event, spec, validate) : undefined;
    if (invalid) {
      failures.set(i, { step: 'validating', detail: invalid });
      continue;
    }
    const partition = choosePartition(event, spec);
    if (typeof partition === 'string') failures.set(i, { step: 'partitioning', detail: partition });
    else itemPartitions[i] = partition;
  }
  if (failures.size > 0) return rejection(batch, failures, schemaCost);

  // The contexts the events carry as sent (enrichment gives the others the batch's own).
  const links = task.traced === true ? eventContexts(batch) : undefined;
  // Enrich and serialize. A size check is only needed when the body itself exceeds the limit.
  const checkSize = task.body.byteLength > task.maxEventBytes;
  const stored = new StoredTexts(task, spec, layoutOf(body.layout, batch.length));
  // Compacted event types: each event's compaction key, which validation made a non-empty string.
  const compactionKeys: string[][] | undefined = spec.compacted === true ? Array.from({ length: spec.partitionCount }, () => []) : undefined;
  // The batch's trace context, parsed once: only an event stored by serializing it needs the object.
  const spanCtx = spec.enrich && task.spanCtx !== undefined ? (JSON.parse(task.spanCtx) as object) : undefined;
  for (let i = 0; i < batch.length; i++) {
    const event = batch[i] as BatchEvent;
    const partition = itemPartitions[i] as number;
    // Decided on the event as sent, before enrichment adds its fields.
    stored.plan(i, event, partition);
    if (spec.enrich) enrich(event, spec, partition, task, spanCtx);
    // Per-event authorization (docs/security.md "Authorization: what a subject may do"): an event without an owner value is blocked.
    if (spec.ownerSelector && eventOwner(spec.ownerSelector, event) === undefined) {
      failures.set(i, { step: 'validating', detail: `the event has no owner value: event_owner_selector ${spec.ownerSelector.type} "${spec.ownerSelector.value}" resolves to null` });
      continue;
    }
    const size = stored.size(i, event);
    if (checkSize && size > task.maxEventBytes) failures.set(i, { step: 'validating', detail: `event size ${size} bytes exceeds the limit of ${task.maxEventBytes} bytes` });
    if (compactionKeys) (compactionKeys[partition] as string[]).push(String(metadataOf(event)?.partition_compaction_key));
  }
  if (failures.size > 0) return rejection(batch, failures, schemaCost);

  const partitions = stored.payloads(itemPartitions, compactionKeys);
  if (spec.idempotencyWindowSeconds !== undefined) attachEidKeys(partitions, batch, itemPartitions);
  let bytes = 0;
  for (const payload of partitions) bytes += payload.data.byteLength - (payload.count - 1);
  // Stored compressed (src/domain/batch/entry-codec.ts) except where a script splits the texts: compacted types
  // store one entry per event, idempotent appends leave out the events stored before.
  if (task.storedCompressionMinBytes !== undefined && spec.compacted !== true && spec.idempotencyWindowSeconds === undefined) compressPayloads(partitions, task.storedCompressionMinBytes);
  return { kind: 'accepted', itemPartitions, partitions, bytes, ...(schemaCost ? { schemaCost } : {}), ...(links !== undefined && links.length > 0 ? { links } : {}) };
}

/**
 * The distinct trace contexts the events carry in `metadata.span_ctx` (docs/tracing.md: the batch span
 * links to each), at most {@link MAX_EVENT_LINKS}: a string `traceparent`, with `tracestate` when it is a
 * string. Their form is checked where the links are made; here they are only collected.
 */
function eventContexts(batch: readonly BatchEvent[]): SpanContextHeaders[] {
  const seen = new Set<string>();
  const contexts: SpanContextHeaders[] = [];
  for (const event of batch) {
    const spanCtx = metadataOf(event)?.span_ctx;
    if (!isEvent(spanCtx)) continue;
    const { traceparent, tracestate } = spanCtx;
    if (typeof traceparent !== 'string' || seen.has(traceparent)) continue;
    seen.add(traceparent);
    contexts.push(typeof tracestate === 'string' ? { traceparent, tracestate } : { traceparent });
    if (contexts.length >= MAX_EVENT_LINKS) break;
  }
  return contexts;
}

/**
 * Idempotent publishing: gives each payload the keys of its events' `metadata.eid`, in order, 16 bytes
 * each ({@link writeEidKey}), as views of one buffer the worker transfers with the payloads (every event
 * of a business or data event type has a uuid eid: the effective schema requires it).
 * @throws RangeError when an eid is not a uuid (validation lets none through)
 */
function attachEidKeys(partitions: PartitionPayload[], batch: readonly BatchEvent[], itemPartitions: Uint32Array): void {
  const keys = new Uint8Array(batch.length * EID_KEY_BYTES);
  const next = new Map<number, number>();
  let start = 0;
  for (const p of partitions) {
    next.set(p.partition, start);
    start += p.count * EID_KEY_BYTES;
  }
  for (let i = 0; i < batch.length; i++) {
    const partition = itemPartitions[i] as number;
    const at = next.get(partition);
    if (at === undefined) continue;
    writeEidKey(eidOf(batch[i] as BatchEvent), keys, at);
    next.set(partition, at + EID_KEY_BYTES);
  }
  start = 0;
  partitions.forEach((p, i) => {
    partitions[i] = { ...p, eidKeys: keys.subarray(start, start + p.count * EID_KEY_BYTES) };
    start += p.count * EID_KEY_BYTES;
  });
}

/** Replaces each payload of at least `minBytes` whose zstd frame pays by that frame ({@link encodeEntries}). */
function compressPayloads(partitions: PartitionPayload[], minBytes: number): void {
  const encoded = encodeEntries(
    partitions.map((p) => p.data),
    minBytes,
  );
  encoded.forEach((entry, i) => {
    const payload = partitions[i];
    if (payload !== undefined && entry.format === ZSTD_FIELD) partitions[i] = { ...payload, data: entry.data, compressed: true };
  });
}

/** The scan's layout when it found exactly the parsed events (it always does for valid JSON), else undefined. */
function layoutOf(layout: EventBatchLayout, events: number): EventBatchLayout | undefined {
  return layout.count === events ? layout : undefined;
}

/**
 * `metadata_enrichment` (docs/publishing.md "Enrichment"): service-set fields, flow_id when absent, and
 * the batch's trace context as span_ctx when the event has none (docs/tracing.md).
 * @param spanCtx the parsed `task.spanCtx` (one object per batch, shared by its events), or undefined
 */
function enrich(event: BatchEvent, spec: PublishTaskSpec, partition: number, task: PublishTask, spanCtx: object | undefined): void {
  const metadata = metadataOf(event);
  if (!metadata) return;
  metadata.received_at = task.receivedAt;
  metadata.event_type = spec.name;
  metadata.version = spec.schemaVersion;
  metadata.partition = String(partition);
  metadata.published_by = task.publishedBy;
  if (metadata.flow_id === undefined || metadata.flow_id === '') metadata.flow_id = task.flowId;
  if (spanCtx !== undefined && metadata.span_ctx === undefined) metadata.span_ctx = spanCtx;
}
