import { Type } from '@sinclair/typebox';
import type { PublishOutcome, Publisher } from '../../services/publisher.js';
import type { CursorService } from '../../services/cursor-service.js';
import { CursorDistancesInputSchema, CursorsLagInputSchema, ShiftedCursorsInputSchema } from '../../domain/cursor-input.js';
import { brokerError, BrokerError } from '../../errors/catalog.js';
import type { PublishBatchResult, PublishCounts, PublishMeter } from '../../observability/meters.js';
import type { AccessControl } from '../../services/access-control.js';
import type { EventTypeRegistry } from '../../services/event-type-registry.js';
import type { KpiCollector } from '../../services/kpi.js';
import { batchItems, empty, json, jsonBody, problems, routesOf, type Route } from '../api/route-model.js';
import { NameParam } from '../api/route-parts.js';
import { CursorDistanceResultSchema, CursorSchema, EventSchema, PartitionSchema } from '../api/wire-schemas.js';
import type { HttpServer, RequestContext } from '../server.js';
import { name } from './event-types.js';
import type { PublishQuotas } from '../../services/publish-quotas.js';
import type { Tracing } from '../../observability/traces.js';

/** The services the publishing and partition routes use. */
export interface PublishingDeps {
  readonly publisher: Publisher;
  readonly cursors: CursorService;
  readonly registry: EventTypeRegistry;
  readonly access: AccessControl;
  /** Counts each publish request once (result, events, bytes, latency, batch size; docs/metrics.md). */
  readonly metrics?: PublishMeter;
  /** Told of every answered batch while `kpi_collection` is on (KPI `broker.batch.published`). */
  readonly kpi?: KpiCollector;
  /** The publishing quotas of the settings, counted for the cluster (docs/publishing.md "Quotas"); none when absent. */
  readonly quotas?: PublishQuotas;
  /** Traces of publishes (docs/tracing.md); absent with `tracing.enabled` false, and then no tracing step runs. */
  readonly tracing?: Tracing;
}

/** The request headers of `POST /event-types/{name}/events` (docs/publishing.md "Refusals and deadlines"). */
export const PublishHeaders = Type.Object({
  'X-Timeout': Type.Optional(
    Type.Integer({
      description: 'deadline in ms, counted from when the node takes the request, cut to config `publish.maxTimeoutMs` (default `publish.defaultTimeoutMs`; 0 or less: already passed): not validated by then — 503 `PUBLISH_DEADLINE_EXCEEDED`, nothing written; validated but not yet written — 207 with every item `aborted`; writes already sent are awaited, so each item\'s state is true',
    }),
  ),
});

/** The query of `GET /event-types/{name}/partitions`. */
export const PartitionsQuery = Type.Object({ cursors: Type.Optional(Type.String({ description: 'JSON array of cursors, each partition at most once: adds unconsumed_events to their partitions (malformed: 422)' })) });
/** The query of `GET /event-types/{name}/cursors-at-time` (docs/consuming.md "Seeking by time"). */
export const CursorsAtTimeQuery = Type.Object({ time: Type.String({ format: 'date-time', description: 'RFC 3339 date-time, e.g. `2026-01-01T12:00:00.250Z` (missing or malformed: 422)' }) });
/** The query of `GET /event-types/{name}/partitions/{partition}`. */
export const PartitionQuery = Type.Object({ consumed_offset: Type.Optional(Type.String({ description: 'adds unconsumed_events after this offset (invalid: 422)' })) });

const route = routesOf<PublishingDeps>();

/** The headers of a publish's answer where a publishing quota applies (docs/publishing.md "Rate-limit headers"). */
const RATE_LIMIT_HEADERS = {
  'RateLimit-Policy': { description: 'where a publishing quota applies: one member per quota and unit, e.g. `"subject-events";q=2000;qu="events";w=1` (IETF draft-ietf-httpapi-ratelimit-headers)', schema: Type.String() },
  RateLimit: { description: 'where a publishing quota applies: what is left of each, e.g. `"subject-events";r=1500;t=1` (`r` left now, `t` seconds until full)', schema: Type.String() },
};

