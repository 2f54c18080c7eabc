import { STATUS_CODES } from 'node:http';

/**
 * One entry of the error catalog.
 * - `status`: the HTTP status the failure is answered with.
 * - `template`: the problem's `detail`; `{name}` placeholders are filled from the call site's values.
 * - `headers`: response headers sent with the problem; their values may hold placeholders too.
 * - `meaning`: when the failure happens (docs/errors.md is generated from it: `npm run docs`).
 */
export interface CatalogEntry {
  readonly status: number;
  readonly template: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly meaning: string;
}

const RETRY_1S = { 'Retry-After': '1' } as const;

/**
 * The one catalog of errors the broker answers with, so every error has a code, a status and a title
 * in one place (docs/errors.md): one code per failure situation.
 * A problem's `type` is `/problems/<code in lower-case kebab>` ({@link problemType}), its `title` the
 * status's reason phrase (docs/http-api.md "Errors"), its `detail` the filled template. Details that
 * existing clients match on (e.g. `EventType "x" does not exist.`) keep their exact wording, and tests
 * pin them. `test/unit/errors.test.ts` fails when docs/errors.md differs from what this table generates.
 *
 * `BAD_REQUEST` (400) and `UNPROCESSABLE` (422) stay generic on purpose: they are a request breaking
 * its shape or a field rule, and `detail` names the field(s), one line each.
 */
