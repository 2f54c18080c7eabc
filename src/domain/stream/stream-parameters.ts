/**
 * Stream parameters of the subscription stream `GET|POST /subscriptions/{id}/events` and of the
 * low-level stream `GET /event-types/{name}/events` (docs/consuming.md "Stream parameters").
 *
 * Values come from the query string and/or a JSON body object; a body field overrides the query
 * parameter of the same name. Their shapes are the schemas below: the query ones are checked by the
 * request pipeline before the handler (the route table declares them), the body one here. Type errors
 * (not an integer, negative, beyond int32, body not an object) are 400; a malformed `partitions` and
 * the rules between values (bounds, {@link streamParameterRules}) are 422.
 */
import { Type, type Static } from '@sinclair/typebox';
import type { InputProblem } from '../json/input-check.js';
import type { PartitionKey } from '../subscription/rebalance.js';
import { checkBody } from '../event-type/rule-problems.js';

/** Effective stream parameters, defaults applied and special values (0 = default) resolved. */
export interface StreamParameters {
  batchLimit: number;
  streamLimit: number;
  batchFlushTimeoutSeconds: number;
  batchTimespanSeconds: number;
  streamTimeoutSeconds: number;
  streamKeepAliveLimit: number;
  maxUncommittedEvents: number;
  commitTimeoutSeconds: number;
  partitions: PartitionKey[];
}

/**
 * Result of {@link parseStreamParameters}: the parameters, or the status with the detail lines
 * (`detail`, one line per problem) and, for a body that broke its schema, each problem's pointer.
 */
export type StreamParametersResult =
  | { ok: true; value: StreamParameters }
  | { ok: false; status: 400 | 422; detail: string; errors?: readonly InputProblem[] };

/** `batch_flush_timeout` default, also used for 0. */
export const DEFAULT_BATCH_FLUSH_TIMEOUT_SECONDS = 30;
/** Largest explicit `stream_timeout`; 0 or more counts as unspecified (about one hour). */
export const MAX_STREAM_TIMEOUT_SECONDS = 4200;
/** Centre and spread of the unspecified `stream_timeout`: 3600 ± 600 s. */
const STREAM_TIMEOUT_CENTRE_SECONDS = 3600;
const STREAM_TIMEOUT_SPREAD_SECONDS = 600;
/** Default and maximum `commit_timeout` (seconds; docs/consuming.md "Commits"). */
export const MAX_COMMIT_TIMEOUT_SECONDS = 60;
const DEFAULT_MAX_UNCOMMITTED_EVENTS = 10;
const INT32_MAX = 2_147_483_647;

/** Every failure of an integer parameter reads the same and is 400 (a value that is not a non-negative int32). */
const NON_NEGATIVE = 'must be a non-negative integer';
const nonNegative = {
  'x-status': 400,
  'x-messages': { type: NON_NEGATIVE, fraction: NON_NEGATIVE, minimum: NON_NEGATIVE, maximum: NON_NEGATIVE, const: NON_NEGATIVE, anyOf: NON_NEGATIVE },
} as const;

/** What each integer parameter means (the API document shows it on the query and the body). */
const MEANING = {
  batch_limit: 'events per batch at most (default 1; at least 1)',
  stream_limit: 'events in the stream at most (0 = unbounded; else not below batch_limit)',
  batch_flush_timeout: 'seconds before a partial batch is sent (default 30; 0 = 30)',
  batch_timespan: 'seconds of event time a batch spans at most (0 = off; body only)',
  stream_timeout: 'seconds before the stream ends (0 or above 4200: about one hour; not below batch_flush_timeout)',
  stream_keep_alive_limit: 'empty batches in a row per partition before the stream ends (0 = unbounded; query only)',
  max_uncommitted_events: 'events sent and not yet committed at most (default 10; at least 1)',
  commit_timeout: `seconds to commit what was sent (0 = ${MAX_COMMIT_TIMEOUT_SECONDS}; at most ${MAX_COMMIT_TIMEOUT_SECONDS})`,
} as const;

type IntegerField = keyof typeof MEANING;

/** A non-negative int32 in a JSON body. */
const bodyInteger = (name: IntegerField) => Type.Optional(Type.Integer({ minimum: 0, maximum: INT32_MAX, ...nonNegative, description: MEANING[name] }));

