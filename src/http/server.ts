/**
 * The broker's HTTP server (docs/architecture.md §3.1): the entry that assembles the HTTP
 * layer — the engine with its workarounds (engine-workarounds.ts), the request pipeline
 * (request-pipeline.ts), body reading (body-reader.ts) and the stream writer (stream-writer.ts) — and
 * registers route declarations (src/http/api/route-model.ts). Routes import the handler types from here.
 */
import type HyperExpress from 'hyper-express';
import type { Logger } from '../observability/logger.js';
import type { Authenticator } from '../auth/authenticator.js';
import type { HttpMeter } from '../observability/meters.js';
import type { AccessLogEntry } from '../services/kpi.js';
import { ConcurrencyLimiter } from './concurrency-limiter.js';
import { PublishAdmission, type QueueDelayBound } from './publish-admission.js';
import { routeBodyLimits, type BodyLimit, type BodyLimitOptions } from './body-reader.js';
import { createEngine, listenExclusive } from './engine-workarounds.js';
import { RequestPipeline, type RouteSettings } from './request-pipeline.js';
import type { Method } from './handler.js';
import { routeInputs } from './request-inputs.js';
import { enginePath, type Route } from './api/route-model.js';

export type { Handler, HttpAnswer, Method, RequestContext } from './handler.js';

/** Body limits in bytes, the control-plane limiter and CORS (config `http.*`; docs/operations.md). */
export interface HttpServerOptions extends BodyLimitOptions {
  /** Holders of the control-plane limiter (routes declared `limited`). */
  readonly controlConcurrency: number;
  /** Waiters of the control-plane limiter; one more is refused with 503 OVERLOADED. */
  readonly controlQueueLength: number;
  /** Bytes of publish bodies admitted at once; one more is refused with 503 PUBLISH_OVERLOADED (src/http/publish-admission.ts). */
  readonly publishMaxInFlightBytes: number;
  /** The bound on the worker threads' queue delay beyond which a publish is refused with 503 PUBLISH_QUEUE_DELAYED; none when absent. */
  readonly publishQueueDelay?: QueueDelayBound;
  /** Origins (`scheme://host[:port]`) answered with CORS headers; empty = none ever. */
  readonly corsAllowedOrigins: readonly string[];
}

/**
 * The broker's HTTP server on hyper-express: every route runs through one pipeline
 * ({@link RequestPipeline}); requests no route takes are answered 404 or 405 with a problem.
 */
export class HttpServer {
  private readonly app: HyperExpress.Server = createEngine();
  private readonly routes: { pattern: RegExp; method: Method; path: string }[] = [];
  /** The node's limiter of control-plane work that grows with request size (docs/operations.md); also for handlers that limit only part of their work. */
  readonly controlLimiter: ConcurrencyLimiter;
  /** The node's bound on publish bodies in flight (docs/publishing.md "Refusals and deadlines"), held by routes declared `admitted`. */
  readonly publishAdmission: PublishAdmission;
  private readonly pipeline: RequestPipeline;
  private readonly limits: { readonly events: BodyLimit; readonly control: BodyLimit };

  /**
   * @param options body limits, control-plane limiter and CORS
   * @param authenticator turns each request's `Authorization` header into its subject (401 problems come from it)
   * @param metrics request latency by route pattern and status (`broker_http_request_duration_seconds`) and
   *   publishes refused by the admission bound (`broker_publish_refused_total`); none when absent
   */
  constructor(
    options: HttpServerOptions,
    authenticator: Authenticator,
    logger: Logger,
    private readonly metrics?: HttpMeter,
  ) {
    this.controlLimiter = new ConcurrencyLimiter(options.controlConcurrency, options.controlQueueLength);
    this.publishAdmission = new PublishAdmission(options.publishMaxInFlightBytes, options.publishQueueDelay);
    this.pipeline = new RequestPipeline({ authenticator, logger, controlLimiter: this.controlLimiter, publishAdmission: this.publishAdmission, refusals: metrics, corsAllowedOrigins: options.corsAllowedOrigins });
    this.limits = routeBodyLimits(options);
    if (options.corsAllowedOrigins.length > 0) this.app.options('/*', (req, res) => this.pipeline.preflight(req, res));
    this.app.set_not_found_handler((req, res) => {
      const allowed = this.routes.filter((r) => r.pattern.test(req.path)).map((r) => r.method);
      this.pipeline.refuseUnrouted(req, res, allowed);
    });
    this.app.set_error_handler((req, res, err) => this.pipeline.refuseWithError(req, res, err));
  }

  /**
   * Registers routes in their order, each at its {@link enginePath}, its handler given `deps`. Path
   * parameters arrive URL-decoded and checked, with the query and declared headers, against the
   * route's schemas; `access: 'public'` routes run without authentication (the handler sees the subject
   * `unauthenticated`). @throws Error when a route's schema does not compile
   */
  register<D>(routes: readonly Route<D>[], deps: D): void {
    for (const route of routes) {
      const { method } = route;
      const path = enginePath(route);
      this.routes.push({ method, path, pattern: new RegExp('^' + path.replace(/:[a-z_]+/g, '[^/]+') + '/?$') });
      const register = method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
      const settings: RouteSettings = {
        method,
        handler: (ctx) => route.handle(ctx, deps),
        isPublic: route.access === 'public',
        limit: route.bodyLimit === 'events' ? this.limits.events : this.limits.control,
        limited: route.limited === true,
        admitted: route.admitted === true,
        record: this.metrics?.route(method, path),
        inputs: routeInputs(route),
      };
      this.app[register](path, (req, res) => this.pipeline.handle(settings, req, res));
    }
  }

  /** Every route registered so far, by its engine path (the API document must describe each: docs/http-api.md). */
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
