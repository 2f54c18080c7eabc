/**
 * One server-sent event as the client parsed it (WHATWG HTML "Server-sent events", the parts the
 * broker uses): the fields of one block ended by a blank line. A block of comments only is a frame too
 * (the broker's keep-alive), with no `data`.
 */
export interface SseFrame {
  id?: string;
  event?: string;
  /** The `data:` lines joined by `\n`; absent when the block had none. */
  data?: string;
  retry?: number;
  comments: string[];
}

/**
 * A client of a `text/event-stream` response for tests (fetch, so it can also send headers): reads
 * frames as they arrive; `next()` waits for the next one, `close()` disconnects. Bodies compressed with
 * `Content-Encoding: gzip` are decoded by fetch, as a browser does.
 */
export class SseClient {
  private readonly queue: SseFrame[] = [];
  private waiting: (() => void) | undefined;
  private ended = false;
  private readonly controller = new AbortController();
  status = 0;
  headers: Headers = new Headers();
  /** The body of an answer that is not 200 (problem JSON), parsed. */
  problem: unknown;
  /** Every frame received so far, in order. */
  readonly received: SseFrame[] = [];
  /** The whole body text received so far. */
  raw = '';

  private constructor() {}

  /** Opens a stream with `Accept: text/event-stream` (unless `init` names another); resolves once the status and headers arrived. */
  static async open(url: string, init: RequestInit & { headers?: Record<string, string> } = {}): Promise<SseClient> {
    const client = new SseClient();
    const res = await fetch(url, { ...init, headers: { accept: 'text/event-stream', ...init.headers }, signal: client.controller.signal });
    client.status = res.status;
    client.headers = res.headers;
    if (res.status !== 200 || !res.body) {
      const text = await res.text();
      client.problem = text ? (JSON.parse(text) as unknown) : undefined;
      client.ended = true;
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
        const text = decoder.decode(chunk, { stream: true });
        this.raw += text;
        rest += text;
        for (let end = rest.indexOf('\n\n'); end >= 0; end = rest.indexOf('\n\n')) {
          const frame = parseBlock(rest.slice(0, end));
          rest = rest.slice(end + 2);
          this.queue.push(frame);
          this.received.push(frame);
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
   * The next frame, or undefined when the stream ended first.
   * @throws Error when nothing arrives within `timeoutMs`
   */
  async next(timeoutMs = 10_000): Promise<SseFrame | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const frame = this.queue.shift();
      if (frame) return frame;
      if (this.ended) return undefined;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no frame within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiting = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /** Reads frames until the server ends the stream. @returns the frames that arrived meanwhile */
  async untilEnd(timeoutMs = 10_000): Promise<SseFrame[]> {
    const out: SseFrame[] = [];
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const frame = await this.next(Math.max(1, deadline - Date.now()));
      if (!frame) return out;
      out.push(frame);
    }
  }

  /** Disconnects like a consumer that goes away. */
  close(): void {
    this.controller.abort();
  }
}

/** Parses one block (the lines before a blank line). */
function parseBlock(block: string): SseFrame {
  const frame: SseFrame = { comments: [] };
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) {
      frame.comments.push(line.slice(1).trimStart());
      continue;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'id') frame.id = value;
    else if (field === 'event') frame.event = value;
    else if (field === 'retry') frame.retry = Number(value);
  }
  if (data.length > 0) frame.data = data.join('\n');
  return frame;
}
