import { Type } from '@sinclair/typebox';
import type { SubscriptionCursors } from '../../services/consumption/subscription-cursors.js';
import type { SubscriptionStreams } from '../../services/consumption/subscription-streams.js';
import type { AccessControl } from '../../services/access-control.js';
import type { Subject } from '../../auth/subject.js';
import type { ResolvedSubscription } from '../../services/consumption/subscription-streams.js';
import { SubscriptionCursorsInputSchema } from '../../domain/cursor/cursor-input.js';
import { negotiateStreamFormat } from '../../domain/stream/stream-format.js';
import { SubscriptionStreamQuerySchema } from '../../domain/stream/stream-parameters.js';
import type { ConcurrencyLimiter } from '../concurrency-limiter.js';
import { empty, json, jsonBody, problems, routesOf, type ResponseSpec, type Route } from '../api/route-model.js';
import { Bool, STREAM_ID, stream, SubscriptionParam } from '../api/route-parts.js';
import { CursorCommitResultsSchema, StreamParametersBodySchema, SubscriptionCursorsSchema, SubscriptionScalingSchema, SubscriptionStatsSchema } from '../api/wire-schemas.js';
import type { Tracing } from '../../observability/traces.js';
import { BrokerError } from '../../errors/catalog.js';

/** The services the subscription consumption routes use. */
export interface SubscriptionStreamDeps {
  readonly streams: SubscriptionStreams;
  readonly cursors: SubscriptionCursors;
  readonly access: AccessControl;
  /** The node's control-plane limiter: a cursor reset reads and parses its body holding a slot. */
  readonly controlLimiter: ConcurrencyLimiter;
  /** Traces: a commit that carries a `traceparent` header gets a span in that trace (docs/tracing.md); absent with tracing off. */
  readonly tracing?: Tracing;
}

/** The headers of a commit: `X-Broker-StreamId` names the stream (missing or empty: 400; docs/consuming.md "Commits"). */
export const CommitHeaders = Type.Object(
  {
    'X-Broker-StreamId': Type.String({
      minLength: 1,
      'x-status': 400,
      'x-messages': { required: 'is required: it names the stream whose cursors these are', minLength: 'is required: it names the stream whose cursors these are' },
      description: 'the stream whose cursors these are (its `X-Broker-StreamId`)',
    }),
  },
  { 'x-status': 400 },
);
/** The query of `GET /subscriptions/{subscription_id}/stats`. */
export const StatsQuery = Type.Object({ show_time_lag: Type.Optional(Bool('add consumer_lag_seconds')) });

const streamResponses: Readonly<Record<string, ResponseSpec>> = {
  '200': stream('the stream: a batch per line; the first says `Stream started`, the last why it ended', { 'X-Broker-StreamId': STREAM_ID }, true),
  ...problems(400, 403, 404, 409, 422, 503),
};

/** Read access to every event type of the subscription, for `subject`. */
const readable = (access: AccessControl, subject: Subject) => (subscription: ResolvedSubscription) => access.requireEventTypesReadable(subject, subscription.eventTypes);

const route = routesOf<SubscriptionStreamDeps>();

/**
 * Subscription consumption routes (docs/consuming.md): streams (GET, or POST with a body for direct
 * assignment), commits, committed cursors, cursor reset and stats. Streaming and commits need reader
 * rights on the subscription and its event types; a cursor reset needs admin rights on the
 * subscription and read access to every one of its event types; reading its cursors or stats needs
 * read access to every one of its event types (they show positions in and counts of their events). A
 * reset's body is read and parsed under the control-plane limiter; its wait for the streams to close is
 * not. Path, query and headers are checked by the pipeline against the route's schemas first; the
 * bodies by the services.
 */
