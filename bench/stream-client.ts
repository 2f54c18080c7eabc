/**
 * The consuming side of the consumption scenarios (consume, end-to-end, commits): a streaming client
 * of `application/x-json-stream` answers over `node:http` that splits the body on "\n" and
 * `JSON.parse`s every line, as a real client would (so the figures include that cost); plain requests
 * on a keep-alive agent; subscriptions; and a committer that commits the latest cursors like a real
 * client does (one commit in flight, the next one carries whatever arrived meanwhile).
 */
import http from 'node:http';
import type { Transform } from 'node:stream';
import zlib from 'node:zlib';
import { DecompressStream } from 'zstd-napi';

/** `BENCH_QUICK=1`: small sizes and short periods, to prove a scenario works (figures meaningless). */
export function quickMode(): boolean {
  const value = process.env.BENCH_QUICK;
  return value !== undefined && value !== '' && value !== '0';
}

/** Requests share these keep-alive sockets (commits have their own, see below); every stream has its own socket. */
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
/** Commits' keep-alive sockets: the broker closes a connection after a 204, which must not slow other requests. */
const commitAgent = new http.Agent({ keepAlive: true, maxSockets: 64 });


/** A subscription cursor as the broker serves it. */
export interface StreamCursor {
  readonly partition: string;
  readonly offset: string;
  readonly event_type?: string;
  readonly cursor_token?: string;
}

/** One batch line, parsed. */
export interface StreamLine {
  readonly cursor: StreamCursor;
  readonly events?: readonly unknown[];
  /**
   * With `events: 'text'` ({@link openStream}): the batch's events as one string (the JSON array's
   * content, not parsed); `events` is then absent. Offsets are dense, so a consumer counts a batch's
   * events from its cursor and the previous one of the partition.
   */
  readonly eventsText?: string;
  readonly info?: { readonly debug?: string };
}

const EVENTS_MARK = Buffer.from(',"events":[');
const INFO_MARK = Buffer.from('],"info":');

/**
 * A batch line read the way the XRANGE baseline of bench/consume.ts reads Redis: decoded to strings, the
 * cursor and info parsed, the events left as text (a client that forwards them, or parses lazily).
 * The broker writes `{"cursor":{…},"events":[…],"info":{…}}` (src/services/consumption/batch-writer.ts).
 */
function lineWithEventsText(whole: Buffer): StreamLine {
  const at = whole.indexOf(EVENTS_MARK);
  if (at < 0) return JSON.parse(whole.toString('utf8')) as StreamLine;
  const { cursor } = JSON.parse(`${whole.toString('utf8', 0, at)}}`) as { cursor: StreamCursor };
  const infoAt = whole.lastIndexOf(INFO_MARK);
  const end = infoAt > at ? infoAt : whole.byteLength - 2;
  const info = infoAt > at ? (JSON.parse(`{${whole.toString('utf8', infoAt + 2)}`) as { info?: StreamLine['info'] }).info : undefined;
  return { cursor, eventsText: whole.toString('utf8', at + EVENTS_MARK.byteLength, end), ...(info ? { info } : {}) };
}

/** A request's answer. */
export interface Answer {
  readonly status: number;
  readonly text: string;
}

/**
 * Requests sent again because the broker had closed the kept-alive connection they were sent on
 * (Node's documented retry case: `reusedSocket` and ECONNRESET). The broker closes the connection
 * after every 204 answer (commits), so a commit that follows one on the same socket can hit this.
 */
export const connectionRetries = { count: 0 };

/**
 * One request on a keep-alive agent. When it hit a kept-alive connection the server had closed, it
 * is sent again once on a new connection of its own (other pooled connections may be closed too).
 */
export async function request(method: string, url: string, body?: string | Buffer, headers: Record<string, string> = {}, use: 'commits' | 'other' = 'other'): Promise<Answer> {
  try {
    return await requestOnce(use === 'commits' ? commitAgent : agent, method, url, body, headers);
  } catch (err) {
    if (!(err instanceof ClosedConnection)) throw err;
    connectionRetries.count += 1;
    return requestOnce(false, method, url, body, headers);
  }
}

/** The server closed a reused keep-alive connection before answering. */
class ClosedConnection extends Error {}

function requestOnce(agent: http.Agent | false, method: string, url: string, body: string | Buffer | undefined, headers: Record<string, string>): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.setTimeout(60_000, () => req.destroy(new Error(`${method} ${url}: no answer within 60 s`)));
    req.on('error', (err: NodeJS.ErrnoException) => reject(req.reusedSocket && err.code === 'ECONNRESET' ? new ClosedConnection(err.message) : err));
    req.end(body);
  });
}

