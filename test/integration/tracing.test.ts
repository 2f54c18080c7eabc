import { randomBytes } from 'node:crypto';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { SpanKind } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';
import { SseClient } from '../support/sse-client.js';

/**
 * Traces (docs/tracing.md): a node with tracing on and an in-memory exporter. A publish that carries a
 * sampled W3C `traceparent` is continued (receive, validate and append spans); its events carry the
 * receive span's context in `metadata.span_ctx`, on a subscription stream, a low-level stream and
 * server-sent events alike; a commit that sends that context as its `traceparent` is a span of the same
 * trace. `tracing.sampleRatio` is 0, so a publish without a sampled parent records nothing.
 */

const exporter = new InMemorySpanExporter();
let broker: TestBroker;
/** A node with tracing off (the default). */
let plain: TestBroker;

beforeAll(async () => {
  [broker, plain] = await Promise.all([
    startTestBroker({ BROKER_TRACING_ENABLED: 'true', BROKER_TRACING_SAMPLE_RATIO: '0', BROKER_CONSUMPTION_POLL_INTERVAL_MS: '200' }, { spanProcessor: new SimpleSpanProcessor(exporter) }),
    startTestBroker(),
  ]);
});
afterAll(async () => {
  await Promise.all([broker.stop(), plain.stop()]);
});

const hex = (bytes: number): string => randomBytes(bytes).toString('hex');
/** A low-level stream from the first event of the one partition (`eventTypes.defaultPartitionCount` is 1). */
const FROM_BEGIN = { headers: { 'X-Broker-Cursors': '[{"partition":"0","offset":"BEGIN"}]' } };

