import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import HyperExpress from 'hyper-express';
import type { Logger } from '../observability/logger.js';
import { brokerError, BrokerError } from '../errors/catalog.js';
import { toProblem } from '../errors/problem.js';
import type { Authenticator } from '../auth/authenticator.js';
import { UNAUTHENTICATED, type Subject } from '../auth/subject.js';
import { parseUntrustedJson } from '../domain/json-limits.js';
import { ConcurrencyLimiter } from './concurrency-limiter.js';
import { bodyMediaTypeProblem } from './body-media-type.js';
import type { HttpMeter, RequestRecorder } from '../observability/meters.js';
import type { AccessLogEntry } from '../services/kpi.js';
import { createStreamCompressor, inflateZstdBody, negotiateStreamCoding, type StreamCompressor } from './compression.js';
import { PortInUseError } from './port-check.js';
import type { StreamingAnswer, StreamSink } from '../domain/stream-sink.js';

export type { StreamingAnswer, StreamSink } from '../domain/stream-sink.js';

/** uWS `ListenOptions.LIBUS_LISTEN_EXCLUSIVE_PORT`: bind without SO_REUSEPORT. */
const LIBUS_LISTEN_EXCLUSIVE_PORT = 1;
/** uWS's native `listen` with host, port and options (its typings list only the other forms); the patched form takes no options. */
type ListenCallback = (listenSocket: unknown) => void;
type ListenWithOptions = (host: string, port: number, options: number, cb: ListenCallback) => unknown;
type ListenOnHost = (host: string, port: number, cb: ListenCallback) => unknown;

const gunzip = promisify(zlib.gunzip);
const gzip = promisify(zlib.gzip);

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
  readonly headers: Readonly<Record<string, string>>;
  readonly flowId: string;
  /** Who asks: authenticated before the handler runs (routes registered `public` get `unauthenticated`). */
  readonly subject: Subject;
  readonly log: Logger;
  /** The body bytes, inflated when sent with `Content-Encoding: gzip` or `zstd`, within the size limits. @throws BrokerError 400/413/415 */
  body(): Promise<Buffer>;
  /**
   * The body parsed as JSON: strict UTF-8, at most `MAX_JSON_DEPTH` levels, no `__proto__` or
   * `constructor.prototype` key (src/domain/json-limits.ts). @throws BrokerError 400 when it is not that
   */
  json(): Promise<unknown>;
}

/** A route handler: answers, or throws a BrokerError (mapped to a problem) or anything else (500). */
export type Handler = (ctx: RequestContext) => Promise<HttpAnswer | StreamingAnswer>;

/** Body limits in bytes, the control-plane limiter and CORS (config `http.*`; issue 13 §2, §4). */
export interface HttpServerOptions {
  /** Largest body of `events` routes as sent. */
  readonly maxBodyBytes: number;
  /** Largest body of `events` routes after gunzip. */
  readonly maxInflatedBodyBytes: number;
  /** Largest body of every other route, as sent and after gunzip (capped by the two above). */
  readonly maxControlBodyBytes: number;
  /** Holders of the control-plane limiter ({@link RouteOptions.limited}). */
  readonly controlConcurrency: number;
  /** Waiters of the control-plane limiter; one more is refused with 503 OVERLOADED. */
  readonly controlQueueLength: number;
  /** Origins (`scheme://host[:port]`) answered with CORS headers; empty = none ever. */
  readonly corsAllowedOrigins: readonly string[];
}

/** Per-route options. */
export interface RouteOptions {
  /** Served without authentication (only `/health`): the handler sees the subject `unauthenticated`. */
  readonly public?: boolean;
  /**
   * Which body limit applies: `events` — publishing and deleted events, `http.maxBodyBytes` as sent and
   * `http.maxInflatedBodyBytes` inflated — or `control` (the default) — `http.maxControlBodyBytes` both
   * as sent and inflated, or the `events` limit when that is smaller.
   */
  readonly body?: 'events' | 'control';
  /**
   * The handler's work grows with the request's size (body parse, list validation, Redis lookups per
   * item): it runs, body reading included, holding a slot of the node's control-plane limiter
   * ({@link HttpServer.controlLimiter}), and answers 503 OVERLOADED when its queue is full.
   */
  readonly limited?: boolean;
}