/** The `{name}` of a request whose subject may read that event type. @throws BrokerError 404, 403 */
async function readable(ctx: Pick<RequestContext, 'params' | 'subject'>, { registry, access }: PublishingDeps): Promise<string> {
  const eventType = name(ctx.params);
  access.requireEventType(ctx.subject, await registry.get(eventType), 'read');
  return eventType;
}

/**
 * Publishing and partition routes (docs/publishing.md; docs/concepts.md "Offsets and cursors"):
 * `POST /event-types/{name}/events`, partitions (with `unconsumed_events` for given cursors), cursor
 * distances, lag, shifted cursors and cursors at a time. Publishing checks, in this order: blacklist (403), body (400),
 * event type (404), the event type's `writers` (403), then per event — so a blocked or malformed request
 * costs no lookup. The partition and cursor endpoints need its `readers`.
 */
export const PUBLISHING_ROUTES: readonly Route<PublishingDeps>[] = [
  route({
    method: 'POST', path: '/event-types/{name}/events', operationId: 'publishEvents', tag: 'Publishing', access: 'authenticated', params: NameParam, bodyLimit: 'events', admitted: true,
    summary: 'Publish a batch of events',
    description: 'Checks in order: the node\'s admission bounds (503 `PUBLISH_OVERLOADED` with `Retry-After` when the publish bodies in flight would pass config `http.publishMaxBytesInFlight`; 503 `PUBLISH_QUEUE_DELAYED` with `Retry-After` when the batches waiting for a validation thread have waited longer than `http.publishMaxQueueDelayMs`; refused before the body is read, nothing written), blacklist (403), body (400), event type (404), `writers` (403), a publishing quota known to be in debt (429 `QUOTA_EXCEEDED` with `Retry-After`), then per event, then the publishing quotas, events and bytes per second counted for the cluster (429; nothing written; the answers of publishes a quota applies to carry the `RateLimit-Policy` and `RateLimit` headers), then whether the Redis masters of its partitions have room (507 `STORAGE_FULL` with `Retry-After` when a master is at or above the high-water mark `redisMemory.highWaterPercent`, or Redis refused the write for memory; nothing written; docs/operations.md "Memory and retention"). 422: nothing was written; 207: storage failed some partitions (on a Redis Cluster, those on full masters), or the deadline (`X-Timeout`) passed before they were written (retry the `failed` and `aborted` items). Body limits: config `http.maxBodyBytes`, `http.maxInflatedBodyBytes`; `Content-Encoding: gzip` or `zstd` accepted. With config `tracing.enabled`, W3C `traceparent` and `tracestate` headers are continued, and a sampled trace\'s context is stored in the `metadata.span_ctx` of events that have none (docs/tracing.md).',
    headers: PublishHeaders,
    body: jsonBody(Type.Array(EventSchema)),
    responses: {
      '200': empty('every event submitted', RATE_LIMIT_HEADERS),
      '207': batchItems('some partitions could not be written, or the deadline passed before they were: one item per event, in input order'),
      '422': batchItems('validation, partitioning or enrichment failed for some events; nothing was written'),
      ...problems(400, 403, 404, 413, 415, 429, 503, 507),
    },
    handler: async (ctx, { publisher, access, metrics, kpi, quotas, tracing }) => {
      // The batch's span, a child of the request's traceparent (docs/tracing.md); none with tracing off.
      const trace = tracing?.publish(ctx.headers, ctx.flowId);
      // Only a name the publisher found becomes a label value: clients cannot make up series.
      let found: string | undefined;
      /** The event type's owning application, once known (its publishing quota). */
      let owner = '';
      /** The RateLimit headers of the quotas charged (none when no quota applies). */
      let rateLimit: Readonly<Record<string, string>> = {};
      let started = performance.now();
      const deadlineFrom = started;
      try {
        const eventType = name(ctx.params);
        access.requireProducerNotBlocked(ctx.subject, eventType);
        const body = await ctx.body();
        if (body.byteLength === 0) throw brokerError('BAD_REQUEST', { reason: 'the body must be a JSON array of events' });
        started = performance.now();
        const bodyBytes = body.byteLength; // the body goes to a worker and is not read afterwards
        const outcome = await publisher.publish(eventType, body, {
          publishedBy: ctx.subject.id,
          flowId: ctx.flowId,
          timeoutMs: ctx.input.headers['X-Timeout'],
          startedAt: deadlineFrom,
          holdUntil: (work) => ctx.holdUntil(work),
          authorize: (record) => {
            found = record.name;
            trace?.named(record.name);
            access.requireEventType(ctx.subject, record, 'write');
            owner = record.owning_application;
            quotas?.refuseInDebt(ctx.subject.id, owner);
          },
          validated: async (events) => {
            if (quotas !== undefined) rateLimit = await quotas.charge(ctx.subject.id, owner, events, bodyBytes);
          },
          ...(trace === undefined ? {} : { trace }),
        });
        const seconds = (performance.now() - started) / 1000;
        const counts = publishCounts(outcome);
        metrics?.batch(eventType, BATCH_RESULTS[outcome.status], seconds, counts, trace?.sampledTraceId);
        trace?.end(outcome.status, outcome.events);
        if (kpi?.enabled) kpi.batchPublished({ eventType, app: ctx.subject.id, result: BATCH_RESULTS[outcome.status], events: counts.submitted, bytes: bodyBytes, ms: seconds * 1000 });
        if (outcome.status === 200) return { status: 200, headers: rateLimit };
        return { status: outcome.status, body: outcome.items, headers: rateLimit };
      } catch (err) {
        if (err instanceof BrokerError && err.code === 'PUBLISH_DEADLINE_EXCEEDED') metrics?.publishRefused('deadline');
        metrics?.batch(found, err instanceof BrokerError && err.status < 500 ? 'refused' : 'failed', (performance.now() - started) / 1000, undefined, trace?.sampledTraceId);
        trace?.end(err instanceof BrokerError ? err.status : 500, 0, err instanceof BrokerError ? err.message : 'internal error');
        throw err;
      }
    },
  }),
  route({
    method: 'GET', path: '/event-types/{name}/partitions', operationId: 'listPartitions', tag: 'Partitions and cursors', access: 'authenticated', params: NameParam,
    summary: 'List partitions',
    query: PartitionsQuery,
    responses: { '200': json('the partitions', Type.Array(PartitionSchema)), ...problems(400, 403, 404, 422) },
    // `?cursors=<JSON array of cursors>` adds unconsumed_events to the partitions named there.
    handler: async (ctx, deps) => ({ status: 200, body: await deps.cursors.list(await readable(ctx, deps), ctx.input.query.cursors) }),
  }),
  route({
    method: 'GET', path: '/event-types/{name}/partitions/{partition}', operationId: 'getPartition', tag: 'Partitions and cursors', access: 'authenticated',
    params: Type.Object({ name: Type.String(), partition: Type.String() }),
    summary: 'Get one partition',
    query: PartitionQuery,
    responses: { '200': json('the partition', PartitionSchema), ...problems(400, 403, 404, 422) },
    // `?consumed_offset=<offset>` adds unconsumed_events after it.
    handler: async (ctx, deps) => ({ status: 200, body: await deps.cursors.get(await readable(ctx, deps), ctx.input.params.partition, ctx.input.query.consumed_offset) }),
  }),
  route({
    method: 'GET', path: '/event-types/{name}/cursors-at-time', operationId: 'cursorsAtTime', tag: 'Partitions and cursors', access: 'authenticated', params: NameParam, limited: true,
    summary: 'Cursors at a time',
    description: 'One cursor per partition from which a stream starts with the first event received at or after `time` (by `metadata.received_at`, to the millisecond; category `undefined`: to the second). Every retained event later: the offset before the oldest one (as `BEGIN`); none at or after `time`: the newest offset. Missing or malformed `time`: 422.',
    query: CursorsAtTimeQuery,
    responses: { '200': json('one cursor per partition, in partition order', Type.Array(CursorSchema)), ...problems(400, 403, 404, 422) },
    handler: async (ctx, deps) => ({ status: 200, body: await deps.cursors.atTime(await readable(ctx, deps), ctx.input.query.time) }),
  }),
  // The cursor tools' work grows with the number of cursors: they run under the control-plane limiter.
  route({
    method: 'POST', path: '/event-types/{name}/cursor-distances', operationId: 'cursorDistances', tag: 'Partitions and cursors', access: 'authenticated', params: NameParam, limited: true,
    summary: 'Distances between cursors', body: jsonBody(CursorDistancesInputSchema),
    responses: { '200': json('one result per query', Type.Array(CursorDistanceResultSchema)), ...problems(400, 403, 404, 422) },
    handler: async (ctx, deps) => ({ status: 200, body: await deps.cursors.distances(await readable(ctx, deps), await ctx.json()) }),
  }),
  route({
    method: 'POST', path: '/event-types/{name}/cursors-lag', operationId: 'cursorsLag', tag: 'Partitions and cursors', access: 'authenticated', params: NameParam, limited: true,
    summary: 'Events after each cursor', body: jsonBody(CursorsLagInputSchema),
    responses: { '200': json('the partitions with unconsumed_events', Type.Array(PartitionSchema)), ...problems(400, 403, 404, 422) },
    handler: async (ctx, deps) => ({ status: 200, body: await deps.cursors.lag(await readable(ctx, deps), await ctx.json()) }),
  }),
  route({
    method: 'POST', path: '/event-types/{name}/shifted-cursors', operationId: 'shiftCursors', tag: 'Partitions and cursors', access: 'authenticated', params: NameParam, limited: true,
    summary: 'Move cursors by a number of events', body: jsonBody(ShiftedCursorsInputSchema),
    responses: { '200': json('the moved cursors', Type.Array(CursorSchema)), ...problems(400, 403, 404, 422) },
    handler: async (ctx, deps) => ({ status: 200, body: await deps.cursors.shift(await readable(ctx, deps), await ctx.json()) }),
  }),
];

