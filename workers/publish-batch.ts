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
import { parseEventBatch, type EventBatchLayout } from '../src/http/json-limits.js';
import { analyseSchemaCost, SCHEMA_COST_LIMITS, type SchemaCostLimits } from '../src/domain/schema-cost.js';
import { rejectedItems } from '../src/domain/batch-items.js';
import type { PublishStep } from '../src/domain/batch-item-response.js';
import type { CompileResult, PartitionPayload, PublishResult, PublishTask, PublishTaskSpec, SchemaCost } from './publish-protocol.js';

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

  /** Whether the validator of this schema key is held (a check that does not make it more recently used). */
  has(schemaKey: string): boolean {
    return this.validators.has(schemaKey);
  }

  /**
   * The validator of a spec's effective schema, compiled on first use, with its cost (the static
   * analysis of src/domain/schema-cost.ts against the main thread's budget, and the compilation time).
   * @throws Error when the schema does not compile, or is not held and the spec lacks its text
   */
  get(spec: Pick<PublishTaskSpec, 'schemaKey' | 'effectiveSchema'>): CompiledSchema {
    const cached = this.validators.get(spec.schemaKey);
    if (cached) return cached;
    if (spec.effectiveSchema === undefined) throw new Error(`no validator for schema key ${spec.schemaKey} and no schema text to compile`);
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
function validationFailure(event: Event, spec: PublishTaskSpec, validate: ValidateFunction): string | undefined {
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

function choosePartition(event: Event, spec: PublishTaskSpec): number | string {
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
  const body = parseEventBatch(task.body);
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
  const stored = new StoredTexts(task, spec, layoutOf(body.layout, batch.length));
  // Compacted event types (issue 6): each event's compaction key, which validation made a non-empty string.
  const compactionKeys: string[][] | undefined = spec.compacted === true ? Array.from({ length: spec.partitionCount }, () => []) : undefined;
  const eids: string[] = new Array<string>(batch.length);
  for (let i = 0; i < batch.length; i++) {
    const event = batch[i] as Event;
    const partition = itemPartitions[i] as number;
    eids[i] = eidOf(event);
    // Decided on the event as sent, before enrichment adds its fields.
    stored.plan(i, event, partition);
    if (spec.enrich) enrich(event, spec, partition, task);
    // Per-event authorization (spec "EventOwnerSelector"): an event without an owner value is blocked.
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
  let bytes = 0;
  for (const payload of partitions) bytes += payload.data.byteLength - (payload.count - 1);
  return schemaCost ? { kind: 'accepted', eids, itemPartitions, partitions, bytes, schemaCost } : { kind: 'accepted', eids, itemPartitions, partitions, bytes };
}

/** The scan's layout when it found exactly the parsed events (it always does for valid JSON), else undefined. */
function layoutOf(layout: EventBatchLayout, events: number): EventBatchLayout | undefined {
  return layout.count === events ? layout : undefined;
}

/** How an event's stored text is made (issue 17 §1.2). */
const enum TextSource {
  /** Its own bytes as sent. */
  Verbatim = 0,
  /** Its own bytes with the enrichment fields spliced in before its `metadata` object's closing brace. */
  Spliced = 1,
  /** `JSON.stringify` of the enriched parsed event (the fall-back). */
  Serialized = 2,
}

/** Enrichment variants: whether `event_type` and `flow_id` are added (absent as sent) or kept (sent). */
const ADD_EVENT_TYPE = 1;
const ADD_FLOW_ID = 2;

/**
 * The stored text of each event of an accepted batch (the text consumers receive, one line per event):
 * the producer's own bytes whenever they parse to exactly what `JSON.stringify` of the enriched event
 * would give, with the enrichment fields spliced in before the `metadata` object's closing brace — the
 * place `JSON.stringify` puts fields enrichment adds, so compact input is stored byte for byte as before.
 * Otherwise the enriched event is serialized, as it always was. An event is serialized when:
 * - the scan's layout does not match the parsed batch, or flags the event: a tab, CR or LF between its
 *   tokens, a number whose text would not survive (exponent, negative zero, > 17 significant digits),
 *   an escaped top-level key or `metadata` twice ({@link EventBatchLayout});
 * - it holds a duplicate key anywhere (fewer parsed keys than members in the text: other parsers could
 *   read the first value where validation saw the last) or a `__proto__` key;
 * - enrichment replaces a value it sent: `metadata.partition`, or an empty `metadata.flow_id`
 *   (`received_at`, `published_by` and `version` were refused by validation; a sent `event_type` equals
 *   the event type's name and is kept, like a non-empty `flow_id`);
 * - enrichment applies but the scan found no `metadata` object where the parsed event has one.
 * Owner selectors and compaction keys read the parsed (enriched) event; they never need its text.
 */
class StoredTexts {
  private readonly sources: Uint8Array;
  private readonly variants: Uint8Array;
  private readonly sizes: Uint32Array;
  /** Serialized texts of the events that fall back, by index. */
  private readonly serialized = new Map<number, string>();
  /** Spliced-in enrichment bytes per partition and variant (`partition * 4 + variant`), built on first use. */
  private readonly insertions: (Buffer | undefined)[] = [];
  private readonly body: Buffer;

  constructor(
    private readonly task: PublishTask,
    private readonly spec: PublishTaskSpec,
    private readonly layout: EventBatchLayout | undefined,
  ) {
    const count = layout?.count ?? 0;
    this.sources = new Uint8Array(count);
    this.variants = new Uint8Array(count);
    this.sizes = new Uint32Array(count);
    const body = task.body;
    this.body = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  }

  /** Decides how event `index` is stored; call before it is enriched. */
  plan(index: number, event: Event, partition: number): void {
    const layout = this.layout;
    if (layout === undefined) return; // no layout: size() serializes every event
    if ((layout.flags[index] ?? 1) !== 0 || countMembers(event) !== layout.members[index]) {
      this.sources[index] = TextSource.Serialized;
      return;
    }
    const metadata = this.spec.enrich ? metadataOf(event) : undefined;
    if (metadata === undefined) {
      this.sources[index] = TextSource.Verbatim;
      this.sizes[index] = (layout.ends[index] ?? 0) - (layout.starts[index] ?? 0);
      return;
    }
    const flowId = metadata.flow_id;
    if ((layout.metadataEnds[index] ?? -1) < 0 || Object.hasOwn(metadata, 'partition') || flowId === '') {
      this.sources[index] = TextSource.Serialized;
      return;
    }
    const variant = (metadata.event_type === undefined ? ADD_EVENT_TYPE : 0) | (flowId === undefined ? ADD_FLOW_ID : 0);
    const comma = layout.metadataEmpty[index] === true ? 0 : 1;
    this.sources[index] = TextSource.Spliced;
    this.variants[index] = variant;
    this.sizes[index] = (layout.ends[index] ?? 0) - (layout.starts[index] ?? 0) + comma + this.insertion(partition, variant).byteLength;
  }

  /** The stored size of event `index` in bytes; serializes it (enriched by now) when it falls back. */
  size(index: number, event: Event): number {
    if (this.layout !== undefined && this.sources[index] !== TextSource.Serialized) return this.sizes[index] ?? 0;
    const text = JSON.stringify(event);
    this.serialized.set(index, text);
    return Buffer.byteLength(text);
  }

  /** The events joined by `\n` per partition, in input order, each in a buffer of its own (transferable). */
  payloads(itemPartitions: Uint32Array, compactionKeys: string[][] | undefined): PartitionPayload[] {
    const partitionCount = this.spec.partitionCount;
    const counts = new Uint32Array(partitionCount);
    const lengths = new Float64Array(partitionCount);
    for (let i = 0; i < itemPartitions.length; i++) {
      const partition = itemPartitions[i] ?? 0;
      lengths[partition] = (lengths[partition] ?? 0) + this.storedSize(i) + ((counts[partition] ?? 0) > 0 ? 1 : 0);
      counts[partition] = (counts[partition] ?? 0) + 1;
    }
    // Its own ArrayBuffer (not the shared pool slab), so the worker can transfer it without a copy.
    const buffers = Array.from(lengths, (length) => (length > 0 ? Buffer.allocUnsafeSlow(length) : undefined));
    const written = new Float64Array(partitionCount);
    for (let i = 0; i < itemPartitions.length; i++) {
      const partition = itemPartitions[i] ?? 0;
      const target = buffers[partition];
      if (target === undefined) continue;
      let at = written[partition] ?? 0;
      if (at > 0) target[at++] = LINE_FEED;
      written[partition] = at + this.write(i, partition, target, at);
    }
    const partitions: PartitionPayload[] = [];
    buffers.forEach((data, partition) => {
      if (data === undefined) return;
      const count = counts[partition] ?? 0;
      partitions.push(compactionKeys ? { partition, count, data, compactionKeys: compactionKeys[partition] } : { partition, count, data });
    });
    return partitions;
  }

  private storedSize(index: number): number {
    const text = this.serialized.get(index);
    return text === undefined ? (this.sizes[index] ?? 0) : Buffer.byteLength(text);
  }

  /** Writes event `index`'s stored text at `at`; returns the bytes written. */
  private write(index: number, partition: number, target: Buffer, at: number): number {
    const text = this.serialized.get(index);
    if (text !== undefined) return target.write(text, at);
    const layout = this.layout;
    if (layout === undefined) throw new Error(`event ${index} has neither a layout nor a serialized text`);
    const start = layout.starts[index] ?? 0;
    const end = layout.ends[index] ?? 0;
    if (this.sources[index] === TextSource.Verbatim) return this.body.copy(target, at, start, end);
    const close = layout.metadataEnds[index] ?? 0;
    let length = this.body.copy(target, at, start, close);
    if (layout.metadataEmpty[index] !== true) target[at + length++] = COMMA;
    length += this.insertion(partition, this.variants[index] ?? 0).copy(target, at + length);
    return length + this.body.copy(target, at + length, close, end);
  }

  /** The enrichment members spliced into `metadata`, in the order enrichment sets them (no leading comma). */
  private insertion(partition: number, variant: number): Buffer {
    const key = partition * 4 + variant;
    const cached = this.insertions[key];
    if (cached !== undefined) return cached;
    const { task, spec } = this;
    const members = [`"received_at":${JSON.stringify(task.receivedAt)}`];
    if ((variant & ADD_EVENT_TYPE) !== 0) members.push(`"event_type":${JSON.stringify(spec.name)}`);
    members.push(`"version":${JSON.stringify(spec.schemaVersion)}`, `"partition":${JSON.stringify(String(partition))}`, `"published_by":${JSON.stringify(task.publishedBy)}`);
    if ((variant & ADD_FLOW_ID) !== 0) members.push(`"flow_id":${JSON.stringify(task.flowId)}`);
    const bytes = Buffer.from(members.join(','));
    this.insertions[key] = bytes;
    return bytes;
  }
}

const LINE_FEED = 0x0a;
const COMMA = 0x2c;

/**
 * Members of every object in a parsed value (the scan's {@link EventBatchLayout.members} counts them in
 * the text), or -1 when a key is `__proto__`. Recursion is bounded by the depth limit of the body.
 */
function countMembers(value: object): number {
  let count = 0;
  if (Array.isArray(value)) {
    for (const item of value as unknown[]) {
      if (typeof item !== 'object' || item === null) continue;
      const inner = countMembers(item);
      if (inner < 0) return -1;
      count += inner;
    }
    return count;
  }
  for (const key in value) {
    if (key === '__proto__') return -1;
    count++;
    const item = (value as Record<string, unknown>)[key];
    if (typeof item !== 'object' || item === null) continue;
    const inner = countMembers(item);
    if (inner < 0) return -1;
    count += inner;
  }
  return count;
}

/** `metadata_enrichment` (spec "Events" item 6; WIRE.md): service-set fields, and flow_id when absent. */
function enrich(event: Event, spec: PublishTaskSpec, partition: number, task: PublishTask): void {
  const metadata = metadataOf(event);
  if (!metadata) return;
  metadata.received_at = task.receivedAt;
  metadata.event_type = spec.name;
  metadata.version = spec.schemaVersion;
  metadata.partition = String(partition);
  metadata.published_by = task.publishedBy;
  if (metadata.flow_id === undefined || metadata.flow_id === '') metadata.flow_id = task.flowId;
}