/** A body limit in bytes as sent and inflated, with the config keys that set them (named in 413 details). */
interface BodyLimit {
  readonly sent: number;
  readonly sentKey: string;
  readonly inflated: number;
  readonly inflatedKey: string;
}

/** What the pipeline needs to know about a registered route. */
interface RouteSettings {
  readonly isPublic: boolean;
  readonly limit: BodyLimit;
  readonly limited: boolean;
  readonly record?: RequestRecorder;
}

/** Methods whose requests change state: their bodies must be declared as JSON (issue 13 §4). */
const STATE_CHANGING: ReadonlySet<Method> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
/** Request headers a browser may send cross-origin to a listed origin (preflight answer). */
const CORS_ALLOW_HEADERS = 'Authorization, Content-Type, Content-Encoding, X-Flow-Id, X-Broker-StreamId, X-Broker-Cursors, Last-Event-ID, span-ctx';
/** Answer headers a listed origin's scripts may read. */
const CORS_EXPOSE_HEADERS = 'X-Flow-Id, X-Broker-StreamId, Location, Warning, Retry-After, span_ctx';

const PROBLEM_JSON = 'application/problem+json';
/** Bodies above this are gzip-compressed for clients that accept it. */
const GZIP_THRESHOLD_BYTES = 1024;

/**
 * The broker's HTTP server on hyper-express (DESIGN.md §1): every route runs through one pipeline —
 * flow id (echoed or generated, WIRE.md "Conventions") → handler → answer or RFC 7807 problem → log
 * line. 2xx are logged at debug, 4xx at info, 5xx at error with the trace id in the problem's detail.
 */
export class HttpServer {
  private readonly app: HyperExpress.Server;
  private readonly routes: { pattern: RegExp; method: Method; path: string }[] = [];
  private accepting = true;
  /** The node's limiter of control-plane work that grows with request size (issue 13 §2.3); also for handlers that limit only part of their work. */
  readonly controlLimiter: ConcurrencyLimiter;
  private readonly corsOrigins: ReadonlySet<string>;
  private readonly eventsLimit: BodyLimit;
  private readonly controlLimit: BodyLimit;
  /** Aborted on shutdown: open streams end so the drain does not wait for them. */
  private readonly stopping = new AbortController();

  /**
   * @param options body limits
   * @param authenticator turns each request's `Authorization` header into its subject (401 problems come from it)
   */
  constructor(
    private readonly options: HttpServerOptions,
    private readonly authenticator: Authenticator,
    private readonly logger: Logger,
    /** Request latency by route pattern and status (`broker_http_request_duration_seconds`); none when absent. */
    private readonly metrics?: HttpMeter,
  ) {
    // hyper-express refuses a body above its max_body_length with a bare 413 before any route runs; the
    // limit is enforced in the pipeline instead (refuseDeclaredOversize, receiveBody), so the answer is a
    // problem with X-Flow-Id.
    this.app = new HyperExpress.Server({ max_body_length: Number.MAX_SAFE_INTEGER, max_body_buffer: 64 * 1024 });
    this.controlLimiter = new ConcurrencyLimiter(options.controlConcurrency, options.controlQueueLength);
    // Every open stream listens to the shutdown signal (and stops listening when it ends): no limit, or
    // Node warns of a leak from the 11th stream on.
    setMaxListeners(0, this.stopping.signal);
    this.corsOrigins = new Set(options.corsAllowedOrigins);
    this.eventsLimit = { sent: options.maxBodyBytes, sentKey: 'http.maxBodyBytes', inflated: options.maxInflatedBodyBytes, inflatedKey: 'http.maxInflatedBodyBytes' };
    const control = options.maxControlBodyBytes;
    this.controlLimit = {
      sent: Math.min(control, options.maxBodyBytes),
      sentKey: control <= options.maxBodyBytes ? 'http.maxControlBodyBytes' : 'http.maxBodyBytes',
      inflated: Math.min(control, options.maxInflatedBodyBytes),
      inflatedKey: control <= options.maxInflatedBodyBytes ? 'http.maxControlBodyBytes' : 'http.maxInflatedBodyBytes',
    };
    if (this.corsOrigins.size > 0) this.app.options('/*', (req, res) => this.preflight(req, res));
    this.app.set_not_found_handler((req, res) => {
      const methods = this.routes.filter((r) => r.pattern.test(req.path)).map((r) => r.method);
      const flowId = this.flowIdOf(req.headers);
      if (methods.length > 0) {
        this.sendProblem(res, flowId, brokerError('METHOD_NOT_ALLOWED', { method: req.method, path: req.path, allowed: methods.join(', ') }));
      } else {
        this.sendProblem(res, flowId, brokerError('ROUTE_NOT_FOUND', { method: req.method, path: req.path }));
      }
    });
    this.app.set_error_handler((req, res, err) => {
      this.sendProblem(res, this.flowIdOf(req.headers), err);
    });
  }

