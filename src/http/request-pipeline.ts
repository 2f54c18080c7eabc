/**
 * The one pipeline every request runs through (docs/architecture.md §3.1): flow id
 * (echoed or generated, docs/http-api.md "Headers") → 503 while draining → 413 declared oversize →
 * 415 body media type → authentication → publish admission (503 beyond `http.publishMaxInFlightBytes`
 * or `http.publishMaxQueueDelayMs`, before the body is read) → control-plane limiter slot → path, query and headers checked
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
import type { PublishRefusalMeter, RequestRecorder } from '../observability/meters.js';
import { brokerError, BrokerError } from '../errors/catalog.js';
import { toProblem } from '../errors/problem.js';
import type { Authenticator } from '../auth/authenticator.js';
import { UNAUTHENTICATED } from '../auth/subject.js';
import type { AccessLogEntry } from '../services/kpi.js';
import type { ConcurrencyLimiter } from './concurrency-limiter.js';
import { admissionRefusal, type Admitted, type PublishAdmission } from './publish-admission.js';
import { bodyMediaTypeProblem } from './body-media-type.js';
import { parseJson, readBody, refuseDeclaredOversize, type BodyLimit } from './body-reader.js';
import { sendStream } from './stream-writer.js';
import { answerBeforeBody, endWithoutBody } from './engine-workarounds.js';
import type { Handler, HttpAnswer, Method, RequestContext } from './handler.js';
import { checkRequestInputs, type RouteInputs } from './request-inputs.js';

const gzip = promisify(zlib.gzip);

/** Methods whose requests change state: their bodies must be declared as JSON, so a web page cannot send them cross-site without a CORS preflight (docs/security.md "Cross-site requests"). */
const STATE_CHANGING: ReadonlySet<Method> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** Request headers a browser may send cross-origin to a listed origin (preflight answer). */
const CORS_ALLOW_HEADERS = 'Authorization, Content-Type, Content-Encoding, X-Flow-Id, X-Broker-StreamId, X-Broker-Cursors, Last-Event-ID, span-ctx, X-Timeout';
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
  /** Holds its body's bytes of the node's publish admission until answered (publishing). */
  readonly admitted: boolean;
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
  /** The node's bound on publish bodies in flight, held by routes declared `admitted` (src/http/publish-admission.ts). */
  readonly publishAdmission: PublishAdmission;
  /** Counts the publishes it refuses (`broker_publish_refused_total`); none without metrics. */
  readonly refusals?: PublishRefusalMeter;
  /** Origins (`scheme://host[:port]`) answered with CORS headers; empty = none ever. */
  readonly corsAllowedOrigins: readonly string[];
}

/** Runs requests through the pipeline; the engine calls it for every routed request, preflight and unrouted one. */
export class RequestPipeline {
  private readonly authenticator: Authenticator;
  private readonly logger: Logger;
  private readonly controlLimiter: ConcurrencyLimiter;
  private readonly publishAdmission: PublishAdmission;
  private readonly refusals: PublishRefusalMeter | undefined;
  private readonly corsOrigins: ReadonlySet<string>;
  /** Aborted on shutdown: new requests get 503 and open streams end so the drain does not wait for them. */
  private readonly stopping = new AbortController();
  private answeredListener: ((entry: AccessLogEntry) => void) | undefined;

