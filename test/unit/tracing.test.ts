import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { deliveryMarks } from '../../src/domain/subscription/delivery-marks.js';
import { prefersOpenMetrics } from '../../src/http/routes/operations.js';
import { createTracing } from '../../src/observability/tracing.js';
import { sampledTraceIdOf } from '../../src/observability/traces.js';

/**
 * The parts of tracing that need no node (docs/tracing.md): the sampling decisions and the context a
 * publish stores, reading a `traceparent`, what a stream reads of a delivered event, and when `/metrics`
 * answers OpenMetrics. The traces of whole requests are in test/integration/tracing.test.ts.
 */

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const SAMPLED = `00-${TRACE_ID}-b7ad6b7169203331-01`;
const UNSAMPLED = `00-${TRACE_ID}-b7ad6b7169203331-00`;
const logger = pino({ level: 'silent' });

function tracingWith(sampleRatio: number): { tracing: NonNullable<ReturnType<typeof createTracing>>; exporter: InMemorySpanExporter } {
  const exporter = new InMemorySpanExporter();
  const tracing = createTracing({ enabled: true, otlpEndpoint: 'http://127.0.0.1:1/v1/traces', sampleRatio, serviceName: 'test' }, { logger, spanProcessor: new SimpleSpanProcessor(exporter) });
  if (tracing === undefined) throw new Error('tracing is on');
  return { tracing, exporter };
}