  /** Registers a route; `path` uses `:param` segments. Parameters arrive URL-decoded. */
  route(method: Method, path: string, handler: Handler, options: RouteOptions = {}): void {
    this.routes.push({ method, path, pattern: new RegExp('^' + path.replace(/:[a-z_]+/g, '[^/]+') + '/?$') });
    const register = method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
    const settings: RouteSettings = {
      isPublic: options.public === true,
      limit: options.body === 'events' ? this.eventsLimit : this.controlLimit,
      limited: options.limited === true,
      record: this.metrics?.route(method, path),
    };
    this.app[register](path, (req, res) => this.handle(method, req, res, handler, settings));
  }

  /** Every route registered so far, as given to {@link route} (the API document must describe each; issue 16 §2.1). */
  registeredRoutes(): readonly { readonly method: Method; readonly path: string }[] {
    return this.routes.map(({ method, path }) => ({ method, path }));
  }

  private answeredListener: ((entry: AccessLogEntry) => void) | undefined;

  /** Tells `listener` of every answered request, streams when they end (the KPI `broker.access.log`). */
  onAnswered(listener: (entry: AccessLogEntry) => void): void {
    this.answeredListener = listener;
  }

  /**
   * Starts listening on `host:port`, exclusively: uWebSockets.js would otherwise set SO_REUSEPORT and a
   * second node on the same port would share it silently. hyper-express offers `exclusive_port` only
   * without a host, so its listen runs with uWS's `listen(host, port, cb)` turned, for that one call,
   * into `listen(host, port, LIBUS_LISTEN_EXCLUSIVE_PORT, cb)` (which uWS 20.30's native listen accepts);
   * hyper-express keeps its own bookkeeping of the listen socket (port, shutdown).
   * @returns the bound port (useful with port 0)
   * @throws PortInUseError when the port is taken
   */
  async listen(port: number, host: string): Promise<number> {
    const uws = this.app.uws_instance;
    const native: unknown = Reflect.get(uws, 'listen'); // uWS's own, from the prototype
    const exclusive: ListenOnHost = (h, p, cb) => (native as ListenWithOptions).call(uws, h, p, LIBUS_LISTEN_EXCLUSIVE_PORT, cb);
    Object.defineProperty(uws, 'listen', { value: exclusive, configurable: true, writable: true });
    try {
      await this.app.listen(port, host);
    } catch {
      throw new PortInUseError(host, port);
    } finally {
      Reflect.deleteProperty(uws, 'listen'); // the prototype's listen again
    }
    return this.app.port;
  }

  /** Stops accepting requests (new ones get 503) and waits until in-flight requests finish. */
  async shutdown(): Promise<void> {
    this.accepting = false;
    this.stopping.abort();
    await this.app.shutdown();
  }

