/**
 * The broker's HTTP server (DESIGN.md §1): the entry that assembles the HTTP layer — the engine with
 * its workarounds (engine-workarounds.ts), the request pipeline (request-pipeline.ts), body reading
 * (body-reader.ts) and the stream writer (stream-writer.ts) — and registers routes. Routes import the
 * handler types from here.
 */
import type HyperExpress from 'hyper-express';
import type { Logger } from '../observability/logger.js';
import type { Authenticator } from '../auth/authenticator.js';
import type { HttpMeter } from '../observability/meters.js';
import type { AccessLogEntry } from '../services/kpi.js';
import { ConcurrencyLimiter } from './concurrency-limiter.js';
import { routeBodyLimits, type BodyLimit, type BodyLimitOptions } from './body-reader.js';
import { createEngine, listenExclusive } from './engine-workarounds.js';
import { RequestPipeline, type RouteSettings } from './request-pipeline.js';
import type { Handler, Method } from './handler.js';
import { routeInputs } from './request-inputs.js';

export type { Handler, HttpAnswer, Method, RequestContext } from './handler.js';

/** Body limits in bytes, the control-plane limiter and CORS (config `http.*`; issue 13 §2, §4). */
export interface HttpServerOptions extends BodyLimitOptions {
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

/**
 * The broker's HTTP server on hyper-express (DESIGN.md §1): every route runs through one pipeline
 * ({@link RequestPipeline}); requests no route takes are answered 404 or 405 with a problem.
 */
export class HttpServer {
  private readonly app: HyperExpress.Server = createEngine();
  private readonly routes: { pattern: RegExp; method: Method; path: string }[] = [];
  /** The node's limiter of control-plane work that grows with request size (issue 13 §2.3); also for handlers that limit only part of their work. */
  readonly controlLimiter: ConcurrencyLimiter;
  private readonly pipeline: RequestPipeline;
  private readonly limits: { readonly events: BodyLimit; readonly control: BodyLimit };

  /**
   * @param options body limits, control-plane limiter and CORS
   * @param authenticator turns each request's `Authorization` header into its subject (401 problems come from it)
   * @param metrics request latency by route pattern and status (`broker_http_request_duration_seconds`); none when absent
   */
  constructor(
    options: HttpServerOptions,
    authenticator: Authenticator,
    logger: Logger,
    private readonly metrics?: HttpMeter,
  ) {
    this.controlLimiter = new ConcurrencyLimiter(options.controlConcurrency, options.controlQueueLength);
    this.pipeline = new RequestPipeline({ authenticator, logger, controlLimiter: this.controlLimiter, corsAllowedOrigins: options.corsAllowedOrigins });
    this.limits = routeBodyLimits(options);
    if (options.corsAllowedOrigins.length > 0) this.app.options('/*', (req, res) => this.pipeline.preflight(req, res));
    this.app.set_not_found_handler((req, res) => {
      const allowed = this.routes.filter((r) => r.pattern.test(req.path)).map((r) => r.method);
      this.pipeline.refuseUnrouted(req, res, allowed);
    });
    this.app.set_error_handler((req, res, err) => this.pipeline.refuseWithError(req, res, err));
  }

  /**
   * Registers a route; `path` uses `:param` segments. Parameters arrive URL-decoded and checked, with the
   * query and declared headers, against the route table's schemas for it (src/http/api/route-table.ts).
   */
  route(method: Method, path: string, handler: Handler, options: RouteOptions = {}): void {
    this.routes.push({ method, path, pattern: new RegExp('^' + path.replace(/:[a-z_]+/g, '[^/]+') + '/?$') });
    const register = method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
    const settings: RouteSettings = {
      method,
      handler,
      isPublic: options.public === true,
      limit: options.body === 'events' ? this.limits.events : this.limits.control,
      limited: options.limited === true,
      record: this.metrics?.route(method, path),
      inputs: routeInputs(method, path),
    };
    this.app[register](path, (req, res) => this.pipeline.handle(settings, req, res));
  }

  /** Every route registered so far, as given to {@link route} (the API document must describe each; issue 16 §2.1). */
  registeredRoutes(): readonly { readonly method: Method; readonly path: string }[] {
    return this.routes.map(({ method, path }) => ({ method, path }));
  }

  /** Tells `listener` of every answered request, streams when they end (the KPI `broker.access.log`). */
  onAnswered(listener: (entry: AccessLogEntry) => void): void {
    this.pipeline.onAnswered(listener);
  }

  /**
   * Starts listening on `host:port`, exclusively (no SO_REUSEPORT: {@link listenExclusive}).
   * @returns the bound port (useful with port 0)
   * @throws PortInUseError when the port is taken
   */
  listen(port: number, host: string): Promise<number> {
    return listenExclusive(this.app, port, host);
  }

  /** Stops accepting requests (new ones get 503), ends open streams and waits until in-flight requests finish. */
  async shutdown(): Promise<void> {
    this.pipeline.stop();
    await this.app.shutdown();
  }
}
