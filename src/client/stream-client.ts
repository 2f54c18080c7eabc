/**
 * The one client of the broker's consumption streams, shared by the `broker` command line, the
 * benchmarks and the tests: it opens a low-level stream (`/event-types/{name}/events`) or a
 * subscription stream (`/subscriptions/{id}/events`) over `node:http`/`node:https`, decodes a
 * compressed body as it arrives, cuts the `application/x-json-stream` body into batch lines
 * incrementally and hands out the parsed batches as an async iterable, with the stream id header the
 * subscription's commits need and a committer for them (docs/consuming.md "Subscription streams", "Commits").
 *
 * The layers, each usable on its own:
 * - {@link LineSplitter}: bytes in, complete lines out (no decoding, no parsing);
 * - {@link parseBatch}: one line to a {@link StreamBatch};
 * - {@link readBatches}: any body (a `fetch` response's `body`, an `http.IncomingMessage`) to batches;
 * - {@link openStream}: the request, the status check, the decoder and {@link BatchStream};
 * - {@link CursorCommitter}: commits the cursors of what was consumed, one request in flight.
 */
import http from 'node:http';
import https from 'node:https';
import { pipeline, type Transform } from 'node:stream';
import zlib from 'node:zlib';
import { DecompressStream } from 'zstd-napi';

/** The header that names a subscription stream; its commits must send it back. */
export const STREAM_ID_HEADER = 'X-Broker-StreamId';

/**
 * A cursor as the broker serves it in a batch: the partition and the offset of the batch's last event
 * (of the last event sent before a keep-alive batch); subscription streams add `event_type` and the
 * `cursor_token` a commit sends back (docs/concepts.md "Offsets and cursors").
 */
export interface StreamCursor {
  readonly partition: string;
  readonly offset: string;
  readonly event_type?: string;
  readonly cursor_token?: string;
}

/**
 * One batch line, parsed: a cursor, the events (absent in a keep-alive batch) and `info.debug` (for
 * instance why the broker ended the stream). `E` is the type the caller reads the events as; the
 * events are not checked against it.
 */
export interface StreamBatch<E = unknown> {
  readonly cursor: StreamCursor;
  readonly events?: readonly E[];
  /**
   * With `events: 'text'` ({@link parseBatch}): the batch's events as one string (the JSON array's
   * content, not parsed); `events` is then absent. Offsets are dense, so a consumer counts a batch's
   * events from its cursor and the previous one of the partition.
   */
  readonly eventsText?: string;
  readonly info?: { readonly debug?: string };
}

/** How {@link parseBatch} reads a batch's events: parsed (`'parse'`) or left as text (`'text'`). */
export type EventsMode = 'parse' | 'text';

/** A line of the stream that is not a batch: not JSON, or an object without a cursor. */
export class StreamFormatError extends Error {
  override readonly name = 'StreamFormatError';
}

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

const NEWLINE = 0x0a;

/**
 * Cuts newline-delimited bytes into lines as they arrive. Lines are cut at the "\n" byte on the raw
 * bytes — a "\n" byte never occurs inside a multi-byte UTF-8 sequence, so a character split across
 * two chunks is whole once the line is — and handed out without the "\n"; empty lines are skipped.
 */
export class LineSplitter {
  private pending: Buffer[] = [];

  /** Bytes held after the last "\n" seen, waiting for the end of their line. */
  get pendingBytes(): number {
    let n = 0;
    for (const piece of this.pending) n += piece.byteLength;
    return n;
  }

  /** Calls `onLine` with every line `chunk` completes, in order; keeps the bytes after its last "\n". */
  push(chunk: Buffer, onLine: (line: Buffer) => void): void {
    let start = 0;
    let newline = chunk.indexOf(NEWLINE, start);
    while (newline >= 0) {
      const piece = chunk.subarray(start, newline);
      const whole = this.pending.length === 0 ? piece : Buffer.concat([...this.pending, piece]);
      this.pending = [];
      if (whole.byteLength > 0) onLine(whole);
      start = newline + 1;
      newline = chunk.indexOf(NEWLINE, start);
    }
    if (start < chunk.byteLength) this.pending.push(chunk.subarray(start));
  }

  /** The body ended: calls `onLine` with the bytes after the last "\n" (a last line without one), if any. */
  end(onLine: (line: Buffer) => void): void {
    const rest = Buffer.concat(this.pending);
    this.pending = [];
    if (rest.byteLength > 0) onLine(rest);
  }
}

const EVENTS_MARK = Buffer.from(',"events":[');
const INFO_MARK = Buffer.from('],"info":');