  private flowIdOf(headers: Record<string, string>): string {
    const given = headers['x-flow-id'];
    return given && given.length <= 256 ? given : randomUUID();
  }

  private async handle(method: Method, req: HyperExpress.Request, res: HyperExpress.Response, handler: Handler, route: RouteSettings): Promise<void> {
    const { isPublic, limit, limited, record } = route;
    const started = process.hrtime.bigint();
    /** When a streamed answer started: its latency ends there, not when the stream does. */
    let streamStarted: bigint | undefined;
    const flowId = this.flowIdOf(req.headers);
    let child: Logger | undefined;
    const log = (): Logger => (child ??= this.logger.child({ flow_id: flowId }));
    let status = 500;
    let subjectId = UNAUTHENTICATED.id;
    let release: (() => void) | undefined;
    const cors = this.corsHeaders(req.headers.origin);
    try {
      if (!this.accepting) throw brokerError('SHUTTING_DOWN');
      this.refuseDeclaredOversize(req, limit);
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
      let bodyPromise: Promise<Buffer> | undefined;
      const ctx: RequestContext = {
        method,
        path: req.path,
        params,
        query: new URLSearchParams(req.path_query),
        headers: req.headers,
        flowId,
        subject,
        get log() {
          return log();
        },
        body: () => (bodyPromise ??= this.readBody(req, limit)),
        json: async () => parseJson(await ctx.body()),
      };
      const answer = await handler(ctx);
      status = answer.status;
      if ('stream' in answer) {
        streamStarted = process.hrtime.bigint();
        await this.sendStream(res, flowId, answer, log, req.headers['accept-encoding'], cors);
      } else await this.sendAnswer(req, res, flowId, answer, cors);
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
   * The body as sent, inflated when `Content-Encoding: gzip` or `zstd` (WIRE.md "Conventions").
   * @param limit the route's limits (`http.maxBodyBytes` / `http.maxInflatedBodyBytes` for publishing,
   *   `http.maxControlBodyBytes` otherwise)
   * @throws BrokerError 413 above the limit as sent or inflated (a gzip or zstd bomb stops inflating at
   *   the limit; a zstd frame declaring a larger size is not inflated at all), 415 for another encoding,
   *   400 for a corrupt gzip or zstd body
   */
  private async readBody(req: HyperExpress.Request, limit: BodyLimit): Promise<Buffer> {
    const raw = await this.receiveBody(req, limit);
    const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
    if (encoding === 'identity' || raw.byteLength === 0) return raw;
    if (encoding === 'zstd') return inflateZstd(raw, limit);
    if (encoding !== 'gzip') throw brokerError('UNSUPPORTED_CONTENT_ENCODING', { encoding });
    try {
      return await gunzip(raw, { maxOutputLength: limit.inflated });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
        throw brokerError('INFLATED_BODY_TOO_LARGE', { coding: 'gzip', limit: limit.inflated, key: limit.inflatedKey });
      }
      throw brokerError('BAD_GZIP', { reason: (err as Error).message });
    }
  }

  /**
   * Refuses a request whose `Content-Length` is above its route's limit (`http.maxBodyBytes` or
   * `http.maxControlBodyBytes`) before anything reads it, on every route. The problem goes out once the client sent its body: hyper-express discards the rest
   * of the body and answers when it is in, so the connection stays usable and the client, still
   * writing, does not lose the answer to a reset. A trickled body cannot hold the answer back for long:
   * uWS drops a connection whose request arrives slower than 16 KB/s (`HTTP_RECEIVE_THROUGHPUT_BYTES`)
   * or that is idle for 10 s (`HTTP_IDLE_TIMEOUT_S`); measured: cut after 10-12 s at 8 KB/s or 1 byte/s.
   * @throws BrokerError 413
   */
  private refuseDeclaredOversize(req: HyperExpress.Request, limit: BodyLimit): void {
    const declared = req.headers['content-length'];
    if (declared !== undefined && Number(declared) > limit.sent) throw tooLarge(`the body is ${declared} bytes long, more`, limit);
  }

