/**
 * The publish hot path inside a worker (DESIGN.md §5 step 3; spec "Publishing"; WIRE.md "Publishing"):
 * parse the batch, validate every event against the effective schema, check sizes, choose partitions,
 * enrich metadata and serialize, grouped per partition. Pure apart from the validator cache, so it is
 * unit-tested without threads.
 */
import type { ValidateFunction } from 'ajv';
import { LRUCache } from 'lru-cache';
import { compileSchema, createSchemaCompiler, describeValidationError } from '../src/domain/schema-compiler.js';
import { hashPartition, userDefinedPartition } from '../src/domain/partitioner.js';
import { eventOwner } from '../src/domain/event-owner.js';
import type { JsonObject } from '../src/domain/json-schema-walk.js';
import { parseUntrustedJson } from '../src/http/json-limits.js';
import { analyseSchemaCost, SCHEMA_COST_LIMITS, type SchemaCostLimits } from '../src/domain/schema-cost.js';
import { rejectedItems } from '../src/domain/batch-items.js';
import type { CompileResult, PartitionPayload, PublishResult, PublishSpec, PublishStep, PublishTask, SchemaCost } from './publish-protocol.js';

/**
 * The main thread validates a small batch itself only against a schema a worker measured as cheap
 * (issue 13 §1.3): at most this many subschema applications per value (a 4 KB batch, at most ~2,000
 * values, then costs at most ~130,000 applications, about a millisecond) ...
 */
export const INLINE_MAX_APPLICATIONS_PER_VALUE = 64;
/** ... and compiled by the worker within this many milliseconds (the main thread compiles it once). */
export const INLINE_MAX_COMPILE_MS = 20;

/** The budget a publish worker measures schemas against: within it, the main thread may validate. */
const INLINE_COST_LIMITS: SchemaCostLimits = { ...SCHEMA_COST_LIMITS, maxApplicationsPerValue: INLINE_MAX_APPLICATIONS_PER_VALUE };

/** A compiled validator with what it costs (undefined: not measured, or over {@link INLINE_MAX_APPLICATIONS_PER_VALUE}). */
export interface CompiledSchema {
  readonly validate: ValidateFunction;
  readonly cost: SchemaCost | undefined;
}

/**
 * Compiled validators per schema key, least recently used dropped first; one per worker thread (and
 * one on the main thread). Each validator has its own ajv instance, dropped with it: a shared instance
 * keeps every schema it ever compiled (measured: RSS +165 MB over 3,000 event types).
 */
export class ValidatorCache {
  private readonly validators: LRUCache<string, CompiledSchema>;

  /**
   * @param maxEntries validators kept (the least recently used is dropped)
   * @param measureCost whether `get` also analyses each schema's validation cost (workers: yes; the
   *   main thread, which compiles only schemas a worker measured already: no)
   */
  constructor(
    maxEntries = 256,
    private readonly measureCost = true,
  ) {
    this.validators = new LRUCache({ max: maxEntries });
  }

  /** Validators held now. */
  get size(): number {
    return this.validators.size;
  }

  /**
   * The validator of a spec's effective schema, compiled on first use, with its cost (the static
   * analysis of src/domain/schema-cost.ts against the main thread's budget, and the compilation time).
   * @throws Error when the schema does not compile
   */
  get(spec: Pick<PublishSpec, 'schemaKey' | 'effectiveSchema'>): CompiledSchema {
    const cached = this.validators.get(spec.schemaKey);
    if (cached) return cached;
    const schema = JSON.parse(spec.effectiveSchema) as JsonObject;
    const started = performance.now();
    const validate = compileSchema(createSchemaCompiler({ metaSchemaCheck: false }), schema);
    const compileMs = performance.now() - started;
    const analysis = this.measureCost ? analyseSchemaCost(schema, INLINE_COST_LIMITS) : undefined;
    const compiled = { validate, cost: analysis?.ok === true ? { applicationsPerValue: analysis.applicationsPerValue, compileMs } : undefined };
    this.validators.set(spec.schemaKey, compiled);
    return compiled;
  }

