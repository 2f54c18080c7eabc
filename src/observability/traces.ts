/**
 * What the HTTP routes and the services report to tracing (docs/tracing.md), as small interfaces so that
 * they never import OpenTelemetry and a node with tracing off holds none of it: the routes get no
 * {@link Tracing} at all then, and nothing below runs (no span objects, no header parsing). The
 * implementation is `tracing.ts`.
 */

/** Request headers as the engine hands them: lower-case names (`traceparent`, `tracestate`). */
export type TraceHeaders = Readonly<Record<string, string>>;

/** Where a batch was validated, and when (epoch milliseconds with fractions: `performance.timeOrigin + performance.now()`). */
export interface ValidationTiming {
  /** `worker` (a piscina thread measured it) or `main` (the inline path of small batches). */
  readonly thread: 'worker' | 'main';
  readonly startMs: number;
  readonly endMs: number;
  /** Worker only: when the task was handed to the pool, so the span can tell the wait for a thread from the work. */
  readonly queuedAtMs?: number;
}

/**
 * A W3C trace context as events carry it in `metadata.span_ctx` (docs/publishing.md "Trace context"):
 * `traceparent` (`00-<trace id>-<span id>-<flags>`) and, when the trace has one, `tracestate`.
 */
export interface SpanContextHeaders {
  readonly traceparent: string;
  readonly tracestate?: string;
}

/** The trace of one publish request: its `receive` span and the `validate` and `append` spans under it. */
export interface PublishTrace {
  /**
   * The context to store in the events of the batch that carry no `metadata.span_ctx` of their own, as
   * the JSON text of the object (`{"traceparent":"…","tracestate":"…"}`): the `receive` span's context.
   * Undefined when the trace is not sampled: a context nobody records is not worth its bytes in every event.
   */
  readonly spanCtx: string | undefined;
  /** The trace id when the trace is sampled (an exemplar of the latency histograms), else undefined. */
  readonly sampledTraceId: string | undefined;
  /** True when the spans are recorded: then the worker times its work and collects the events' own contexts for links. */
  readonly recording: boolean;
  /** The event type's name is known (the request's path named an existing one). */
  named(eventType: string): void;
  /** Records the `validate` span from the times measured where the batch was validated. */
  validated(timing: ValidationTiming, events: number): void;
  /**
   * Starts the `append` span (the writes of the batch's partitions).
   * @returns the function that ends it, given the partitions that failed (0 when all were written)
   */
  appending(partitions: number): (failedPartitions: number) => void;
  /**
   * Links the `receive` span (the batch's span) to the contexts the events carry in `metadata.span_ctx`
   * (`traceparent`, `tracestate`); ones that are not valid W3C contexts are skipped.
   */
  link(contexts: readonly SpanContextHeaders[]): void;
  /** Ends the `receive` span with the answer's status (5xx marks it an error) and, for a problem, its detail. */
  end(status: number, events: number, problem?: string): void;
}

/** The span of one commit request that carried a `traceparent` header. */
export interface CommitTrace {
  /** Ends the span with the answer's status and the number of cursors committed. */
  end(status: number, cursors: number, problem?: string): void;
}

/** A node's tracing (present only with `tracing.enabled`). */
export interface Tracing {
  /**
   * Starts the trace of a publish: a child of the request's `traceparent` (sampled as its flag says),
   * or a new trace sampled by `tracing.sampleRatio`.
   */
  publish(headers: TraceHeaders, flowId: string): PublishTrace;
  /** Starts the span of a commit when the request carries a valid `traceparent`; undefined otherwise (a commit does not start traces). */
  commit(headers: TraceHeaders, subscriptionId: string, flowId: string): CommitTrace | undefined;
  /** Whether the trace of a W3C `traceparent` is sampled, and its trace id if so (exemplars of delivered events). */
  sampledTraceId(traceparent: string): string | undefined;
  /** Exports the spans still waiting and stops, within a few seconds. Never rejects. */
  close(): Promise<void>;
}

/** The trace id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`) whose sampled flag is set; undefined for any other text. */
export function sampledTraceIdOf(traceparent: string): string | undefined {
  if (traceparent.length < 55 || traceparent.charCodeAt(2) !== DASH || traceparent.charCodeAt(35) !== DASH || traceparent.charCodeAt(52) !== DASH) return undefined;
  const flags = Number.parseInt(traceparent.slice(53, 55), 16);
  if (!Number.isInteger(flags) || (flags & 1) === 0) return undefined;
  const traceId = traceparent.slice(3, 35);
  return TRACE_ID.test(traceId) && traceId !== ZERO_TRACE_ID ? traceId : undefined;
}

const DASH = 0x2d;
const TRACE_ID = /^[0-9a-f]{32}$/;
const ZERO_TRACE_ID = '0'.repeat(32);