/** A producer's sampled span context. */
function producer(): { traceId: string; spanId: string; traceparent: string } {
  const traceId = hex(16);
  const spanId = hex(8);
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

/** The finished spans of a trace, once `count` of them have ended (spans end as their requests answer; this waits on that, not on time). */
async function spansOf(traceId: string, count: number, timeoutMs = 5000): Promise<ReadableSpan[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
    if (spans.length >= count || Date.now() > deadline) return spans;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

function only(spans: readonly ReadableSpan[], name: string): ReadableSpan {
  const named = spans.filter((s) => s.name === name);
  expect(named.map((s) => s.name), `spans named ${name} among ${spans.map((s) => s.name).join(', ')}`).toEqual([name]);
  return named[0] as ReadableSpan;
}

async function createEventType(node: TestBroker, name: string): Promise<void> {
  const created = await call(node.url, 'POST', '/event-types', businessEventType(name));
  expect(created.status, created.text).toBe(201);
}

async function createSubscription(node: TestBroker, name: string, annotations: Record<string, string> = {}): Promise<string> {
  const created = await call(node.url, 'POST', '/subscriptions', { owning_application: `app-${hex(4)}`, event_types: [name], read_from: 'begin', annotations });
  expect(created.status, created.text).toBe(201);
  return (created.json as { id: string }).id;
}

type Metadata = { span_ctx?: { traceparent?: string; tracestate?: string }; eid: string };
const metadataOf = (event: Record<string, unknown>): Metadata => event.metadata as Metadata;

/**
 * Publishes `events` to `name` with the producer's `traceparent` (and `tracestate`), expecting 200;
 * returns the trace's receive span once the validate and append spans under it ended too.
 */
async function tracedPublish(name: string, events: readonly Record<string, unknown>[], context: ReturnType<typeof producer>): Promise<{ receive: ReadableSpan; spans: ReadableSpan[] }> {
  const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, events, { traceparent: context.traceparent, tracestate: 'vendor=producer' });
  expect(answer.status, answer.text).toBe(200);
  const spans = await spansOf(context.traceId, 3);
  return { receive: only(spans, `receive ${name}`), spans };
}

/** The span_ctx the broker stores: the receive span's context, sampled, with the request's tracestate. */
function storedContext(receive: ReadableSpan): { traceparent: string; tracestate: string } {
  return { traceparent: `00-${receive.spanContext().traceId}-${receive.spanContext().spanId}-01`, tracestate: 'vendor=producer' };
}

/** A consumer committing `cursors` of `stream` inside the trace of the event it processed (its span_ctx as `traceparent`). */
async function commitInTrace(subscription: string, streamId: string, cursors: readonly StreamBatch['cursor'][], traceparent: string): Promise<void> {
  const committed = await call(broker.url, 'POST', `/subscriptions/${subscription}/cursors`, { items: cursors }, { 'X-Broker-StreamId': streamId, traceparent });
  expect(committed.status, committed.text).toBe(204);
}

describe('traces', () => {
  it('a subscription stream: publish (receive, validate in a worker, append) to the consumer\'s commit is one trace; an event\'s own span_ctx stays and is linked', async () => {
    const name = 'trace.sub';
    await createEventType(broker, name);
    const subscription = await createSubscription(broker, name);
    const context = producer();
    // An event with a span context of its own (another trace) keeps it; the batch span links to it.
    const own = producer();
    // Over publish.inlineMaxBytes (4 KB): validated in a worker thread.
    const events = Array.from({ length: 40 }, (_, i) => orderEvent(`o-${i}-${'x'.repeat(100)}`));
    (events[0]?.metadata as Record<string, unknown>).span_ctx = { traceparent: own.traceparent };
    const { receive, spans } = await tracedPublish(name, events, context);

    expect(receive.kind).toBe(SpanKind.SERVER);
    expect(receive.parentSpanContext?.spanId).toBe(context.spanId);
    expect(receive.attributes).toMatchObject({ 'messaging.destination.name': name, 'messaging.batch.message_count': 40, 'http.response.status_code': 200 });
    expect(receive.links.map((l) => l.context.traceId)).toEqual([own.traceId]);
    const validate = only(spans, `validate ${name}`);
    const append = only(spans, `append ${name}`);
    for (const child of [validate, append]) expect(child.parentSpanContext?.spanId).toBe(receive.spanContext().spanId);
    // Timed in the worker thread; the wait before it is an attribute.
    expect(validate.attributes).toMatchObject({ 'broker.validation.thread': 'worker', 'messaging.batch.message_count': 40 });
    expect(validate.attributes['broker.validation.queued_ms']).toBeGreaterThanOrEqual(0);
    expect(append.attributes).toMatchObject({ 'broker.partitions': 1 });
    const [receiveStart, receiveEnd] = [receive.startTime, receive.endTime].map(([s, ns]) => s * 1e9 + ns) as [number, number];
    const [validateStart, validateEnd] = [validate.startTime, validate.endTime].map(([s, ns]) => s * 1e9 + ns) as [number, number];
    expect(validateStart).toBeGreaterThanOrEqual(receiveStart);
    expect(validateEnd).toBeLessThanOrEqual(receiveEnd);

    const stream = await StreamClient.open(`${broker.url}/subscriptions/${subscription}/events?batch_limit=40&max_uncommitted_events=40&batch_flush_timeout=1`);
    const batches = await stream.events(40);
    stream.close();
    const delivered = batches.flatMap((b) => b.events ?? []);
    const stored = storedContext(receive);
    const ownEid = (events[0]?.metadata as { eid: string }).eid;
    expect(delivered).toHaveLength(40);
    for (const event of delivered) expect(metadataOf(event).span_ctx).toEqual(metadataOf(event).eid === ownEid ? { traceparent: own.traceparent } : stored);

    // The consumer processed the events in the producer's trace and commits there.
    await commitInTrace(subscription, stream.headers.get('x-broker-streamid') ?? '', batches.map((b) => b.cursor), stored.traceparent);
    const commit = only(await spansOf(context.traceId, 4), 'commit');
    expect(commit.kind).toBe(SpanKind.SERVER);
    expect(commit.parentSpanContext?.spanId).toBe(receive.spanContext().spanId);
    expect(commit.attributes).toMatchObject({ 'broker.subscription_id': subscription, 'messaging.batch.message_count': batches.length, 'http.response.status_code': 204 });
  });

  it('a low-level stream delivers the trace context with each event; a small batch is validated on the main thread', async () => {
    const name = 'trace.low';
    await createEventType(broker, name);
    const context = producer();
    const { receive, spans } = await tracedPublish(name, [orderEvent('a'), orderEvent('b')], context);
    expect(only(spans, `validate ${name}`).attributes['broker.validation.thread']).toBe('main');
    const stream = await StreamClient.open(`${broker.url}/event-types/${name}/events?batch_flush_timeout=1&stream_limit=2`, FROM_BEGIN);
    const events = (await stream.events(2)).flatMap((b) => b.events ?? []);
    stream.close();
    for (const event of events) expect(metadataOf(event).span_ctx).toEqual(storedContext(receive));
  });

  it('server-sent events of a subscription deliver the context, and the commit continues the trace', async () => {
    const name = 'trace.sse';
    await createEventType(broker, name);
    const subscription = await createSubscription(broker, name);
    const context = producer();
    const { receive } = await tracedPublish(name, [orderEvent('s1'), orderEvent('s2')], context);
    const sse = await SseClient.open(`${broker.url}/subscriptions/${subscription}/events?batch_limit=2&batch_flush_timeout=1`);
    expect(sse.status).toBe(200);
    let batch: StreamBatch | undefined;
    while (batch?.events === undefined) {
      const frame = await sse.next();
      if (frame === undefined) throw new Error('the stream ended before its events');
      if (frame.data !== undefined) batch = JSON.parse(frame.data) as StreamBatch;
    }
    sse.close();
    const stored = storedContext(receive);
    for (const event of batch.events) expect(metadataOf(event).span_ctx).toEqual(stored);
    await commitInTrace(subscription, sse.headers.get('x-broker-streamid') ?? '', [batch.cursor], stored.traceparent);
    const commit = only(await spansOf(context.traceId, 4), 'commit');
    expect(commit.parentSpanContext?.spanId).toBe(receive.spanContext().spanId);
  });

  it('a queue-mode subscription delivers the context, and its acknowledging commit continues the trace', async () => {
    const name = 'trace.queue';
    await createEventType(broker, name);
    const subscription = await createSubscription(broker, name, { 'broker.io/consumption-mode': 'queue' });
    const context = producer();
    const { receive } = await tracedPublish(name, [orderEvent('q1'), orderEvent('q2')], context);
    const stream = await StreamClient.open(`${broker.url}/subscriptions/${subscription}/events?batch_limit=2&batch_flush_timeout=1`);
    const batches = await stream.events(2);
    const stored = storedContext(receive);
    for (const event of batches.flatMap((b) => b.events ?? [])) expect(metadataOf(event).span_ctx).toEqual(stored);
    await commitInTrace(subscription, stream.headers.get('x-broker-streamid') ?? '', batches.map((b) => b.cursor), stored.traceparent);
    stream.close();
    expect(only(await spansOf(context.traceId, 4), 'commit').parentSpanContext?.spanId).toBe(receive.spanContext().spanId);
  });

  it('records nothing and stores no context for a trace that is not sampled; a commit without traceparent has no span', async () => {
    const name = 'trace.unsampled';
    await createEventType(broker, name);
    const subscription = await createSubscription(broker, name);
    const unsampled = producer();
    const headersOf: Record<string, string>[] = [{ traceparent: `00-${unsampled.traceId}-${unsampled.spanId}-00` }, {}, { traceparent: 'not-a-traceparent' }];
    for (const headers of headersOf) {
      const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, [orderEvent('u')], headers);
      expect(answer.status, answer.text).toBe(200);
    }
    const stream = await StreamClient.open(`${broker.url}/subscriptions/${subscription}/events?batch_limit=3&batch_flush_timeout=1`);
    const batches = await stream.events(3);
    stream.close();
    for (const event of batches.flatMap((b) => b.events ?? [])) expect(metadataOf(event).span_ctx).toBeUndefined();
    const before = exporter.getFinishedSpans().length;
    const committed = await call(broker.url, 'POST', `/subscriptions/${subscription}/cursors`, { items: batches.map((b) => b.cursor) }, { 'X-Broker-StreamId': stream.headers.get('x-broker-streamid') ?? '' });
    expect(committed.status, committed.text).toBe(204);
    // The commit's answer went out after any span of it ended: none did, and none of the publishes made one.
    expect(exporter.getFinishedSpans().length).toBe(before);
    expect(exporter.getFinishedSpans().some((s) => s.spanContext().traceId === unsampled.traceId || s.attributes['messaging.destination.name'] === name)).toBe(false);
  });

  it('/metrics answers OpenMetrics with trace ids as exemplars of the publish and delivery latency when Prometheus asks for it', async () => {
    const name = 'trace.metrics';
    await createEventType(broker, name);
    const context = producer();
    await tracedPublish(name, [orderEvent('m')], context);
    const stream = await StreamClient.open(`${broker.url}/event-types/${name}/events?batch_flush_timeout=1&stream_limit=1`, FROM_BEGIN);
    await stream.events(1);
    stream.close();
    const accept = 'application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1';
    const open = await fetch(`${broker.url}/metrics`, { headers: { accept } });
    expect(open.headers.get('content-type')).toBe('application/openmetrics-text; version=1.0.0; charset=utf-8');
    const text = await open.text();
    expect(text.endsWith('# EOF\n')).toBe(true);
    expect(text).not.toMatch(/\n\n/);
    const publishBucket = new RegExp(`^broker_publish_duration_seconds_bucket\\{le="[^"]+",event_type="${name.replaceAll('.', '\\.')}"\\} \\d+ # \\{trace_id="${context.traceId}"\\} [0-9.e-]+ \\d+\\.\\d{3}$`, 'm');
    expect(text).toMatch(publishBucket);
    expect(text).toMatch(new RegExp(`^broker_delivery_latency_seconds_bucket\\{le="[^"]+",kind="low_level"\\} \\d+ # \\{trace_id="${context.traceId}"\\} `, 'm'));
    // Counter families are named without `_total` in OpenMetrics; their samples keep it.
    expect(text).toMatch(/^# TYPE broker_publish_batches counter$/m);
    expect(text).toMatch(/^broker_publish_batches_total\{/m);

    const plainText = await fetch(`${broker.url}/metrics`);
    expect(plainText.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const body = await plainText.text();
    expect(body).toMatch(/^# TYPE broker_publish_batches_total counter$/m);
    expect(body).not.toContain('trace_id');
    expect(body).toMatch(/^broker_delivery_latency_seconds_count\{kind="low_level"\} [1-9]/m);
  });

  it('with tracing off a traceparent changes nothing: no span_ctx in the events, /metrics stays in the text format', async () => {
    const name = 'trace.off';
    await createEventType(plain, name);
    const context = producer();
    const answer = await call(plain.url, 'POST', `/event-types/${name}/events`, [orderEvent('p')], { traceparent: context.traceparent });
    expect(answer.status, answer.text).toBe(200);
    const stream = await StreamClient.open(`${plain.url}/event-types/${name}/events?batch_flush_timeout=1&stream_limit=1`, FROM_BEGIN);
    const [event] = (await stream.events(1)).flatMap((b) => b.events ?? []);
    stream.close();
    expect(metadataOf(event ?? {}).span_ctx).toBeUndefined();
    const metrics = await fetch(`${plain.url}/metrics`, { headers: { accept: 'application/openmetrics-text;version=1.0.0' } });
    expect(metrics.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(await metrics.text()).not.toContain('# EOF');
  });
});