  /** Drops the validators of these schema keys (their event types were changed or deleted). */
  forget(schemaKeys: Iterable<string>): void {
    for (const key of schemaKeys) this.validators.delete(key);
  }

  /**
   * The registry's check that a new effective schema is usable (issue 13 §1.3): its validation cost is
   * within the budget (checked first: it bounds what compiling and validating can cost), then it
   * compiles (in an instance of its own, dropped afterwards). Nothing is cached.
   * @returns the cost, or the reason (a 422 detail)
   */
  check(effectiveSchema: string, limits: SchemaCostLimits): CompileResult {
    try {
      const schema = JSON.parse(effectiveSchema) as JsonObject;
      const analysis = analyseSchemaCost(schema, limits);
      if (!analysis.ok) return { ok: false, reason: analysis.reason };
      const started = performance.now();
      compileSchema(createSchemaCompiler({ metaSchemaCheck: false }), schema);
      const compileMs = performance.now() - started;
      return { ok: true, cost: { applicationsPerValue: analysis.applicationsPerValue, compileMs } };
    } catch (err) {
      return { ok: false, reason: `the schema cannot be compiled: ${firstLine((err as Error).message)}` };
    }
  }
}

/** The first line of an error message, at most 300 characters (ajv appends the whole generated code to some). */
function firstLine(message: string): string {
  const line = message.split('\n', 1)[0] ?? '';
  const cut = line.indexOf(', function code:');
  const text = cut >= 0 ? line.slice(0, cut) : line;
  return text.length > 300 ? `${text.slice(0, 300)}...` : text;
}

const SERVICE_SET_FIELDS = ['received_at', 'published_by', 'version'] as const;

type Event = Record<string, unknown>;

