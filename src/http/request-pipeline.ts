/**
 * The one pipeline every request runs through (docs/architecture.md §3.1): flow id
 * (echoed or generated, docs/http-api.md "Headers") → 503 while draining → 413 declared oversize →
 * 415 body media type → authentication → control-plane limiter slot → path, query and headers checked
 * against the route's schemas (src/http/request-inputs.ts) → handler → answer (gzip for large
 * bodies), stream (src/http/stream-writer.ts) or RFC 7807 problem → metrics, access-log entry and log
 * line. 2xx are logged at debug, 4xx at info, 5xx at error with the trace id in the problem's detail.
 */
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type HyperExpress from 'hyper-express';
import type { Logger } from '../observability/logger.js';
import type { RequestRecorder } from '../observability/meters.js';
import { brokerError } from '../errors/catalog.js';
import { toProblem } from '../errors/problem.js';
import type { Authenticator } from '../auth/authenticator.js';
import { UNAUTHENTICATED } from '../auth/subject.js';
import type { AccessLogEntry } from '../services/kpi.js';
import type { ConcurrencyLimiter } from './concurrency-limiter.js';
import { bodyMediaTypeProblem } from './body-media-type.js';
import { parseJson, readBody, refuseDeclaredOversize, type BodyLimit } from './body-reader.js';
import { sendStream } from './stream-writer.js';
import { endWithoutBody } from './engine-workarounds.js';
import type { Handler, HttpAnswer, Method, RequestContext } from './handler.js';
import { checkRequestInputs, type RouteInputs } from './request-inputs.js';

const gzip = promisify(zlib.gzip);

/** Methods whose requests change state: their bodies must be declared as JSON, so a web page cannot send them cross-site without a CORS preflight (docs/security.md "Cross-site requests"). */
const STATE_CHANGING: ReadonlySet<Method> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** Request headers a browser may send cross-origin to a listed origin (preflight answer). */
const CORS_ALLOW_HEADERS = 'Authorization, Content-Type, Content-Encoding, X-Flow-Id, X-Broker-StreamId, X-Broker-Cursors, Last-Event-ID, span-ctx';
/** Answer headers a listed origin's scripts may read. */
const CORS_EXPOSE_HEADERS = 'X-Flow-Id, X-Broker-StreamId, Location, Warning, Retry-After, span_ctx';

const PROBLEM_JSON = 'application/problem+json';
/** Bodies above this are gzip-compressed for clients that accept it. */
const GZIP_THRESHOLD_BYTES = 1024;

/** What the pipeline needs to know about a registered route. */
export interface RouteSettings {
  readonly method: Method;
  readonly handler: Handler;
  /** Served without authentication: the handler sees the subject `unauthenticated`. */
  readonly isPublic: boolean;
  /** The route's body limit (src/http/body-reader.ts `routeBodyLimits`). */
  readonly limit: BodyLimit;
  /** Runs holding a slot of the control-plane limiter. */
  readonly limited: boolean;
  /** Records the request's latency and status; none without metrics. */
  readonly record?: RequestRecorder;
  /** The schemas of its path parameters, query and headers, checked before the handler runs (src/http/request-inputs.ts). */
  readonly inputs: RouteInputs;
}

/** The pipeline's collaborators. */
export interface RequestPipelineOptions {
  /** Turns each request's `Authorization` header into its subject (401 problems come from it). */
  readonly authenticator: Authenticator;
  readonly logger: Logger;
  /** The node's control-plane limiter, held by routes declared `limited` (src/http/concurrency-limiter.ts). */
  readonly controlLimiter: ConcurrencyLimiter;
  /** Origins (`scheme://host[:port]`) answered with CORS headers; empty = none ever. */
  readonly corsAllowedOrigins: readonly string[];
}

/** Runs requests through the pipeline; the engine calls it for every routed request, preflight and unrouted one. */
export class RequestPipeline {
  private readonly authenticator: Authenticator;
  private readonly logger: Logger;
  private readonly controlLimiter: ConcurrencyLimiter;
  private readonly corsOrigins: ReadonlySet<string>;
  /** Aborted on shutdown: new requests get 503 and open streams end so the drain does not wait for them. */
  private readonly stopping = new AbortController();
  private answeredListener: ((entry: AccessLogEntry) => void) | undefined;

  constructor(options: RequestPipelineOptions) {
    this.authenticator = options.authenticator;
    this.logger = options.logger;
    this.controlLimiter = options.controlLimiter;
    this.corsOrigins = new Set(options.corsAllowedOrigins);
    // Every open stream listens to the shutdown signal (and stops listening when it ends): no limit, or
    // Node warns of a leak from the 11th stream on.
    setMaxListeners(0, this.stopping.signal);
  }

