// Probe (a stream's client should get its headers, with the stream id, before the first batch): can the
// HTTP engine put a chunked response's header block on the wire alone, before any body bytes? Each approach serves one response on a bare uWS app (no hyper-express) and a
// raw socket client prints every read it gets, marking the read that completes the header block and
// what that read carries after the blank line. Node's own http server is shown for comparison.
//
//   npm run build && node dist/bench/probes/probe-stream-head.js [approach ...]
//
// The body bytes a batch would be are written GAP_MS after the headers, so any bytes that arrive
// before them are what the approach put on the wire by itself.
import http from 'node:http';
import net from 'node:net';
import uWS from 'uWebSockets.js';

const GAP_MS = 300;
const LINE = '{"batch":1}\n';

type Approach = (res: uWS.HttpResponse, state: { aborted: boolean }) => void;

const head = (res: uWS.HttpResponse): void => {
  res.writeStatus('200 OK');
  res.writeHeader('Content-Type', 'application/x-json-stream');
  res.writeHeader('X-Broker-StreamId', 'abc');
};
const later = (fn: () => void, ms = GAP_MS): void => void setTimeout(fn, ms);
/** Writes the first batch, then ends the response, each in its own cork (as the broker does). */
const batchThenEnd = (res: uWS.HttpResponse, state: { aborted: boolean }): void => {
  later(() => state.aborted || void res.cork(() => res.write(LINE)));
  later(() => state.aborted || void res.cork(() => res.end()), 2 * GAP_MS);
};
const attempt = (what: string, fn: () => void): void => {
  try {
    fn();
  } catch (err) {
    console.log(`  ${what} threw: ${(err as Error).message}`);
  }
};

const approaches: Record<string, { says: string; serve: Approach }> = {
  'empty-write-in-handler-cork': {
    says: "status and headers, then write('') inside the route handler's cork",
    serve: (res, state) => {
      head(res);
      res.write('');
      batchThenEnd(res, state);
    },
  },
  'empty-write-async-cork': {
    says: "one tick later: cork(status, headers, write(''))",
    serve: (res, state) =>
      void setImmediate(() => {
        res.cork(() => {
          head(res);
          res.write('');
        });
        batchThenEnd(res, state);
      }),
  },
  'empty-write-uncorked': {
    says: "one tick later, no cork: status, headers, write('') (uWS warns about uncorked writes)",
    serve: (res, state) =>
      void setImmediate(() => {
        head(res);
        res.write('');
        batchThenEnd(res, state);
      }),
  },
  'first-chunk-uncorked': {
    says: 'one tick later, no cork: status, headers, write(batch): one send() per piece (see strace), still one read',
    serve: (res, state) =>
      void setImmediate(() => {
        head(res);
        res.write(LINE);
        later(() => state.aborted || void res.cork(() => res.end()));
      }),
  },
  'header-value-crlf': {
    says: "writeHeader('Transfer-Encoding', 'chunked\\r\\n') ends the block by hand; uWS's first write() then adds its own header lines to the body",
    serve: (res, state) => {
      head(res);
      res.writeHeader('Transfer-Encoding', 'chunked\r\n');
      batchThenEnd(res, state);
    },
  },
  'end-without-body': {
    says: "writeHeader('Transfer-Encoding', 'chunked'), endWithoutBody(): the block ends, but uWS takes the response as finished",
    serve: (res) => {
      head(res);
      res.writeHeader('Transfer-Encoding', 'chunked');
      res.endWithoutBody();
      later(() => attempt('write after endWithoutBody()', () => res.cork(() => res.write(LINE))));
    },
  },
  'spoofed-content-length': {
    says: 'endWithoutBody(1e12): a Content-Length the stream never meets, and uWS takes the response as finished',
    serve: (res) => {
      head(res);
      res.endWithoutBody(1e12);
      later(() => attempt('tryEnd after endWithoutBody(1e12)', () => res.cork(() => void res.tryEnd(LINE, 1e12))));
    },
  },
};

