/**
 * Stream parameters of the subscription stream `GET|POST /subscriptions/{id}/events` and of the
 * low-level stream `GET /event-types/{name}/events` (spec "Subscriptions" → "Stream parameters",
 * "Limits"; WIRE.md "Streaming", "Low-level stream").
 *
 * Values come from the query string and/or a JSON body object; a body field overrides the query
 * parameter of the same name. Type errors (not an integer, negative, beyond int32, body not an
 * object) are 400; rule violations (bounds, malformed `partitions`) are 422.
 */
import type { PartitionKey } from './rebalance.js';

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

/** Result of {@link parseStreamParameters}. */
export type StreamParametersResult = { ok: true; value: StreamParameters } | { ok: false; status: 400 | 422; detail: string };

/** `batch_flush_timeout` default, also used for 0. */
export const DEFAULT_BATCH_FLUSH_TIMEOUT_SECONDS = 30;
/** Largest explicit `stream_timeout`; 0 or more counts as unspecified (about one hour). */
export const MAX_STREAM_TIMEOUT_SECONDS = 4200;
/** Centre and spread of the unspecified `stream_timeout`: 3600 ± 600 s. */
const STREAM_TIMEOUT_CENTRE_SECONDS = 3600;
const STREAM_TIMEOUT_SPREAD_SECONDS = 600;
/** Default and maximum `commit_timeout` (spec "Limits"). */
export const MAX_COMMIT_TIMEOUT_SECONDS = 60;
const DEFAULT_MAX_UNCOMMITTED_EVENTS = 10;
const INT32_MAX = 2_147_483_647;

type Source = 'query' | 'body';
type Kind = 'subscription' | 'low-level';

/** Integer parameters: wire name, where it may come from, for which streams. */
const INTEGER_FIELDS = {
  batch_limit: { from: ['query', 'body'], kinds: ['subscription', 'low-level'] },
  stream_limit: { from: ['query', 'body'], kinds: ['subscription', 'low-level'] },
  batch_flush_timeout: { from: ['query', 'body'], kinds: ['subscription', 'low-level'] },
  batch_timespan: { from: ['body'], kinds: ['subscription', 'low-level'] },
  stream_timeout: { from: ['query', 'body'], kinds: ['subscription', 'low-level'] },
  stream_keep_alive_limit: { from: ['query'], kinds: ['subscription', 'low-level'] },
  max_uncommitted_events: { from: ['query', 'body'], kinds: ['subscription'] },
  commit_timeout: { from: ['query', 'body'], kinds: ['subscription'] },
} as const satisfies Record<string, { from: readonly Source[]; kinds: readonly Kind[] }>;

type IntegerField = keyof typeof INTEGER_FIELDS;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const QUERY_INTEGER = /^[0-9]+$/;

/**
 * Reads one integer field: body first, then query. `value` is `undefined` when absent (an empty query
 * value or a JSON null counts as absent); `error` is the 400 detail when present but not a non-negative int32.
 */
function readInteger(name: IntegerField, query: URLSearchParams, body: Record<string, unknown>, kind: Kind): { value: number | undefined } | { error: string } {
  const spec: { from: readonly Source[]; kinds: readonly Kind[] } = INTEGER_FIELDS[name];
  if (!spec.kinds.includes(kind)) return { value: undefined };
  const fromBody = spec.from.includes('body') ? body[name] : undefined;
  if (fromBody !== undefined && fromBody !== null) {
    if (typeof fromBody !== 'number' || !Number.isInteger(fromBody) || fromBody < 0 || fromBody > INT32_MAX) {
      return { error: `Field "${name}" must be a non-negative integer` };
    }
    return { value: fromBody };
  }
  const fromQuery = spec.from.includes('query') ? query.get(name) : null;
  if (fromQuery === null || fromQuery === '') return { value: undefined };
  const value = Number(fromQuery);
  if (!QUERY_INTEGER.test(fromQuery) || value > INT32_MAX) return { error: `Parameter "${name}" must be a non-negative integer` };
  return { value };
}

/** Parses `partitions` (body only): an array of `{event_type, partition}` with string values; `undefined` when malformed. */
function readPartitions(raw: unknown): PartitionKey[] | undefined {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) return undefined;
  const out: PartitionKey[] = [];
  for (const item of raw as unknown[]) {
    if (!isRecord(item)) return undefined;
    const eventType = item['event_type'];
    const partition = item['partition'];
    if (typeof eventType !== 'string' || eventType === '' || typeof partition !== 'string' || partition === '') return undefined;
    out.push({ eventType, partition });
  }
  return out;
}

