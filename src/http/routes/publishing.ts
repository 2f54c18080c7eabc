import { Type } from '@sinclair/typebox';
import type { PublishOutcome, Publisher } from '../../services/publishing/publisher.js';
import { brokerError, BrokerError } from '../../errors/catalog.js';
import type { PublishBatchResult, PublishCounts, PublishMeter } from '../../observability/meters.js';
import type { AccessControl } from '../../services/access-control.js';
import type { KpiCollector } from '../../services/kpi.js';
import { batchItems, empty, jsonBody, problems, routesOf, type Route } from '../api/route-model.js';
import { NameParam } from '../api/route-parts.js';
import { name } from './event-types.js';
import { EventSchema } from '../api/wire-schemas.js';
import type { PublishQuotas } from '../../services/publish-quotas.js';
import type { Tracing } from '../../observability/traces.js';

/** The services the publishing route uses. */
export interface PublishingDeps {
  readonly publisher: Publisher;
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

const route = routesOf<PublishingDeps>();

/** The headers of a publish's answer where a publishing quota applies (docs/publishing.md "Rate-limit headers"). */
const RATE_LIMIT_HEADERS = {
  'RateLimit-Policy': { description: 'where a publishing quota applies: one member per quota and unit, e.g. `"subject-events";q=2000;qu="events";w=1` (IETF draft-ietf-httpapi-ratelimit-headers)', schema: Type.String() },
  RateLimit: { description: 'where a publishing quota applies: what is left of each, e.g. `"subject-events";r=1500;t=1` (`r` left now, `t` seconds until full)', schema: Type.String() },
};

/**
 * The publishing route (docs/publishing.md): `POST /event-types/{name}/events`. It checks, in this order:
 * blacklist (403), body (400), event type (404), the event type's `writers` (403), then per event — so a
 * blocked or malformed request costs no lookup. Partitions and cursors: partitions.ts, cursors.ts.
 */
export const PUBLISHING_ROUTES: readonly Route<PublishingDeps>[] = [
  route({
    method: 'POST', path: '/event-types/{name}/events', operationId: 'publishEvents', tag: 'Publishing', access: 'authenticated', params: NameParam, bodyLimit: 'events', admitted: true,
    summary: 'Publish a batch of events',
    description: 'Checks in order: the node\'s admission bounds (503 `PUBLISH_OVERLOADED` with `Retry-After` when the publish bodies in flight would pass config `http.publishMaxInFlightBytes`; 503 `PUBLISH_QUEUE_DELAYED` with `Retry-After` when the batches waiting for a validation thread have waited longer than `http.publishMaxQueueDelayMs`; refused before the body is read, nothing written), blacklist (403), body (400), event type (404), `writers` (403), a publishing quota known to be in debt (429 `QUOTA_EXCEEDED` with `Retry-After`), then per event, then the publishing quotas, events and bytes per second counted for the cluster (429; nothing written; the answers of publishes a quota applies to carry the `RateLimit-Policy` and `RateLimit` headers), then whether the Redis masters of its partitions have room (507 `STORAGE_FULL` with `Retry-After` when a master is at or above the high-water mark `redisMemory.highWaterPercent`, or Redis refused the write for memory; nothing written; docs/operations.md "Memory and retention"). 422: nothing was written; 207: storage failed some partitions (on a Redis Cluster, those on full masters), or the deadline (`X-Timeout`) passed before they were written (retry the `failed` and `aborted` items). Body limits: config `http.maxBodyBytes`, `http.maxInflatedBodyBytes`; `Content-Encoding: gzip` or `zstd` accepted. With config `tracing.enabled`, W3C `traceparent` and `tracestate` headers are continued, and a sampled trace\'s context is stored in the `metadata.span_ctx` of events that have none (docs/tracing.md).',
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
];

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