/**
 * Parses one batch line (UTF-8, without its "\n"). With `events: 'text'` the cursor and `info` are
 * parsed and the events are left as text ({@link StreamBatch.eventsText}): the broker writes
 * `{"cursor":{…},"events":[…],"info":{…}}` in that order, so the events are the bytes between the
 * two marks (a client that forwards events, or parses them lazily, saves that cost).
 * @throws StreamFormatError when the line is not JSON or has no `cursor`
 */
export function parseBatch<E = unknown>(line: Buffer, events: EventsMode = 'parse'): StreamBatch<E> {
  let parsed: unknown;
  try {
    parsed = events === 'text' ? parseWithEventsText(line) : JSON.parse(line.toString('utf8'));
  } catch (err) {
    throw new StreamFormatError(`unparsable stream line (${line.byteLength} bytes): ${(err as Error).message}; starts ${line.subarray(0, 200).toString('utf8')}`);
  }
  if (typeof parsed !== 'object' || parsed === null || !('cursor' in parsed)) throw new StreamFormatError(`a stream line without a cursor: ${line.subarray(0, 200).toString('utf8')}`);
  return parsed as StreamBatch<E>;
}

function parseWithEventsText(whole: Buffer): unknown {
  const at = whole.indexOf(EVENTS_MARK);
  if (at < 0) return JSON.parse(whole.toString('utf8'));
  const { cursor } = JSON.parse(`${whole.toString('utf8', 0, at)}}`) as { cursor: StreamCursor };
  const infoAt = whole.lastIndexOf(INFO_MARK);
  const end = infoAt > at ? infoAt : whole.byteLength - 2;
  const info = infoAt > at ? (JSON.parse(`{${whole.toString('utf8', infoAt + 2)}`) as { info?: StreamBatch['info'] }).info : undefined;
  return { cursor, eventsText: whole.toString('utf8', at + EVENTS_MARK.byteLength, end), ...(info ? { info } : {}) };
}

/**
 * The batches of a stream body, parsed as the bytes arrive: from a `fetch` response's `body` or an
 * `http.IncomingMessage` (already decoded: this reads `application/x-json-stream` text). A last line
 * without "\n" counts once the body ended; keep-alive batches (no `events`) are yielded like the others.
 * @throws StreamFormatError for a line that is not a batch; whatever `body` throws (a dropped connection)
 */
export async function* readBatches<E = unknown>(body: AsyncIterable<Uint8Array>, events: EventsMode = 'parse'): AsyncGenerator<StreamBatch<E>> {
  const splitter = new LineSplitter();
  const lines: Buffer[] = [];
  const collect = (line: Buffer): void => void lines.push(line);
  for await (const chunk of body) {
    splitter.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength), collect);
    for (const line of lines.splice(0)) yield parseBatch<E>(line, events);
  }
  splitter.end(collect);
  for (const line of lines.splice(0)) yield parseBatch<E>(line, events);
}

/**
 * Query parameters of a stream (docs/consuming.md "Stream parameters"); the broker's defaults apply
 * to those left out. Seconds and counts, as integers. `max_uncommitted_events` and `commit_timeout`
 * only apply to subscription streams.
 */
export interface StreamParameters {
  readonly batch_limit?: number;
  readonly stream_limit?: number;
  readonly batch_flush_timeout?: number;
  readonly stream_timeout?: number;
  readonly stream_keep_alive_limit?: number;
  readonly max_uncommitted_events?: number;
  readonly commit_timeout?: number;
}

/** What a stream reads: an event type without a subscription (low-level), or a subscription. */
export type StreamSource = { readonly eventType: string } | { readonly subscription: string };

/**
 * The request target (path and query) of a stream: `/event-types/{name}/events?…` or
 * `/subscriptions/{id}/events?…`, the name or id URL-encoded, the parameters in the order given.
 */
export function streamPath(source: StreamSource, parameters: StreamParameters = {}): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(parameters)) if (value !== undefined) query.set(name, String(value));
  const base = 'eventType' in source ? `/event-types/${encodeURIComponent(source.eventType)}/events` : `/subscriptions/${encodeURIComponent(source.subscription)}/events`;
  const search = query.toString();
  return search === '' ? base : `${base}?${search}`;
}

