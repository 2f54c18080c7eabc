/**
 * Sending a streamed answer to the client's socket (docs/architecture.md "4. Stream path"): status and
 * headers at once, then the answer's writes through a {@link StreamSink} with backpressure, compressed
 * when the client asks (docs/compression.md), until the answer settles, the client leaves or the node
 * shuts down.
 */
import type HyperExpress from 'hyper-express';
import type { Logger } from '../observability/logger.js';
import type { StreamingAnswer, StreamSink } from '../domain/stream/stream-sink.js';
import { createStreamCompressor, negotiateStreamCoding, type StreamCompressor } from './compression.js';

/** What {@link sendStream} needs besides the response and the answer. */
export interface StreamSendOptions {
  /** The request's flow id, sent as `X-Flow-Id`. */
  readonly flowId: string;
  /** The request's logger (made on first use); stream failures are logged there. */
  readonly log: () => Logger;
  /** The request's `Accept-Encoding`, as received. */
  readonly acceptEncoding: string | undefined;
  /** The request's CORS answer headers, if its origin is listed. */
  readonly cors?: Readonly<Record<string, string>>;
  /** Aborted when the node shuts down: the stream's sink signal aborts too. */
  readonly stopping: AbortSignal;
}

/**
 * Sends a streamed answer. With `Accept-Encoding` naming zstd or gzip ({@link negotiateStreamCoding})
 * the body is compressed: `Content-Encoding` says which, and every sink write goes out as complete
 * compressed blocks (flushed per write, so a client decodes each batch line as it arrives). Streams
 * always carry `Vary: Accept-Encoding`. Backpressure counts the compressed bytes uWS holds plus the
 * lines still in the compressor; the compressor's native memory is released when the stream ends or
 * the client leaves. Resolves when the response ended; a failing answer is logged, never thrown.
 */
export async function sendStream(res: HyperExpress.Response, answer: StreamingAnswer, options: StreamSendOptions): Promise<void> {
  const { flowId, log, acceptEncoding, cors, stopping } = options;
  const controller = new AbortController();
  const stopOnShutdown = (): void => controller.abort();
  stopping.addEventListener('abort', stopOnShutdown);
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
  // send an opening batch at once, which travels with the blank line (the bytes of every approach
  // tried: bench/probes/probe-stream-head.ts).
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
    if (stopping.aborted) controller.abort();
    await answer.stream(sink);
  } catch (err) {
    log().error({ err }, 'stream failed');
  } finally {
    stopping.removeEventListener('abort', stopOnShutdown);
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
