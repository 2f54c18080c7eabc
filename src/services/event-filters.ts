/**
 * Consumer filters on the server (docs/consuming.md "Filters"): the checks a filter goes through before a
 * subscription or a stream takes it, and the test of read events against it. Both run in the worker
 * threads under a time limit, so a costly filter cannot hold up the main thread.
 */
import { LRUCache } from 'lru-cache';
import type { BrokerConfig } from '../config/config-schema.js';
import { filterSpecOf, type EventFilterSpec } from '../domain/subscription/event-filter.js';
import { schemaCostLimitsOf } from '../domain/schema/schema-cost.js';
import type { EventSegment } from '../storage/partition-store.js';
import { brokerError } from '../errors/catalog.js';
import type { EventFilter } from './consumption/stream/partition-reader.js';
import type { WorkerPool } from './worker-pool.js';

/** Time limit of one test of a read slice against a filter, in ms (a read slice is about 1 MB of events: tens of ms). */
export const FILTER_MATCH_TIMEOUT_MS = 10_000;

const NEWLINE = 0x0a;

/** Filters whose checks passed, remembered by key so a stream reopened with the same filter is not checked again. */
const ACCEPTED_FILTERS = 1_000;

/** Checks filters and tests events against them, in the worker threads of `pool`. */
export class EventFilters {
  /** Keys of filters that passed the checks (the checks depend only on the text and the limits, fixed for the node's life). */
  private readonly accepted = new LRUCache<string, true>({ max: ACCEPTED_FILTERS });

  /** @param config the event type schema limits a filter is held to (`eventTypes.maxSchemaBytes`, `schemaMax*`, `schemaCompileTimeoutMs`) */
  constructor(
    private readonly pool: Pick<WorkerPool, 'guardSchema' | 'compile' | 'matchFilter'>,
    private readonly config: BrokerConfig['eventTypes'],
  ) {}

  /**
   * Checks a filter as an event type's schema is checked (docs/publishing.md "Schema cost budget"): its
   * size, the draft-04 meta-schema and keyword bounds, its validation cost, and that it compiles, each in
   * a worker under `eventTypes.schemaCompileTimeoutMs`. A filter that passed is remembered (the last
   * {@link ACCEPTED_FILTERS} distinct ones) and not checked again.
   * @param text the filter as JSON text
   * @param where how the 422 detail names the filter (`Field "filter"`, `Query parameter "filter"`)
   * @returns its key and canonical text
   * @throws BrokerError 422 UNPROCESSABLE naming the problem
   */
  async check(text: string, where: string): Promise<EventFilterSpec> {
    const refuse = (reason: string) => brokerError('UNPROCESSABLE', { reason: `${where} is not a usable filter: ${reason}` });
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes > this.config.maxSchemaBytes) throw refuse(`it is ${bytes} bytes long, more than the limit of ${this.config.maxSchemaBytes} bytes`);
    const spec = filterSpecOf(text);
    if (spec === undefined) throw refuse('it is not valid JSON');
    if (this.accepted.has(spec.key)) return spec;
    const limits = schemaCostLimitsOf(this.config);
    const timeoutMs = this.config.schemaCompileTimeoutMs;
    const guarded = await this.pool.guardSchema(spec.text, this.config.maxSchemaBytes, limits, timeoutMs);
    if (!guarded.ok) throw refuse(guarded.reason);
    const compiled = await this.pool.compile(spec.text, limits, timeoutMs);
    if (!compiled.ok) throw refuse(compiled.reason);
    this.accepted.set(spec.key, true);
    return spec;
  }

  /** The test of read events against a checked filter, for a stream's reader (`ReadPolicy.filter`). */
  matcher(spec: EventFilterSpec): EventFilter {
    return { match: (segments) => this.pool.matchFilter(spec, joinSegments(segments), countOf(segments), FILTER_MATCH_TIMEOUT_MS) };
  }
}

/** The events of `segments` together. */
function countOf(segments: readonly EventSegment[]): number {
  let count = 0;
  for (const s of segments) count += s.count;
  return count;
}

/**
 * The segments' texts joined by `\n` in a buffer of their own (never a pooled one: it is transferred to a
 * worker, which detaches it).
 */
export function joinSegments(segments: readonly EventSegment[]): Uint8Array {
  let length = Math.max(0, segments.length - 1);
  for (const s of segments) length += s.data.length;
  const joined = new Uint8Array(length);
  let at = 0;
  segments.forEach((s, i) => {
    if (i > 0) joined[at++] = NEWLINE;
    joined.set(s.data, at);
    at += s.data.length;
  });
  return joined;
}