export const errorCatalog = {
  // 400
  BAD_REQUEST: { status: 400, template: '{reason}', meaning: 'The request is malformed: not JSON, not valid UTF-8, nested deeper than 512 levels, a `__proto__` or `constructor.prototype` key in a control-plane body, wrong JSON shape, bad enum value, bad query parameter or header; or the client left while its request waited for a control-plane slot. `detail` names what is wrong.' },
  BAD_PATH_PARAMETER: { status: 400, template: 'path parameter "{value}" is not valid URL encoding', meaning: 'A path parameter is not valid percent-encoding.' },
  BAD_GZIP: { status: 400, template: 'the gzip body cannot be inflated: {reason}', meaning: 'A `Content-Encoding: gzip` body that does not inflate.' },
  BAD_ZSTD: { status: 400, template: 'the zstd body cannot be decoded: {reason}', meaning: 'A `Content-Encoding: zstd` body that does not decode: corrupt, truncated, or a frame asking for a window above 8 MiB (the RFC 9659 limit).' },
  INCOMPLETE_BODY: { status: 400, template: 'the connection closed before the chunked body was complete', meaning: 'The connection closed while a chunked request body was still arriving.' },
  UNKNOWN_FEATURE: { status: 400, template: 'Feature "{feature}" is unknown; known: {known}', meaning: '`PUT /settings/features` names a feature the broker does not know.' },
  BAD_PAGING_TOKEN: { status: 400, template: 'token is not a paging token of this listing; take it from the next or prev link, or use token=new', meaning: 'The `token` query parameter of `GET /subscriptions` is not one this listing handed out.' },
  // 401
  UNAUTHORIZED: { status: 401, template: '{reason}', headers: { 'WWW-Authenticate': 'Bearer' }, meaning: 'No bearer token, or one that does not verify (signature, expiry, issuer, audience) or that the token-info service calls inactive. Only `/health`, `/openapi.json`, `/docs`, `/problems` and the console\'s files under `/ui` need none.' },
  // 403
  ACCESS_DENIED: { status: 403, template: 'Access on {operation} {resource} denied', meaning: 'The subject is not in the authorization list (admins, readers or writers) of the event type, subscription or admin settings.' },
  PRODUCER_BLOCKED: { status: 403, template: 'Application or event type is blocked', meaning: 'The producing application or the event type is on the blacklist (`PRODUCER_APP`, `PRODUCER_ET`).' },
  CONSUMPTION_BLOCKED: { status: 403, template: 'Consumption is blocked', meaning: 'The consuming application or one of the event types is on the blacklist (`CONSUMER_APP`, `CONSUMER_ET`).' },
  FEATURE_DISABLED: { status: 403, template: '{operation} is disabled (feature {feature})', meaning: 'A feature toggle disables the operation: `disable_event_type_creation`, `disable_event_type_deletion`, `disable_subscription_creation`, or `repartitioning` being off.' },
  ORIGIN_NOT_ALLOWED: { status: 403, template: 'Origin {origin} is not allowed (http.corsAllowedOrigins)', meaning: 'A browser request from an origin that `http.corsAllowedOrigins` does not list.' },
  // 404
  ROUTE_NOT_FOUND: { status: 404, template: 'no route for {method} {path}', meaning: 'No route has this path.' },
  EVENT_TYPE_NOT_FOUND: { status: 404, template: 'EventType "{name}" does not exist.', meaning: 'No event type has this name.' },
  SCHEMA_VERSION_NOT_FOUND: { status: 404, template: 'schema version "{version}" of EventType "{name}" does not exist.', meaning: 'The event type has no schema version with this number.' },
  MATCHING_SCHEMA_NOT_FOUND: { status: 404, template: 'no schema version of EventType "{name}" equals the schema sent', meaning: '`POST /event-types/{name}/schemas?fetch=true`: no stored schema version equals the one sent.' },
  PARTITION_NOT_FOUND: { status: 404, template: 'partition not found', meaning: 'The event type has no partition with this id.' },
  SUBSCRIPTION_NOT_FOUND: { status: 404, template: 'Subscription with id "{id}" does not exist.', meaning: 'No subscription has this id.' },
  STORAGE_NOT_FOUND: { status: 404, template: 'Storage "{id}" does not exist.', meaning: 'No storage has this id.' },
  AVRO_SCHEMA_NOT_FOUND: { status: 404, template: 'Avro schema "{name}" does not exist.', meaning: 'No Avro schema of the broker\'s own envelope has this name.' },
  AVRO_SCHEMA_VERSION_NOT_FOUND: { status: 404, template: 'Version "{version}" of the Avro schema "{name}" does not exist.', meaning: 'The Avro schema has no version with this number.' },
  CONSOLE_NOT_BUILT: { status: 404, template: 'The console is not built into this node (npm run build builds dist/ui)', meaning: 'The web console was asked for but this node was started without a built console.' },
  CONSOLE_ASSET_NOT_FOUND: { status: 404, template: 'no console asset {path}', meaning: 'The web console has no file at this path.' },
  API_REFERENCE_NOT_BUILT: { status: 404, template: 'The API reference page is not built into this node (npm run build copies it into dist/docs-assets); /openapi.json is served', meaning: '`/docs` was asked for but this node was started without the reference page\'s files; `/openapi.json` is served anyway.' },
  API_REFERENCE_ASSET_NOT_FOUND: { status: 404, template: 'no API reference file {path}', meaning: 'The API reference page has no file at this path.' },
  PROBLEM_TYPE_NOT_FOUND: { status: 404, template: 'no problem type {type}; GET /problems lists them', meaning: '`GET /problems/{type}` names no problem type of the catalog.' },
  // 405
  METHOD_NOT_ALLOWED: { status: 405, template: '{method} is not supported on {path}', headers: { Allow: '{allowed}' }, meaning: 'The route exists but not for this method; `Allow` lists the methods it has.' },
  // 409
  EVENT_TYPE_EXISTS: { status: 409, template: 'EventType "{name}" already exists.', meaning: 'An event type with this name exists already.' },
  EVENT_TYPE_CHANGED_CONCURRENTLY: { status: 409, template: 'EventType "{name}" was changed concurrently; retry', meaning: 'Another request changed the event type between reading and writing it; retry.' },
  EVENT_TYPE_HAS_SUBSCRIPTIONS: { status: 409, template: 'EventType "{name}" has {count} subscription(s) ({ids}); delete them first, or enable the feature delete_event_type_with_subscriptions', meaning: 'The event type to delete is read by subscriptions and `delete_event_type_with_subscriptions` is off.' },
  SUBSCRIPTION_CHANGED_CONCURRENTLY: { status: 409, template: 'A subscription with the same key was changed concurrently; retry', meaning: 'Another request created or deleted a subscription with the same key meanwhile; retry.' },
  NO_FREE_SLOT: { status: 409, template: 'No free slots for streaming available', meaning: 'Every partition of the subscription is streamed already: a new stream would get none.' },
  PARTITION_TAKEN: { status: 409, template: 'Partition already requested directly by another stream: event type "{eventType}" partition "{partition}"', meaning: 'A stream asked for a partition directly that another stream requested directly.' },
  CURSOR_RESET_RUNNING: { status: 409, template: 'Cursors are being reset; try again shortly', meaning: 'A stream of the subscription was opened while a cursor reset runs.' },
  CURSOR_RESET_ALREADY_RUNNING: { status: 409, template: 'Cursors of this subscription are being reset already', meaning: 'A cursor reset was asked for while another one runs.' },
  SKIPPED_EVENT_NOT_COMMITTED: { status: 409, template: 'the skipped event at {offset} could not be committed ({outcome})', meaning: 'A dead-lettered event could not be committed past: the stream lost the partition meanwhile.' },
  TIMELINE_SWITCH_CONFLICT: { status: 409, template: 'The timelines or partitions of event type "{name}" changed during the switch; create the timeline again (publishing stays blocked until a switch completes)', meaning: 'The event type\'s timelines or partitions changed while a timeline switch ran; create the timeline again.' },
  STORAGE_EXISTS: { status: 409, template: 'Storage "{id}" already exists.', meaning: 'A storage with this id exists already.' },
  STORAGE_RUNS_NODES: { status: 409, template: 'Storage "{id}" cannot be deleted: it is the storage the broker nodes run on.', meaning: 'The storage to delete is the Redis the broker nodes keep their own state in.' },
  STORAGE_IS_DEFAULT: { status: 409, template: 'Storage "{id}" cannot be deleted: it is the default storage.', meaning: 'The storage to delete is the default storage for new event types.' },
  STORAGE_IN_USE: { status: 409, template: 'Storage "{id}" cannot be deleted: timelines of event types {eventTypes} use it.', meaning: 'Timelines of event types still keep their events in the storage to delete.' },
  // 412
  INVALID_START_CURSOR: { status: 412, template: 'invalid cursor {cursor}: {reason}', meaning: 'A low-level stream was asked to start from an invalid cursor: unknown partition, malformed offset, or beyond the newest offset.' },
  CURSOR_EXPIRED: { status: 412, template: 'invalid cursor {cursor}: offset has expired', meaning: 'A low-level stream was asked to start from an offset that retention or compaction removed already.' },
  // 413
  BODY_TOO_LARGE: { status: 413, template: '{what} than the limit of {limit} bytes ({key})', meaning: 'The body is larger than its limit: `http.maxBodyBytes` for publishing and deleted events, `http.maxControlBodyBytes` for every other request.' },
  INFLATED_BODY_TOO_LARGE: { status: 413, template: 'the {coding} body inflates to more than {limit} bytes ({key})', meaning: 'A gzip or zstd body inflates beyond its limit (`http.maxInflatedBodyBytes` for publishing and deleted events, `http.maxControlBodyBytes` otherwise); a zstd frame declaring a larger content size is refused before decoding.' },
  // 415
  UNSUPPORTED_MEDIA_TYPE: { status: 415, template: '{reason}', meaning: 'A POST, PUT, PATCH or DELETE whose body is not declared as JSON (`Content-Type` other than `application/json` or a `+json` type, a charset other than UTF-8, or a body without `Content-Type`); nothing was done.' },
  UNSUPPORTED_CONTENT_ENCODING: { status: 415, template: 'Content-Encoding "{encoding}" is not supported; use zstd, gzip or none', meaning: 'A `Content-Encoding` other than zstd, gzip or identity; nothing was done.' },
  // 422
  UNPROCESSABLE: { status: 422, template: '{reason}', meaning: 'The body (or a query parameter such as `cursors`) parses but breaks a field rule; `detail` lists one line per field.' },
  INVALID_SCHEMA: { status: 422, template: 'invalid schema: {reason}', meaning: 'The event type\'s JSON Schema is not valid JSON Schema draft 04, is too costly, or contradicts the event type\'s fields.' },
  INCOMPATIBLE_SCHEMA: { status: 422, template: 'the schema change is not allowed under compatibility mode {mode}:\n{reasons}', meaning: 'The new schema breaks the event type\'s `compatibility_mode`; one line per reason.' },
  INVALID_CURSOR: { status: 422, template: 'invalid cursor {cursor}: {reason}', meaning: 'A cursor of the cursor tools names an unknown partition, is malformed, or lies before the oldest or after the newest available offset.' },
  INVALID_SHIFT: { status: 422, template: 'invalid shift of cursor {cursor}: {reason}', meaning: 'A cursor shifted before the oldest or after the newest available offset.' },
  INVALID_COMMIT_CURSOR: { status: 422, template: 'cursor {index}: offset "{offset}" is {reason}', meaning: 'A cursor to commit or reset has a malformed offset or one that does not exist in the partition.' },
  PARTITION_NOT_IN_SUBSCRIPTION: { status: 422, template: 'cursor {index}: event type "{eventType}" partition "{partition}" is not part of the subscription', meaning: 'A cursor to commit or reset names a partition that the subscription does not read.' },
  SESSION_NOT_FOUND: { status: 422, template: 'Session with stream id {streamId} not found', meaning: 'A commit names a stream that is closed or whose lease expired.' },
  BATCH_NOT_HELD: { status: 422, template: 'Cursor of event type "{eventType}" partition "{partition}" offset "{offset}" is not the end of a batch stream {streamId} holds', meaning: 'A commit or hand-back on a queue-mode subscription names no batch the stream holds: a batch another stream holds (handed on after its commit timeout), one waiting to be handed out again, or an offset never handed out (a hand-back: also one acknowledged already).' },
  PARTITION_NOT_ASSIGNED: { status: 422, template: 'Cursor of event type "{eventType}" partition "{partition}" is not assigned to stream {streamId}', meaning: 'A commit names a partition that the stream does not hold (any more).' },
  EVENT_TYPE_NOT_COMPACTED: { status: 422, template: 'Events can only be deleted from event types with cleanup_policy "compact" or "compact_and_delete"', meaning: '`POST /event-types/{name}/deleted-events` on an event type with `cleanup_policy` `delete`.' },
  UNKNOWN_EVENT_TYPES: { status: 422, template: 'Field "event_types" names event types that do not exist: {names}', meaning: 'A new subscription names event types that do not exist.' },
  TOO_MANY_PARTITIONS: { status: 422, template: 'The subscription would have {count} partitions over its event types; at most {limit} are allowed', meaning: 'A new subscription would read more partitions than `subscriptions.maxPartitions`.' },
  UNKNOWN_STORAGE: { status: 422, template: 'storage_id: storage "{id}" does not exist', meaning: 'A new timeline names a storage that does not exist.' },
  TOO_MANY_TIMELINES: { status: 422, template: 'event type "{name}" has reached the most timelines an offset can name ({limit})', meaning: 'The event type has as many timelines as an offset can name.' },
  STORAGE_PREFIX_TAKEN: { status: 422, template: 'redis_configuration: storage "{id}" already writes keys with prefix "{prefix}" on that deployment', meaning: 'A new storage would share a Redis deployment and key prefix with an existing one.' },
  STORAGE_NOT_ANSWERING: { status: 422, template: 'redis_configuration: the deployment does not answer: {reason}', meaning: 'A new storage\'s Redis deployment cannot be reached.' },
  // 429
  QUOTA_EXCEEDED: { status: 429, template: 'The {kind} "{name}" is over its publishing quota of {limit} {unit} per second; nothing was written, retry in {retryAfter} s', headers: { 'Retry-After': '{retryAfter}' }, meaning: 'A publishing quota (docs/publishing.md "Quotas"; `PUT /settings/quotas/{kind}/{name}`) of the publishing subject or of the event type\'s owning application is used up, counted for the whole cluster: its events or bytes per second (charged together once the batch is validated, before anything is written; a quota known to be in debt refuses before validation). Nothing was written; retry after `Retry-After` seconds. The `RateLimit-Policy` and `RateLimit` headers tell the quota and what is left of it.' },
  // 500
  INTERNAL: { status: 500, template: 'An internal error occurred; trace id {traceId}', meaning: 'A bug. `detail` carries a trace id that is logged with the stack.' },
  // 503
  STORAGE_UNAVAILABLE: { status: 503, template: 'Storage is unavailable: {reason}', headers: RETRY_1S, meaning: 'Redis cannot be reached, did not answer within `redis.commandTimeoutMs`, or a Redis Cluster is still failing over (MOVED/ASK/TRYAGAIN/CLUSTERDOWN left after the client retries). A publish answered 503 wrote nothing.' },
  STORAGE_UNREACHABLE: { status: 503, template: 'Storage "{id}" is unreachable: {reason}', headers: RETRY_1S, meaning: 'The storage (Redis deployment) of a timeline cannot be reached.' },
  STORAGE_NOT_REGISTERED: { status: 503, template: 'Storage "{id}" is not registered; the timeline using it cannot be read or written', meaning: 'A timeline names a storage that is not registered (a bug or a storage removed by hand).' },
  TIMELINE_SWITCHING: { status: 503, template: 'Event type "{name}" is switching timelines; nothing was written, retry shortly', headers: RETRY_1S, meaning: 'A publish arrived while the event type switches to a new timeline; nothing was written; retry.' },
  ASSIGNMENT_CONTENDED: { status: 503, template: 'The subscription assignment kept changing; try again', headers: RETRY_1S, meaning: 'The subscription\'s partition assignment kept changing under a stream being opened; retry.' },
  DEAD_LETTER_NOT_STORED: { status: 503, template: 'the dead-letter event was not stored ({outcome})', meaning: 'An event to skip could not be written to the dead-letter queue; the stream stays on it.' },
  SHUTTING_DOWN: { status: 503, template: 'The node is shutting down', headers: RETRY_1S, meaning: 'The node is draining on SIGTERM; retry on another node.' },
  READ_ONLY: { status: 503, template: 'Database is in read-only mode (feature disable_db_write_operations); try again later', headers: { 'Retry-After': '60' }, meaning: 'The feature `disable_db_write_operations` is on: event types, subscriptions, cursor resets and settings other than features cannot change; publishing and commits go on.' },
  AUTH_UNAVAILABLE: { status: 503, template: 'The {service} {failure}; the token cannot be {action} now, retry.', headers: RETRY_1S, meaning: 'The token-info service (mode `tokeninfo`) or the JWKS endpoint (mode `jwt`) cannot be reached or answers an error; nothing was done; retry.' },
  BUSY: { status: 503, template: '{reason}', headers: RETRY_1S, meaning: 'The batch was not processed within `publish.workerTaskTimeoutMs`; nothing was written; retry.' },
  OVERLOADED: { status: 503, template: 'This node is busy with {active} large control-plane requests and {waiting} waiting (http.controlConcurrency {concurrency}, http.controlQueueLength {queueLength}); nothing was done, retry shortly', headers: RETRY_1S, meaning: 'This node already runs `http.controlConcurrency` control-plane requests whose work grows with their size and has `http.controlQueueLength` more waiting; nothing was done; retry after `Retry-After` seconds.' },
  PUBLISH_OVERLOADED: { status: 503, template: 'This node already holds {inFlight} bytes of publish bodies in flight and this one declares {declared} (http.publishMaxInFlightBytes {limit}); nothing of it was read or written, retry in {retryAfter} s', headers: { 'Retry-After': '{retryAfter}' }, meaning: 'Bounded admission (docs/publishing.md "Refusals and deadlines"): the publish bodies this node is reading, validating and writing, with this one, would pass `http.publishMaxInFlightBytes`. The refusal comes before the body is read (for a chunked or compressed body: once it is read, before any validation); nothing was written; retry after `Retry-After` seconds (1 to 10: how long the producers already refused take to be admitted at the rate this node admits publishes), on this node or another.' },
  PUBLISH_QUEUE_DELAYED: { status: 503, template: 'Batches on this node have waited {waitedMs} ms for a worker thread (http.publishMaxQueueDelayMs {limit}); nothing of this publish was read or written, retry in {retryAfter} s', headers: { 'Retry-After': '{retryAfter}' }, meaning: 'Bounded admission (docs/publishing.md "Refusals and deadlines"): the oldest batch waiting for this node\'s validation threads has waited longer than `http.publishMaxQueueDelayMs`, so a batch admitted now would wait longer still. Refused before the body is read; bodies of at most `publish.inlineMaxBytes` are not held to it. Nothing was written; retry after `Retry-After` seconds (1 to 10, as for `PUBLISH_OVERLOADED`), on this node or another.' },
  PUBLISH_DEADLINE_EXCEEDED: { status: 503, template: 'The batch was not validated within its deadline of {timeoutMs} ms ({source}); nothing was written', headers: RETRY_1S, meaning: 'The publish deadline (`X-Timeout`, else `publish.defaultTimeoutMs`) passed before the batch was validated (waiting for the event type or for a worker thread); nothing was written. A deadline that passes after validation but before the writes started is answered 207 with every item `aborted`.' },
  // 507
  STORAGE_FULL: { status: 507, template: 'Storage is full: {state}', headers: { 'Retry-After': '5' }, meaning: 'A Redis master holding the partitions written to is at or above the high-water mark (`redisMemory.highWaterPercent` of its `maxmemory`, or of its machine\'s memory when it has none), or Redis itself refused the write for lack of memory (`OOM`). A publish answered 507 wrote nothing; on a Redis Cluster, a batch whose partitions lie on full and other masters is answered 207 instead, its items on the full masters `failed` with this text. Commits, session heartbeats and control-plane changes keep working below `maxmemory`. Publishing resumes within `redisMemory.checkIntervalMs` once retention, compaction or deletions free memory (docs/operations.md "Memory and retention").' },
} as const satisfies Record<string, CatalogEntry>;

