/**
 * The shape of a route declaration: method, path, what the route takes and answers as TypeBox
 * schemas, how the pipeline runs it and its handler, in one object ({@link Route}, written with
 * {@link routesOf}). Each API area declares its routes beside their handlers (src/http/routes/*.ts);
 * `route-table.ts` lists them all; `openapi.ts` derives the OpenAPI document from them, the server
 * (src/http/server.ts) registers them and checks each request's path, query and headers against
 * their schemas, and the test support validates answers against them (docs/http-api.md).
 */
import { Type, type Static, type TObject, type TSchema } from '@sinclair/typebox';
import type { StreamingAnswer } from '../../domain/stream/stream-sink.js';
import type { HttpAnswer, Method, RequestContext } from '../handler.js';
import { BatchItemResponsesSchema, ProblemSchema } from './wire-schemas.js';

/** `application/json`. */
export const JSON_MEDIA = 'application/json';
/** RFC 7807 problems. */
export const PROBLEM_MEDIA = 'application/problem+json';
/** One JSON batch per line (docs/consuming.md). */
export const JSON_STREAM_MEDIA = 'application/x-json-stream';
/** Server-sent events (docs/server-sent-events.md). */
export const EVENT_STREAM_MEDIA = 'text/event-stream';

/** A response header (its name as sent). */
export interface HeaderSpec {
  readonly description: string;
  readonly schema: TSchema;
  /** Always sent with this answer. */
  readonly required?: boolean;
}

/** One answer of a route: by media type, the schema of its body (none: no body). */
export interface ResponseSpec {
  readonly description: string;
  /** Body schema per media type; absent or empty: the answer has no body. A `text/*` body has a string schema. */
  readonly content?: Readonly<Record<string, TSchema>>;
  readonly headers?: Readonly<Record<string, HeaderSpec>>;
}

/** Who may call a route. `public`: no authentication (like `/health`); `authenticated`: the node's auth mode applies. */
export type RouteAccess = 'public' | 'authenticated';

/** A request body. */
export interface BodySpec {
  readonly description?: string;
  /** Media type → schema. */
  readonly content: Readonly<Record<string, TSchema>>;
  readonly required: boolean;
}

/**
 * The sections of the API reference (OpenAPI tags), in the order the reference page shows them. A
 * route names one ({@link RouteSpec.tag}).
 */
export const TAGS = [
  'Event types',
  'Schemas',
  'Publishing',
  'Partitions and cursors',
  'Storages and timelines',
  'Low-level streams',
  'Subscriptions',
  'Subscription streams',
  'Settings',
  'Operations',
  'Console',
] as const;
/** A section of the API reference. */
export type Tag = (typeof TAGS)[number];

/** What a route declares for the document and the request checks: everything but how it runs. */
export interface RouteSpec {
  readonly method: Method;
  /**
   * The path in OpenAPI form (`/event-types/{name}`). The server registers it with the engine as
   * `/event-types/:name` ({@link enginePath}), which is also the `route` label of its metrics.
   */
  readonly path: string;
  /** The last path parameter stands for the rest of the path, slashes included (registered as `*`). */
  readonly restOfPath?: boolean;
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  /** The section of the API reference (OpenAPI tag). */
  readonly tag: Tag;
  readonly access: RouteAccess;
  /** Path parameters (every `{…}` of `path`), all strings. */
  readonly params?: TObject;
  /** Query parameters. */
  readonly query?: TObject;
  /** Request headers the route reads. */
  readonly headers?: TObject;
  readonly body?: BodySpec;
  /** By status code (`"200"`); failures not listed answer the `default` problem. */
  readonly responses: Readonly<Record<string, ResponseSpec>>;
  readonly deprecated?: boolean;
}

/** The `X-Flow-Id` answer header every route sends (docs/http-api.md). */
export const FLOW_ID_HEADER: HeaderSpec = { description: 'the request\'s X-Flow-Id, or a new uuid when it sent none', schema: Type.String(), required: true };

