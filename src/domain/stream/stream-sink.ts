/**
 * What a streamed answer is, seen from both sides (docs/architecture.md "Stream path"): the consumption services build
 * {@link StreamingAnswer}s and write to a {@link StreamSink}; the HTTP layer's stream writer
 * (`sendStream`) sends the status and headers, hands the answer a sink bound to the client's
 * connection and ends the response when the answer's `stream` settles. Types only, no I/O.
 */

/**
 * Where a streamed answer writes (docs/architecture.md "Stream path"): lines go to the client as HTTP chunks. `write`
 * reports backpressure like a Node writable; a stream must `await drained()` after it returned false
 * before writing more, so a slow client never makes the node buffer without bound.
 */
export interface StreamSink {
  /** Queues chunks (one corked write each, no concatenation). @returns false when the client is behind (wait for `drained()`) or gone */
  write(chunk: string | Buffer | readonly Buffer[]): boolean;
  /** Resolves when the queued bytes went out, or at once when the client is gone. */
  drained(): Promise<void>;
  /** Bytes queued for the client and not yet sent. */
  readonly bufferedBytes: number;
  /** True once the client disconnected. */
  readonly closed: boolean;
  /** Aborted when the client disconnects or the node shuts down: the stream should end (flushing what it may). */
  readonly signal: AbortSignal;
}

/** A streamed answer: status and headers go out at once, then `stream` writes until it returns. */
export interface StreamingAnswer {
  readonly status: number;
  readonly contentType: string;
  readonly headers?: Readonly<Record<string, string>>;
  /** Writes the body; the response ends when it settles. A rejection after the headers went out ends the response and is logged. */
  stream(sink: StreamSink): Promise<void>;
}
