import { assertResponseMatches, streamBatchMismatch } from './response-schemas.js';

/** One batch line of a stream, parsed. */
export interface StreamBatch {
  cursor: { partition: string; offset: string; event_type?: string; cursor_token?: string };
  events?: Record<string, unknown>[];
  info?: { debug?: string };
}

/**
 * A client of an `application/x-json-stream` response for tests: reads lines as they arrive.
 * `next()` waits for the next batch; `close()` disconnects like a consumer that goes away. A problem
 * answer and every batch are checked against the route's schemas in the API document
 * (test/support/response-schemas.ts): `open()` throws for a problem that does not match, `next()` for
 * a batch that does not.
 */
export class StreamClient {
  private readonly lines: StreamBatch[] = [];
  private waiting: (() => void) | undefined;
  private ended = false;
  private readonly controller = new AbortController();
  status = 0;
  headers: Headers = new Headers();
  /** Body of an error answer (problem JSON), when the status is not 200. */
  problem: unknown;
  /** Every batch received so far, in order. */
  readonly received: StreamBatch[] = [];
  /** The first batch that did not match the route's stream batch schema; `next()` throws it. */
  private mismatch: Error | undefined;
  /** When each batch came off the socket (`performance.now()` ms), read as it arrives whatever the consumer awaits. */
  private readonly arrivals = new WeakMap<StreamBatch, number>();

  private constructor(
    private readonly method: string,
    private readonly path: string,
  ) {}

  /**
   * Opens a stream; resolves once the status and headers arrived.
   * @throws Error when a problem answer does not match the route's schema
   */
  static async open(url: string, init: RequestInit = {}): Promise<StreamClient> {
    const target = new URL(url);
    const client = new StreamClient((init.method ?? 'GET').toUpperCase(), target.pathname + target.search);
    const res = await fetch(url, { ...init, signal: client.controller.signal });
    client.status = res.status;
    client.headers = res.headers;
    if (res.status !== 200 || !res.body) {
      const text = await res.text();
      client.problem = text ? (JSON.parse(text) as unknown) : undefined;
      client.ended = true;
      if (client.problem !== undefined) assertResponseMatches(client.method, client.path, res.status, res.headers.get('content-type'), client.problem);
      return client;
    }
    void client.pump(res.body);
    return client;
  }

  private async pump(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let rest = '';
    try {
      for await (const chunk of body) {
        const arrivedAt = performance.now();
        rest += decoder.decode(chunk, { stream: true });
        let newline = rest.indexOf('\n');
        while (newline >= 0) {
          const line = rest.slice(0, newline);
          rest = rest.slice(newline + 1);
          if (line.length > 0) {
            const batch = JSON.parse(line) as StreamBatch;
            const mismatch = this.mismatch === undefined ? streamBatchMismatch(this.method, this.path, batch) : undefined;
            if (mismatch !== undefined) this.mismatch = new Error(`response schema mismatch: ${mismatch}`);
            this.lines.push(batch);
            this.received.push(batch);
            this.arrivals.set(batch, arrivedAt);
          }
          newline = rest.indexOf('\n');
        }
        this.notify();
      }
    } catch {
      // aborted by close()
    } finally {
      this.ended = true;
      this.notify();
    }
  }

  private notify(): void {
    const w = this.waiting;
    this.waiting = undefined;
    w?.();
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

  /** True once the server ended the response (or it was closed). */
  get done(): boolean {
    return this.ended && this.lines.length === 0;
  }

  /**
   * The next batch, or undefined when the stream ended first.
   * @throws Error when nothing arrives within `timeoutMs`, or when a batch did not match the route's stream batch schema
   */
  async next(timeoutMs = 10_000): Promise<StreamBatch | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.mismatch !== undefined) throw this.mismatch;
      const line = this.lines.shift();
      if (line) return line;
      if (this.ended) return undefined;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no batch within ${timeoutMs} ms`);
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
      if (!batch) throw new Error(`stream ended after ${seen} of ${count} events`);
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

  /** Disconnects. */
  close(): void {
    this.controller.abort();
  }
}