/** A code of the catalog (upper snake case, stable: clients may program against it). */
export type ErrorCode = keyof typeof errorCatalog;

/** The `{name}` placeholders of a template, as a union of names. */
type Placeholders<T extends string> = T extends `${string}{${infer Name}}${infer Rest}` ? Name | Placeholders<Rest> : never;

type HeaderTemplates<C extends ErrorCode> = (typeof errorCatalog)[C] extends { readonly headers: infer H } ? H[keyof H] & string : never;

/** The values a code's template and header templates need: one per placeholder (strings or numbers). */
export type ErrorParams<C extends ErrorCode> = { readonly [Name in Placeholders<(typeof errorCatalog)[C]['template'] | HeaderTemplates<C>>]: string | number };

/** `brokerError`'s arguments after the code: none for a template without placeholders, else its values. */
export type ErrorArgs<C extends ErrorCode> = [Placeholders<(typeof errorCatalog)[C]['template'] | HeaderTemplates<C>>] extends [never] ? [] : [params: ErrorParams<C>];

/**
 * A code's problem `type`: the relative URI `/problems/<code in lower-case kebab>`, e.g.
 * `EVENT_TYPE_NOT_FOUND` → `/problems/event-type-not-found` (RFC 7807 §3.1: resolved against the
 * request's URI).
 */
