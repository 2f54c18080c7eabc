/**
 * What a route handler sees and answers (docs/architecture.md §3.1): the request context the pipeline
 * builds (src/http/request-pipeline.ts) and the two kinds of answer, plain or streamed
 * (src/domain/stream/stream-sink.ts). Types only; routes import them through src/http/server.ts.
 */
import type { Logger } from '../observability/logger.js';
import type { Subject } from '../auth/subject.js';
import type { StreamingAnswer } from '../domain/stream/stream-sink.js';
import type { CheckedInputs } from './request-inputs.js';

/** The HTTP methods routes are registered for. */
export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** What a handler answers; `body` objects are sent as JSON. */
export interface HttpAnswer {
  readonly status: number;
  readonly body?: string | Buffer | object;
  readonly contentType?: string;
  readonly headers?: Readonly<Record<string, string>>;
}

/** Per-request context handed to handlers. */
export interface RequestContext {
  readonly method: Method;
  readonly path: string;
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
  /**
   * The path parameters, query and declared headers after the check against the route's schemas, values
   * coerced to their declared types; a route's handler sees them typed by its schemas (`RouteContext`,
   * src/http/api/route-model.ts).
   */
  readonly input: CheckedInputs;
  readonly headers: Readonly<Record<string, string>>;
  readonly flowId: string;
  /** Who asks: authenticated before the handler runs (routes declared `access: 'public'` get `unauthenticated`). */
  readonly subject: Subject;
  readonly log: Logger;
  /** The body bytes, inflated when sent with `Content-Encoding: gzip` or `zstd`, within the size limits. @throws BrokerError 400/413/415 */
  body(): Promise<Buffer>;
  /**
   * The body parsed as JSON: strict UTF-8, at most `MAX_JSON_DEPTH` levels, no `__proto__` or
   * `constructor.prototype` key (src/domain/json/json-limits.ts). @throws BrokerError 400 when it is not that
   */
  json(): Promise<unknown>;
  /**
   * Keeps what the request holds of the node's publish admission (routes declared `admitted`) until
   * `work` settles, even after the answer went out: work the answer no longer waits for (a batch still
   * in a worker when its deadline passed) stays counted in `http.publishMaxInFlightBytes`. Nothing on
   * other routes.
   */
  holdUntil(work: Promise<unknown>): void;
}

/** A route handler: answers, or throws a BrokerError (mapped to a problem) or anything else (500). */
export type Handler = (ctx: RequestContext) => Promise<HttpAnswer | StreamingAnswer>;
