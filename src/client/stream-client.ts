/**
 * The one client of the broker's consumption streams, shared by the `broker` command line, the
 * benchmarks and the tests: it opens a low-level stream (`/event-types/{name}/events`) or a
 * subscription stream (`/subscriptions/{id}/events`) over `node:http`/`node:https`, decodes a
 * compressed body as it arrives, cuts the `application/x-json-stream` body into batch lines
 * incrementally and hands out the parsed batches as an async iterable, with the stream id header the
 * subscription's commits need and a committer for them (docs/consuming.md "Subscription streams", "Commits").
 *
 * The layers, each usable on its own (this module re-exports them, so users import from here alone):
 * - {@link LineSplitter}: bytes in, complete lines out (no decoding, no parsing);
 * - {@link parseBatch}: one line to a {@link StreamBatch};
 * - {@link readBatches}: any body (a `fetch` response's `body`, an `http.IncomingMessage`) to batches;
 * - {@link openStream}: the request, the status check, the decoder and {@link BatchStream};
 * - {@link CursorCommitter}: commits the cursors of what was consumed, one request in flight.
 */
import http from 'node:http';
import https from 'node:https';
import { pipeline, type Readable, type Transform } from 'node:stream';
import zlib from 'node:zlib';
import { DecompressStream } from 'zstd-napi';
import { StreamFormatError, readBatches, type EventsMode, type StreamBatch } from './stream-batch.js';

export { LineSplitter } from './line-splitter.js';
export { StreamFormatError, parseBatch, readBatches, type EventsMode, type StreamBatch, type StreamCursor } from './stream-batch.js';
export { commitPath, streamPath, type StreamParameters, type StreamSource } from './stream-path.js';
export { CursorCommitter, type CommitAnswer, type CommitFailure, type CommitSender } from './cursor-committer.js';

/** The header that names a subscription stream; its commits must send it back. */
export const STREAM_ID_HEADER = 'X-Broker-StreamId';

/** The stream ended before the broker ended it: the connection dropped, or its compressed body did not decode. */
export class StreamBrokenError extends Error {
  override readonly name = 'StreamBrokenError';
}

/** The broker answered the stream request with a status other than 200; the answer is kept whole. */
export class StreamRefusedError extends Error {
  override readonly name = 'StreamRefusedError';

  constructor(
    message: string,
    /** The answer's status code. */
    readonly status: number,
    /** The answer's header fields (names lower-cased). */
    readonly headers: http.IncomingHttpHeaders,
    /** The answer's body as UTF-8 text (a problem JSON, usually). */
    readonly text: string,
  ) {
    super(message);
  }
}

/** How {@link openStream} sends its request and reads the answer. */
export interface OpenStreamOptions {
  /** `GET` (default), or `POST` for a subscription stream with its parameters (and partitions) in a JSON body. */
  readonly method?: 'GET' | 'POST';
  /** Header fields (any case). `Accept-Encoding` defaults to `identity`; a body gets `Content-Type: application/json` unless given. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Request body, sent as UTF-8. */
  readonly body?: string;
  /** How the batches' events are read ({@link parseBatch}); default `'parse'`. */
  readonly events?: EventsMode;
  /** Called with every body chunk as received, before decoding (compressed bytes when the answer has a `Content-Encoding`). */
  readonly onBodyChunk?: (chunk: Buffer) => void;
  /** The agent of the request; default `false`: a connection of its own, closed with the stream. */
  readonly agent?: http.Agent | false;
}

/**
 * Opens a stream; resolves once the status and headers arrived with a {@link BatchStream} to iterate.
 * A body sent with `Content-Encoding: gzip`, `zstd` or `deflate` (ask with an `Accept-Encoding`
 * header, docs/compression.md "Streams") is decoded as it arrives (zlib's gunzip and inflate,
 * zstd-napi's `DecompressStream`), so a batch comes out as soon as the bytes received hold all of it.
 * @param url absolute `http:` or `https:` URL of the stream (see {@link streamPath})
 * @throws StreamRefusedError when the broker answers anything but 200 (after reading the whole answer)
 * @throws Error when the request fails (connection refused, reset)
 */