export function problemType(code: ErrorCode): string {
  return `/problems/${code.toLowerCase().replaceAll('_', '-')}`;
}

/** One problem type as `GET /problems/{type}` describes it (the catalog entry behind a problem's `type`). */
export interface ProblemTypeDescription {
  readonly type: string;
  readonly code: ErrorCode;
  readonly status: number;
  readonly title: string;
  /** The `detail` template: `{name}` placeholders are filled per failure. */
  readonly detail_template: string;
  readonly meaning: string;
}

/** Every problem type of the catalog, in catalog order (`GET /problems`; the API document's "Problem types"). */
export function problemTypes(): ProblemTypeDescription[] {
  return (Object.keys(errorCatalog) as ErrorCode[]).map((code) => {
    const entry: CatalogEntry = errorCatalog[code];
    return { type: problemType(code), code, status: entry.status, title: reasonPhrase(entry.status), detail_template: entry.template, meaning: entry.meaning };
  });
}

/** The HTTP reason phrase of a status, used as a problem's `title`. */
export function reasonPhrase(status: number): string {
  if (status === 422) return 'Unprocessable Entity';
  return STATUS_CODES[status] ?? 'Error';
}

/** Fills `{name}` placeholders from `params`. @throws Error when a placeholder has no value (a bug) */
function fill(template: string, params: Readonly<Record<string, string | number>>): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = params[name];
    if (value === undefined) throw new Error(`error template "${template}" needs a value for {${name}}`);
    return String(value);
  });
}