function isEvent(value: unknown): value is Event {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function metadataOf(event: Event): Event | undefined {
  const metadata = event.metadata;
  return isEvent(metadata) ? metadata : undefined;
}

/** Checks one business/data event; returns the failure detail or undefined. */
function validationFailure(event: Event, spec: PublishSpec, validate: ValidateFunction): string | undefined {
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

function choosePartition(event: Event, spec: PublishSpec): number | string {
  switch (spec.partitionStrategy) {
    case 'random':
      return Math.floor(Math.random() * spec.partitionCount);
    case 'hash':
      return hashPartition(event, spec.partitionKeyPaths, spec.partitionCount);
    case 'user_defined':
      return userDefinedPartition(event, spec.partitionCount);
  }
}

function eidOf(event: Event): string {
  const eid = metadataOf(event)?.eid;
  return typeof eid === 'string' ? eid : '';
}

/** The 422 answer (see {@link rejectedItems}). */
function rejection(events: readonly Event[], failures: ReadonlyMap<number, { step: PublishStep; detail: string }>, schemaCost: SchemaCost | undefined): PublishResult {
  const items = rejectedItems(events.map(eidOf), failures);
  return schemaCost ? { kind: 'rejected', items, schemaCost } : { kind: 'rejected', items };
}

/**
 * Processes one batch.
 * @returns `malformed` (answer 400) when the body is not a UTF-8 JSON array of objects nested at most
 *   `MAX_JSON_DEPTH` levels (src/http/json-limits.ts); `rejected`
 *   (answer 422) when any event fails validation, size or partitioning, listing every failure;
 *   otherwise `accepted` with the serialized events grouped per partition, in input order.
 * @throws Error when the effective schema does not compile (a registry bug; answered 500)
 */
export function processBatch(task: PublishTask, validators: ValidatorCache): PublishResult {
  const { spec } = task;
  // Strict UTF-8, nesting depth, JSON (DESIGN.md §7). Keys like `__proto__` stay plain own properties of
  // the event (JSON.parse never sets a prototype) and are stored as sent: nothing here merges objects.
  const body = parseUntrustedJson(task.body);
  if (!body.ok) return { kind: 'malformed', detail: body.reason };
  const parsed = body.value;
  if (!Array.isArray(parsed)) return { kind: 'malformed', detail: 'body must be a JSON array of events' };
  const events = parsed as unknown[];
  for (let i = 0; i < events.length; i++) {
    if (!isEvent(events[i])) return { kind: 'malformed', detail: `item ${i} of the body is not a JSON object` };
  }
  const batch = events as Event[];
  const compiled = spec.category === 'undefined' ? undefined : validators.get(spec);
  const validate = compiled?.validate;
  const schemaCost = compiled?.cost;

  const failures = new Map<number, { step: PublishStep; detail: string }>();
  const itemPartitions = new Uint32Array(batch.length);
  for (let i = 0; i < batch.length; i++) {
    const event = batch[i] as Event;
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

  // Enrich and serialize. A size check is only needed when the body itself exceeds the limit.
  const checkSize = task.body.byteLength > task.maxEventBytes;
  const texts: string[][] = Array.from({ length: spec.partitionCount }, () => []);
  // Compacted event types (issue 6): each event's compaction key, which validation made a non-empty string.
  const compactionKeys: string[][] | undefined = spec.compacted === true ? Array.from({ length: spec.partitionCount }, () => []) : undefined;
  const eids: string[] = new Array<string>(batch.length);
  for (let i = 0; i < batch.length; i++) {
    const event = batch[i] as Event;
    const partition = itemPartitions[i] as number;
    eids[i] = eidOf(event);
    if (spec.enrich) enrich(event, spec, partition, task);
    // Per-event authorization (spec "EventOwnerSelector"): an event without an owner value is blocked.
    if (spec.ownerSelector && eventOwner(spec.ownerSelector, event) === undefined) {
      failures.set(i, { step: 'validating', detail: `the event has no owner value: event_owner_selector ${spec.ownerSelector.type} "${spec.ownerSelector.value}" resolves to null` });
      continue;
    }
    const text = JSON.stringify(event);
    if (checkSize) {
      const size = Buffer.byteLength(text);
      if (size > task.maxEventBytes) failures.set(i, { step: 'validating', detail: `event size ${size} bytes exceeds the limit of ${task.maxEventBytes} bytes` });
    }
    (texts[partition] as string[]).push(text);
    if (compactionKeys) (compactionKeys[partition] as string[]).push(String(metadataOf(event)?.partition_compaction_key));
  }
  if (failures.size > 0) return rejection(batch, failures, schemaCost);

  const partitions: PartitionPayload[] = [];
  let bytes = 0;
  texts.forEach((list, partition) => {
    if (list.length === 0) return;
    const joined = list.join('\n');
    // Its own ArrayBuffer (not the shared pool slab), so the worker can transfer it without a copy.
    const data = Buffer.allocUnsafeSlow(Buffer.byteLength(joined));
    data.write(joined);
    bytes += data.byteLength - (list.length - 1);
    partitions.push(compactionKeys ? { partition, count: list.length, data, compactionKeys: compactionKeys[partition] } : { partition, count: list.length, data });
  });
  return schemaCost ? { kind: 'accepted', eids, itemPartitions, partitions, bytes, schemaCost } : { kind: 'accepted', eids, itemPartitions, partitions, bytes };
}

/** `metadata_enrichment` (spec "Events" item 6; WIRE.md): service-set fields, and flow_id when absent. */
function enrich(event: Event, spec: PublishSpec, partition: number, task: PublishTask): void {
  const metadata = metadataOf(event);
  if (!metadata) return;
  metadata.received_at = task.receivedAt;
  metadata.event_type = spec.name;
  metadata.version = spec.schemaVersion;
  metadata.partition = String(partition);
  metadata.published_by = task.publishedBy;
  if (metadata.flow_id === undefined || metadata.flow_id === '') metadata.flow_id = task.flowId;
}
