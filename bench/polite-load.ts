/**
 * A load generator that follows the protocol (docs/load-testing.md "A load generator that follows the
 * protocol"): each of `connections` keep-alive connections posts the scenario's bodies one after another,
 * and after a `503` or `429` waits what `Retry-After` asks, plus a random share of up to half of it (as
 * `broker publish` does), before it sends again; where the answers carry the `RateLimit-Policy` and
 * `RateLimit` headers (docs/publishing.md "Rate-limit headers"), it waits until they say the next body
 * fits. autocannon sends again at once, refused body and all, which no server can make cheap.
 * Latencies are exact (each request's send to its answer's end), as in bench/load-generator.ts.
 *
 * With `openingSeconds`, the connections open together and run that long before the measured
 * `durationSeconds` on the same connections: every connection's first body leaves in the same
 * millisecond, a herd that a steady population of producers does not send (docs/load-testing.md "A load
 * generator that follows the protocol"). What the opening measured is returned apart ({@link PoliteLoad}).
 */
import http from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { pacingDelayMs } from '../src/client/rate-limit-pacing.js';
import type { LoadOptions, LoadResult, MeasuredLoad } from './load-generator.js';

/** {@link runPoliteLoad}'s options: the load's, and an opening before the measured seconds. */
export interface PoliteLoadOptions extends LoadOptions {
  /** Seconds the connections run before `durationSeconds` are measured (default 0: measured from the first request). */
  readonly openingSeconds?: number;
  /** Called once the opening is over and the measured seconds begin (at once without an opening). */
  readonly onMeasuring?: () => void;
}

/** What the opening of a {@link runPoliteLoad} run measured: requests sent before the measured seconds, by their send time. */
export interface LoadOpening {
  readonly seconds: number;
  /** Events of the publishes accepted (2xx). */
  readonly events: number;
  /** Refusals (`503`, `429`): count and latencies (ms, send to the answer's end). */
  readonly refusals: { readonly count: number; readonly p50: number; readonly p99: number };
}

/** A {@link runPoliteLoad} run: the measured seconds ({@link MeasuredLoad}) and the opening before them. */
export interface PoliteLoad extends MeasuredLoad {
  readonly opening: LoadOpening;
}

/** Longest wait a `Retry-After` may ask for here, ms. */
const MAX_RETRY_AFTER_MS = 30_000;

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