/**
 * A code's template filled with `values`: the `detail` its error would carry, for texts that are sent
 * in other places than a problem (e.g. the `error` of a schema compatibility check).
 */
export function errorDetail<C extends ErrorCode>(code: C, ...args: ErrorArgs<C>): string {
  return fill(errorCatalog[code].template, args[0] ?? {});
}

/**
 * An expected failure, answered as an RFC 7807 problem by the HTTP layer. Made by {@link brokerError}
 * (lint forbids `new BrokerError` outside `src/errors/`), so every detail comes from the catalog.
 */
export class BrokerError extends Error {
  override readonly name = 'BrokerError';
  readonly status: number;

  /** @internal use {@link brokerError} */
  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    readonly headers: Readonly<Record<string, string>> = {},
    /** Per-field problems with the JSON pointer of each (input checked against a schema): the problem's `errors` member. */
    readonly errors?: readonly FieldError[],
  ) {
    super(detail);
    this.status = errorCatalog[code].status;
  }

  /** The problem `type` URI of this error's code. */
  get type(): string {
    return problemType(this.code);
  }
}

/**
 * The error of a catalog code, its detail and headers filled from `params` (typed per code: the
 * template's placeholders). E.g. `brokerError('EVENT_TYPE_NOT_FOUND', { name })`.
 */