  /**
   * Receives the body bytes as sent, at most `limit.sent`. A body with `Content-Length` is
   * already known to fit ({@link refuseDeclaredOversize}) and is received by hyper-express into one
   * buffer of that size; a chunked body is counted as it arrives and refused as soon as it passes the
   * limit, keeping nothing of it.
   * @throws BrokerError 413; 400 when the client leaves before its chunked body is complete
   */
  private receiveBody(req: HyperExpress.Request, bodyLimit: BodyLimit): Promise<Buffer> {
    if (req.headers['transfer-encoding'] !== 'chunked') return req.buffer();
    const limit = bodyLimit.sent;
    return new Promise((resolve, reject) => {
      let chunks: Buffer[] = [];
      let size = 0;
      let refused = false;
      // pipe(), not on('data'): hyper-express's Request starts its lazily made stream flowing only there.
      req.pipe(
        new Writable({
          write: (chunk: Buffer, _encoding, done) => {
            if (!refused) {
              size += chunk.byteLength;
              if (size > limit) {
                refused = true;
                chunks = [];
                reject(tooLarge('the chunked body is longer', bodyLimit));
              } else {
                chunks.push(chunk);
              }
            }
            done();
          },
          final: (done) => {
            // The stream also ends when the client goes away mid-body: a cut-off body is never used.
            if (!req.received) reject(brokerError('INCOMPLETE_BODY'));
            else if (!refused) resolve(Buffer.concat(chunks, size));
            done();
          },
        }),
      );
    });
  }

  /**
   * The CORS answer headers for a request from `origin` (issue 13 §4): only for an origin listed in
   * `http.corsAllowedOrigins`, so with the default (none listed) no answer ever carries CORS headers.
   */
  private corsHeaders(origin: string | undefined): Readonly<Record<string, string>> | undefined {
    if (origin === undefined || !this.corsOrigins.has(origin)) return undefined;
    return { 'Access-Control-Allow-Origin': origin, 'Access-Control-Expose-Headers': CORS_EXPOSE_HEADERS, Vary: 'Origin' };
  }

