/**
 * The benchmarks' load generator: autocannon driven with the scenarios' request bodies, counting events
 * and bytes per answered request and keeping exact latencies (bench/harness.ts re-exports it).
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import autocannon from 'autocannon';
import type { Recorder } from './harness.js';

/** 10^6 bytes: MB/s figures are decimal megabytes. */
export const MB = 1_000_000;

/** One request body of a load run, with what it carries. */
export interface LoadRequest {
  readonly path: string;
  readonly body: Buffer;
  /** Events in the body. */
  readonly events: number;
  /** Sum of the events' JSON text sizes (the body minus brackets and commas). */
  readonly eventBytes: number;
  /** Headers of this request alone (e.g. a W3C `traceparent`), besides those of the run. */
  readonly headers?: Readonly<Record<string, string>>;
}

/** Builds a {@link LoadRequest} from events (serialized as one JSON array). */
export function loadRequest(path: string, events: readonly object[]): LoadRequest {
  const texts = events.map((e) => JSON.stringify(e));
  const body = Buffer.from(`[${texts.join(',')}]`);
  return { path, body, events: texts.length, eventBytes: texts.reduce((sum, t) => sum + Buffer.byteLength(t), 0) };
}

export interface LoadOptions {
  readonly url: string;
  readonly requests: readonly LoadRequest[];
  readonly connections: number;
  readonly durationSeconds: number;
  readonly pipelining?: number;
  /** Extra request headers (e.g. `Authorization`). */
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * Gives each request a body of its own, made from the request's body (same size): e.g. fresh eids, so
   * a broker that stores each eid once stores every request. Runs in the load generator, per request.
   */
  readonly rewrite?: (body: Buffer) => Buffer;
}

/** What one load run measured (2xx answers only, unless said otherwise). */
export interface LoadResult {
  readonly durationSeconds: number;
  readonly okRequests: number;
  readonly events: number;
  readonly bodyBytes: number;
  readonly eventBytes: number;
  /** Answers that were not 2xx. */
  readonly non2xx: number;
  /** Connection errors and timeouts. */
  readonly errors: number;
  /** Count per status code. */
  readonly statuses: Readonly<Record<string, number>>;
  /** Status and start of the body of the first non-2xx answer. */
  readonly firstFailure: string | undefined;
  /** Exact latency percentiles (ms) of the 2xx answers; autocannon's own histogram has 1 ms resolution. */
  readonly latencyMs: { readonly p50: number; readonly p97_5: number; readonly p99: number; readonly mean: number; readonly max: number };
  /** The 503 answers (refusals of an overloaded node): how many, and their latency percentiles (ms). */
  readonly refusals: { readonly count: number; readonly p50: number; readonly p99: number };
  readonly requestsPerSecond: number;
  readonly eventsPerSecond: number;
  /** Request body MB/s. */
  readonly bodyMBps: number;
  /** Event JSON MB/s. */
  readonly eventMBps: number;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? Number.NaN;
}

/** autocannon 8's private per-client requests, each with the bytes it writes (head and body). */
interface ClientInternals {
  requestIterator?: { requests?: { requestBuffer?: Buffer }[] };
}

/**
 * A `setupClient` hook that gives every connection the same request bytes: autocannon deep-copies its
 * options, bodies included, for each connection it opens, and builds each request's bytes again for
 * each, all before the first connection opens, while the clock of each connection's first request is
 * already running. With 527 KB bodies and 1,024 connections that was about 4 GB copied and ~10 s before
 * the load began, counted in the first requests' latencies. The requests are handed to autocannon
 * without a body (and with their `Content-Length`); this hook appends each body to the head autocannon
 * built, once, and shares the result between connections.
 * @throws Error when the autocannon in use keeps its requests elsewhere (the load would go without bodies)
 */
function shareRequestBuffers(bodies: readonly LoadRequest[]): (client: autocannon.Client) => void {
  const buffers: (Buffer | undefined)[] = [];
  return (client) => {
    const built = (client as unknown as ClientInternals).requestIterator?.requests;
    if (built?.length !== bodies.length) throw new Error('autocannon keeps its requests elsewhere than requestIterator.requests: update bench/load-generator.ts');
    built.forEach((request, i) => {
      const head = request.requestBuffer;
      const body = bodies[i]?.body;
      if (head === undefined || body === undefined) throw new Error('autocannon built no request bytes: update bench/load-generator.ts');
      request.requestBuffer = buffers[i] ??= Buffer.concat([head, body]);
    });
  };
}