export const SUBSCRIPTION_STREAM_ROUTES: readonly Route<SubscriptionStreamDeps>[] = [
  route({
    method: 'GET', path: '/subscriptions/{subscription_id}/events', operationId: 'streamSubscription', tag: 'Subscription streams', access: 'authenticated', params: SubscriptionParam,
    summary: 'Stream a subscription',
    description: 'Partitions are balanced over the subscription\'s streams. In queue mode (annotation `broker.io/consumption-mode: queue`) any number of streams read every partition: each batch goes to one stream, events of a partition arrive in offset order within a stream but not across streams, and a batch not acknowledged within `commit_timeout` goes to another stream. `Accept: text/event-stream` asks for server-sent events; `Accept-Encoding: zstd` or `gzip` compresses the stream.',
    query: SubscriptionStreamQuerySchema,
    responses: streamResponses,
    handler: async (ctx, { streams }) => streams.open(ctx.input.params.subscription_id, ctx.input.query, undefined, ctx.subject, negotiateStreamFormat(ctx.headers.accept)),
  }),
  route({
    method: 'POST', path: '/subscriptions/{subscription_id}/events', operationId: 'streamSubscriptionDirect', tag: 'Subscription streams', access: 'authenticated', params: SubscriptionParam,
    summary: 'Stream a subscription with parameters in the body (direct assignment with `partitions`)',
    query: SubscriptionStreamQuerySchema,
    body: jsonBody(StreamParametersBodySchema, 'stream parameters; a field overrides the query parameter of the same name', false),
    responses: streamResponses,
    handler: async (ctx, { streams }) => {
      const body = await ctx.body();
      return streams.open(ctx.input.params.subscription_id, ctx.input.query, body.byteLength === 0 ? undefined : await ctx.json(), ctx.subject, negotiateStreamFormat(ctx.headers.accept));
    },
  }),
  route({
    method: 'POST', path: '/subscriptions/{subscription_id}/cursors', operationId: 'commitCursors', tag: 'Subscription streams', access: 'authenticated', params: SubscriptionParam,
    summary: 'Commit cursors of a stream',
    description: 'In queue mode (annotation `broker.io/consumption-mode: queue`) a cursor acknowledges exactly the batch it ended, not the events before it; the committed cursor becomes the highest offset below which every event is acknowledged. With config `tracing.enabled`, a W3C `traceparent` header (e.g. an event\'s `metadata.span_ctx.traceparent`) makes the commit a span of that trace (docs/tracing.md).',
    headers: CommitHeaders,
    body: jsonBody(SubscriptionCursorsInputSchema),
    responses: { '204': empty('every cursor advanced'), '200': json('some cursors did not advance: a result per cursor', CursorCommitResultsSchema), ...problems(400, 403, 404, 422) },
    handler: async (ctx, { cursors, tracing }) => {
      const subscriptionId = ctx.input.params.subscription_id;
      const trace = tracing?.commit(ctx.headers, subscriptionId, ctx.flowId);
      if (trace === undefined) {
        const answer = await cursors.commit(subscriptionId, ctx.input.headers['X-Broker-StreamId'], await ctx.json(), ctx.subject);
        return answer.status === 204 ? { status: 204 } : { status: 200, body: answer.body };
      }
      try {
        const body = await ctx.json();
        const answer = await cursors.commit(subscriptionId, ctx.input.headers['X-Broker-StreamId'], body, ctx.subject);
        trace.end(answer.status, cursorCount(body));
        return answer.status === 204 ? { status: 204 } : { status: 200, body: answer.body };
      } catch (err) {
        trace.end(err instanceof BrokerError ? err.status : 500, 0, err instanceof BrokerError ? err.message : 'internal error');
        throw err;
      }
    },
  }),
  route({
    method: 'POST', path: '/subscriptions/{subscription_id}/cursors/hand-back', operationId: 'handBackBatches', tag: 'Subscription streams', access: 'authenticated', params: SubscriptionParam,
    summary: 'Hand batches of a queue-mode stream back',
    description: 'Queue mode only (annotation `broker.io/consumption-mode: queue`): each cursor is that of a batch the stream holds and has not acknowledged; the batches are handed out again at once, to any stream, and the delivery counts towards `broker.io/subscription-max-event-send-count`.',
    headers: CommitHeaders,
    body: jsonBody(SubscriptionCursorsInputSchema),
    responses: { '204': empty('handed back'), ...problems(400, 403, 404, 422) },
    handler: async (ctx, { cursors }) => {
      await cursors.handBack(ctx.input.params.subscription_id, ctx.input.headers['X-Broker-StreamId'], await ctx.json(), ctx.subject);
      return { status: 204 };
    },
  }),
  route({
    method: 'GET', path: '/subscriptions/{subscription_id}/cursors', operationId: 'getCursors', tag: 'Subscription streams', access: 'authenticated', params: SubscriptionParam,
    summary: 'Committed cursors', responses: { '200': json('the committed cursors (empty before first use)', SubscriptionCursorsSchema), ...problems(403, 404) },
    handler: async (ctx, { cursors, access }) => ({ status: 200, body: await cursors.committed(ctx.input.params.subscription_id, readable(access, ctx.subject)) }),
  }),
  route({
    method: 'PATCH', path: '/subscriptions/{subscription_id}/cursors', operationId: 'resetCursors', tag: 'Subscription streams', access: 'authenticated', params: SubscriptionParam,
    summary: 'Reset cursors', description: 'Closes every stream of the subscription, then writes the cursors; new streams get 409 meanwhile.',
    body: jsonBody(SubscriptionCursorsInputSchema),
    responses: { '204': empty('reset'), ...problems(400, 403, 404, 409, 422, 503) },
    handler: async (ctx, { cursors, access, controlLimiter }) => {
      access.requireWritable();
      const body = await controlLimiter.run(() => ctx.json());
      await cursors.reset(ctx.input.params.subscription_id, body, (subscription) => {
        access.requireSubscription(ctx.subject, subscription.record, 'admin');
        readable(access, ctx.subject)(subscription);
      });
      return { status: 204 };
    },
  }),
  route({
    method: 'GET', path: '/subscriptions/{subscription_id}/stats', operationId: 'getSubscriptionStats', tag: 'Subscription streams', access: 'authenticated', params: SubscriptionParam,
    summary: 'Subscription statistics', query: StatsQuery,
    responses: { '200': json('per event type and partition', SubscriptionStatsSchema), ...problems(403, 404) },
    handler: async (ctx, { cursors, access }) => ({
      status: 200,
      body: await cursors.stats(ctx.input.params.subscription_id, ctx.input.query.show_time_lag === 'true', readable(access, ctx.subject)),
    }),
  }),
  route({
    method: 'GET', path: '/subscriptions/{subscription_id}/scaling', operationId: 'getSubscriptionScaling', tag: 'Subscription streams', access: 'authenticated', params: SubscriptionParam,
    summary: 'Lag and usable consumers of a subscription, for an autoscaler',
    description: 'The stats summed over the subscription\'s partitions, flat for an autoscaler that reads one JSON field (KEDA\'s `metrics-api` trigger, docs/operations.md "Autoscaling consumers"): `unconsumed_events`, `consumer_lag_seconds` and `drain_seconds` (their maximum over partitions), the live `streams` and `max_consumers` — the partition count in stream mode, absent in queue mode (any number of streams share the work). Authorized like the stats: read access to every event type of the subscription.',
    responses: { '200': json('the subscription\'s lag and consumers', SubscriptionScalingSchema), ...problems(403, 404) },
    handler: async (ctx, { cursors, access }) => ({ status: 200, body: await cursors.scaling(ctx.input.params.subscription_id, readable(access, ctx.subject)) }),
  }),
];

/** The cursors of a commit body as sent (`items`), for its span; 0 when the body has none. */
function cursorCount(body: unknown): number {
  const items = typeof body === 'object' && body !== null ? (body as { items?: unknown }).items : undefined;
  return Array.isArray(items) ? items.length : 0;
}