/** Registers the publishing and partition routes ({@link PUBLISHING_ROUTES}) with their services. */
export function publishingRoutes(
  http: HttpServer,
  publisher: Publisher,
  cursors: CursorService,
  registry: EventTypeRegistry,
  access: AccessControl,
  metrics?: PublishMeter,
  kpi?: KpiCollector,
  quotas?: PublishQuotas,
  tracing?: Tracing,
): void {
  http.register(PUBLISHING_ROUTES, { publisher, cursors, registry, access, metrics, kpi, quotas, tracing });
}

/** `broker_publish_batches_total` result of each answer the publisher returns. */
const BATCH_RESULTS: Readonly<Record<PublishOutcome['status'], PublishBatchResult>> = { 200: 'submitted', 207: 'partially_failed', 422: 'rejected' };

/**
 * The events of an answered batch by outcome, for the metrics. A 200 costs nothing per event; the
 * items of a 207 or 422 (already built for the answer) are counted once.
 */
function publishCounts(outcome: PublishOutcome): PublishCounts {
  if (outcome.status === 200) return { submitted: outcome.events, failed: 0, invalid: 0, aborted: 0, bytes: outcome.bytes };
  let submitted = 0;
  let failed = 0;
  let aborted = 0;
  for (const item of outcome.items) {
    if (item.publishing_status === 'submitted') submitted++;
    else if (item.publishing_status === 'failed') failed++;
    else aborted++;
  }
  // In a 422 the failed items failed validation (nothing was written); in a 207 storage failed them.
  if (outcome.status === 422) return { submitted: 0, failed: 0, invalid: failed, aborted, bytes: 0 };
  return { submitted, failed, invalid: 0, aborted, bytes: outcome.bytes };
}