/**
 * Runs autocannon against `url` with the requests rotated per connection (each connection cycles
 * through the list). Counts events and bytes of every 2xx answer through the per-request
 * `onResponse` hook, and keeps every response time for exact percentiles.
 */
export function runLoad(options: LoadOptions): Promise<LoadResult> {
  let okRequests = 0;
  let events = 0;
  let bodyBytes = 0;
  let eventBytes = 0;
  let firstFailure: string | undefined;
  const latencies: number[] = [];
  const refusalLatencies: number[] = [];
  const shared = options.rewrite === undefined;
  const requests: autocannon.Request[] = options.requests.map((request) => ({
    method: 'POST',
    path: request.path,
    headers: { 'content-type': 'application/json', ...options.headers, ...request.headers, ...(shared ? { 'content-length': String(request.body.byteLength) } : {}) },
    ...(shared ? {} : { body: request.body, setupRequest: (req: autocannon.Request) => ({ ...req, body: (options.rewrite as (body: Buffer) => Buffer)(request.body) }) }),
    onResponse: (status: number, body: string) => {
      if (status >= 200 && status < 300) {
        okRequests++;
        events += request.events;
        bodyBytes += request.body.byteLength;
        eventBytes += request.eventBytes;
      } else {
        firstFailure ??= `${status} ${String(body).slice(0, 1000)}`;
      }
    },
  }));
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      {
        url: options.url,
        connections: options.connections,
        duration: options.durationSeconds,
        pipelining: options.pipelining ?? 1,
        requests,
        timeout: 60,
        ...(shared ? { setupClient: shareRequestBuffers(options.requests) } : {}),
      },
      (err, result) => {
        if (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
          return;
        }
        const sorted = Float64Array.from(latencies).sort();
        const refused = Float64Array.from(refusalLatencies).sort();
        const seconds = result.duration;
        const statuses: Record<string, number> = {};
        for (const [code, stat] of Object.entries(result.statusCodeStats ?? {})) statuses[code] = stat.count ?? 0;
        resolve({
          durationSeconds: seconds,
          okRequests,
          events,
          bodyBytes,
          eventBytes,
          non2xx: result.non2xx,
          errors: result.errors,
          statuses,
          firstFailure,
          latencyMs: {
            p50: percentile(sorted, 50),
            p97_5: percentile(sorted, 97.5),
            p99: percentile(sorted, 99),
            mean: sorted.length === 0 ? Number.NaN : latencies.reduce((a, b) => a + b, 0) / sorted.length,
            max: sorted.length === 0 ? Number.NaN : (sorted[sorted.length - 1] ?? Number.NaN),
          },
          refusals: { count: refused.length, p50: percentile(refused, 50), p99: percentile(refused, 99) },
          requestsPerSecond: okRequests / seconds,
          eventsPerSecond: events / seconds,
          bodyMBps: bodyBytes / MB / seconds,
          eventMBps: eventBytes / MB / seconds,
        });
      },
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      if (statusCode >= 200 && statusCode < 300) latencies.push(responseTime);
      else if (statusCode === 503) refusalLatencies.push(responseTime);
    });
  });
}

/** A load's result with what the load generator's own process did meanwhile. */
export interface MeasuredLoad {
  readonly result: LoadResult;
  /** p99 of this process's event-loop delay during the load (ms): autocannon's latencies include it. */
  readonly loopP99: number;
  /** This process's CPU during the load, in % of one core. */
  readonly cpuPercent: number;
}

/** {@link runLoad}, measuring this process's event-loop delay and CPU meanwhile (docs/load-testing.md "What the load generator leaves"). @throws what {@link runLoad} throws */
export async function runMeasuredLoad(options: LoadOptions): Promise<MeasuredLoad> {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const started = performance.now();
  const cpu = process.cpuUsage();
  try {
    const result = await runLoad(options);
    const used = process.cpuUsage(cpu);
    return { result, loopP99: delay.percentile(99) / 1e6, cpuPercent: ((used.user + used.system) / 1000 / (performance.now() - started)) * 100 };
  } finally {
    delay.disable();
  }
}

/** Reports non-2xx answers and connection errors of a load run loudly. @returns whether there were any */
export function reportFailures(recorder: Recorder, label: string, result: LoadResult): boolean {
  if (result.non2xx === 0 && result.errors === 0) return false;
  recorder.alarm(`${label}: ${result.non2xx} non-2xx answers, ${result.errors} connection errors/timeouts; statuses ${JSON.stringify(result.statuses)}`);
  if (result.firstFailure !== undefined) recorder.alarm(`${label}: first failure: ${result.firstFailure}`);
  return true;
}

