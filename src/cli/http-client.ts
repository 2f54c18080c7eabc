/**
 * The `broker` command line's HTTP client: plain requests on keep-alive sockets and
 * `application/x-json-stream` answers read by the shared stream client (src/client/stream-client.ts),
 * over `node:http`/`node:https`. Every request
 * carries the bearer token when one is set; control-plane bodies go out as `application/json` (the
 * broker refuses other types with 415).
 */
import http from 'node:http';
import https from 'node:https';
import { StreamRefusedError, openStream as openBatchStream, type StreamBatch } from '../client/stream-client.js';
import { CliError, EXIT, answerError } from './exit-codes.js';

export type { StreamCursor } from '../client/stream-client.js';

/** One batch line of a stream (docs/consuming.md "Subscription streams"). */
export type StreamLine = StreamBatch;

/** A whole answer. */
export interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  /** The body as UTF-8 text ('' when empty). */
  readonly text: string;
}

/** What a request sends besides method and path. */
export interface RequestOptions {
  /** Raw body; a string is sent as UTF-8. */
  readonly body?: Buffer | string;
  /** Extra headers; `content-type` is `application/json` on every method but GET and HEAD. */
  readonly headers?: Record<string, string>;
  /** `commits`: the commit sockets (the broker closes a connection after a 204, which must not hit other requests). */
  readonly use?: 'commits' | 'other';
  /** Milliseconds without an answer before this request fails (default: the client's `timeoutMs`). */
  readonly timeoutMs?: number;
}

/** An open stream answer. */
export interface OpenStream {
  /** `X-Broker-StreamId` (subscription streams). */
  readonly streamId: string | undefined;
  /** Lines as they arrive, parsed; reading pauses while the consumer of this iterable does (backpressure). Ends when the broker ends the answer or `close()` was called; leaving it early closes the stream. @throws CliError (exit 4) on a broken line or a dropped connection */
  readonly lines: AsyncIterable<StreamLine>;
  /** Disconnects, as a consumer that goes away; `lines` then ends. */
  close(): void;
}

/** Connection settings of a client. */
export interface ClientOptions {
  /** Base URL of a broker node (or a balancer), e.g. `http://localhost:8080`; a path in it prefixes every request. */
  readonly url: string;
  /** Bearer token sent as `Authorization: Bearer <token>` (none: no header, for auth mode `off`). */
  readonly token?: string | undefined;
  /** How long a plain request may take before it fails, in milliseconds. */
  readonly timeoutMs?: number;
}

/** The broker closed a reused keep-alive connection before answering (Node's documented retry case). */
class ClosedConnection extends Error {}

/** A client of one broker URL. */
export class BrokerClient {
  private readonly base: URL;
  private readonly transport: typeof http | typeof https;
  private readonly agent: http.Agent;
  private readonly commitAgent: http.Agent;
  private readonly timeoutMs: number;

  /** @throws CliError (exit 2) for a URL that is not http(s) */
  constructor(private readonly options: ClientOptions) {
    let base: URL;
    try {
      base = new URL(options.url);
    } catch {
      throw new CliError(`--url: "${options.url}" is not a URL`, EXIT.usage);
    }
    if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new CliError(`--url: "${options.url}" is not an http(s) URL`, EXIT.usage);
    this.base = base;
    this.transport = base.protocol === 'https:' ? https : http;
    const Agent = base.protocol === 'https:' ? https.Agent : http.Agent;
    this.agent = new Agent({ keepAlive: true, maxSockets: 8 });
    this.commitAgent = new Agent({ keepAlive: true, maxSockets: 2 });
    this.timeoutMs = options.timeoutMs ?? 120_000;
  }

  /** The full URL of a path such as `/event-types?x=1`. */
  urlOf(path: string): string {
    return `${this.base.origin}${this.base.pathname.replace(/\/+$/, '')}${path}`;
  }

  /**
   * Sends one request and reads the whole answer, whatever its status. A request that hit a kept-alive
   * connection the broker had closed is sent once more on a fresh connection.
   * @throws CliError (exit 4) when the broker cannot be reached or does not answer within the timeout
   */
  async request(method: string, path: string, options: RequestOptions = {}): Promise<Answer> {
    const agent = options.use === 'commits' ? this.commitAgent : this.agent;
    try {
      try {
        return await this.once(agent, method, path, options);
      } catch (err) {
        if (!(err instanceof ClosedConnection)) throw err;
        return await this.once(false, method, path, options);
      }
    } catch (err) {
      throw this.unreachable(method, path, err);
    }
  }

