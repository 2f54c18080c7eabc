/**
 * Messages between the main thread and the publish workers (docs/architecture.md "Inline or worker"). Plain data only:
 * structured-cloned by piscina, with the body's bytes transferred rather than copied. The event type's
 * {@link PublishSpec} and the {@link BatchItemResponse} items of a rejection are domain types
 * (src/domain/batch/publish-spec.ts, src/domain/batch/batch-item-response.ts): the main thread's services and the
 * domain use them without reaching into workers/.
 */
import type { JsonValue } from '../src/domain/schema/json-schema-walk.js';
import type { BatchItemResponse } from '../src/domain/batch/batch-item-response.js';
import type { PublishSpec } from '../src/domain/batch/publish-spec.js';
import type { SchemaCostLimits } from '../src/domain/schema/schema-cost.js';
import type { SpanContextHeaders } from '../src/observability/traces.js';

/**
 * The event type's {@link PublishSpec} as a publish task carries it to a worker: the effective schema's text only when the worker
 * lacks its validator: a worker that holds the validator needs no text, and cloning the text into
 * every task would cost each batch its length again. Without it, a worker that has no validator for `schemaKey`
 * answers {@link SchemaNeeded} and the pool sends the task again with the text.
 */
export type PublishTaskSpec = Omit<PublishSpec, 'effectiveSchema'> & { readonly effectiveSchema?: string };

/** One batch to process. */
export interface PublishTask {
  readonly kind: 'publish';
  /** The request body (already gunzipped): a JSON array of events, UTF-8. */
  readonly body: Uint8Array;
  readonly spec: PublishTaskSpec;
  readonly maxEventBytes: number;
  /** Enrichment inputs: the same for every event of the batch. */
  readonly receivedAt: string;
  readonly publishedBy: string;
  readonly flowId: string;
  /**
   * Tracing (docs/tracing.md): the trace context stored as `metadata.span_ctx` in the events that carry
   * none of their own, as the JSON text of the object (`{"traceparent":"…"}`); absent when the batch's
   * trace is not sampled (or tracing is off).
   */
  readonly spanCtx?: string;
  /** Tracing: the batch's span is recorded, so the worker times its work ({@link PublishTiming}) and returns the contexts the events carry (`links`). */
  readonly traced?: true;
  /**
   * Events stored compressed (docs/operations.md "Memory and retention"): a partition's events of at least
   * this many bytes (joined by `\n`) are stored as one zstd frame (src/domain/batch/entry-codec.ts) unless the
   * event type is compacted or idempotent; absent when `publish.storedCompression` is off.
   */
  readonly storedCompressionMinBytes?: number;
}

/** When a worker worked on a traced batch: epoch milliseconds with fractions (`performance.timeOrigin + performance.now()` of its thread). */
export interface PublishTiming {
  readonly startMs: number;
  readonly endMs: number;
}

/**
 * The registry's admission check of a submitted schema text (src/domain/schema/schema-guard.ts: size, JSON,
 * depth, subschema count, keyword bounds, draft-04 meta-schema, references, patterns). It runs in a
 * worker under a time limit because its cost grows with what the user sent.
 */
export interface GuardTask {
  readonly kind: 'guard';
  /** `schema.schema` of the event type: the schema as JSON text. */
  readonly schema: string;
  /** Largest accepted schema text, in UTF-8 bytes (`eventTypes.maxSchemaBytes`). */
  readonly maxSchemaBytes: number;
  /** The schema cost budget (`eventTypes.schemaMax*`). */
  readonly limits: SchemaCostLimits;
}

/**
 * The registry's check that an effective schema is usable: its validation cost is within the budget
 * (src/domain/schema/schema-cost.ts) and it compiles (run in a worker so neither can stall the node).
 */
export interface CompileTask {
  readonly kind: 'compile';
  readonly effectiveSchema: string;
  /** The schema cost budget (`eventTypes.schemaMax*`). */
  readonly limits: SchemaCostLimits;
}

/** Drops validators of retired schema keys (deleted or changed event types), so no thread keeps validators no batch will use again. */
export interface ForgetTask extends RoundTask {
  readonly kind: 'forget';
  readonly schemaKeys: readonly string[];
}

/**
 * A task sent once per thread in one round (`WorkerPool.onEveryThread`): each thread that ran it counts
 * itself in `round[0]` (shared memory) and stays with it until `parties` threads did, at most
 * `ROUND_WAIT_MS`, so piscina hands the round's other tasks to the other threads.
 */
export interface RoundTask {
  readonly round?: Int32Array;
  readonly parties?: number;
}

/** How long a thread waits at most for the other threads of a round, in ms (a thread busy with a batch longer than that is missed by the round). */
export const ROUND_WAIT_MS = 250;

/** A worker's answer to a {@link ForgetTask}: which thread ran it and how many validators it holds now. */
export interface ForgetResult {
  readonly threadId: number;
  readonly validators: number;
}

/**
 * Compiles an event type's validator into the thread's cache ahead of its first batch, so that batch
 * does not wait for a compilation (sent to every thread when the event type is created or changed, or a
 * node learns of it by a notice).
 */
export interface WarmTask extends RoundTask {
  readonly kind: 'warm';
  readonly schemaKey: string;
  readonly effectiveSchema: string;
}

/** A worker's answer to a {@link WarmTask}: which thread, its validator count, and the schema's cost when within the main thread's budget. */
export interface WarmResult {
  readonly threadId: number;
  readonly validators: number;
  readonly cost?: SchemaCost;
}