  /** Tells `listener` of every answered request, streams when they end (the KPI `broker.access.log`). */
  onAnswered(listener: (entry: AccessLogEntry) => void): void {
    this.answeredListener = listener;
  }

  /** Stops accepting requests (new ones get 503 SHUTTING_DOWN) and ends open streams. */
  stop(): void {
    this.stopping.abort();
  }

  /** Runs one request of a registered route to its answer, stream or problem; never rejects. */
  async handle(route: RouteSettings, req: HyperExpress.Request, res: HyperExpress.Response): Promise<void> {
    const { method, handler, isPublic, limit, limited, record } = route;
    const started = process.hrtime.bigint();
    /** When a streamed answer started: its latency ends there, not when the stream does. */
    let streamStarted: bigint | undefined;
    const flowId = flowIdOf(req.headers);
    let child: Logger | undefined;
    const log = (): Logger => (child ??= this.logger.child({ flow_id: flowId }));
    let status = 500;
    let subjectId = UNAUTHENTICATED.id;
    let release: (() => void) | undefined;
    const cors = this.corsHeaders(req.headers.origin);
    try {
      if (this.stopping.signal.aborted) throw brokerError('SHUTTING_DOWN');
      refuseDeclaredOversize(req, limit);
      if (STATE_CHANGING.has(method)) {
        const problem = bodyMediaTypeProblem(req.headers);
        if (problem !== undefined) throw brokerError('UNSUPPORTED_MEDIA_TYPE', { reason: problem });
      }
      const subject = isPublic ? UNAUTHENTICATED : await this.authenticator.authenticate(req.headers.authorization);
      subjectId = subject.id;
      if (limited) {
        // A client that leaves while waiting gives up its place; one that leaves mid-body leaves the body
        // read pending for good (hyper-express never settles it), so its slot is freed when it leaves.
        // hyper-express emits 'close' on an aborted response only once its Writable exists; adding a
        // listener (a Writable method) creates it, as for streamed answers (sendStream).
        const left = new AbortController();
        res.once('close', () => left.abort());
        const held = await this.controlLimiter.acquire(left.signal);
        release = held;
        if (left.signal.aborted) held();
        else left.signal.addEventListener('abort', held, { once: true });
      }
      const params: Record<string, string> = {};
      for (const [key, value] of Object.entries(req.path_parameters)) params[key] = safeDecode(value);
      const query = new URLSearchParams(req.path_query);
      const input = checkRequestInputs(route.inputs, params, query, req.headers);
      let bodyPromise: Promise<Buffer> | undefined;
      const ctx: RequestContext = {
        method,
        path: req.path,
        params,
        query,
        input,
        headers: req.headers,
        flowId,
        subject,
        get log() {
          return log();
        },
        body: () => (bodyPromise ??= readBody(req, limit)),
        json: async () => parseJson(await ctx.body()),
      };
      const answer = await handler(ctx);
      status = answer.status;
      if ('stream' in answer) {
        streamStarted = process.hrtime.bigint();
        await sendStream(res, answer, { flowId, log, acceptEncoding: req.headers['accept-encoding'], cors, stopping: this.stopping.signal });
      } else await sendAnswer(req, res, flowId, answer, cors);
    } catch (err) {
      status = this.sendProblem(res, flowId, err, cors);
    } finally {
      release?.();
      const ended = process.hrtime.bigint();
      record?.(status, Number((streamStarted ?? ended) - started) / 1e9);
      const ms = Number(ended - started) / 1e6;
      this.answeredListener?.({
        method,
        path: req.path,
        query: req.path_query ?? '',
        app: subjectId,
        userAgent: req.headers['user-agent'] ?? '',
        status,
        ms,
        acceptEncoding: req.headers['accept-encoding'] ?? '',
        contentEncoding: req.headers['content-encoding'] ?? '',
        requestLength: Number(req.headers['content-length'] ?? 0) || 0,
      });
      const line = { method, path: req.path, status, ms: Math.round(ms * 100) / 100 };
      if (status >= 500) log().error(line, 'request failed');
      else if (status >= 400) log().info(line, 'request rejected');
      else if (this.logger.isLevelEnabled('debug')) log().debug(line, 'request');
    }
  }