export function brokerError<C extends ErrorCode>(code: C, ...args: ErrorArgs<C>): BrokerError {
  const entry: CatalogEntry = errorCatalog[code];
  const params: Readonly<Record<string, string | number>> = args[0] ?? {};
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(entry.headers ?? {})) headers[name] = fill(value, params);
  return new BrokerError(code, fill(entry.template, params), headers);
}

/**
 * The same error with more response headers (e.g. the `RateLimit-Policy` and `RateLimit` of a 429
 * `QUOTA_EXCEEDED`, docs/publishing.md "Quotas"); the catalog's own headers win over `extra`.
 */
export function withHeaders(err: BrokerError, extra: Readonly<Record<string, string>>): BrokerError {
  return new BrokerError(err.code, err.detail, { ...extra, ...err.headers }, err.errors);
}

/**
 * One failing field of a request checked against its schema, so a client can tell which field to fix: the RFC 6901 pointer into
 * the checked part (`/authorization/readers/0/value`), the part (`body`, `query`, `path`, `header`) and
 * the detail line. Sent as the problem's `errors` member (RFC 9457 §3.1 style).
 */
export interface FieldError {
  readonly pointer: string;
  readonly detail: string;
  readonly in?: string;
}

/**
 * The 400 `BAD_REQUEST` or 422 `UNPROCESSABLE` of a request that broke its schema or a field rule: one
 * `detail` line per problem and, when known, each problem's JSON pointer in `errors` (docs/http-api.md
 * "Errors": malformed 400, a broken rule 422).
 */
export function invalidInput(status: 400 | 422, details: readonly string[], errors?: readonly FieldError[], part = 'body'): BrokerError {
  const code = status === 400 ? 'BAD_REQUEST' : 'UNPROCESSABLE';
  const fields = errors?.map((e) => ({ pointer: e.pointer, detail: e.detail, in: e.in ?? part }));
  return new BrokerError(code, fill(errorCatalog[code].template, { reason: details.join('\n') }), {}, fields);
}

/** An RFC 7807 problem body as the broker sends it; `type` is {@link problemType} of the code. */
export interface Problem {
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  /** The failing fields of a request checked against its schema ({@link FieldError}). */
  readonly errors?: readonly FieldError[];
  /** Last, so bodies begin `{"title":` as the reference service's problems do. */
  readonly type: string;
}
