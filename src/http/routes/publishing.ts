import type { PublishOutcome, Publisher } from '../../services/publisher.js';
import type { CursorService } from '../../services/cursor-service.js';
import { brokerError, BrokerError } from '../../errors/catalog.js';
import type { PublishBatchResult, PublishCounts, PublishMeter } from '../../observability/meters.js';
import type { AccessControl } from '../../services/access-control.js';
import type { EventTypeRegistry } from '../../services/event-type-registry.js';
import type { HttpServer, RequestContext } from '../server.js';
import type { KpiCollector } from '../../services/kpi.js';
import { name } from './event-types.js';
import { inputOf } from '../request-inputs.js';
import { PartitionQuery, PartitionsQuery } from '../api/event-type-routes.js';

/**
 * Publishing and partition routes (spec "Publishing", "Event type registry"; WIRE.md "Publishing",
 * "Offsets and cursors"; issue 14 §4.1, §4.3): `POST /event-types/{name}/events`, partitions (with
 * `unconsumed_events` for given cursors), cursor distances, lag and shifted cursors.
 * Publishing checks, in WIRE.md's order: blacklist (403), body (400), event type (404), the event
 * type's `writers` (403), then per event. The partition and cursor endpoints need its `readers`.
 * @param metrics counts each publish request once (result, events, bytes, latency, batch size; DESIGN.md §8)
 */
export function publishingRoutes(
  http: HttpServer,
  publisher: Publisher,
  cursors: CursorService,
  registry: EventTypeRegistry,
  access: AccessControl,
  metrics?: PublishMeter,
  /** Told of every answered batch while `kpi_collection` is on (KPI `broker.batch.published`). */
  kpi?: KpiCollector,
): void {
  http.route('POST', '/event-types/:name/events', async (ctx) => {
    // Only a name the publisher found becomes a label value: clients cannot make up series.
    let found: string | undefined;
    let started = performance.now();
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
        authorize: (record) => {
          found = record.name;
          access.requireEventType(ctx.subject, record, 'write');
        },
      });
      const seconds = (performance.now() - started) / 1000;
      const counts = publishCounts(outcome);
      metrics?.batch(eventType, BATCH_RESULTS[outcome.status], seconds, counts);
      if (kpi?.enabled) kpi.batchPublished({ eventType, app: ctx.subject.id, result: BATCH_RESULTS[outcome.status], events: counts.submitted, bytes: bodyBytes, ms: seconds * 1000 });
      if (outcome.status === 200) return { status: 200 };
      return { status: outcome.status, body: outcome.items };
    } catch (err) {
      metrics?.batch(found, err instanceof BrokerError && err.status < 500 ? 'refused' : 'failed', (performance.now() - started) / 1000);
      throw err;
    }
  }, { body: 'events' });

  /** The `{name}` of a request whose subject may read that event type. @throws BrokerError 404, 403 */
  const readable = async (ctx: RequestContext): Promise<string> => {
    const eventType = name(ctx.params);
    access.requireEventType(ctx.subject, await registry.get(eventType), 'read');
    return eventType;
  };

  // `?cursors=<JSON array of cursors>` adds unconsumed_events to the partitions named there (issue 14 §4.3).
  http.route('GET', '/event-types/:name/partitions', async (ctx) => ({ status: 200, body: await cursors.list(await readable(ctx), inputOf(PartitionsQuery, ctx.input.query, 'query').cursors) }));

  // `?consumed_offset=<offset>` adds unconsumed_events after it (issue 14 §4.3).
  http.route('GET', '/event-types/:name/partitions/:partition', async (ctx) => ({
    status: 200,
    body: await cursors.get(await readable(ctx), ctx.params.partition ?? '', inputOf(PartitionQuery, ctx.input.query, 'query').consumed_offset),
  }));

  // Work grows with the number of cursors (issue 13 §2.3): under the control-plane limiter.
  http.route('POST', '/event-types/:name/cursor-distances', async (ctx) => ({ status: 200, body: await cursors.distances(await readable(ctx), await ctx.json()) }), { limited: true });

  http.route('POST', '/event-types/:name/cursors-lag', async (ctx) => ({ status: 200, body: await cursors.lag(await readable(ctx), await ctx.json()) }), { limited: true });

  http.route('POST', '/event-types/:name/shifted-cursors', async (ctx) => ({ status: 200, body: await cursors.shift(await readable(ctx), await ctx.json()) }), { limited: true });
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