export function openStream(url: string | URL, options: OpenStreamOptions = {}): Promise<BatchStream> {
  const target = typeof url === 'string' ? new URL(url) : url;
  const transport = target.protocol === 'https:' ? https : http;
  const method = options.method ?? 'GET';
  const headers: Record<string, string> = { 'accept-encoding': 'identity' };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  for (const [name, value] of Object.entries(options.headers ?? {})) headers[name.toLowerCase()] = value;
  return new Promise((resolve, reject) => {
    const req = transport.request(target, { method, agent: options.agent ?? false, headers }, (res) => {
      if (res.statusCode !== 200) {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          reject(new StreamRefusedError(`${method} ${target.href} answered ${String(res.statusCode)}: ${text.slice(0, 500)}`, res.statusCode ?? 0, res.headers, text));
        });
        res.on('error', reject);
        return;
      }
      resolve(new BatchStream(req, res, options));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/**
 * An open stream (status 200): its header fields, the batches as an async iterable, byte counters and
 * `close()`. Iterate it once. Reading pauses while the iterating code does (the socket's backpressure
 * reaches the broker). Iteration ends when the broker ends the answer or `close()` was called; leaving
 * the iteration early closes the stream.
 */
export class BatchStream implements AsyncIterable<StreamBatch> {
  /** The answer's header fields (names lower-cased). */
  readonly headers: http.IncomingHttpHeaders;
  /** {@link STREAM_ID_HEADER} of a subscription stream (undefined for a low-level stream). */
  readonly streamId: string | undefined;
  /** `Content-Encoding` of the answer (undefined: identity). */
  readonly contentEncoding: string | undefined;
  private bodyBytes = 0;
  private debug: string | undefined;
  private reason: string | undefined;
  private closing = false;
  private iterated = false;
  private readonly socket: { readonly bytesRead: number } | null;
  private readonly events: EventsMode;
  private readonly onBodyChunk: ((chunk: Buffer) => void) | undefined;

  /** @internal built by {@link openStream} */
  constructor(
    private readonly req: http.ClientRequest,
    private readonly res: http.IncomingMessage,
    options: OpenStreamOptions,
  ) {
    this.headers = res.headers;
    const id = res.headers[STREAM_ID_HEADER.toLowerCase()];
    this.streamId = typeof id === 'string' ? id : undefined;
    const coding = res.headers['content-encoding'];
    this.contentEncoding = typeof coding === 'string' && coding !== 'identity' ? coding : undefined;
    this.socket = res.socket;
    this.events = options.events ?? 'parse';
    this.onBodyChunk = options.onBodyChunk;
  }

  /** Body bytes received so far, as sent (compressed when the answer has a `Content-Encoding`). */
  get bytes(): number {
    return this.bodyBytes;
  }

  /** Bytes read from the stream's socket so far: the answer's head, chunk framing and body, as on the wire. */
  get wireBytes(): number {
    return this.socket?.bytesRead ?? 0;
  }

  /** The `info.debug` of the last batch read that had one (for instance why the broker ended the stream). */
  get lastDebug(): string | undefined {
    return this.debug;
  }

  /** The `info.stream_close_reason` of the stream's last batch, once the broker ended it (docs/consuming.md "Why a stream ended"). */
  get closeReason(): string | undefined {
    return this.reason;
  }

  /** True once the whole answer arrived: the broker ended it. */
  get complete(): boolean {
    return this.res.complete;
  }

  /** Disconnects, as a consumer that goes away; the iteration then ends without an error. */
  close(): void {
    this.closing = true;
    this.res.destroy();
    this.req.destroy();
  }

  /**
   * The batches as they arrive.
   * @throws StreamFormatError for a line that is not a batch
   * @throws StreamBrokenError when the connection dropped or the body did not decode before the broker ended the stream
   * @throws Error when iterated a second time
   */
  [Symbol.asyncIterator](): AsyncIterator<StreamBatch> {
    if (this.iterated) throw new Error('a stream is read once');
    this.iterated = true;
    return this.batches();
  }

  /** The body as decoded bytes: the answer itself, or a decoder the answer is piped into. */
  private body(): AsyncIterable<Buffer> {
    const coding = this.contentEncoding;
    if (coding === undefined) return dataChunks(this.res, (chunk) => this.take(chunk));
    const decoder: Transform | undefined =
      coding === 'gzip' || coding === 'x-gzip' ? zlib.createGunzip() : coding === 'deflate' ? zlib.createInflate() : coding === 'zstd' ? new DecompressStream() : undefined;
    if (decoder === undefined) throw new StreamBrokenError(`the stream came with Content-Encoding ${coding}, which this client does not decode`);
    this.res.on('data', (chunk: Buffer) => this.take(chunk));
    // An error on either side (a dropped connection, a corrupt body) destroys the decoder with it, which ends its iteration.
    pipeline(this.res, decoder, () => undefined);
    return dataChunks(decoder);
  }

  private take(chunk: Buffer): void {
    this.bodyBytes += chunk.byteLength;
    this.onBodyChunk?.(chunk);
  }

  private async *batches(): AsyncGenerator<StreamBatch> {
    let finished = false;
    let batches: AsyncGenerator<StreamBatch> | undefined;
    try {
      batches = readBatches(this.body(), this.events);
      for (;;) {
        let next: IteratorResult<StreamBatch>;
        try {
          next = await batches.next();
        } catch (err) {
          if (this.closing) return;
          if (err instanceof StreamFormatError) throw err;
          throw new StreamBrokenError(`the stream broke off: ${err instanceof Error ? err.message || (err as NodeJS.ErrnoException).code || err.name : String(err)}`);
        }
        if (next.done === true) break;
        if (next.value.info?.debug !== undefined) this.debug = next.value.info.debug;
        if (next.value.info?.stream_close_reason !== undefined) this.reason = next.value.info.stream_close_reason;
        yield next.value;
      }
      if (!this.res.complete && !this.closing) throw new StreamBrokenError('the stream broke off before the broker ended it');
      finished = true;
    } finally {
      if (!finished && !this.closing) this.close();
      // Releases the reader of the body when the iteration was left early (a no-op once it finished).
      void batches?.return(undefined).catch(() => undefined);
    }
  }
}

/** Chunks a {@link dataChunks} reader holds before it pauses its source. */
const QUEUED_CHUNKS = 16;

/**
 * The chunks of `source` as its `data` events deliver them, each passed to `onChunk` first. Unlike a
 * readable's own async iterator, which hands out whatever it buffered meanwhile concatenated into one
 * new buffer (a copy of every byte when the consumer falls behind), the chunks go out as they came; the
 * source is paused while {@link QUEUED_CHUNKS} wait, so backpressure still reaches the sender. Ends at
 * the source's `end`; throws its error, or a premature-close error when it closed before its end.
 * Leaving the iteration early destroys the source.
 */
async function* dataChunks(source: Readable, onChunk?: (chunk: Buffer) => void): AsyncGenerator<Buffer> {
  const queue: Buffer[] = [];
  let ended = false;
  let failure: Error | undefined;
  let wake: (() => void) | undefined;
  const notify = (): void => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  const onData = (chunk: Buffer): void => {
    onChunk?.(chunk);
    queue.push(chunk);
    if (queue.length >= QUEUED_CHUNKS) source.pause();
    notify();
  };
  const onEnd = (): void => {
    ended = true;
    notify();
  };
  const onError = (err: Error): void => {
    failure ??= err;
    notify();
  };
  const onClose = (): void => {
    if (!ended) failure ??= new Error('the body closed before its end');
    notify();
  };
  source.on('data', onData);
  source.on('end', onEnd);
  source.on('error', onError);
  source.on('close', onClose);
  try {
    for (;;) {
      const chunk = queue.shift();
      if (chunk !== undefined) {
        if (queue.length === 0 && source.isPaused()) source.resume();
        yield chunk;
        continue;
      }
      if (failure !== undefined) throw failure;
      if (ended) return;
      await new Promise<void>((resolve) => (wake = resolve));
    }
  } finally {
    source.off('data', onData);
    source.off('end', onEnd);
    source.off('error', onError);
    source.off('close', onClose);
    // A source destroyed later (the connection closing after a decoder error) must not throw unheard.
    source.on('error', () => undefined);
    if (!ended) source.destroy();
  }
}
