import { StreamRefusedError, openStream, type BatchStream } from '../../src/client/stream-client.js';
import { assertResponseMatches, streamBatchMismatch } from './response-schemas.js';

/** One batch line of a stream, parsed (the shared client's batch, typed for reading events in tests). */
export interface StreamBatch {
  cursor: { partition: string; offset: string; event_type?: string; cursor_token?: string };
  events?: Record<string, unknown>[];
  info?: { debug?: string; stream_close_reason?: string };
}

/**
 * Batches a test reads from a stream: filled as they arrive by reading the stream eagerly (so arrival
 * times are the socket's, not the test's), taken with `next()`, which waits up to a timeout. The base
 * of {@link StreamClient} and the compressed streams' client (test/support/compressed-stream.ts).
 */
export abstract class BatchQueue {
  private readonly queue: StreamBatch[] = [];
  private waiting: (() => void) | undefined;
  private finished = false;
  /** Every batch received so far, in order. */
  readonly received: StreamBatch[] = [];
  /** When each batch came off the socket (`performance.now()` ms), read as it arrives whatever the consumer awaits. */
  private readonly arrivals = new WeakMap<StreamBatch, number>();

  /** Reads `stream` to its end into the queue; a failure of the stream is passed to `onError` (and ends the queue). */
  protected async pump(stream: BatchStream, onBatch: (batch: StreamBatch) => void = () => undefined, onError: (err: unknown) => void = () => undefined): Promise<void> {
    try {
      for await (const wire of stream) {
        const batch = wire as StreamBatch;
        this.arrivals.set(batch, performance.now());
        onBatch(batch);
        this.queue.push(batch);
        this.received.push(batch);
        this.notify();
      }
    } catch (err) {
      onError(err);
    } finally {
      this.end();
    }
  }

  /** No more batches will come. */
  protected end(): void {
    this.finished = true;
    this.notify();
  }

  private notify(): void {
    const w = this.waiting;
    this.waiting = undefined;
    w?.();
  }

  /** Thrown by `next()` before anything else (for instance a batch that broke a check), or undefined. */
  protected failure(): Error | undefined {
    return undefined;
  }

  /** Appended to the message of a `next()` that timed out or an `events()` that ran out. */
  protected context(): string {
    return '';
  }

  /**
   * When `batch` (one this client returned) came off the socket, in `performance.now()` ms: the time it
   * reached the client, not when the consumer got round to it.
   * @throws Error for a batch this client did not receive
   */
  arrivedAt(batch: StreamBatch): number {
    const at = this.arrivals.get(batch);
    if (at === undefined) throw new Error('not a batch of this stream');
    return at;
  }

  /** True once the server ended the response (or it was closed) and every batch was taken. */
  get done(): boolean {
    return this.finished && this.queue.length === 0;
  }

  /**
   * The next batch, or undefined when the stream ended first.
   * @throws Error when nothing arrives within `timeoutMs`, or what {@link failure} answers
   */
  async next(timeoutMs = 10_000): Promise<StreamBatch | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const failure = this.failure();
      if (failure !== undefined) throw failure;
      const batch = this.queue.shift();
      if (batch) return batch;
      if (this.finished) return undefined;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no batch within ${timeoutMs} ms${this.context()}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiting = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /** Reads batches until `count` events arrived (keep-alives skipped). @returns the batches with events */
  async events(count: number, timeoutMs = 10_000): Promise<StreamBatch[]> {
    const out: StreamBatch[] = [];
    let seen = 0;
    const deadline = Date.now() + timeoutMs;
    while (seen < count) {
      const batch = await this.next(Math.max(1, deadline - Date.now()));
      if (!batch) throw new Error(`stream ended after ${seen} of ${count} events${this.context()}`);
      if (batch.events) {
        out.push(batch);
        seen += batch.events.length;
      }
    }
    return out;
  }

  /** Waits until the server ends the stream. @returns every batch that arrived meanwhile */
  async untilEnd(timeoutMs = 10_000): Promise<StreamBatch[]> {
    const out: StreamBatch[] = [];
    for (;;) {
      const batch = await this.next(timeoutMs);
      if (!batch) return out;
      out.push(batch);
    }
  }

  /** Disconnects like a consumer that goes away. */
  abstract close(): void;
}

/**
 * What `fetch` sends when a request names no `Accept-Encoding`, and so what the stream tests sent
 * while they read through `fetch`: most test streams arrive gzip-compressed (decoded by the client).
 */
const FETCH_ACCEPT_ENCODING = 'gzip, deflate';

/**
 * A client of an `application/x-json-stream` response for tests, on the shared stream client
 * (src/client/stream-client.ts): reads batches as they arrive. `next()` waits for the next batch;
 * `close()` disconnects like a consumer that goes away. A problem answer and every batch are checked
 * against the route's schemas in the API document (test/support/response-schemas.ts): `open()` throws
 * for a problem that does not match, `next()` for a batch that does not.
 */
export class StreamClient extends BatchQueue {
  status = 0;
  headers: Headers = new Headers();
  /** Body of an error answer (problem JSON), when the status is not 200. */
  problem: unknown;
  /** The first batch that did not match the route's stream batch schema; `next()` throws it. */
  private mismatch: Error | undefined;
  private stream: BatchStream | undefined;

  private constructor(
    private readonly method: string,
    private readonly path: string,
  ) {
    super();
  }

  /**
   * Opens a stream; resolves once the status and headers arrived. `init` as for `fetch` (a string
   * body only); without an `Accept-Encoding` header the request asks for what `fetch` asks for.
   * @throws Error when a problem answer does not match the route's schema, or the request fails
   */
  static async open(url: string, init: RequestInit = {}): Promise<StreamClient> {
    const target = new URL(url);
    const method = (init.method ?? 'GET').toUpperCase();
    if (method !== 'GET' && method !== 'POST') throw new Error(`a stream is opened with GET or POST, not ${method}`);
    if (init.body !== undefined && init.body !== null && typeof init.body !== 'string') throw new Error('StreamClient sends string bodies only');
    const headers: Record<string, string> = { 'accept-encoding': FETCH_ACCEPT_ENCODING };
    new Headers(init.headers).forEach((value, name) => (headers[name] = value));
    const client = new StreamClient(method, target.pathname + target.search);
    try {
      client.stream = await openStream(target, { method, headers, ...(typeof init.body === 'string' ? { body: init.body } : {}) });
    } catch (err) {
      if (!(err instanceof StreamRefusedError)) throw err;
      client.status = err.status;
      client.headers = headersOf(err.headers);
      client.problem = err.text ? (JSON.parse(err.text) as unknown) : undefined;
      client.end();
      if (client.problem !== undefined) assertResponseMatches(client.method, client.path, err.status, client.headers.get('content-type'), client.problem);
      return client;
    }
    client.status = 200;
    client.headers = headersOf(client.stream.headers);
    void client.pump(client.stream, (batch) => {
      const mismatch = client.mismatch === undefined ? streamBatchMismatch(client.method, client.path, batch) : undefined;
      if (mismatch !== undefined) client.mismatch = new Error(`response schema mismatch: ${mismatch}`);
    });
    return client;
  }

  protected override failure(): Error | undefined {
    return this.mismatch;
  }

  /** Disconnects. */
  close(): void {
    this.stream?.close();
  }
}

/** `fetch`-style header fields of a `node:http` answer (repeated fields joined with ", "). */
export function headersOf(fields: Readonly<Record<string, string | string[] | undefined>>): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(fields)) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
  }
  return headers;
}
