import type http from 'node:http';
import { openStream, type BatchStream } from '../../src/client/stream-client.js';
import { BatchQueue } from './stream-client.js';

/**
 * A client of a compressed `application/x-json-stream` answer for tests, on the shared stream client
 * (src/client/stream-client.ts): it keeps the body bytes as sent and decodes them as they arrive with a
 * streaming decoder of the answer's `Content-Encoding` (gzip: zlib's gunzip; zstd: zstd-napi's
 * `DecompressStream`), cutting the decoded text into batch lines as they come out. So a batch shows up
 * only if the compressed bytes received so far hold all of it: the broker flushed it as complete blocks.
 */
export class CompressedStreamClient extends BatchQueue {
  status = 0;
  headers: http.IncomingHttpHeaders = {};
  /** A decoder error (corrupt or truncated compressed body), or the connection's. */
  error: Error | undefined;
  private constructor(
    private readonly stream: BatchStream,
    /** Every compressed chunk received, in order (the whole body once it ended). */
    readonly raw: Buffer[],
  ) {
    super();
  }

  /**
   * Opens a stream with `Accept-Encoding: acceptEncoding`; resolves once the status and headers
   * arrived. An answer without `Content-Encoding` is read as is.
   * @throws StreamRefusedError for an answer other than 200
   */
  static async open(url: string, acceptEncoding: string, headers: Record<string, string> = {}): Promise<CompressedStreamClient> {
    const raw: Buffer[] = [];
    const stream = await openStream(url, { headers: { 'accept-encoding': acceptEncoding, ...headers }, onBodyChunk: (chunk) => raw.push(chunk) });
    const client = new CompressedStreamClient(stream, raw);
    client.status = 200;
    client.headers = stream.headers;
    void client.pump(stream, undefined, (err) => (client.error ??= err instanceof Error ? err : new Error(String(err))));
    return client;
  }

  /** Compressed body bytes received so far. */
  get rawBytes(): number {
    return this.stream.bytes;
  }

  /** True once the server ended the answer (all of it received). */
  get ended(): boolean {
    return this.stream.complete;
  }

  protected override context(): string {
    return this.error ? `: ${this.error.message}` : ` (${this.rawBytes} compressed bytes received)`;
  }

  /** Disconnects like a consumer that goes away. */
  close(): void {
    this.stream.close();
  }
}
