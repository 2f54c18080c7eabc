/** Route table entries of the subscription area (spec "Subscriptions"; WIRE.md "Subscriptions" to "Rebalancing"). */
import { Type } from '@sinclair/typebox';
import {
  CursorCommitResultsSchema,
  StreamParametersBodySchema,
  SubscriptionCursorsSchema,
  SubscriptionInputSchema,
  SubscriptionListSchema,
  SubscriptionRecordSchema,
  SubscriptionStatsSchema,
  SubscriptionUpdateSchema,
} from './wire-schemas.js';
import { empty, json, jsonBody, problems, type ResponseSpec, type RouteSpec } from './route-model.js';
import { SubscriptionParam, Bool, Paging, Location, STREAM_ID, stream, route } from './route-parts.js';
import { SubscriptionStreamQuerySchema } from '../../domain/stream-parameters.js';
import { SubscriptionCursorsInputSchema } from '../../domain/cursor-input.js';

/** The headers of a commit: `X-Broker-StreamId` names the stream (missing or empty: 400; WIRE.md "Commits, cursor reset, stats"). */
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

/**
 * The query of `GET /subscriptions` (spec "Subscriptions"; WIRE.md "Subscriptions"): filters, paging by
 * offset or (feature `token_subscription_iteration`) by token. A malformed value is 400.
 */
export const ListSubscriptionsQuery = Type.Object({
  owning_application: Type.Optional(Type.String({ description: 'only subscriptions of this application' })),
  event_type: Type.Optional(Type.Array(Type.String(), { description: 'repeatable: only subscriptions reading every one of them' })),
  reader: Type.Optional(
    Type.String({
      pattern: '^[^:]+:[\\s\\S]+$',
      'x-status': 400,
      'x-messages': { pattern: 'must have the form <data_type>:<value>, e.g. user:alice' },
      description: '`<data_type>:<value>`: only subscriptions whose `authorization.readers` list this attribute',
    }),
  ),
  show_status: Type.Optional(Bool('add each partition\'s state')),
  token: Type.Optional(Type.String({ description: 'paging token (feature token_subscription_iteration); `new` for the first page' })),
  ...Paging,
});

const streamResponses: Readonly<Record<string, ResponseSpec>> = {
  '200': stream('the stream: a batch per line; the first says `Stream started`, the last why it ended', { 'X-Broker-StreamId': STREAM_ID }, true),
  ...problems(400, 403, 404, 409, 422, 503),
};

/** Subscriptions, their streams, commits, cursors and stats. */
export const SUBSCRIPTION_ROUTES: RouteSpec[] = [
  route({
    method: 'POST', path: '/subscriptions', operationId: 'createSubscription', tag: 'Subscriptions', access: 'authenticated',
    summary: 'Create a subscription (or get the one with the same key)',
    description: 'Key: owning_application, the set of event_types, consumer_group. Needs read access to every event type. Feature `disable_subscription_creation`, `force_subscription_authz`.',
    body: jsonBody(SubscriptionInputSchema),
    responses: { '201': json('created', SubscriptionRecordSchema, { Location }), '200': json('the existing subscription of that key', SubscriptionRecordSchema, { Location }), ...problems(400, 403, 422, 503) },
  }),
  route({
    method: 'GET', path: '/subscriptions', operationId: 'listSubscriptions', tag: 'Subscriptions', access: 'authenticated',
    summary: 'List subscriptions (newest first)',
    query: ListSubscriptionsQuery,
    responses: { '200': json('a page', SubscriptionListSchema), ...problems(400) },
  }),
  route({
    method: 'GET', path: '/subscriptions/{subscription_id}', operationId: 'getSubscription', tag: 'Subscriptions', access: 'authenticated', params: SubscriptionParam,
    summary: 'Get a subscription', responses: { '200': json('the subscription', SubscriptionRecordSchema), ...problems(404) },
  }),
  route({
    method: 'PUT', path: '/subscriptions/{subscription_id}', operationId: 'updateSubscription', tag: 'Subscriptions', access: 'authenticated', params: SubscriptionParam,
    summary: 'Update a subscription\'s authorization, annotations and labels', description: 'Needs its `admins`; a change of its readers ends its streams.',
    body: jsonBody(SubscriptionUpdateSchema, 'the subscription\'s fields, each optional (absent: unchanged); only authorization, annotations and labels may differ from the stored ones'),
    responses: { '204': empty('updated'), ...problems(400, 403, 404, 422, 503) },
  }),
  route({
    method: 'DELETE', path: '/subscriptions/{subscription_id}', operationId: 'deleteSubscription', tag: 'Subscriptions', access: 'authenticated', params: SubscriptionParam,
    summary: 'Delete a subscription', responses: { '204': empty('deleted'), ...problems(403, 404, 503) },
  }),
  route({
    method: 'GET', path: '/subscriptions/{subscription_id}/events', operationId: 'streamSubscription', tag: 'Subscription streams', access: 'authenticated', params: SubscriptionParam,
    summary: 'Stream a subscription',
    description: 'Partitions are balanced over the subscription\'s streams. `Accept: text/event-stream` asks for server-sent events; `Accept-Encoding: zstd` or `gzip` compresses the stream.',
    query: SubscriptionStreamQuerySchema,
    responses: streamResponses,
  }),
  route({
    method: 'POST', path: '/subscriptions/{subscription_id}/events', operationId: 'streamSubscriptionDirect', tag: 'Subscription streams', access: 'authenticated', params: SubscriptionParam,
    summary: 'Stream a subscription with parameters in the body (direct assignment with `partitions`)',
    query: SubscriptionStreamQuerySchema,
    body: jsonBody(StreamParametersBodySchema, 'stream parameters; a field overrides the query parameter of the same name', false),
    responses: streamResponses,
  }),
  route({
    method: 'POST', path: '/subscriptions/{subscription_id}/cursors', operationId: 'commitCursors', tag: 'Subscription streams', access: 'authenticated', params: SubscriptionParam,
    summary: 'Commit cursors of a stream',
    headers: CommitHeaders,
    body: jsonBody(SubscriptionCursorsInputSchema),
    responses: { '204': empty('every cursor advanced'), '200': json('some cursors did not advance: a result per cursor', CursorCommitResultsSchema), ...problems(400, 403, 404, 422) },
  }),
  route({
    method: 'GET', path: '/subscriptions/{subscription_id}/cursors', operationId: 'getCursors', tag: 'Subscription streams', access: 'authenticated', params: SubscriptionParam,
    summary: 'Committed cursors', responses: { '200': json('the committed cursors (empty before first use)', SubscriptionCursorsSchema), ...problems(403, 404) },
  }),
  route({
    method: 'PATCH', path: '/subscriptions/{subscription_id}/cursors', operationId: 'resetCursors', tag: 'Subscription streams', access: 'authenticated', params: SubscriptionParam,
    summary: 'Reset cursors', description: 'Closes every stream of the subscription, then writes the cursors; new streams get 409 meanwhile.',
    body: jsonBody(SubscriptionCursorsInputSchema),
    responses: { '204': empty('reset'), ...problems(400, 403, 404, 409, 422, 503) },
  }),
  route({
    method: 'GET', path: '/subscriptions/{subscription_id}/stats', operationId: 'getSubscriptionStats', tag: 'Subscription streams', access: 'authenticated', params: SubscriptionParam,
    summary: 'Subscription statistics', query: StatsQuery,
    responses: { '200': json('per event type and partition', SubscriptionStatsSchema), ...problems(403, 404) },
  }),
];