  constructor(options: RequestPipelineOptions) {
    this.authenticator = options.authenticator;
    this.logger = options.logger;
    this.controlLimiter = options.controlLimiter;
    this.publishAdmission = options.publishAdmission;
    this.refusals = options.refusals;
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
    const { method, handler, isPublic, limit, limited, admitted, record } = route;
    const started = process.hrtime.bigint();
    /** When a streamed answer started: its latency ends there, not when the stream does. */
    let streamStarted: bigint | undefined;
    const flowId = flowIdOf(req.headers);
    let child: Logger | undefined;
    const log = (): Logger => (child ??= this.logger.child({ flow_id: flowId }));
    let status = 500;
    let subjectId = UNAUTHENTICATED.id;
    let release: (() => void) | undefined;
    let admission: Admitted | undefined;
    /** Settles when the work the answer left behind is done (RequestContext.holdUntil); the admission is held until then. */
    let heldUntil: Promise<unknown> | undefined;
    /**
     * Refused by the publish admission bound, or for memory (507 `STORAGE_FULL`): expected under load,
     * counted in the metrics, logged at debug only (a full Redis logs its transition once: storage/redis/redis-memory.ts).
     */
    let refusedAtBound = false;
    /** The handler answered a 5xx itself (the storage readiness): a state it reports, not a failure. */
    let answered = false;
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
      if (admitted) admission = this.admit(req, res);
      if (limited) release = await this.controlSlot(res);
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
        body: () => (bodyPromise ??= admission === undefined ? readBody(req, limit) : this.readAdmitted(req, limit, admission)),
        json: async () => parseJson(await ctx.body()),
        holdUntil: (work) => {
          heldUntil = heldUntil === undefined ? work : Promise.allSettled([heldUntil, work]);
        },
      };
      const answer = await handler(ctx);
      status = answer.status;
      answered = true;
      if ('stream' in answer) {
        streamStarted = process.hrtime.bigint();
        await sendStream(res, answer, { flowId, log, acceptEncoding: req.headers['accept-encoding'], cors, stopping: this.stopping.signal });
      } else await sendAnswer(req, res, flowId, answer, cors);
    } catch (err) {
      answered = false;
      refusedAtBound = admissionRefusal(err) !== undefined;
      status = refusedAtBound ? this.refuseBeforeBody(req, res, flowId, err, cors) : this.sendProblem(res, flowId, err, cors);
      refusedAtBound ||= err instanceof BrokerError && err.code === 'STORAGE_FULL';
    } finally {
      release?.();
      if (heldUntil === undefined) admission?.release();
      else {
        const held = admission;
        void heldUntil.finally(() => held?.release());
      }
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
      this.logAnswer({ method, path: req.path, status, ms: Math.round(ms * 100) / 100 }, refusedAtBound, answered, log);
    }
  }

  /**
   * Waits for a slot of the control-plane limiter. @returns its release. A client that leaves while
   * waiting gives up its place; one that leaves mid-body leaves the body read pending for good
   * (hyper-express never settles it), so its slot is freed when it leaves. hyper-express emits 'close' on
   * an aborted response only once its Writable exists; adding a listener (a Writable method) creates it,
   * as for streamed answers (sendStream).
   */
  private async controlSlot(res: HyperExpress.Response): Promise<() => void> {
    const left = new AbortController();
    res.once('close', () => left.abort());
    const held = await this.controlLimiter.acquire(left.signal);
    if (left.signal.aborted) held();
    else left.signal.addEventListener('abort', held, { once: true });
    return held;
  }

  /**
   * The log line of an answer. A node at its admission bound may refuse thousands of publishes a second:
   * an error line each would cost the CPU the admitted work needs (broker_publish_refused_total counts them).
   */
  private logAnswer(line: { readonly method: string; readonly path: string; readonly status: number; readonly ms: number }, refusedAtBound: boolean, answered: boolean, log: () => Logger): void {
    const { status } = line;
    if (refusedAtBound) {
      if (this.logger.isLevelEnabled('debug')) log().debug(line, status === 507 ? 'publish refused: storage full' : 'publish refused at the admission bound');
    } else if (status >= 500 && answered) log().info(line, 'request answered with a state');
    else if (status >= 500) log().error(line, 'request failed');
    else if (status >= 400) log().info(line, 'request rejected');
    else if (this.logger.isLevelEnabled('debug')) log().debug(line, 'request');
  }

  /**
   * Admits a publish by its declared `Content-Length` before its body is read (src/http/publish-admission.ts).
   * A client that leaves before its body is in gives the bytes back at once: hyper-express never settles
   * that body's read, so the request would otherwise hold them for good. One that leaves later holds them
   * until its batch is answered, since its work goes on.
   * @throws BrokerError PUBLISH_OVERLOADED (503, `Retry-After: 1`; counted by reason `bytes_in_flight`),
   *   PUBLISH_QUEUE_DELAYED (503, `Retry-After: 1`; counted by reason `queue_delay`)
   */
  private admit(req: HyperExpress.Request, res: HyperExpress.Response): Admitted {
    let admission: Admitted;
    try {
      admission = this.publishAdmission.admit(Number(req.headers['content-length'] ?? 0) || 0);
    } catch (err) {
      this.refusals?.publishRefused(admissionRefusal(err) ?? 'bytes_in_flight');
      throw err;
    }
    // hyper-express emits 'close' on an aborted response only once its Writable exists; adding the
    // listener creates it (as for the control-plane limiter above).
    res.once('close', () => {
      if (!req.received) admission.release();
    });
    return admission;
  }

  /**
   * Reads an admitted publish's body and raises its hold to the body's size as received and inflated.
   * @throws what {@link readBody} throws; PUBLISH_OVERLOADED (counted) when that size passes the bound
   */
  private async readAdmitted(req: HyperExpress.Request, limit: BodyLimit, admission: Admitted): Promise<Buffer> {
    const body = await readBody(req, limit);
    try {
      admission.grow(body.byteLength);
    } catch (err) {
      this.refusals?.publishRefused('bytes_in_flight');
      throw err;
    }
    return body;
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

  /**
   * Sends a refusal decided on the headers at once, without waiting for the body (the rest of it is skipped,
   * the connection kept: src/http/engine-workarounds.ts `answerBeforeBody`). @returns the status sent
   */
  private refuseBeforeBody(req: HyperExpress.Request, res: HyperExpress.Response, flowId: string, err: unknown, cors?: Readonly<Record<string, string>>): number {
    if (req.received) return this.sendProblem(res, flowId, err, cors);
    const answer = toProblem(err);
    answerBeforeBody(req, res, answer.status, { 'X-Flow-Id': flowId, 'Content-Type': PROBLEM_JSON, ...cors, ...answer.headers }, JSON.stringify(answer.problem));
    return answer.status;
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
