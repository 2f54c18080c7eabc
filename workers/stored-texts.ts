/**
 * The stored text of each event of an accepted batch, and the per-partition payloads built from them:
 * the producer's own bytes, with the enrichment fields spliced in, whenever that gives exactly what
 * serializing the enriched event would, so a worker does not serialize every accepted event again; see
 * {@link StoredTexts}.
 */
import type { EventBatchLayout } from '../src/domain/batch/event-batch-scan.js';
import { decodeEntry, ZSTD_FIELD } from '../src/domain/batch/entry-codec.js';
import { eidOf, isEvent, metadataOf, type BatchEvent } from './batch-event.js';
import type { PartitionPayload, PublishTask, PublishTaskSpec } from './publish-protocol.js';

/** How an event's stored text is made. */
const enum TextSource {
  /** Its own bytes as sent. */
  Verbatim = 0,
  /** Its own bytes with the enrichment fields spliced in before its `metadata` object's closing brace. */
  Spliced = 1,
  /** `JSON.stringify` of the enriched parsed event (the fall-back). */
  Serialized = 2,
}

/** Enrichment variants: whether `event_type`, `flow_id` and `span_ctx` are added (absent as sent) or kept (sent). */
const ADD_EVENT_TYPE = 1;
const ADD_FLOW_ID = 2;
/** `span_ctx`: added only when the task carries a trace context (a sampled trace, docs/tracing.md). */
const ADD_SPAN_CTX = 4;
/** Variants per partition in the insertion cache (every combination of the flags above). */
const VARIANTS = 8;

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
export class StoredTexts {
  private readonly sources: Uint8Array;
  private readonly variants: Uint8Array;
  private readonly sizes: Uint32Array;
  /** Serialized texts of the events that fall back, by index. */
  private readonly serialized = new Map<number, string>();
  /** Spliced-in enrichment bytes per partition and variant (`partition * VARIANTS + variant`), built on first use. */
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
  plan(index: number, event: BatchEvent, partition: number): void {
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
    const variant = (metadata.event_type === undefined ? ADD_EVENT_TYPE : 0) | (flowId === undefined ? ADD_FLOW_ID : 0) | (this.task.spanCtx !== undefined && metadata.span_ctx === undefined ? ADD_SPAN_CTX : 0);
    const comma = layout.metadataEmpty[index] === true ? 0 : 1;
    this.sources[index] = TextSource.Spliced;
    this.variants[index] = variant;
    this.sizes[index] = (layout.ends[index] ?? 0) - (layout.starts[index] ?? 0) + comma + this.insertion(partition, variant).byteLength;
  }

  /** The stored size of event `index` in bytes; serializes it (enriched by now) when it falls back. */
  size(index: number, event: BatchEvent): number {
    if (this.layout !== undefined && this.sources[index] !== TextSource.Serialized) return this.sizes[index] ?? 0;
    const text = JSON.stringify(event);
    this.serialized.set(index, text);
    return Buffer.byteLength(text);
  }

  /**
   * The events joined by `\n` per partition, in input order: views of ONE buffer with an ArrayBuffer of its
   * own (transferable). One allocation and one transfer per batch, however many partitions it touches
   * (a 1000-event batch over 64 partitions made 64 of each).
   */
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
    let total = 0;
    for (const length of lengths) total += length;
    const all = Buffer.allocUnsafeSlow(total);
    let offset = 0;
    const buffers = Array.from(lengths, (length) => {
      if (length === 0) return undefined;
      const view = all.subarray(offset, offset + length);
      offset += length;
      return view;
    });
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
    const key = partition * VARIANTS + variant;
    const cached = this.insertions[key];
    if (cached !== undefined) return cached;
    const { task, spec } = this;
    const members = [`"received_at":${JSON.stringify(task.receivedAt)}`];
    if ((variant & ADD_EVENT_TYPE) !== 0) members.push(`"event_type":${JSON.stringify(spec.name)}`);
    members.push(`"version":${JSON.stringify(spec.schemaVersion)}`, `"partition":${JSON.stringify(String(partition))}`, `"published_by":${JSON.stringify(task.publishedBy)}`);
    if ((variant & ADD_FLOW_ID) !== 0) members.push(`"flow_id":${JSON.stringify(task.flowId)}`);
    // The task's text is JSON.stringify of the context object: the same bytes serializing the enriched event gives.
    if ((variant & ADD_SPAN_CTX) !== 0 && task.spanCtx !== undefined) members.push(`"span_ctx":${task.spanCtx}`);
    const bytes = Buffer.from(members.join(','));
    this.insertions[key] = bytes;
    return bytes;
  }
}

/**
 * The `metadata.eid` of each event of an accepted batch, in input order ('' when it has none), read back
 * from its stored text: event i is the next line of partition `itemPartitions[i]`'s payload, decompressed
 * when it is (a stored text never holds a raw newline). Only a 207 answer needs them, so the worker does not send them with
 * every batch (1,000 strings cloned into the main thread per 1000-event batch). Parses
 * every event: for that rare answer only (docs/publishing.md "Answers": each 207 item carries its event's eid).
 * @param partitions the payloads of {@link StoredTexts.payloads}, each partition once
 * @param itemPartitions partition index per input event
 * @returns one eid per input event; never throws (stored texts are JSON the worker wrote)
 */
export function eidsOfPayloads(partitions: readonly PartitionPayload[], itemPartitions: Uint32Array): string[] {
  const lines = new Map<number, string[]>();
  for (const { partition, data, compressed } of partitions) {
    const stored = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    lines.set(partition, (compressed === true ? decodeEntry(ZSTD_FIELD, stored) : stored).toString('utf8').split('\n'));
  }
  const next = new Map<number, number>();
  return Array.from(itemPartitions, (partition) => {
    const line = next.get(partition) ?? 0;
    next.set(partition, line + 1);
    const text = lines.get(partition)?.[line];
    if (text === undefined) return '';
    const event: unknown = JSON.parse(text);
    return isEvent(event) ? eidOf(event) : '';
  });
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