/**
 * Parses and validates stream parameters (spec "Stream parameters" table; WIRE.md "Streaming",
 * "Low-level stream").
 *
 * Defaults and rules: `batch_limit` 1 (min 1); `stream_limit` 0 = unbounded, non-zero below
 * `batch_limit` → 422; `batch_flush_timeout` 30 (0 = 30); `batch_timespan` 0 (body only);
 * `stream_timeout` 0 or above 4200 → 3000..4200 s chosen with `random` (3600 ± 600), below the
 * effective `batch_flush_timeout` → 422; `stream_keep_alive_limit` 0 (query only);
 * `max_uncommitted_events` 10 (min 1) and `commit_timeout` 60 (0 = 60, above 60 → 422) and
 * `partitions` (body only) for `kind: 'subscription'` only — for `'low-level'` they are ignored and
 * the result holds 10, 60 and `[]`. A parameter in a place it is not read from is ignored.
 *
 * @param body the parsed JSON body; `undefined` or `null` when there is none, else it must be an object (400)
 * @param random returns [0, 1), picks the unspecified stream timeout; defaults to `Math.random`
 * @returns the effective parameters, or 400 (not a non-negative int32, body not an object) or 422
 *   (bounds, malformed `partitions`). Duplicated or unknown partitions are left to `validateDirectRequests`.
 */
export function parseStreamParameters(query: URLSearchParams, body: unknown, kind: Kind, random: () => number = Math.random): StreamParametersResult {
  if (body !== undefined && body !== null && !isRecord(body)) return { ok: false, status: 400, detail: 'Request body must be a JSON object' };
  const fields: Record<string, unknown> = body ?? {};

  const values = new Map<IntegerField, number | undefined>();
  for (const name of Object.keys(INTEGER_FIELDS) as IntegerField[]) {
    const read = readInteger(name, query, fields, kind);
    if ('error' in read) return { ok: false, status: 400, detail: read.error };
    values.set(name, read.value);
  }
  const get = (name: IntegerField, fallback: number): number => values.get(name) ?? fallback;
  const invalid = (detail: string): StreamParametersResult => ({ ok: false, status: 422, detail });

  const batchLimit = get('batch_limit', 1);
  if (batchLimit < 1) return invalid('batch_limit must be at least 1');
  const streamLimit = get('stream_limit', 0);
  if (streamLimit !== 0 && streamLimit < batchLimit) return invalid('stream_limit can not be lower than batch_limit');
  const batchFlushTimeoutSeconds = get('batch_flush_timeout', 0) || DEFAULT_BATCH_FLUSH_TIMEOUT_SECONDS;
  const requestedStreamTimeout = get('stream_timeout', 0);
  const streamTimeoutSeconds =
    requestedStreamTimeout === 0 || requestedStreamTimeout > MAX_STREAM_TIMEOUT_SECONDS ? unspecifiedStreamTimeout(random) : requestedStreamTimeout;
  if (streamTimeoutSeconds < batchFlushTimeoutSeconds) return invalid('stream_timeout can not be lower than batch_flush_timeout');

  const maxUncommittedEvents = get('max_uncommitted_events', DEFAULT_MAX_UNCOMMITTED_EVENTS);
  if (maxUncommittedEvents < 1) return invalid('max_uncommitted_events must be at least 1');
  const commitTimeoutSeconds = get('commit_timeout', 0) || MAX_COMMIT_TIMEOUT_SECONDS;
  if (commitTimeoutSeconds > MAX_COMMIT_TIMEOUT_SECONDS) return invalid(`commit_timeout can not be more than ${MAX_COMMIT_TIMEOUT_SECONDS} seconds`);

  const partitions = kind === 'subscription' ? readPartitions(fields['partitions']) : [];
  if (partitions === undefined) return invalid('partitions must be an array of objects with string fields "event_type" and "partition"');

  return {
    ok: true,
    value: {
      batchLimit,
      streamLimit,
      batchFlushTimeoutSeconds,
      batchTimespanSeconds: get('batch_timespan', 0),
      streamTimeoutSeconds,
      streamKeepAliveLimit: get('stream_keep_alive_limit', 0),
      maxUncommittedEvents,
      commitTimeoutSeconds,
      partitions,
    },
  };
}

/** About one hour: an integer in 3000..4200 seconds, uniform over `random()` in [0, 1). */
function unspecifiedStreamTimeout(random: () => number): number {
  const r = Math.min(Math.max(random(), 0), 1);
  const offset = Math.min(Math.floor(r * (2 * STREAM_TIMEOUT_SPREAD_SECONDS + 1)), 2 * STREAM_TIMEOUT_SPREAD_SECONDS);
  return STREAM_TIMEOUT_CENTRE_SECONDS - STREAM_TIMEOUT_SPREAD_SECONDS + offset;
}