  /**
   * Answers a CORS preflight (`OPTIONS`, registered only when `http.corsAllowedOrigins` is not empty):
   * 204 with the allowed methods and headers for a listed origin, 403 problem for any other.
   */
  preflight(req: HyperExpress.Request, res: HyperExpress.Response): void {
    const flowId = flowIdOf(req.headers);
    const cors = this.corsHeaders(req.headers.origin);
    if (cors === undefined) {
      this.sendProblem(res, flowId, brokerError('ORIGIN_NOT_ALLOWED', { origin: JSON.stringify(req.headers.origin ?? '') }));
      return;
    }
    res.status(204);
    res.header('X-Flow-Id', flowId);
    for (const [key, value] of Object.entries(cors)) res.header(key, value);
    res.header('Access-Control-Allow-Methods', 'GET, POST, PUT, PATCH, DELETE');
    res.header('Access-Control-Allow-Headers', CORS_ALLOW_HEADERS);
    res.header('Access-Control-Max-Age', '600');
    endWithoutBody(res);
  }

  /**
   * Answers a request no route took: 405 METHOD_NOT_ALLOWED naming `allowed` when routes serve its path
   * with other methods, else 404 ROUTE_NOT_FOUND.
   */
  refuseUnrouted(req: HyperExpress.Request, res: HyperExpress.Response, allowed: readonly Method[]): void {
    const flowId = flowIdOf(req.headers);
    if (allowed.length > 0) {
      this.sendProblem(res, flowId, brokerError('METHOD_NOT_ALLOWED', { method: req.method, path: req.path, allowed: allowed.join(', ') }));
    } else {
      this.sendProblem(res, flowId, brokerError('ROUTE_NOT_FOUND', { method: req.method, path: req.path }));
    }
  }

  /** Answers an error the engine caught outside the pipeline with its problem (500 with a trace id when unexpected). */
  refuseWithError(req: HyperExpress.Request, res: HyperExpress.Response, err: unknown): void {
    this.sendProblem(res, flowIdOf(req.headers), err);
  }

  /**
   * The CORS answer headers for a request from `origin` (docs/security.md "Cross-site requests"): only
   * for an origin listed in `http.corsAllowedOrigins`, so with the default (none listed) no answer ever
   * carries CORS headers.
   */
  private corsHeaders(origin: string | undefined): Readonly<Record<string, string>> | undefined {
    if (origin === undefined || !this.corsOrigins.has(origin)) return undefined;
    return { 'Access-Control-Allow-Origin': origin, 'Access-Control-Expose-Headers': CORS_EXPOSE_HEADERS, Vary: 'Origin' };
  }

  /** Sends the problem for an error (with the request's CORS headers, if any). @returns the status sent */
  private sendProblem(res: HyperExpress.Response, flowId: string, err: unknown, cors?: Readonly<Record<string, string>>): number {
    const answer = toProblem(err);
    if (answer.traceId) this.logger.error({ flow_id: flowId, trace_id: answer.traceId, err }, 'unexpected error');
    if (res.completed) return answer.status;
    res.status(answer.status);
    res.header('X-Flow-Id', flowId);
    res.header('Content-Type', PROBLEM_JSON);
    for (const [key, value] of Object.entries({ ...cors, ...answer.headers })) res.header(key, value);
    res.send(JSON.stringify(answer.problem));
    return answer.status;
  }
}

/** Sends a plain answer: objects as JSON, bodies above {@link GZIP_THRESHOLD_BYTES} gzipped when accepted. */
async function sendAnswer(req: HyperExpress.Request, res: HyperExpress.Response, flowId: string, answer: HttpAnswer, cors?: Readonly<Record<string, string>>): Promise<void> {
  if (res.completed) return;
  let body: Buffer | string | undefined;
  let contentType = answer.contentType;
  if (answer.body === undefined) body = undefined;
  else if (typeof answer.body === 'string' || Buffer.isBuffer(answer.body)) body = answer.body;
  else {
    body = JSON.stringify(answer.body);
    contentType ??= 'application/json';
  }
  res.status(answer.status);
  res.header('X-Flow-Id', flowId);
  for (const [key, value] of Object.entries({ ...cors, ...answer.headers })) res.header(key, value);
  if (body === undefined) {
    if (answer.status === 204) endWithoutBody(res);
    else res.send();
    return;
  }
  if (contentType) res.header('Content-Type', contentType);
  const size = typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength;
  if (size > GZIP_THRESHOLD_BYTES && /\bgzip\b/.test(req.headers['accept-encoding'] ?? '')) {
    const compressed = await gzip(body);
    res.header('Content-Encoding', 'gzip');
    res.header('Vary', 'Accept-Encoding');
    res.send(compressed);
    return;
  }
  res.send(body);
}

/** The request's flow id: its `X-Flow-Id` when given and at most 256 characters, else a new UUID. */
function flowIdOf(headers: Record<string, string>): string {
  const given = headers['x-flow-id'];
  return given && given.length <= 256 ? given : randomUUID();
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    throw brokerError('BAD_PATH_PARAMETER', { value });
  }
}
