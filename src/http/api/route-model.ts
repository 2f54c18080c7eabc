/**
 * The shape of one entry of the route table (issue 16 §1, §2): what a route takes and answers, as
 * TypeBox schemas. `route-table.ts` lists every route the node serves; `openapi.ts` turns the table
 * into the OpenAPI document; the test support validates answers against it.
 */
import { Type, type TObject, type TSchema } from '@sinclair/typebox';
import type { Method } from '../server.js';
import { BatchItemResponsesSchema, ProblemSchema } from './wire-schemas.js';

/** `application/json`. */
export const JSON_MEDIA = 'application/json';
/** RFC 7807 problems. */
export const PROBLEM_MEDIA = 'application/problem+json';
/** One JSON batch per line (spec "Subscriptions", WIRE.md "Streaming"). */
export const JSON_STREAM_MEDIA = 'application/x-json-stream';
/** Server-sent events (README "Server-sent events"). */
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

/** One route of the node, as the OpenAPI document and the test support see it. */
export interface RouteSpec {
  readonly method: Method;
  /**
   * The path in OpenAPI form (`/event-types/{name}`). It must name the same route as the path the
   * server registers (`/event-types/:name`): equal once parameters are blanked. A registration's `*` is a parameter
   * here, which takes the rest of the path when {@link RouteSpec.restOfPath} is set.
   */
  readonly path: string;
  /** The last path parameter stands for the rest of the path, slashes included (a `*` registration). */
  readonly restOfPath?: boolean;
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  /** The section of the API reference (OpenAPI tag). */
  readonly tag: string;
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

/** The `X-Flow-Id` answer header every route sends (WIRE.md "Conventions"). */
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
  501: 'not implemented',
  503: 'the node cannot serve it now (read-only mode, overload, storage unavailable, shutting down); `Retry-After`',
};

/** Problem answers for the given statuses. */
export function problems(...statuses: number[]): Record<string, ResponseSpec> {
  const out: Record<string, ResponseSpec> = {};
  for (const status of statuses) out[String(status)] = { description: PROBLEM_MEANING[status] ?? 'problem', content: { [PROBLEM_MEDIA]: ProblemSchema } };
  return out;
}

/**
 * A 422 or 207 answer of a batch: BatchItemResponse per event (WIRE.md "Publishing"); with
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
 * both give `GET /event-types/{}`; a registration's `*` is blanked too.
 */
export function routeKey(method: string, path: string): string {
  const blanked = path.replace(/\{[A-Za-z_]+\}/g, '{}').replace(/:[A-Za-z_]+/g, '{}').replace(/\*/g, '{}');
  return `${method.toUpperCase()} ${blanked}`;
}
