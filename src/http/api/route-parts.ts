/** Pieces several route declarations share (parameters, headers, stream answers). */
import { Type } from '@sinclair/typebox';
import { StreamBatchSchema } from './wire-schemas.js';
import { streamQueryProperties } from '../../domain/stream/stream-parameters.js';
import { EVENT_STREAM_MEDIA, JSON_STREAM_MEDIA, type HeaderSpec, type ResponseSpec } from './route-model.js';

/** `{name}`: an event type. */
export const NameParam = Type.Object({ name: Type.String({ description: 'event type name' }) });
/** `{subscription_id}`: a uuid; any other value names no subscription (404, like an unknown one). */
export const SubscriptionParam = Type.Object({ subscription_id: Type.String({ description: 'the subscription\'s uuid (another value: 404)' }) });
/** A `true`/`false` query parameter (400 otherwise); `anyCase` accepts `TRUE`, `False`, …. */
export const Bool = (description: string, anyCase = false) =>
  Type.Unsafe<string>(
    Type.String({
      ...(anyCase ? { 'x-any-case-enum': ['true', 'false'] } : { enum: ['true', 'false'] }),
      'x-status': 400,
      'x-messages': { enum: 'must be true or false', 'x-any-case-enum': 'must be true or false' },
      description,
    }),
  );
/** `offset`/`limit` paging (docs/http-api.md: limit 1..1000, default 20; offset ≥ 0; anything else 400); read with {@link pageOf}. */
export const Paging = {
  offset: Type.Optional(
    Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0, 'x-status': 400, 'x-messages': { minimum: 'must not be negative', fraction: 'must be an integer' } }),
  ),
  limit: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 1000, default: 20, 'x-status': 400, 'x-messages': { minimum: 'must be between 1 and 1000', maximum: 'must be between 1 and 1000', fraction: 'must be an integer' } }),
  ),
};
/** A page of a listing: `offset` ≥ 0, `limit` 1..1000. */
export interface Page {
  readonly offset: number;
  readonly limit: number;
}

/**
 * The page of a listing whose query declares {@link Paging}, as the pipeline checked it (400 `Field
 * "limit" must be between 1 and 1000`, `Field "offset" must not be negative`, `… must be an integer`):
 * the defaults the schema declares for what the request left out.
 */
export function pageOf(query: { readonly offset?: number; readonly limit?: number }): Page {
  return { offset: query.offset ?? 0, limit: query.limit ?? 20 };
}

/** `Location` of a created resource. */
export const Location: HeaderSpec = { description: 'the created (or existing) resource', schema: Type.String(), required: true };
/** `Warning` of an event type creation or update whose declared traffic cannot fit the Redis memory budget (RFC 9111 form; docs/operations.md "Memory and retention"). */
export const CapacityWarning: HeaderSpec = {
  description: 'RFC 9111 `299 - "<text>"`: the memory the event type\'s `default_statistic` and `retention_time` need exceeds the room below the high-water mark of its storage; nothing was refused for it',
  schema: Type.String(),
  required: false,
};
/** `X-Broker-StreamId` of a subscription stream. */
export const STREAM_ID: HeaderSpec = { description: 'the stream\'s id: commits name it in `X-Broker-StreamId`', schema: Type.String({ format: 'uuid' }), required: true };

/**
 * Query parameters of both streams (docs/consuming.md): non-negative int32 values (else 400), an empty
 * value is absent; declared and read in src/domain/stream/stream-parameters.ts.
 */
export const streamQuery = streamQueryProperties;

/** A streamed answer, as JSON lines and (when `sse`) as server-sent events. */
export function stream(description: string, headers: Readonly<Record<string, HeaderSpec>>, sse: boolean): ResponseSpec {
  return {
    description,
    content: {
      [JSON_STREAM_MEDIA]: StreamBatchSchema,
      ...(sse ? { [EVENT_STREAM_MEDIA]: Type.String({ description: 'each batch as one server-sent event (`id:` its cursors, `data:` the batch JSON); docs/server-sent-events.md' }) } : {}),
    },
    headers,
  };
}
