/**
 * Traces over OpenTelemetry (docs/tracing.md): the implementation of the {@link Tracing} interfaces of
 * traces.ts with OpenTelemetry's own SDK — W3C Trace Context read by `@opentelemetry/core`'s
 * propagator, spans made by a tracer provider of this node (never the process-global one, so several nodes
 * in one process keep their traces apart), sampled parent-based with a trace-id ratio for new traces, and
 * exported over OTLP/HTTP in batches. Built only when `tracing.enabled` is true.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Attributes, type Context, type Link, type Span, type TextMapGetter, type Tracer } from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, type ReadableSpan, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { BrokerConfig } from '../config/config-schema.js';
import type { Logger } from './logger.js';
import { sampledTraceIdOf, type CommitTrace, type PublishTrace, type SpanContextHeaders, type TraceHeaders, type Tracing, type ValidationTiming } from './traces.js';

/** The most links one batch's span takes (OpenTelemetry's default span limit); further contexts are not linked. */
export const MAX_BATCH_LINKS = 128;

/** How long stopping waits for the last spans to be exported, ms. */
const CLOSE_WAIT_MS = 5000;
/** How long one OTLP export may take, ms. */
const EXPORT_TIMEOUT_MS = 5000;
/** A failed export is logged at most once per this many ms (a collector that is down would otherwise fill the log). */
const EXPORT_FAILURE_LOG_MS = 60_000;

/** `messaging.system` of the spans: the broker is the messaging system. */
const MESSAGING_SYSTEM = 'event-broker';

const propagator = new W3CTraceContextPropagator();
const headerGetter: TextMapGetter<TraceHeaders> = {
  get: (carrier, key) => carrier[key],
  keys: (carrier) => Object.keys(carrier),
};
/** Reads an event's `metadata.span_ctx` as the propagator reads headers. */
const spanCtxGetter: TextMapGetter<SpanContextHeaders> = {
  get: (carrier, key) => (key === 'traceparent' ? carrier.traceparent : key === 'tracestate' ? carrier.tracestate : undefined),
  keys: () => ['traceparent', 'tracestate'],
};

/** What {@link createTracing} needs besides the settings. */
export interface TracingOptions {
  /**
   * Where finished spans go instead of the OTLP exporter of `tracing.otlpEndpoint` (tests give a
   * `SimpleSpanProcessor` over an `InMemorySpanExporter`).
   */
  readonly spanProcessor?: SpanProcessor;
  readonly logger: Logger;
}

/**
 * The node's tracing for `tracing.*` (docs/tracing.md), or undefined when `tracing.enabled` is false:
 * then nothing of OpenTelemetry is set up and the routes skip every tracing step.
 */
export function createTracing(config: BrokerConfig['tracing'], options: TracingOptions): Tracing | undefined {
  if (!config.enabled) return undefined;
  const processor = options.spanProcessor ?? new BatchSpanProcessor(new LoggedExporter(new OTLPTraceExporter({ url: config.otlpEndpoint, timeoutMillis: EXPORT_TIMEOUT_MS }), config.otlpEndpoint, options.logger));
  return new OpenTelemetryTracing(config, processor);
}

/** {@link Tracing} on OpenTelemetry's SDK. */
class OpenTelemetryTracing implements Tracing {
  private readonly provider: BasicTracerProvider;
  private readonly tracer: Tracer;

  constructor(config: BrokerConfig['tracing'], processor: SpanProcessor) {
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ 'service.name': config.serviceName }),
      sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(config.sampleRatio) }),
      spanProcessors: [processor],
    });
    this.tracer = this.provider.getTracer('event-broker');
  }

  publish(headers: TraceHeaders, flowId: string): PublishTrace {
    const parent = parentOf(headers);
    const span = this.tracer.startSpan('receive', { kind: SpanKind.SERVER, attributes: { 'messaging.system': MESSAGING_SYSTEM, 'messaging.operation.type': 'receive', 'broker.flow_id': flowId } }, parent);
    return new OpenTelemetryPublishTrace(this.tracer, span);
  }

  commit(headers: TraceHeaders, subscriptionId: string, flowId: string): CommitTrace | undefined {
    if (headers.traceparent === undefined) return undefined;
    const parent = parentOf(headers);
    if (trace.getSpanContext(parent) === undefined) return undefined;
    const span = this.tracer.startSpan(
      'commit',
      { kind: SpanKind.SERVER, attributes: { 'messaging.system': MESSAGING_SYSTEM, 'messaging.operation.type': 'settle', 'messaging.consumer.group.name': subscriptionId, 'broker.subscription_id': subscriptionId, 'broker.flow_id': flowId } },
      parent,
    );
    return {
      end: (status, cursors, problem) => {
        span.setAttributes({ 'http.response.status_code': status, 'messaging.batch.message_count': cursors });
        endWith(span, status, problem);
      },
    };
  }

  sampledTraceId(traceparent: string): string | undefined {
    return sampledTraceIdOf(traceparent);
  }

  async close(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.provider.shutdown().catch(() => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)))]);
    clearTimeout(timer);
  }
}

