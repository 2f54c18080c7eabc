import { STATUS_CODES } from 'node:http';

/**
 * The one catalog of errors the broker answers with. Each code has an HTTP status and a meaning; the
 * problem's `title` is the status's reason phrase (WIRE.md "Conventions"), `detail` is per occurrence.
 * `test/unit/errors.test.ts` keeps this table and the README's error table in step.
 */
export const errorCatalog = {
  BAD_REQUEST: { status: 400, meaning: 'The request is malformed: not JSON, not valid UTF-8, nested deeper than 512 levels, a `__proto__` or `constructor.prototype` key in a control-plane body, wrong JSON shape, bad enum value, bad query parameter or header.' },
  BAD_GZIP: { status: 400, meaning: 'A `Content-Encoding: gzip` body that does not inflate.' },
  BAD_ZSTD: { status: 400, meaning: 'A `Content-Encoding: zstd` body that does not decode: corrupt, truncated, or a frame asking for a window above 8 MiB (the RFC 9659 limit).' },
  UNAUTHORIZED: { status: 401, meaning: 'No bearer token, or one that does not verify (signature, expiry, issuer, audience) or that the token-info service calls inactive. Only `/health` needs none.' },
  FORBIDDEN: { status: 403, meaning: 'The subject may not do this: not in the authorization list of the event type, subscription or admin settings; a blocked producer or consumer; a feature toggle that disables the operation.' },
  NOT_FOUND: { status: 404, meaning: 'No such route, event type, partition, schema version or subscription, or no stored schema version equal to the one sent (`POST /event-types/{name}/schemas?fetch=true`).' },
  METHOD_NOT_ALLOWED: { status: 405, meaning: 'The route exists but not for this method.' },
  CONFLICT: { status: 409, meaning: 'The resource exists already (event type name) or is being changed; no free streaming slot; a requested partition is taken; a cursor reset runs.' },
  PRECONDITION_FAILED: { status: 412, meaning: 'A low-level stream was asked to start from an invalid cursor: unknown partition, malformed, expired or beyond the newest offset.' },
  PAYLOAD_TOO_LARGE: { status: 413, meaning: 'The body is larger than its limit: `http.maxBodyBytes` for publishing and deleted events (inflated, gzip or zstd: `http.maxInflatedBodyBytes`), `http.maxControlBodyBytes` for every other request, as sent and inflated; a zstd frame declaring a larger content size is refused before decoding.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, meaning: 'A `Content-Encoding` other than zstd, gzip or identity; or a POST, PUT, PATCH or DELETE whose body is not declared as JSON (`Content-Type` other than `application/json` or a `+json` type, a charset other than UTF-8, or a body without `Content-Type`); nothing was done.' },
  UNPROCESSABLE: { status: 422, meaning: 'The body (or a query parameter such as `cursors`) parses but breaks a rule: a field, a schema, a strategy, a cursor, a cursor shifted before the oldest or after the newest available offset.' },
  INTERNAL: { status: 500, meaning: 'A bug. `detail` carries a trace id that is logged with the stack.' },
  STORAGE_UNAVAILABLE: { status: 503, meaning: 'Redis cannot be reached, did not answer within `redis.commandTimeoutMs`, or a Redis Cluster is still failing over (MOVED/ASK/TRYAGAIN/CLUSTERDOWN left after the client retries). A publish answered 503 wrote nothing.' },
  SHUTTING_DOWN: { status: 503, meaning: 'The node is draining on SIGTERM; retry on another node.' },
  READ_ONLY: { status: 503, meaning: 'The feature `disable_db_write_operations` is on: event types, subscriptions, cursor resets and settings other than features cannot change; publishing and commits go on.' },
  AUTH_UNAVAILABLE: { status: 503, meaning: 'The token-info service (mode `tokeninfo`) or the JWKS endpoint (mode `jwt`) cannot be reached or answers an error; nothing was done; retry.' },
  BUSY: { status: 503, meaning: 'The batch was not processed within `publish.workerTaskTimeoutMs`; nothing was written; retry.' },
  OVERLOADED: { status: 503, meaning: 'This node already runs `http.controlConcurrency` control-plane requests whose work grows with their size and has `http.controlQueueLength` more waiting; nothing was done; retry after `Retry-After` seconds.' },
} as const satisfies Record<string, { status: number; meaning: string }>;

export type ErrorCode = keyof typeof errorCatalog;

/** The HTTP reason phrase of a status, used as a problem's `title`. */
export function reasonPhrase(status: number): string {
  if (status === 422) return 'Unprocessable Entity';
  return STATUS_CODES[status] ?? 'Error';
}

/**
 * An expected failure, answered as an RFC 7807 problem by the HTTP layer.
 * @param code catalog code; decides the status
 * @param detail human-readable, safe to show to the client
 */
export class BrokerError extends Error {
  override readonly name = 'BrokerError';
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(detail);
    this.status = errorCatalog[code].status;
  }
}

/** An RFC 7807 problem body as the broker sends it (`type` omitted = `about:blank`). */
export interface Problem {
  readonly title: string;
  readonly status: number;
  readonly detail: string;
}

/** Shorthands for the most common errors. */
export const errors = {
  eventTypeNotFound: (name: string) => new BrokerError('NOT_FOUND', `EventType "${name}" does not exist.`),
  unprocessable: (detail: string) => new BrokerError('UNPROCESSABLE', detail),
  badRequest: (detail: string) => new BrokerError('BAD_REQUEST', detail),
  /** WIRE.md "Settings": `Access on WRITE event-type:orders denied`. */
  accessDenied: (operation: 'ADMIN' | 'READ' | 'WRITE', resource: string) => new BrokerError('FORBIDDEN', `Access on ${operation} ${resource} denied`),
  unauthorized: (detail: string) => new BrokerError('UNAUTHORIZED', detail, { 'WWW-Authenticate': 'Bearer' }),
};