/** Creates a subscription (or gets the existing one for the same key). @returns its id */
export async function createSubscription(brokerUrl: string, owningApplication: string, eventType: string, readFrom: 'begin' | 'end' = 'begin'): Promise<string> {
  const { status, text } = await request('POST', `${brokerUrl}/subscriptions`, JSON.stringify({ owning_application: owningApplication, event_types: [eventType], read_from: readFrom }));
  if (status !== 201 && status !== 200) throw new Error(`POST /subscriptions answered ${status}: ${text.slice(0, 500)}`);
  const parsed = JSON.parse(text) as { id?: unknown };
  if (typeof parsed.id !== 'string') throw new Error(`POST /subscriptions answered without an id: ${text.slice(0, 500)}`);
  return parsed.id;
}

/** An open stream. */
export interface OpenStream {
  /** `X-Broker-StreamId` (subscription streams). */
  readonly streamId: string | undefined;
  /** Bytes of the body received so far, as sent (compressed when the answer has a `Content-Encoding`). */
  readonly bytes: number;
  /** Bytes read from the stream's socket so far: the response head, chunk framing and body, as on the wire. */
  readonly wireBytes: number;
  /** `Content-Encoding` of the answer (undefined: identity). */
  readonly contentEncoding: string | undefined;
  /** Settles when the server ended the answer or `close()` was called; rejects on a broken line or a socket error. */
  readonly ended: Promise<void>;
  /** The `info.debug` of the last batch seen that had one (e.g. why the stream ended). */
  readonly lastDebug: string | undefined;
  /** Disconnects like a consumer that goes away. */
  close(): void;
}

/**
 * Opens a stream and calls `onLine` with every batch line, parsed, in order. Lines are cut at "\n"
 * on the raw bytes (a "\n" byte never occurs inside a multi-byte UTF-8 sequence) and decoded once.
 * `events: 'text'` leaves each batch's events unparsed ({@link StreamLine.eventsText}); default `'parse'`.
 * `onOpen` runs with the `X-Broker-StreamId` once the headers arrived, before the first line.
 * A body sent with `Content-Encoding: gzip` or `zstd` (ask with an `Accept-Encoding` header) is
 * decoded as it arrives (zlib's gunzip, zstd-napi's `DecompressStream`), so the client pays that cost.
 * @throws Error when the broker does not answer 200 (with the start of its answer)
 */
export function openStream(
  url: string,
  options: { method?: 'GET' | 'POST'; headers?: Record<string, string>; body?: string; onOpen?: (streamId: string | undefined) => void; events?: 'parse' | 'text' },
  onLine: (line: StreamLine) => void,
): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: options.method ?? 'GET', agent: false, headers: { 'content-type': 'application/json', ...(options.headers ?? {}) } }, (res) => {
      if (res.statusCode !== 200) {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => reject(new Error(`${options.method ?? 'GET'} ${url} answered ${String(res.statusCode)}: ${Buffer.concat(chunks).toString('utf8').slice(0, 500)}`)));
        return;
      }
      let bytes = 0;
      let lastDebug: string | undefined;
      let closing = false;
      let pending: Buffer[] = [];
      const header = res.headers['x-broker-streamid'];
      const streamId = typeof header === 'string' ? header : undefined;
      // Before any line: lines may be delivered before a caller awaiting this promise resumes.
      options.onOpen?.(streamId);
      const coding = res.headers['content-encoding'];
      const decoder: Transform | undefined = coding === 'gzip' ? zlib.createGunzip() : coding === 'zstd' ? new DecompressStream() : undefined;
      const socket = res.socket;
      const ended = new Promise<void>((resolveEnd, rejectEnd) => {
        const fail = (err: unknown): void => {
          res.destroy();
          rejectEnd(err instanceof Error ? err : new Error(String(err)));
        };
        const body = decoder ?? res;
        if (decoder) {
          res.on('data', (chunk: Buffer) => {
            bytes += chunk.byteLength;
            decoder.write(chunk);
          });
          res.on('end', () => decoder.end());
          decoder.on('error', (err: Error) => (closing ? resolveEnd() : fail(err)));
          decoder.on('end', () => resolveEnd());
        }
        body.on('data', (chunk: Buffer) => {
          if (!decoder) bytes += chunk.byteLength;
          let start = 0;
          let newline = chunk.indexOf(10, start);
          while (newline >= 0) {
            const piece = chunk.subarray(start, newline);
            const whole = pending.length === 0 ? piece : Buffer.concat([...pending, piece]);
            pending = [];
            if (whole.byteLength > 0) {
              let line: StreamLine;
              try {
                line = options.events === 'text' ? lineWithEventsText(whole) : (JSON.parse(whole.toString('utf8')) as StreamLine);
              } catch (err) {
                fail(new Error(`unparsable stream line (${whole.byteLength} bytes): ${(err as Error).message}; starts ${whole.subarray(0, 200).toString('utf8')}`));
                return;
              }
              if (line.info?.debug !== undefined) lastDebug = line.info.debug;
              try {
                onLine(line);
              } catch (err) {
                fail(err);
                return;
              }
            }
            start = newline + 1;
            newline = chunk.indexOf(10, start);
          }
          if (start < chunk.byteLength) pending.push(chunk.subarray(start));
        });
        if (!decoder) res.on('end', () => resolveEnd());
        res.on('close', () => {
          // With a decoder the stream ends when the decoder has given out the last line (its 'end'), unless the body was cut off.
          if (!decoder || closing || !res.complete) resolveEnd();
        });
        res.on('error', (err) => (closing ? resolveEnd() : rejectEnd(err)));
      });
      // A stream ending with an error nobody awaits yet must not crash the process.
      ended.catch(() => undefined);
      resolve({
        streamId,
        get bytes() {
          return bytes;
        },
        get wireBytes() {
          return socket.bytesRead;
        },
        contentEncoding: typeof coding === 'string' ? coding : undefined,
        get lastDebug() {
          return lastDebug;
        },
        ended,
        close: () => {
          closing = true;
          res.destroy();
          req.destroy();
        },
      });
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/**
 * Commits cursors of one stream as a client that does not wait for its commits before reading on.
 * `coalesce` (the default): at most one commit in flight; the next one carries the latest cursor of
 * every partition that got a batch meanwhile (with a fast broker, every batch is committed). Without
 * `coalesce`, every batch's cursor is committed at once in its own request (several may be in flight).
 */