/** A non-negative int32 in the query; an empty value (`?batch_limit=`) counts as absent. */
const queryInteger = (name: IntegerField) =>
  Type.Optional(Type.Union([Type.Integer({ minimum: 0, maximum: INT32_MAX, ...nonNegative }), Type.Literal('', { ...nonNegative, description: 'empty: absent' })], { ...nonNegative, description: MEANING[name] }));

/** Query parameters of both streams (docs/consuming.md "Stream parameters"); `batch_timespan` is read from a body only. */
export const streamQueryProperties = {
  batch_limit: queryInteger('batch_limit'),
  stream_limit: queryInteger('stream_limit'),
  batch_flush_timeout: queryInteger('batch_flush_timeout'),
  stream_timeout: queryInteger('stream_timeout'),
  stream_keep_alive_limit: queryInteger('stream_keep_alive_limit'),
};

/** Query of a subscription stream (docs/consuming.md "Stream parameters"): the common ones, `max_uncommitted_events` and `commit_timeout`. */
export const SubscriptionStreamQuerySchema = Type.Object({
  ...streamQueryProperties,
  max_uncommitted_events: queryInteger('max_uncommitted_events'),
  commit_timeout: queryInteger('commit_timeout'),
});

/** The checked query of a stream (a low-level stream's has a subset of these). */
export type StreamQuery = Static<typeof SubscriptionStreamQuerySchema>;

const PARTITIONS_TEXT = 'must be an array of objects with string fields "event_type" and "partition"';
const partitionField = (description: string) => Type.String({ minLength: 1, 'x-status': 422, description });

/**
 * Stream parameters of a subscription stream as a `POST` body (docs/consuming.md "Stream parameters"): `partitions`
 * asks for those partitions (direct assignment); `stream_keep_alive_limit` is read from the query only.
 * A malformed `partitions` is 422, any other failure 400.
 */
export const StreamParametersBodySchema = Type.Object(
  {
    partitions: Type.Optional(
      Type.Array(
        Type.Object({ event_type: partitionField('an event type of the subscription'), partition: partitionField('one of its partitions') }, { 'x-status': 422, 'x-messages': { type: PARTITIONS_TEXT } }),
        { 'x-status': 422, 'x-messages': { type: PARTITIONS_TEXT }, description: 'direct assignment: these partitions go to this stream (duplicates and foreign partitions: 422)' },
      ),
    ),
    batch_limit: bodyInteger('batch_limit'),
    stream_limit: bodyInteger('stream_limit'),
    batch_flush_timeout: bodyInteger('batch_flush_timeout'),
    batch_timespan: bodyInteger('batch_timespan'),
    stream_timeout: bodyInteger('stream_timeout'),
    max_uncommitted_events: bodyInteger('max_uncommitted_events'),
    commit_timeout: bodyInteger('commit_timeout'),
  },
  { 'x-status': 400, 'x-messages': { type: 'must be a JSON object' } },
);

type StreamParametersBody = Static<typeof StreamParametersBodySchema>;

/**
 * The stream parameters (docs/consuming.md "Stream parameters").
 *
 * Defaults and rules: `batch_limit` 1 (min 1); `stream_limit` 0 = unbounded, non-zero below
 * `batch_limit` → 422; `batch_flush_timeout` 30 (0 = 30); `batch_timespan` 0 (body only);
 * `stream_timeout` 0 or above 4200 → 3000..4200 s chosen with `random` (3600 ± 600), below the
 * effective `batch_flush_timeout` → 422; `stream_keep_alive_limit` 0 (query only);
 * `max_uncommitted_events` 10 (min 1) and `commit_timeout` 60 (0 = 60, above 60 → 422) and
 * `partitions` (body only) for `kind: 'subscription'` only — for `'low-level'` (which has no body)
 * they are ignored and the result holds 10, 60 and `[]`.
 *
 * @param query the query as the pipeline checked it against {@link SubscriptionStreamQuerySchema} (or the
 *   low-level stream's query schema); `''` counts as absent
 * @param body the parsed JSON body; `undefined` or `null` when there is none, else checked against
 *   {@link StreamParametersBodySchema}; ignored for `'low-level'`
 * @param random returns [0, 1), picks the unspecified stream timeout; defaults to `Math.random`
 * @returns the effective parameters, or 400 (a body value not a non-negative int32, body not an object)
 *   or 422 (malformed `partitions`, {@link streamParameterRules}). Duplicated or unknown partitions are
 *   left to `validateDirectRequests`.
 */