/** A JSON answer. */
export function json(description: string, schema: TSchema, headers?: Readonly<Record<string, HeaderSpec>>): ResponseSpec {
  return { description, content: { [JSON_MEDIA]: schema }, ...(headers ? { headers } : {}) };
}

/** An answer without a body. */
export function empty(description: string, headers?: Readonly<Record<string, HeaderSpec>>): ResponseSpec {
  return { description, ...(headers ? { headers } : {}) };
}

/** A JSON request body. */
export function jsonBody(schema: TSchema, description?: string, required = true): BodySpec {
  return { content: { [JSON_MEDIA]: schema }, required, ...(description ? { description } : {}) };
}

/** What each problem status means in general (the route's description says more). */
const PROBLEM_MEANING: Readonly<Record<number, string>> = {
  400: 'malformed request (body, query or header)',
  401: 'no valid bearer token (auth modes jwt and tokeninfo); `WWW-Authenticate: Bearer`',
  403: 'not allowed (authorization, blacklist, or a feature toggle)',
  404: 'not found',
  409: 'conflict with the current state',
  412: 'a cursor is not valid (low-level stream)',
  413: 'body above the limit (config http.maxBodyBytes, http.maxInflatedBodyBytes, http.maxControlBodyBytes)',
  415: 'body not declared as JSON, or an unsupported Content-Encoding',
  422: 'the request is well formed but breaks a rule',
  429: 'over a publishing quota (docs/publishing.md "Quotas"); nothing was written; `Retry-After`',
  501: 'not implemented',
  503: 'the node cannot serve it now (read-only mode, overload, storage unavailable, shutting down); `Retry-After`',
  507: 'a Redis master is full (above the high-water mark, or out of memory); nothing was written; `Retry-After`',
};

/** Problem answers for the given statuses. */
export function problems(...statuses: number[]): Record<string, ResponseSpec> {
  const out: Record<string, ResponseSpec> = {};
  for (const status of statuses) out[String(status)] = { description: PROBLEM_MEANING[status] ?? 'problem', content: { [PROBLEM_MEDIA]: ProblemSchema } };
  return out;
}

/**
 * A 422 or 207 answer of a batch: BatchItemResponse per event (docs/publishing.md); with
 * `orProblem`, a problem instead when the whole request is refused (e.g. deleted events of an event
 * type that is not compacted).
 */
export function batchItems(description: string, orProblem = false): ResponseSpec {
  return { description, content: { [JSON_MEDIA]: BatchItemResponsesSchema, ...(orProblem ? { [PROBLEM_MEDIA]: ProblemSchema } : {}) } };
}

/** The problem answer of every status a route does not list (`default` in the document). */
export const DEFAULT_PROBLEM: ResponseSpec = { description: 'a problem (RFC 7807): any failure not listed', content: { [PROBLEM_MEDIA]: ProblemSchema } };

/**
 * A route's method and path with parameters blanked: `/event-types/{name}` and `/event-types/:name`
 * both give `GET /event-types/{}`; an engine path's `*` is blanked too.
 */
export function routeKey(method: string, path: string): string {
  const blanked = path.replace(/\{[A-Za-z_]+\}/g, '{}').replace(/:[A-Za-z_]+/g, '{}').replace(/\*/g, '{}');
  return `${method.toUpperCase()} ${blanked}`;
}

/**
 * The engine's form of a route's path: `{name}` becomes `:name`, and the last parameter of a
 * {@link RouteSpec.restOfPath} route becomes `*`. The server registers it and labels the route's
 * metrics with it (`broker_http_request_duration_seconds{route="/event-types/:name/events"}`).
 */
export function enginePath(spec: Pick<RouteSpec, 'path' | 'restOfPath'>): string {
  const path = spec.restOfPath === true ? spec.path.replace(/\{[A-Za-z_]+\}$/, '*') : spec.path;
  return path.replace(/\{([A-Za-z_]+)\}/g, ':$1');
}