describe('tracing', () => {
  it('is nothing at all when tracing.enabled is false', () => {
    expect(createTracing({ enabled: false, otlpEndpoint: 'http://127.0.0.1:1/v1/traces', sampleRatio: 1, serviceName: 'test' }, { logger })).toBeUndefined();
  });

  it('follows a traceparent\'s sampled flag whatever the ratio, and samples new traces by tracing.sampleRatio', async () => {
    const none = tracingWith(0);
    const sampled = none.tracing.publish({ traceparent: SAMPLED, tracestate: 'a=1' }, 'flow');
    expect(sampled.recording).toBe(true);
    expect(sampled.sampledTraceId).toBe(TRACE_ID);
    const stored = JSON.parse(sampled.spanCtx ?? '{}') as { traceparent: string; tracestate: string };
    expect(stored.traceparent).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`));
    expect(stored.traceparent.slice(36, 52)).not.toBe('b7ad6b7169203331');
    expect(stored.tracestate).toBe('a=1');
    sampled.end(200, 1);
    const headersList: Record<string, string>[] = [{ traceparent: UNSAMPLED }, {}, { traceparent: 'garbage' }];
    for (const headers of headersList) {
      const trace = none.tracing.publish(headers, 'flow');
      expect([trace.recording, trace.spanCtx, trace.sampledTraceId]).toEqual([false, undefined, undefined]);
      trace.end(200, 1);
    }
    expect(none.exporter.getFinishedSpans().map((s) => s.name)).toEqual(['receive']);

    const all = tracingWith(1);
    const root = all.tracing.publish({}, 'flow');
    expect(root.recording).toBe(true);
    const rootContext = JSON.parse(root.spanCtx ?? '{}') as Record<string, string>;
    expect(Object.keys(rootContext)).toEqual(['traceparent']);
    expect(rootContext.traceparent).toMatch(new RegExp(`^00-${root.sampledTraceId ?? 'none'}-[0-9a-f]{16}-01$`));
    expect(all.tracing.publish({ traceparent: UNSAMPLED }, 'flow').recording).toBe(false);
    await Promise.all([none.tracing.close(), all.tracing.close()]);
  });

  it('starts a commit span only for a request with a valid traceparent', async () => {
    const { tracing, exporter } = tracingWith(1);
    expect(tracing.commit({}, 'sub', 'flow')).toBeUndefined();
    expect(tracing.commit({ traceparent: 'nope' }, 'sub', 'flow')).toBeUndefined();
    tracing.commit({ traceparent: SAMPLED }, 'sub', 'flow')?.end(204, 2);
    const [commit] = exporter.getFinishedSpans();
    expect(commit?.name).toBe('commit');
    expect(commit?.spanContext().traceId).toBe(TRACE_ID);
    expect(commit?.attributes).toMatchObject({ 'broker.subscription_id': 'sub', 'messaging.batch.message_count': 2, 'http.response.status_code': 204 });
    await tracing.close();
  });

  it('links the batch span to the events\' valid contexts only, at most 128', async () => {
    const { tracing, exporter } = tracingWith(1);
    const trace = tracing.publish({ traceparent: SAMPLED }, 'flow');
    const contexts = Array.from({ length: 200 }, (_, i) => ({ traceparent: `00-${i.toString(16).padStart(32, '1')}-00f067aa0ba902b7-01` }));
    trace.link([{ traceparent: 'not one' }, { traceparent: `00-${'0'.repeat(32)}-00f067aa0ba902b7-01` }, ...contexts]);
    trace.end(200, 1);
    const [receive] = exporter.getFinishedSpans();
    expect(receive?.links).toHaveLength(128);
    expect(receive?.links[0]?.context.traceId).toBe(contexts[0]?.traceparent.slice(3, 35));
    await tracing.close();
  });

  it('reads the trace id of a sampled W3C traceparent only', () => {
    expect(sampledTraceIdOf(SAMPLED)).toBe(TRACE_ID);
    expect(sampledTraceIdOf(`00-${TRACE_ID}-b7ad6b7169203331-03`)).toBe(TRACE_ID);
    for (const text of [UNSAMPLED, '', 'x'.repeat(55), `00-${'0'.repeat(32)}-b7ad6b7169203331-01`, `00-${TRACE_ID.toUpperCase()}-b7ad6b7169203331-01`, `00-${TRACE_ID}-b7ad6b7169203331-zz`]) {
      expect(sampledTraceIdOf(text), text).toBeUndefined();
    }
  });
});

describe('delivery marks', () => {
  const receivedAt = '2026-11-28T10:00:00.250Z';
  const at = Date.parse(receivedAt);

  it('read received_at and span_ctx.traceparent of the first event, spliced or serialized', () => {
    const spliced = `{"metadata":{"eid":"e","occurred_at":"o","received_at":"${receivedAt}","event_type":"t","version":"1.0.0","partition":"0","published_by":"p","flow_id":"f","span_ctx":{"traceparent":"${SAMPLED}"}},"x":1}`;
    expect(deliveryMarks(Buffer.from(`${spliced}\n{"metadata":{"received_at":"2020-01-01T00:00:00Z","version":"1"}}`))).toEqual({ receivedAtMs: at, traceparent: SAMPLED });
    const ownContextFirst = `{"x":{"received_at":"2020-01-01T00:00:00Z"},"metadata":{"span_ctx":{"tracestate":"a=}","traceparent":"${SAMPLED}"},"event_type":"t","received_at":"${receivedAt}","version":"1.0.0"}}`;
    expect(deliveryMarks(Buffer.from(ownContextFirst))).toEqual({ receivedAtMs: at });
    const ownContext = `{"metadata":{"span_ctx":{"traceparent":"${UNSAMPLED}","tracestate":"a=1"},"received_at":"${receivedAt}","event_type":"t","version":"1.0.0"}}`;
    expect(deliveryMarks(Buffer.from(ownContext))).toEqual({ receivedAtMs: at, traceparent: UNSAMPLED });
  });

  it('leave span_ctx alone when not asked (a node without tracing), and read any RFC 3339 form of received_at', () => {
    const event = `{"metadata":{"received_at":"${receivedAt}","version":"1","span_ctx":{"traceparent":"${SAMPLED}"}}}`;
    expect(deliveryMarks(Buffer.from(event), false)).toEqual({ receivedAtMs: at });
    for (const text of ['2026-11-28T11:00:00.250+01:00', '2026-11-28T10:00:00.25Z']) {
      expect(deliveryMarks(Buffer.from(`{"metadata":{"received_at":"${text}","version":"1"}}`))?.receivedAtMs, text).toBe(at);
    }
    expect(deliveryMarks(Buffer.from('{"metadata":{"received_at":"2026-13-28T10:00:00.250Z","version":"1"}}'))).toBeUndefined();
  });

  it('find nothing in an event without the enrichment, or only in a later event', () => {
    expect(deliveryMarks(Buffer.from('{"order":1}\n{"metadata":{"received_at":"2026-01-01T00:00:00Z","version":"1"}}'))).toBeUndefined();
    expect(deliveryMarks(Buffer.from(`{"data":{"received_at":"${receivedAt}","other":1}}`))).toBeUndefined();
    expect(deliveryMarks(Buffer.from('{"metadata":{"received_at":"not a date","version":"1"}}'))).toBeUndefined();
    expect(deliveryMarks(Buffer.alloc(0))).toBeUndefined();
  });
});

describe('/metrics content negotiation', () => {
  it('prefers OpenMetrics when the Accept header ranks it at least as high as the text format', () => {
    expect(prefersOpenMetrics('application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1')).toBe(true);
    expect(prefersOpenMetrics('application/openmetrics-text; version=1.0.0')).toBe(true);
    for (const accept of [undefined, '', '*/*', 'text/plain', 'text/plain;version=0.0.4,application/openmetrics-text;q=0.5', 'application/openmetrics-text;q=0']) {
      expect(prefersOpenMetrics(accept), String(accept)).toBe(false);
    }
  });
});