export function parseStreamParameters(query: StreamQuery, body: unknown, kind: 'subscription' | 'low-level', random: () => number = Math.random): StreamParametersResult {
  let fields: StreamParametersBody = {};
  if (kind === 'subscription' && body !== undefined && body !== null) {
    const checked = checkBody(StreamParametersBodySchema, body);
    if (!checked.ok) return { ok: false, status: checked.status, detail: checked.details.join('\n'), ...(checked.errors ? { errors: checked.errors } : {}) };
    fields = checked.value;
  }
  const subscription = kind === 'subscription';
  /** A query value; `''` is absent. */
  const q = (value: number | '' | undefined): number | undefined => (value === '' ? undefined : value);
  const batchFlushTimeoutSeconds = (fields.batch_flush_timeout ?? q(query.batch_flush_timeout) ?? 0) || DEFAULT_BATCH_FLUSH_TIMEOUT_SECONDS;
  const requestedStreamTimeout = fields.stream_timeout ?? q(query.stream_timeout) ?? 0;
  const value: StreamParameters = {
    batchLimit: fields.batch_limit ?? q(query.batch_limit) ?? 1,
    streamLimit: fields.stream_limit ?? q(query.stream_limit) ?? 0,
    batchFlushTimeoutSeconds,
    batchTimespanSeconds: fields.batch_timespan ?? 0,
    streamTimeoutSeconds: requestedStreamTimeout === 0 || requestedStreamTimeout > MAX_STREAM_TIMEOUT_SECONDS ? unspecifiedStreamTimeout(random) : requestedStreamTimeout,
    streamKeepAliveLimit: q(query.stream_keep_alive_limit) ?? 0,
    maxUncommittedEvents: subscription ? (fields.max_uncommitted_events ?? q(query.max_uncommitted_events) ?? DEFAULT_MAX_UNCOMMITTED_EVENTS) : DEFAULT_MAX_UNCOMMITTED_EVENTS,
    commitTimeoutSeconds: (subscription ? (fields.commit_timeout ?? q(query.commit_timeout) ?? 0) : 0) || MAX_COMMIT_TIMEOUT_SECONDS,
    partitions: (fields.partitions ?? []).map((p) => ({ eventType: p.event_type, partition: p.partition })),
  };
  const broken = streamParameterRules(value);
  return broken.length === 0 ? { ok: true, value } : { ok: false, status: 422, detail: broken.join('\n') };
}

/**
 * The rules between stream parameters (docs/consuming.md "Stream parameters"), on the
 * effective values: `batch_limit` at least 1, `stream_limit` (when not 0) not below it, `stream_timeout`
 * not below `batch_flush_timeout`, `max_uncommitted_events` at least 1, `commit_timeout` at most 60.
 * @returns one 422 detail line per broken rule (none: the parameters hold)
 */
export function streamParameterRules(p: StreamParameters): string[] {
  const broken: string[] = [];
  if (p.batchLimit < 1) broken.push('batch_limit must be at least 1');
  if (p.streamLimit !== 0 && p.streamLimit < p.batchLimit) broken.push('stream_limit can not be lower than batch_limit');
  if (p.streamTimeoutSeconds < p.batchFlushTimeoutSeconds) broken.push('stream_timeout can not be lower than batch_flush_timeout');
  if (p.maxUncommittedEvents < 1) broken.push('max_uncommitted_events must be at least 1');
  if (p.commitTimeoutSeconds > MAX_COMMIT_TIMEOUT_SECONDS) broken.push(`commit_timeout can not be more than ${MAX_COMMIT_TIMEOUT_SECONDS} seconds`);
  return broken;
}

/** About one hour: an integer in 3000..4200 seconds, uniform over `random()` in [0, 1). */
function unspecifiedStreamTimeout(random: () => number): number {
  const r = Math.min(Math.max(random(), 0), 1);
  const offset = Math.min(Math.floor(r * (2 * STREAM_TIMEOUT_SPREAD_SECONDS + 1)), 2 * STREAM_TIMEOUT_SPREAD_SECONDS);
  return STREAM_TIMEOUT_CENTRE_SECONDS - STREAM_TIMEOUT_SPREAD_SECONDS + offset;
}