/** The values of a request part its route declares with `S`, as the pipeline checked them; without a schema, the part as sent. */
export type InputOf<S> = S extends TObject ? Static<S> : Readonly<Record<string, unknown>>;

/**
 * What a route's handler sees: the request context, with the path parameters, query and headers typed
 * by the route's own schemas. The pipeline checked them against those schemas before the handler runs
 * (src/http/request-inputs.ts), so the values have the declared types. Path parameters that are plain
 * strings, and the rest-of-path parameter, are not checked: they are the strings the engine gave (a
 * rest-of-path parameter is absent there; its handler reads `path`).
 */
export interface RouteContext<P, Q, H> extends Omit<RequestContext, 'input'> {
  readonly input: { readonly params: InputOf<P>; readonly query: InputOf<Q>; readonly headers: InputOf<H> };
}

/** How the pipeline runs a route, beside what it declares. */
export interface RouteRunning {
  /**
   * Which body limit applies: `events` — publishing and deleted events, `http.maxBodyBytes` as sent and
   * `http.maxInflatedBodyBytes` inflated — or `control` (the default) — `http.maxControlBodyBytes` both
   * as sent and inflated, or the `events` limit when that is smaller.
   */
  readonly bodyLimit?: 'events' | 'control';
  /**
   * The handler's work grows with the request's size (body parse, list validation, Redis lookups per
   * item): it runs, body reading included, holding a slot of the node's control-plane limiter, and
   * answers 503 OVERLOADED when its queue is full (docs/operations.md).
   */
  readonly limited?: boolean;
  /**
   * Publishing: the request holds its body's bytes of the node's publish admission from before its body
   * is read until it is answered, and is refused with 503 PUBLISH_OVERLOADED when they would pass
   * `http.publishMaxInFlightBytes`, or PUBLISH_QUEUE_DELAYED while the worker threads' queue delay is beyond
   * `http.publishMaxQueueDelayMs` (src/http/publish-admission.ts; docs/publishing.md "Refusals and deadlines").
   */
  readonly admitted?: boolean;
}

/** A route's handler: answers, or throws a BrokerError (mapped to a problem) or anything else (500). `deps` are its area's services. */
export type RouteHandler<D, P, Q, H> = (ctx: RouteContext<P, Q, H>, deps: D) => Promise<HttpAnswer | StreamingAnswer>;

/** A route as written in its area: declaration, running options and a handler typed by the route's own schemas. */
export interface RouteDeclaration<D, P extends TObject | undefined, Q extends TObject | undefined, H extends TObject | undefined>
  extends Omit<RouteSpec, 'params' | 'query' | 'headers'>,
    RouteRunning {
  readonly params?: P;
  readonly query?: Q;
  readonly headers?: H;
  readonly handler: RouteHandler<D, P, Q, H>;
}

/** One route of the node, declared once: what the document shows, what the pipeline checks and runs, and its handler. */
export interface Route<D> extends RouteSpec, RouteRunning {
  /** Runs the handler on a request the pipeline has checked against this route's schemas. */
  readonly handle: (ctx: RequestContext, deps: D) => Promise<HttpAnswer | StreamingAnswer>;
}

/**
 * The route writer of an API area whose handlers take `D` (its services): `routesOf<Deps>()` gives a
 * function that turns one {@link RouteDeclaration} into a {@link Route}, typing the handler's
 * `ctx.input` by the route's `params`, `query` and `headers` schemas (test/unit/openapi.test.ts checks
 * `params` names every `{…}` of the path).
 */
export function routesOf<D>() {
  return <P extends TObject | undefined = undefined, Q extends TObject | undefined = undefined, H extends TObject | undefined = undefined>(
    declaration: RouteDeclaration<D, P, Q, H>,
  ): Route<D> => {
    const { handler, ...rest } = declaration;
    // The pipeline checked the request's parts against `params`, `query` and `headers` (request-inputs.ts):
    // its checked values are the ones these schemas type.
    return { ...rest, handle: (ctx, deps) => handler(ctx as RouteContext<P, Q, H>, deps) };
  };
}