/** The request target of a subscription's commits (`POST`, with {@link STREAM_ID_HEADER}). */
export function commitPath(subscription: string): string {
  return `/subscriptions/${encodeURIComponent(subscription)}/cursors`;
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
    if (coding === undefined) return this.counted(this.res);
    const decoder: Transform | undefined =
      coding === 'gzip' || coding === 'x-gzip' ? zlib.createGunzip() : coding === 'deflate' ? zlib.createInflate() : coding === 'zstd' ? new DecompressStream() : undefined;
    if (decoder === undefined) throw new StreamBrokenError(`the stream came with Content-Encoding ${coding}, which this client does not decode`);
    this.res.on('data', (chunk: Buffer) => this.take(chunk));
    // An error on either side (a dropped connection, a corrupt body) destroys the decoder with it, which ends its iteration.
    pipeline(this.res, decoder, () => undefined);
    return decoder;
  }

  private take(chunk: Buffer): void {
    this.bodyBytes += chunk.byteLength;
    this.onBodyChunk?.(chunk);
  }

  private async *counted(body: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
    for await (const chunk of body) {
      this.take(chunk);
      yield chunk;
    }
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

/** What a commit request answered: its status (0 when it got no answer) and body text (the error's message then). */
export interface CommitAnswer {
  readonly status: number;
  readonly text: string;
}

/** Sends one commit of `items` (`POST /subscriptions/{id}/cursors` with {@link STREAM_ID_HEADER}) and answers what came back. */
export type CommitSender = (items: readonly StreamCursor[]) => Promise<CommitAnswer>;

/** A commit that was refused (neither 204 nor 200) or not answered (status 0). */
export interface CommitFailure extends CommitAnswer {
  readonly items: readonly StreamCursor[];
}

/**
 * Commits the cursors of one subscription stream as a client that does not wait for its commits
 * before reading on (docs/consuming.md "Commits"). `coalesce` (the default): at most one commit in
 * flight; the next one carries the latest cursor of every partition that got a batch meanwhile (with
 * a fast broker, every batch is committed). Without `coalesce`, every cursor is committed at once in
 * its own request (several may be in flight). A failed commit is counted and reported, never thrown.
 */
export class CursorCommitter {
  private readonly pending = new Map<string, StreamCursor>();
  private inFlight: Promise<void> | undefined;
  private readonly single = new Set<Promise<void>>();
  /** Commit requests answered 204 or 200. */
  commits = 0;
  /** Commits answered 200 with an `outdated` item (a cursor at or before the committed one). */
  outdated = 0;
  /** Commits answered neither 204 nor 200, or not at all. */
  failures = 0;
  /** The first failure: `<status> <start of the answer> (items <start of the cursors>)`. */
  firstFailure: string | undefined;
  /** Whether cursors are committed as they are added (false: only collected until {@link flush}). */
  auto = true;

  /**
   * @param send sends one commit (see {@link CommitSender}); it may throw, which counts as a failure with status 0
   * @param options `coalesce` as described above; `onFailure` hears of every failed commit
   */
  constructor(
    private readonly send: CommitSender,
    private readonly options: { readonly coalesce?: boolean; readonly onFailure?: (failure: CommitFailure) => void } = {},
  ) {}

  /** Takes a consumed batch's cursor and commits it (or the latest ones) as described above. */
  add(cursor: StreamCursor): void {
    if (this.auto && this.options.coalesce === false) {
      const sending = this.commit([cursor]).finally(() => this.single.delete(sending));
      this.single.add(sending);
      return;
    }
    this.pending.set(`${cursor.event_type ?? ''}\n${cursor.partition}`, cursor);
    if (this.auto && this.inFlight === undefined) void this.kick();
  }

  /** Commits what is pending now and waits until no commit is in flight. */
  async flush(): Promise<void> {
    await Promise.all(this.single);
    while (this.inFlight !== undefined || this.pending.size > 0) await (this.inFlight ?? this.kick());
  }

  private kick(): Promise<void> {
    const running = this.run().finally(() => {
      if (this.inFlight === running) this.inFlight = undefined;
    });
    this.inFlight = running;
    return running;
  }

  private async run(): Promise<void> {
    while (this.pending.size > 0) {
      const items = [...this.pending.values()];
      this.pending.clear();
      await this.commit(items);
      if (!this.auto) break;
    }
  }

  private async commit(items: readonly StreamCursor[]): Promise<void> {
    let answer: CommitAnswer;
    try {
      answer = await this.send(items);
    } catch (err) {
      answer = { status: 0, text: err instanceof Error ? err.message : String(err) };
    }
    if (answer.status === 204 || answer.status === 200) {
      this.commits += 1;
      if (answer.status === 200 && answer.text.includes('"outdated"')) this.outdated += 1;
      return;
    }
    this.failures += 1;
    this.firstFailure ??= `${answer.status} ${answer.text.slice(0, 500)} (items ${JSON.stringify(items).slice(0, 300)})`;
    this.options.onFailure?.({ ...answer, items });
  }
}
