import net from 'node:net';

/** One `read` of the socket: the bytes one `data` event delivered, and when (ms after the request was sent). */
export interface SocketRead {
  readonly atMs: number;
  readonly bytes: Buffer;
}

/** What a raw socket saw of a response up to the read that completed its header block. */
export interface StreamHead {
  /** Status code of the status line. */
  readonly status: number;
  /** Header fields, names lower-cased (the last value of a repeated name). */
  readonly headers: Readonly<Record<string, string>>;
  /** The header block as sent, status line to the blank line included (latin1). */
  readonly block: string;
  /** Every read up to and including the one that completed the header block. */
  readonly reads: readonly SocketRead[];
  /** Bytes after the blank line in the read that completed the header block: body bytes (chunk framing included). */
  readonly carried: Buffer;
  /** When the header block was complete (ms after the request was sent). */
  readonly atMs: number;
  /** Resolves with the bytes that arrive after the header-completing read until the connection closes (the request asks for `Connection: close`). */
  readonly rest: Promise<Buffer>;
  /** Closes the socket (a consumer going away). */
  close(): void;
}

const BLANK_LINE = Buffer.from('\r\n\r\n');

/**
 * Sends one HTTP/1.1 request on a raw TCP socket and reads the response the way a client does that
 * parses the header block with its own buffered reader: read by read, keeping what each `data` event
 * delivered, so a test can see what travelled with the blank line (whether the header block went out
 * before any body bytes). Nothing is parsed
 * beyond the header block ({@link parseChunked} reads the body bytes).
 * @param base `http://host:port` of the node
 * @param path request target (path and query)
 * @param init method (GET), extra header fields, body (sent with `Content-Length`)
 * @throws Error when the connection closes before the header block is complete or nothing completes it within `timeoutMs`
 */
export function readStreamHead(
  base: string,
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
  timeoutMs = 10_000,
): Promise<StreamHead> {
  const url = new URL(base);
  const socket = net.connect(Number(url.port), url.hostname);
  socket.setNoDelay(true);
  const lines = [`${init.method ?? 'GET'} ${path} HTTP/1.1`, `Host: ${url.host}`, 'Connection: close'];
  for (const [name, value] of Object.entries(init.headers ?? {})) lines.push(`${name}: ${value}`);
  if (init.body !== undefined) lines.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(init.body)}`);
  const request = `${lines.join('\r\n')}\r\n\r\n${init.body ?? ''}`;
  let started = 0;
  const reads: SocketRead[] = [];
  const after: Buffer[] = [];
  let headDone = false;
  const rest = new Promise<Buffer>((resolve) => socket.on('close', () => resolve(Buffer.concat(after))));
  return new Promise<StreamHead>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete header block within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('connect', () => {
      started = performance.now();
      socket.write(request);
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      if (!headDone) reject(new Error(`the connection closed before the header block was complete; received ${JSON.stringify(Buffer.concat(reads.map((r) => r.bytes)).toString('latin1'))}`));
    });
    socket.on('data', (bytes: Buffer) => {
      if (headDone) {
        after.push(bytes);
        return;
      }
      const atMs = performance.now() - started;
      reads.push({ atMs, bytes });
      const all = Buffer.concat(reads.map((r) => r.bytes));
      const end = all.indexOf(BLANK_LINE);
      if (end < 0) return;
      headDone = true;
      clearTimeout(timer);
      const block = all.subarray(0, end + BLANK_LINE.length).toString('latin1');
      const [statusLine = '', ...fields] = block.slice(0, end).split('\r\n');
      const headers: Record<string, string> = {};
      for (const field of fields) {
        const colon = field.indexOf(':');
        if (colon > 0) headers[field.slice(0, colon).trim().toLowerCase()] = field.slice(colon + 1).trim();
      }
      resolve({
        status: Number(statusLine.split(' ')[1]),
        headers,
        block,
        reads,
        carried: all.subarray(end + BLANK_LINE.length),
        atMs,
        rest,
        close: () => socket.destroy(),
      });
    });
  });
}

/**
 * Reads chunked body bytes strictly (`<hex>\r\n<data>\r\n`… `0\r\n\r\n`, RFC 9112 §7.1, no extensions).
 * @returns the chunks' data, and whether the last chunk came; the data of a chunk cut off at the end
 *   of `body` is returned as far as it came
 * @throws Error on anything else, such as an empty line where a chunk size belongs
 */
export function parseChunked(body: Buffer): { chunks: string[]; complete: boolean } {
  const chunks: string[] = [];
  let at = 0;
  while (at < body.length) {
    const eol = body.indexOf('\r\n', at);
    if (eol < 0) throw new Error(`no complete chunk size line at ${at}: ${JSON.stringify(body.subarray(at).toString('latin1'))}`);
    const sizeText = body.subarray(at, eol).toString('latin1');
    if (!/^[0-9a-fA-F]+$/.test(sizeText)) throw new Error(`bad chunk size line at ${at}: ${JSON.stringify(sizeText)}`);
    const size = Number.parseInt(sizeText, 16);
    if (size === 0) {
      if (body.subarray(eol + 2).toString('latin1') !== '\r\n') throw new Error(`bad end of chunked body: ${JSON.stringify(body.subarray(eol + 2).toString('latin1'))}`);
      return { chunks, complete: true };
    }
    const data = body.subarray(eol + 2, eol + 2 + size);
    chunks.push(data.toString());
    const end = eol + 2 + size;
    const crlf = body.subarray(end, end + 2).toString('latin1');
    if (crlf !== '\r\n'.slice(0, crlf.length)) throw new Error(`chunk data at ${eol + 2} not followed by CRLF`);
    at = end + 2;
  }
  return { chunks, complete: false };
}