  /**
   * Answers a CORS preflight (`OPTIONS`, registered only when `http.corsAllowedOrigins` is not empty):
   * 204 with the allowed methods and headers for a listed origin, 403 problem for any other.
   */
  private preflight(req: HyperExpress.Request, res: HyperExpress.Response): void {
    const flowId = this.flowIdOf(req.headers);
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

  private async sendAnswer(req: HyperExpress.Request, res: HyperExpress.Response, flowId: string, answer: HttpAnswer, cors?: Readonly<Record<string, string>>): Promise<void> {
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

  /**
   * Sends a streamed answer. With `Accept-Encoding` naming zstd or gzip ({@link negotiateStreamCoding})
   * the body is compressed: `Content-Encoding` says which, and every sink write goes out as complete
   * compressed blocks (flushed per write, so a client decodes each batch line as it arrives). Streams
   * always carry `Vary: Accept-Encoding`. Backpressure counts the compressed bytes uWS holds plus the
   * lines still in the compressor; the compressor's native memory is released when the stream ends or
   * the client leaves.
   */
  private async sendStream(res: HyperExpress.Response, flowId: string, answer: StreamingAnswer, log: () => Logger, acceptEncoding: string | undefined, cors?: Readonly<Record<string, string>>): Promise<void> {
    const controller = new AbortController();
    const stopOnShutdown = (): void => controller.abort();
    this.stopping.signal.addEventListener('abort', stopOnShutdown);
    let closed = false;
    res.on('close', () => {
      closed = true;
      controller.abort();
    });
    res.status(answer.status);
    res.header('X-Flow-Id', flowId);
    res.header('Content-Type', answer.contentType);
    for (const [key, value] of Object.entries({ ...cors, ...answer.headers })) res.header(key, value);
    const coding = negotiateStreamCoding(acceptEncoding);
    res.header('Vary', 'Accept-Encoding');
    if (coding !== undefined) res.header('Content-Encoding', coding);
    // Writes the status line and these headers now (hyper-express initiates the response), but not the
    // blank line: uWS 20.30 writes that only as the start of the first chunk (`\r\n<size>\r\n<data>` in
    // one call; a zero-length write writes nothing). So the header block cannot leave alone and streams
    // send an opening batch at once, which travels with the blank line (issue 14 §2; README "Known gaps";
    // the bytes of every approach tried: scripts/probe-stream-head.ts).
    res.write('');
    const writer = new BackpressureWriter(res);
    const compressor: StreamCompressor | undefined =
      coding === undefined
        ? undefined
        : createStreamCompressor(coding, (block) => {
            if (!closed) writer.write([block]);
          });
    res.on('close', () => {
      writer.abort();
      compressor?.destroy();
    });
    const buffers = (chunk: string | Buffer | readonly Buffer[]): readonly Buffer[] => (typeof chunk === 'string' ? [Buffer.from(chunk)] : Buffer.isBuffer(chunk) ? [chunk] : chunk);
    const sink: StreamSink = {
      write: (chunk) => {
        if (closed) return false;
        if (compressor === undefined) return writer.write(buffers(chunk));
        compressor.write(buffers(chunk));
        return compressor.pendingBytes === 0 && !writer.behind;
      },
      drained: async () => {
        await compressor?.idle();
        await writer.drained();
      },
      get bufferedBytes() {
        return writer.queuedBytes + (compressor?.pendingBytes ?? 0);
      },
      get closed() {
        return closed;
      },
      signal: controller.signal,
    };
    try {
      if (this.stopping.signal.aborted) controller.abort();
      await answer.stream(sink);
    } catch (err) {
      log().error({ err }, 'stream failed');
    } finally {
      this.stopping.signal.removeEventListener('abort', stopOnShutdown);
      if (compressor !== undefined && !closed) {
        // The end of the zstd frame or the gzip trailer, sent before the response ends.
        try {
          await compressor.end();
          await writer.drained();
        } catch (err) {
          log().error({ err, coding }, 'ending the compressed stream failed');
        }
      }
      compressor?.destroy();
      if (!closed) res.end();
    }
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

/**
 * Streams bytes to uWS with backpressure. Batches go straight to uWS (`res.raw`), not through
 * hyper-express's Writable, which reports "drained" while uWS still holds the bytes.
 *
 * uWS buffers what a write() could not send (it answers false) and, once the socket is writable again,
 * calls the writable handler — and, while such a handler is registered, drains its buffer only when the
 * handler writes. So the writer keeps what it could not hand over in its own queue and always holds
 * back the last byte while uWS is behind: the handler then always has something to write, which flushes
 * uWS's buffer first. (Rare leftover: if the very last byte itself does not fit, it goes out with the
 * stream's next write, a keep-alive at the latest.)
 */
class BackpressureWriter {
  /** Bytes not yet handed to uWS. */
  private queue: Buffer[] = [];
  private isBehind = false;
  private waiting: (() => void) | undefined;
  queuedBytes = 0;

  constructor(private readonly res: HyperExpress.Response) {
    res.drain(() => {
      if (this.isBehind) this.res.atomic(() => this.pump([]));
      if (!this.isBehind) this.wake();
      return true;
    });
  }

  /** True while uWS holds bytes it could not send yet: wait for {@link drained} before writing more. */
  get behind(): boolean {
    return this.isBehind;
  }

  /** @returns false when the client is behind: wait for {@link drained} */
  write(chunks: readonly Buffer[]): boolean {
    if (this.isBehind) {
      for (const c of chunks) {
        this.queue.push(c);
        this.queuedBytes += c.length;
      }
      return false;
    }
    this.res.atomic(() => this.pump(chunks));
    return !this.isBehind;
  }

  /** Resolves once everything written went to uWS and uWS could send it (or the client left). */
  drained(): Promise<void> {
    if (!this.isBehind) return Promise.resolve();
    return new Promise((resolve) => (this.waiting = resolve));
  }

  /** The client left: nothing more goes out; waiters are released. */
  abort(): void {
    this.queue = [];
    this.queuedBytes = 0;
    this.isBehind = false;
    this.wake();
  }

  private wake(): void {
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.();
  }

  /** Hands the queue and `chunks` to uWS until it pushes back, keeping the rest (at least one byte) queued. */
  private pump(chunks: readonly Buffer[]): void {
    const items = [...this.queue, ...chunks];
    this.queue = [];
    this.queuedBytes = 0;
    for (let i = 0; i < items.length; i++) {
      const chunk = items[i] as Buffer;
      const last = i === items.length - 1;
      const body = last && chunk.length > 1 ? chunk.subarray(0, chunk.length - 1) : chunk;
      if (!this.res.raw.write(body)) {
        const rest = last ? (body === chunk ? [] : [chunk.subarray(chunk.length - 1)]) : [...(body === chunk ? [] : [chunk.subarray(body.length)]), ...items.slice(i + 1)];
        this.queue = rest;
        for (const r of rest) this.queuedBytes += r.length;
        this.isBehind = true;
        return;
      }
      if (body !== chunk && !this.res.raw.write(chunk.subarray(body.length))) {
        this.isBehind = true;
        return;
      }
    }
    this.isBehind = false;
  }
}

/**
 * Sends a 204. hyper-express 6.18 passes `endWithoutBody(undefined, undefined)` to uWS, which this uWS
 * build reads as a `Content-Length` of 2^63 and then drops the connection, so clients lose keep-alive
 * (and some see ECONNRESET). uWS called without arguments writes no length. The hook is removed when used.
 */
function endWithoutBody(res: HyperExpress.Response): void {
  const raw = res.raw as unknown as { endWithoutBody: (...args: unknown[]) => unknown };
  const original = raw.endWithoutBody;
  raw.endWithoutBody = function (this: unknown, length?: unknown, close?: unknown) {
    raw.endWithoutBody = original;
    return length === undefined && close === undefined ? original.call(this) : original.call(this, length, close);
  };
  res.send();
}

/**
 * A `Content-Encoding: zstd` body inflated within the route's inflated limit (src/http/compression.ts).
 * @throws BrokerError 413 when it inflates (or declares it inflates) past the limit, 400 (BAD_ZSTD) when it does not decode
 */
function inflateZstd(raw: Buffer, limit: BodyLimit): Buffer {
  const inflated = inflateZstdBody(raw, limit.inflated);
  if (inflated.ok) return inflated.body;
  if (inflated.failure.kind === 'too-large') throw brokerError('INFLATED_BODY_TOO_LARGE', { coding: 'zstd', limit: limit.inflated, key: limit.inflatedKey });
  throw brokerError('BAD_ZSTD', { reason: inflated.failure.reason });
}

function tooLarge(what: string, limit: BodyLimit): BrokerError {
  return brokerError('BODY_TOO_LARGE', { what, limit: limit.sent, key: limit.sentKey });
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    throw brokerError('BAD_PATH_PARAMETER', { value });
  }
}

/**
 * Parses a JSON request body strictly (DESIGN.md §7; WIRE.md "Conventions": malformed JSON is 400):
 * UTF-8 without invalid sequences, nesting at most `MAX_JSON_DEPTH` levels, and no `__proto__` or
 * `constructor.prototype` key anywhere (src/domain/json-limits.ts).
 * @throws BrokerError 400 (BAD_REQUEST) naming what is wrong
 */
export function parseJson(body: Buffer): unknown {
  const parsed = parseUntrustedJson(body, { refusePrototypeKeys: true });
  if (!parsed.ok) throw brokerError('BAD_REQUEST', { reason: parsed.reason });
  return parsed.value;
}