  /**
   * A control-plane call: sends `body` as JSON (when given) and answers the parsed JSON body
   * (undefined for an empty one).
   * @param expected statuses counted as success (default: any 2xx)
   * @throws CliError exit 3 for a 4xx answer, exit 4 for 5xx or an unreachable broker, with `title: detail`
   */
  async json(method: string, path: string, body?: unknown, expected?: readonly number[]): Promise<{ status: number; body: unknown; warnings: string[] }> {
    const answer = await this.request(method, path, body === undefined ? {} : { body: JSON.stringify(body) });
    const ok = expected ? expected.includes(answer.status) : answer.status >= 200 && answer.status < 300;
    if (!ok) throw answerError(answer.status, answer.text);
    const warnings = warningTexts(answer.headers.warning);
    if (answer.text === '') return { status: answer.status, body: undefined, warnings };
    try {
      return { status: answer.status, body: JSON.parse(answer.text) as unknown, warnings };
    } catch {
      throw new CliError(`${method} ${path}: the broker answered ${answer.status} with a body that is not JSON: ${answer.text.slice(0, 200)}`, EXIT.serverError);
    }
  }

  /**
   * Opens a stream (`application/x-json-stream`) on its own connection.
   * @throws CliError exit 3/4 when the broker answers anything but 200 (the problem's `title: detail`), exit 4 when unreachable
   */
  async openStream(method: 'GET' | 'POST', path: string, options: { headers?: Record<string, string>; body?: string } = {}): Promise<OpenStream> {
    let stream;
    try {
      stream = await openBatchStream(this.urlOf(path), { method, headers: this.headersOf(method, { 'accept-encoding': 'identity', ...(options.headers ?? {}) }), ...(options.body === undefined ? {} : { body: options.body }) });
    } catch (err) {
      if (err instanceof StreamRefusedError) throw answerError(err.status, err.text);
      throw this.unreachable(method, path, err);
    }
    return { streamId: stream.streamId, lines: cliErrors(stream), close: () => stream.close() };
  }

  /** Frees the kept-alive sockets so the process can exit. */
  close(): void {
    this.agent.destroy();
    this.commitAgent.destroy();
  }

  /** Request headers: the token, `Content-Type: application/json` on every request that may carry a body, then `extra`. */
  private headersOf(method: string, extra: Record<string, string>): Record<string, string> {
    const headers: Record<string, string> = {};
    if (this.options.token !== undefined && this.options.token !== '') headers.authorization = `Bearer ${this.options.token}`;
    if (method !== 'GET' && method !== 'HEAD') headers['content-type'] = 'application/json';
    for (const [name, value] of Object.entries(extra)) headers[name.toLowerCase()] = value;
    return headers;
  }

  private once(agent: http.Agent | false, method: string, path: string, options: RequestOptions): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const req = this.transport.request(this.urlOf(path), { method, agent, headers: this.headersOf(method, options.headers ?? {}) }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      });
      const timeoutMs = options.timeoutMs ?? this.timeoutMs;
      req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)));
      req.on('error', (err: NodeJS.ErrnoException) => reject(req.reusedSocket && err.code === 'ECONNRESET' ? new ClosedConnection(err.message) : err));
      req.end(options.body);
    });
  }

  private unreachable(method: string, path: string, err: unknown): CliError {
    if (err instanceof CliError) return err;
    const message = err instanceof Error ? err.message || (err as NodeJS.ErrnoException).code || err.name : String(err);
    return new CliError(`${method} ${this.urlOf(path)}: cannot reach the broker: ${message}`, EXIT.serverError);
  }
}

/** The batches of `stream`, its failures (a broken line, a dropped connection) as CliError exit 4. */
async function* cliErrors(stream: AsyncIterable<StreamLine>): AsyncGenerator<StreamLine> {
  try {
    yield* stream;
  } catch (err) {
    throw new CliError(err instanceof Error ? err.message : String(err), EXIT.serverError);
  }
}

/**
 * The texts of an answer's `Warning` headers (RFC 9111: `<code> <agent> "<text>"`, several joined by
 * commas), unquoted; e.g. the capacity warning of an event type change (docs/operations.md "Memory and retention").
 */
export function warningTexts(header: string | string[] | undefined): string[] {
  const values = header === undefined ? [] : Array.isArray(header) ? header : [header];
  const texts: string[] = [];
  for (const value of values) {
    for (const match of value.matchAll(/\d{3} \S+ "((?:[^"\\]|\\.)*)"/g)) texts.push((match[1] ?? '').replace(/\\(.)/g, '$1'));
  }
  return texts;
}
