import http from 'node:http';
import zlib from 'node:zlib';
import type { Transform } from 'node:stream';
import { DecompressStream } from 'zstd-napi';
import type { StreamBatch } from './stream-client.js';

/**
 * A client of a compressed `application/x-json-stream` answer for tests. It reads the body bytes as
 * sent (node:http does not decode; `fetch` would), feeds every chunk to a streaming decoder of the
 * answer's `Content-Encoding` (gzip: zlib's gunzip; zstd: zstd-napi's `DecompressStream`) and cuts
 * the decoded text into batch lines as they come out. So a batch shows up only if the compressed
 * bytes received so far hold all of it: the broker flushed it as complete blocks.
 */
export class CompressedStreamClient {
  status = 0;
  headers: http.IncomingHttpHeaders = {};
  /** Compressed body bytes received so far. */
  rawBytes = 0;
  /** Every compressed chunk received, in order (the whole body once it ended). */
  readonly raw: Buffer[] = [];
  /** True once the server ended the answer (all of it received). */
  ended = false;
  /** A decoder error (corrupt or truncated compressed body). */
  error: Error | undefined;
  private readonly lines: StreamBatch[] = [];
  private waiting: (() => void) | undefined;
  private decoderDone = false;
  private constructor(private readonly req: http.ClientRequest) {}

  /**
   * Opens a stream with `Accept-Encoding: acceptEncoding`; resolves once the status and headers
   * arrived. An answer without `Content-Encoding` is read as is.
   */
  static open(url: string, acceptEncoding: string, headers: Record<string, string> = {}): Promise<CompressedStreamClient> {
    return new Promise((resolve, reject) => {
      const req = http.request(url, { agent: false, headers: { 'accept-encoding': acceptEncoding, ...headers } });
      const client = new CompressedStreamClient(req);
      req.on('error', (err) => {
        client.error ??= err;
        client.finish();
        reject(err);
      });
      req.on('response', (res) => {
        client.status = res.statusCode ?? 0;
        client.headers = res.headers;
        const coding = res.headers['content-encoding'];
        const decoder: Transform | undefined = coding === 'gzip' ? zlib.createGunzip() : coding === 'zstd' ? new DecompressStream() : undefined;
        let text = '';
        const onText = (chunk: Buffer): void => {
          text += chunk.toString('utf8');
          let newline = text.indexOf('\n');
          while (newline >= 0) {
            const line = text.slice(0, newline);
            text = text.slice(newline + 1);
            if (line.length > 0) client.lines.push(JSON.parse(line) as StreamBatch);
            newline = text.indexOf('\n');
          }
          client.notify();
        };
        if (decoder) {
          decoder.on('data', onText);
          decoder.on('error', (err: Error) => {
            client.error ??= err;
            client.finish();
          });
          decoder.on('end', () => client.finish());
        }
        res.on('data', (chunk: Buffer) => {
          client.rawBytes += chunk.byteLength;
          client.raw.push(chunk);
          if (decoder) decoder.write(chunk);
          else onText(chunk);
        });
        res.on('end', () => {
          client.ended = true;
          if (decoder) decoder.end();
          else client.finish();
        });
        res.on('error', () => client.finish());
        resolve(client);
      });
      req.end();
    });
  }

  private finish(): void {
    this.decoderDone = true;
    this.notify();
  }

  private notify(): void {
    const w = this.waiting;
    this.waiting = undefined;
    w?.();
  }

  /**
   * The next decoded batch, or undefined when the body ended (or failed to decode) first.
   * @throws Error when nothing is decoded within `timeoutMs`
   */
  async next(timeoutMs = 10_000): Promise<StreamBatch | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const line = this.lines.shift();
      if (line) return line;
      if (this.decoderDone) return undefined;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no batch decoded within ${timeoutMs} ms (${this.rawBytes} compressed bytes received)`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiting = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
  }

  /** Decoded batches until `count` events arrived (keep-alives skipped). */
  async events(count: number, timeoutMs = 10_000): Promise<StreamBatch[]> {
    const out: StreamBatch[] = [];
    let seen = 0;
    const deadline = Date.now() + timeoutMs;
    while (seen < count) {
      const batch = await this.next(Math.max(1, deadline - Date.now()));
      if (!batch) throw new Error(`stream ended after ${seen} of ${count} events${this.error ? `: ${this.error.message}` : ''}`);
      if (batch.events) {
        out.push(batch);
        seen += batch.events.length;
      }
    }
    return out;
  }

  /** Every batch until the body ends. */
  async untilEnd(timeoutMs = 10_000): Promise<StreamBatch[]> {
    const out: StreamBatch[] = [];
    for (;;) {
      const batch = await this.next(timeoutMs);
      if (!batch) return out;
      out.push(batch);
    }
  }

  /** Disconnects like a consumer that goes away. */
  close(): void {
    this.req.destroy();
  }
}