export class Committer {
  private readonly pending = new Map<string, StreamCursor>();
  private inFlight: Promise<void> | undefined;
  private readonly single = new Set<Promise<void>>();
  /** Commit requests answered 204 or 200. */
  commits = 0;
  /** Commits answered 200 with an `outdated` item. */
  outdated = 0;
  /** Commits answered neither 204 nor 200 (or not at all). */
  failures = 0;
  firstFailure: string | undefined;
  /** Whether new cursors are committed at once (false: only collected until `flush`). */
  auto = true;

  constructor(
    private readonly url: string,
    private readonly streamId: string,
    private readonly coalesce = true,
  ) {}

  /** Takes a batch's cursor and commits it (or the latest ones) as described above. */
  add(cursor: StreamCursor): void {
    if (this.auto && !this.coalesce) {
      const sending = this.send([cursor]).finally(() => this.single.delete(sending));
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
      await this.send(items);
      if (!this.auto) break;
    }
  }

  private async send(items: readonly StreamCursor[]): Promise<void> {
    let answer: Answer;
    try {
      answer = await request('POST', this.url, JSON.stringify({ items }), { 'X-Broker-StreamId': this.streamId }, 'commits');
    } catch (err) {
      answer = { status: 0, text: err instanceof Error ? err.message : String(err) };
    }
    if (answer.status === 204 || answer.status === 200) {
      this.commits += 1;
      if (answer.status === 200 && answer.text.includes('"outdated"')) this.outdated += 1;
    } else {
      this.failures += 1;
      this.firstFailure ??= `${answer.status} ${answer.text.slice(0, 500)} (items ${JSON.stringify(items).slice(0, 300)})`;
    }
  }
}

/** The `p`th percentile of sorted values (nearest rank). */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? Number.NaN;
}

/** 503 answers met by {@link requestRetrying} (the node's control-plane limiter was full) and sent again. */
export const overloadRetries = { count: 0 };

/**
 * A control-plane request (event type and subscription create/update, cursor resets: they run under the
 * node's limiter, `http.controlConcurrency` at once, `http.controlQueueLength` waiting): an answer 503
 * (`OVERLOADED`, nothing was done) is sent again after a random 0.2–1 s (the node says `Retry-After: 1`;
 * spreading the retries keeps them from arriving together), up to 60 times.
 * @throws Error when the answer's status is not in `expected` (with the start of the answer)
 */
export async function requestRetrying(method: string, url: string, body: string | undefined, expected: readonly number[]): Promise<Answer> {
  for (let attempt = 1; ; attempt++) {
    const answer = await request(method, url, body);
    if (expected.includes(answer.status)) return answer;
    if (answer.status !== 503 || attempt >= 60) throw new Error(`${method} ${url} answered ${answer.status}: ${answer.text.slice(0, 500)}`);
    overloadRetries.count += 1;
    await new Promise((resolve) => setTimeout(resolve, 200 + Math.floor(Math.random() * 800)));
  }
}