/** Sends a GET on a raw socket and prints each read until the connection is quiet for 2 gaps. */
function readRaw(port: number): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    let started = 0;
    let seen = Buffer.alloc(0);
    let headerRead = 0;
    let n = 0;
    let quiet: NodeJS.Timeout | undefined;
    let finished = false;
    const done = (): void => {
      if (finished) return;
      finished = true;
      clearTimeout(quiet);
      socket.destroy();
      const body = headerRead > 0 ? seen.subarray(seen.indexOf('\r\n\r\n') + 4) : Buffer.alloc(0);
      console.log(`  body as chunked: ${checkChunked(body)}`);
      resolve();
    };
    const arm = (): void => {
      clearTimeout(quiet);
      quiet = setTimeout(done, 3 * GAP_MS);
    };
    socket.on('connect', () => {
      started = performance.now();
      socket.write('GET /stream HTTP/1.1\r\nHost: probe\r\n\r\n');
      arm();
    });
    socket.on('data', (bytes: Buffer) => {
      n++;
      const before = seen.length;
      seen = Buffer.concat([seen, bytes]);
      const end = seen.indexOf('\r\n\r\n');
      let mark = '';
      if (headerRead === 0 && end >= 0) {
        headerRead = n;
        const carried = seen.length - (end + 4);
        mark = carried === 0 ? '  <- completes the header block, carries no body bytes' : `  <- completes the header block, carries ${carried} body bytes`;
        if (end + 4 < before) mark = '';
      }
      const text = bytes.toString('latin1').replace(/Date: [^\r]*/, 'Date: …');
      console.log(`  read ${n} @${(performance.now() - started).toFixed(0)} ms, ${bytes.length} B: ${JSON.stringify(text)}${mark}`);
      arm();
    });
    socket.on('close', () => done());
  });
}

/** Whether the bytes after the blank line are a valid chunked body (RFC 9112 §7.1), and what it holds. */
function checkChunked(body: Buffer): string {
  const data: string[] = [];
  let at = 0;
  for (;;) {
    const eol = body.indexOf('\r\n', at);
    if (eol < 0) return at === body.length && body.length === 0 ? 'empty' : `incomplete after ${JSON.stringify(data.join(''))}`;
    const sizeText = body.subarray(at, eol).toString('latin1');
    if (!/^[0-9a-fA-F]+$/.test(sizeText)) return `INVALID: chunk size line ${JSON.stringify(sizeText)} at byte ${at}`;
    const size = Number.parseInt(sizeText, 16);
    if (size === 0) return `valid, data ${JSON.stringify(data.join(''))}`;
    data.push(body.subarray(eol + 2, eol + 2 + size).toString('latin1'));
    if (body.subarray(eol + 2 + size, eol + 4 + size).toString('latin1') !== '\r\n') return `INVALID: no CRLF after chunk data at byte ${eol + 2}`;
    at = eol + 4 + size;
  }
}

async function probeUws(name: string, serve: Approach): Promise<void> {
  const app = uWS.App();
  app.get('/*', (res) => {
    const state = { aborted: false };
    res.onAborted(() => (state.aborted = true));
    serve(res, state);
  });
  const token = await new Promise<uWS.us_listen_socket | false>((resolve) => app.listen('127.0.0.1', 0, resolve));
  if (!token) throw new Error(`${name}: cannot listen`);
  await readRaw(uWS.us_socket_local_port(token));
  uWS.us_listen_socket_close(token);
}

async function probeNodeHttp(): Promise<void> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'application/x-json-stream', 'X-Broker-StreamId': 'abc' });
    res.flushHeaders();
    later(() => res.write(LINE));
    later(() => res.end(), 2 * GAP_MS);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  await readRaw((server.address() as net.AddressInfo).port);
  server.close();
}

const wanted = process.argv.slice(2);
for (const [name, { says, serve }] of Object.entries(approaches)) {
  if (wanted.length > 0 && !wanted.includes(name)) continue;
  console.log(`\n${name}: ${says}`);
  await probeUws(name, serve);
}
if (wanted.length === 0 || wanted.includes('node-http')) {
  console.log('\nnode-http: node:http, writeHead + flushHeaders (for comparison)');
  await probeNodeHttp();
}