/** The trace of one publish (see {@link PublishTrace}). */
class OpenTelemetryPublishTrace implements PublishTrace {
  readonly spanCtx: string | undefined;
  readonly sampledTraceId: string | undefined;
  readonly recording: boolean;
  /** The `receive` span as parent of the spans under it. */
  private readonly context: Context;
  private eventType = '';

  constructor(
    private readonly tracer: Tracer,
    private readonly span: Span,
  ) {
    const own = span.spanContext();
    this.recording = span.isRecording();
    if ((own.traceFlags & TraceFlags.SAMPLED) === 0) {
      // Most batches at a low ratio: nothing is stored, recorded or linked for them.
      this.sampledTraceId = undefined;
      this.spanCtx = undefined;
      this.context = ROOT_CONTEXT;
      return;
    }
    this.sampledTraceId = own.traceId;
    const tracestate = own.traceState?.serialize();
    const stored: SpanContextHeaders = { traceparent: `00-${own.traceId}-${own.spanId}-01`, ...(tracestate ? { tracestate } : {}) };
    this.spanCtx = JSON.stringify(stored);
    this.context = trace.setSpan(ROOT_CONTEXT, span);
  }

  named(eventType: string): void {
    if (!this.recording) return;
    this.eventType = eventType;
    this.span.updateName(`receive ${eventType}`);
    this.span.setAttribute('messaging.destination.name', eventType);
  }

  validated(timing: ValidationTiming, events: number): void {
    if (!this.recording) return;
    const attributes: Attributes = { 'broker.validation.thread': timing.thread, 'messaging.batch.message_count': events };
    if (timing.queuedAtMs !== undefined) attributes['broker.validation.queued_ms'] = Math.max(0, timing.startMs - timing.queuedAtMs);
    this.tracer.startSpan(this.childName('validate'), { kind: SpanKind.INTERNAL, startTime: timing.startMs, attributes }, this.context).end(timing.endMs);
  }

  appending(partitions: number): (failedPartitions: number) => void {
    if (!this.recording) return () => undefined;
    const span = this.tracer.startSpan(this.childName('append'), { kind: SpanKind.INTERNAL, attributes: { 'broker.partitions': partitions } }, this.context);
    return (failed) => {
      if (failed > 0) {
        span.setAttribute('broker.partitions_failed', failed);
        span.setStatus({ code: SpanStatusCode.ERROR, message: `${failed} of ${partitions} partitions were not written` });
      }
      span.end();
    };
  }

  link(contexts: readonly SpanContextHeaders[]): void {
    if (!this.recording || contexts.length === 0) return;
    const links: Link[] = [];
    for (const headers of contexts) {
      if (links.length >= MAX_BATCH_LINKS) break;
      const context = trace.getSpanContext(propagator.extract(ROOT_CONTEXT, headers, spanCtxGetter));
      if (context !== undefined) links.push({ context });
    }
    if (links.length > 0) this.span.addLinks(links);
  }

  end(status: number, events: number, problem?: string): void {
    if (this.recording) this.span.setAttributes({ 'http.response.status_code': status, 'messaging.batch.message_count': events });
    endWith(this.span, status, problem);
  }

  private childName(operation: string): string {
    return this.eventType === '' ? operation : `${operation} ${this.eventType}`;
  }
}

/** The context of a request's `traceparent` and `tracestate` (the root context when it has none or it is not a valid W3C context). */
function parentOf(headers: TraceHeaders): Context {
  return headers.traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, headers, headerGetter);
}

/** Ends a server span: a 5xx answer marks it an error (OpenTelemetry's HTTP conventions leave 4xx unset on the server). */
function endWith(span: Span, status: number, problem: string | undefined): void {
  if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR, ...(problem === undefined ? {} : { message: problem }) });
  span.end();
}

/**
 * The OTLP exporter, telling the log when spans could not be sent (OpenTelemetry reports it only to its
 * own diagnostics logger, silent by default), at most once per {@link EXPORT_FAILURE_LOG_MS}: a collector
 * that is down costs the node the spans, never a log line per batch.
 */
class LoggedExporter implements SpanExporter {
  private loggedAt = -Infinity;

  constructor(
    private readonly inner: SpanExporter,
    private readonly endpoint: string,
    private readonly logger: Logger,
  ) {}

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    this.inner.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS && performance.now() - this.loggedAt >= EXPORT_FAILURE_LOG_MS) {
        this.loggedAt = performance.now();
        this.logger.warn({ endpoint: this.endpoint, spans: spans.length, err: result.error?.message }, 'spans could not be exported over OTLP; they are dropped (logged at most once a minute)');
      }
      resultCallback(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}
