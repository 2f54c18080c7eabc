/**
 * The batches of an `application/x-json-stream` body: their shape, the parsing of one line
 * ({@link parseBatch}) and of a whole body as it arrives ({@link readBatches}), for the stream client
 * (src/client/stream-client.ts).
 */
import { LineSplitter } from './line-splitter.js';

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
 * One batch line, parsed: a cursor, the events (absent in a keep-alive batch) and `info`: on the last
 * batch of a stream the broker ended, `stream_close_reason` (a code, docs/consuming.md "Why a stream
 * ended") and `debug` (the same in words); `debug` also says `Stream started` on a subscription stream's first batch. `E` is the type the caller reads the events as; the
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
  readonly info?: { readonly debug?: string; readonly stream_close_reason?: string };
}

/** How {@link parseBatch} reads a batch's events: parsed (`'parse'`) or left as text (`'text'`). */
export type EventsMode = 'parse' | 'text';

/** A line of the stream that is not a batch: not JSON, or an object without a cursor. */
export class StreamFormatError extends Error {
  override readonly name = 'StreamFormatError';
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