/** Generates a cheap schema's validator as standalone code, which the main thread instantiates without compiling (a compilation on the main thread would hold up every request it serves). */
export interface StandaloneTask {
  readonly kind: 'standalone';
  readonly effectiveSchema: string;
}

/**
 * A worker's answer to a {@link StandaloneTask}: the code of a CommonJS module exporting the validate
 * function and the schema's priming instance (src/domain/schema/priming-instance.ts; the main thread runs the
 * validator over it once), or why not; `transient` when no worker answered in time (worth another try later).
 */
export type StandaloneResult = { readonly ok: true; readonly code: string; readonly primingInstance: JsonValue } | { readonly ok: false; readonly reason: string; readonly transient?: true };

/**
 * A consumer filter's test of stored events (docs/consuming.md "Filters"): the events' stored texts (as
 * Redis holds them, joined by `\n`; the events as consumers receive them) are parsed and each tested
 * against the filter, a draft-04 JSON Schema the registry's checks accepted. The filter's text travels
 * only to a thread that lacks its validator, as for a {@link PublishTask}: without it, such a thread
 * answers {@link FilterNeeded}.
 */
export interface FilterTask {
  readonly kind: 'filter';
  /** The filter's key (`filterKeyOf`, src/domain/subscription/event-filter.ts): its validator's name in the thread's cache. */
  readonly filterKey: string;
  /** The filter's canonical JSON text; only when the thread asked for it. */
  readonly filter?: string;
  /** The stored texts of `count` events joined by `\n` (transferred). */
  readonly data: Uint8Array;
  readonly count: number;
}

/** A worker's answer to a {@link FilterTask}: one flag per event, in order, 1 where the event matches (transferred). */
export interface FilterMatches {
  readonly kind: 'matches';
  readonly flags: Uint8Array;
}

/** A worker's answer to a {@link FilterTask} sent without the filter text when it has no validator for the key: the data comes back (transferred) for the retry. */
export interface FilterNeeded {
  readonly kind: 'filter-needed';
  readonly data: Uint8Array;
}

export type WorkerTask = PublishTask | GuardTask | CompileTask | ForgetTask | WarmTask | StandaloneTask | FilterTask;

/**
 * What validating against an effective schema costs, as a worker measured it when it compiled the
 * schema: the worst subschema applications per value of an event (src/domain/schema/schema-cost.ts) and the
 * compilation time in milliseconds. Publish results carry it only for schemas within the main
 * thread's budget (`INLINE_MAX_APPLICATIONS_PER_VALUE` of workers/validator-cache.ts): the main thread
 * validates small batches itself only for those, so a costly schema never runs on the thread that serves every request.
 */
export interface SchemaCost {
  readonly applicationsPerValue: number;
  readonly compileMs: number;
}

/**
 * The events of one partition, serialized: the JSON texts joined by `\n` (JSON text never contains a raw
 * newline), or one zstd frame of them when `compressed` (src/domain/batch/entry-codec.ts).
 */
export interface PartitionPayload {
  readonly partition: number;
  readonly count: number;
  readonly data: Uint8Array;
  /** `data` is one zstd frame of the texts joined by `\n`: stored in stream entry field `z` instead of `d`. */
  readonly compressed?: true;
  /** `metadata.partition_compaction_key` of each event, in order; exactly when the event type's spec is `compacted`. */
  readonly compactionKeys?: string[];
  /**
   * The 16-byte key of each event's `metadata.eid` (its uuid's bytes), concatenated in order; exactly when
   * the event type's spec has `idempotencyWindowSeconds` (docs/publishing.md "Idempotent publishing").
   */
  readonly eidKeys?: Uint8Array;
}

/**
 * A worker's answer to a {@link PublishTask} sent without the schema text when the worker has no
 * validator for its schema key: nothing was done, and the body comes back (transferred) for the retry.
 */
export interface SchemaNeeded {
  readonly kind: 'schema-needed';
  readonly body: Uint8Array;
}

/** A worker's answer to a {@link PublishTask}: 400, 422 or the payloads to write; with `timing` when the task was `traced`. */
export type PublishResult = (
  | { readonly kind: 'malformed'; readonly detail: string }
  | { readonly kind: 'rejected'; readonly items: BatchItemResponse[]; readonly schemaCost?: SchemaCost }
  | {
      readonly kind: 'accepted';
      /**
       * A traced task only: the distinct trace contexts the events carry in `metadata.span_ctx` (a string
       * `traceparent`, and `tracestate` when it is a string), at most `MAX_EVENT_LINKS`, for the batch span's links.
       */
      readonly links?: SpanContextHeaders[];
      /** The cost of the event type's schema as this worker measured it (absent for category `undefined`, or over the budget). */
      readonly schemaCost?: SchemaCost;
      /**
       * Partition index per input event, in input order (its length is the batch's event count). The
       * events' eids are not sent: a 207 answer reads them back from the payloads (`eidsOfPayloads`, stored-texts.ts).
       */
      readonly itemPartitions: Uint32Array;
      readonly partitions: PartitionPayload[];
      /** Total bytes of the serialized events (as JSON texts, before any compression). */
      readonly bytes: number;
    }
) & { readonly timing?: PublishTiming };

/** The most event contexts a traced batch returns for links (the batch span takes as many: OpenTelemetry's default limit). */
export const MAX_EVENT_LINKS = 128;

/** A worker's answer to a {@link GuardTask}: accepted, or why not (a 422 detail). */
export type GuardResult = { readonly ok: true } | { readonly ok: false; readonly reason: string };

/** A worker's answer to a {@link CompileTask}. */
export type CompileResult = { readonly ok: true; readonly cost: SchemaCost } | { readonly ok: false; readonly reason: string };
