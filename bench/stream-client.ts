/**
 * The consuming side of the consumption scenarios (consume, end-to-end, commits): streams read by the
 * product's stream client (src/client/stream-client.ts), which splits the body on "\n" and
 * `JSON.parse`s every line, as a real client would (so the figures include that cost), handed to a
 * callback per batch; plain requests on a keep-alive agent; subscriptions; and a committer that commits
 * the latest cursors like a real client does (one commit in flight, the next one carries whatever
 * arrived meanwhile).
 */
import http from 'node:http';
import { CursorCommitter, STREAM_ID_HEADER, openStream as openBatchStream, type StreamBatch } from '../src/client/stream-client.js';

export type { StreamCursor } from '../src/client/stream-client.js';

/** `BENCH_QUICK=1`: small sizes and short periods, to prove a scenario works (figures meaningless). */
export function quickMode(): boolean {
  const value = process.env.BENCH_QUICK;
  return value !== undefined && value !== '' && value !== '0';
}

/** Requests share these keep-alive sockets (commits have their own, see below); every stream has its own socket. */
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
/** Commits' keep-alive sockets: the broker closes a connection after a 204, which must not slow other requests. */
const commitAgent = new http.Agent({ keepAlive: true, maxSockets: 64 });


/** One batch line, parsed (with `events: 'text'`, the events left as text: {@link StreamBatch.eventsText}). */
export type StreamLine = StreamBatch;

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
 * Opens a stream and calls `onLine` with every batch line, parsed, in order (the shared client's
 * parsing: lines cut at "\n" on the raw bytes and decoded once). `events: 'text'` leaves each batch's
 * events unparsed ({@link StreamLine.eventsText}); default `'parse'`. `onOpen` runs with the
 * `X-Broker-StreamId` once the headers arrived, before the first line. A body sent with
 * `Content-Encoding: gzip` or `zstd` (ask with an `Accept-Encoding` header) is decoded as it arrives,
 * so the client pays that cost.
 * @throws Error when the broker does not answer 200 (with the start of its answer)
 */
export async function openStream(
  url: string,
  options: { method?: 'GET' | 'POST'; headers?: Record<string, string>; body?: string; onOpen?: (streamId: string | undefined) => void; events?: 'parse' | 'text' },
  onLine: (line: StreamLine) => void,
): Promise<OpenStream> {
  const stream = await openBatchStream(url, {
    method: options.method ?? 'GET',
    headers: { 'content-type': 'application/json', ...(options.headers ?? {}) },
    ...(options.body === undefined ? {} : { body: options.body }),
    events: options.events ?? 'parse',
  });
  // Before any line: lines may be delivered before a caller awaiting this promise resumes.
  options.onOpen?.(stream.streamId);
  const ended = (async () => {
    for await (const line of stream) onLine(line);
  })();
  // A stream ending with an error nobody awaits yet must not crash the process.
  ended.catch(() => undefined);
  return {
    streamId: stream.streamId,
    get bytes() {
      return stream.bytes;
    },
    get wireBytes() {
      return stream.wireBytes;
    },
    contentEncoding: stream.contentEncoding,
    get lastDebug() {
      return stream.lastDebug;
    },
    ended,
    close: () => stream.close(),
  };
}

/**
 * Commits cursors of one stream as a client that does not wait for its commits before reading on
 * (the shared {@link CursorCommitter}, sending on the commits' keep-alive sockets). `coalesce` (the
 * default): at most one commit in flight; the next one carries the latest cursor of every partition
 * that got a batch meanwhile (with a fast broker, every batch is committed). Without `coalesce`, every
 * batch's cursor is committed at once in its own request (several may be in flight).
 */
export class Committer extends CursorCommitter {
  /**
   * @param url the subscription's `/cursors` URL
   * @param streamId the stream's `X-Broker-StreamId`
   */
  constructor(url: string, streamId: string, coalesce = true) {
    super((items) => request('POST', url, JSON.stringify({ items }), { [STREAM_ID_HEADER]: streamId }, 'commits'), { coalesce });
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