/** The wait a `Retry-After` (delay-seconds) asks for, jittered upward by up to half of it; 1 s when absent. */
function retryAfterMs(header: string | undefined, random: () => number): number {
  const seconds = header !== undefined && /^\d+$/.test(header.trim()) ? Number(header.trim()) : 1;
  const asked = Math.min(MAX_RETRY_AFTER_MS, seconds * 1000);
  return asked + (asked / 2) * random();
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** One request: status, the answer's headers, ms from send to the answer's end. */
function send(agent: http.Agent, url: URL, path: string, body: Buffer, headers: Readonly<Record<string, string>>): Promise<{ status: number; headers: http.IncomingHttpHeaders; ms: number; text: string }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      { agent, host: url.hostname, port: url.port, path, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': String(body.byteLength), ...headers } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, ms: performance.now() - started, text: Buffer.concat(chunks).toString('utf8', 0, 200) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Runs the polite load against `options.url` for `options.openingSeconds` (default 0) and then
 * `options.durationSeconds`: `options.connections` loops, each cycling through `options.requests`
 * (starting at its own index). Counts 2xx answers (events, bytes, latencies) and refusals (`503`, `429`:
 * count and latencies) as {@link LoadResult} does, those of requests sent in the opening apart; the event-loop
 * delay and CPU figures cover the measured seconds.
 * @param random a number in [0, 1) for the jitter (`Math.random` by default)
 */
export async function runPoliteLoad(options: PoliteLoadOptions, random: () => number = Math.random): Promise<PoliteLoad> {
  const url = new URL(options.url);
  const agent = new http.Agent({ keepAlive: true, maxSockets: options.connections, maxFreeSockets: options.connections });
  const latencies: number[] = [];
  const refusals: number[] = [];
  const statuses: Record<string, number> = {};
  let events = 0;
  let openingEvents = 0;
  const openingRefusals: number[] = [];
  let bodyBytes = 0;
  let eventBytes = 0;
  let errors = 0;
  let firstFailure: string | undefined;
  const delay = monitorEventLoopDelay({ resolution: 10 });
  let cpu = process.cpuUsage();
  let started = performance.now();
  const measuredFrom = started + (options.openingSeconds ?? 0) * 1000;
  const endAt = measuredFrom + options.durationSeconds * 1000;
  const measuring = (): void => {
    delay.enable();
    cpu = process.cpuUsage();
    started = performance.now();
    options.onMeasuring?.();
  };
  const opening = measuredFrom > started ? setTimeout(measuring, measuredFrom - started) : undefined;
  if (opening === undefined) measuring();
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(ms, endAt - performance.now()))));
  try {
    await Promise.all(
      Array.from({ length: options.connections }, async (_, loop) => {
        let limits: { policy: string; current: string | undefined; at: number } | undefined;
        for (let i = loop; performance.now() < endAt; i++) {
          const request = options.requests[i % options.requests.length];
          if (request === undefined) return;
          if (limits !== undefined) {
            const waitMs = pacingDelayMs(limits.policy, limits.current, { events: request.events, contentBytes: request.body.byteLength }, performance.now() - limits.at);
            if (waitMs > 0) {
              await sleep(waitMs);
              if (performance.now() >= endAt) return;
            }
          }
          let answer: Awaited<ReturnType<typeof send>>;
          const inOpening = performance.now() < measuredFrom;
          try {
            answer = await send(agent, url, request.path, request.body, { ...options.headers, ...request.headers });
          } catch (err) {
            errors++;
            firstFailure ??= err instanceof Error ? err.message : String(err);
            await sleep(100);
            continue;
          }
          // Answers that end after the run count no more (autocannon stops there too).
          if (performance.now() > endAt) return;
          if (!inOpening) statuses[String(answer.status)] = (statuses[String(answer.status)] ?? 0) + 1;
          const policy = headerText(answer.headers['ratelimit-policy']);
          limits = policy === undefined ? undefined : { policy, current: headerText(answer.headers.ratelimit), at: performance.now() };
          if (inOpening) {
            if (answer.status >= 200 && answer.status < 300) openingEvents += request.events;
            else if (answer.status === 503 || answer.status === 429) openingRefusals.push(answer.ms);
          } else if (answer.status >= 200 && answer.status < 300) {
            latencies.push(answer.ms);
            events += request.events;
            bodyBytes += request.body.byteLength;
            eventBytes += request.eventBytes;
          } else if (answer.status === 503 || answer.status === 429) refusals.push(answer.ms);
          if (answer.status === 503 || answer.status === 429) await sleep(retryAfterMs(headerText(answer.headers['retry-after']), random));
          else if (answer.status < 200 || answer.status >= 300) firstFailure ??= `${answer.status} ${answer.text}`;
        }
      }),
    );
  } finally {
    clearTimeout(opening);
    agent.destroy();
    delay.disable();
  }
  const seconds = options.durationSeconds;
  const used = process.cpuUsage(cpu);
  latencies.sort((a, b) => a - b);
  refusals.sort((a, b) => a - b);
  const okRequests = latencies.length;
  const answered = Object.values(statuses).reduce((sum, n) => sum + n, 0);
  const result: LoadResult = {
    durationSeconds: seconds,
    okRequests,
    events,
    bodyBytes,
    eventBytes,
    non2xx: answered - okRequests,
    errors,
    statuses,
    firstFailure,
    latencyMs: {
      p50: percentile(latencies, 50),
      p97_5: percentile(latencies, 97.5),
      p99: percentile(latencies, 99),
      mean: okRequests === 0 ? Number.NaN : latencies.reduce((sum, v) => sum + v, 0) / okRequests,
      max: latencies[latencies.length - 1] ?? Number.NaN,
    },
    refusals: { count: refusals.length, p50: percentile(refusals, 50), p99: percentile(refusals, 99) },
    requestsPerSecond: okRequests / seconds,
    eventsPerSecond: events / seconds,
    bodyMBps: bodyBytes / 1e6 / seconds,
    eventMBps: eventBytes / 1e6 / seconds,
  };
  openingRefusals.sort((a, b) => a - b);
  return {
    result,
    loopP99: delay.percentile(99) / 1e6,
    cpuPercent: ((used.user + used.system) / 1000 / (performance.now() - started)) * 100,
    opening: { seconds: options.openingSeconds ?? 0, events: openingEvents, refusals: { count: openingRefusals.length, p50: percentile(openingRefusals, 50), p99: percentile(openingRefusals, 99) } },
  };
}
