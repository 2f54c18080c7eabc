/**
 * Where the broker works around its HTTP engine, hyper-express 6.18 on uWebSockets.js 20.30
 * (docs/architecture.md "9. Dependencies"): each function names what the engine does on its own and
 * why the broker cannot use that. The request pipeline, the body reader and the stream writer call
 * these instead of the engine directly.
 */
import { STATUS_CODES } from 'node:http';
import HyperExpress from 'hyper-express';
import { PortInUseError } from './port-check.js';

/** uWS `ListenOptions.LIBUS_LISTEN_EXCLUSIVE_PORT`: bind without SO_REUSEPORT. */
const LIBUS_LISTEN_EXCLUSIVE_PORT = 1;
/** uWS's native `listen` with host, port and options (its typings list only the other forms); the patched form takes no options. */
type ListenCallback = (listenSocket: unknown) => void;
type ListenWithOptions = (host: string, port: number, options: number, cb: ListenCallback) => unknown;
type ListenOnHost = (host: string, port: number, cb: ListenCallback) => unknown;

/**
 * A hyper-express server that leaves body limits and signals to the broker. hyper-express refuses a body
 * above its `max_body_length` with a bare 413 before any route runs; the limit is enforced in the pipeline
 * instead (src/http/body-reader.ts: `refuseDeclaredOversize`, `readBody`), so the answer is a problem with
 * X-Flow-Id. Bodies are buffered by hyper-express in chunks of at most 64 KiB. Its `auto_close` (on by
 * default) closes the listening socket on `SIGINT`, `SIGTERM`, `SIGUSR1` and `SIGUSR2`: a node sent
 * `SIGUSR1` (Node's signal to open the inspector, how an operator attaches a debugger) kept running but
 * refused every new connection. Off: src/main.ts drains on `SIGTERM`/`SIGINT` and says what it does with
 * the other two.
 */
export function createEngine(): HyperExpress.Server {
  return new HyperExpress.Server({ max_body_length: Number.MAX_SAFE_INTEGER, max_body_buffer: 64 * 1024, auto_close: false });
}

/**
 * Starts `app` listening on `host:port`, exclusively: uWebSockets.js would otherwise set SO_REUSEPORT
 * and a second node on the same port would share it silently. hyper-express offers `exclusive_port`
 * only without a host, so its listen runs with uWS's `listen(host, port, cb)` turned, for that one call,
 * into `listen(host, port, LIBUS_LISTEN_EXCLUSIVE_PORT, cb)` (which uWS 20.30's native listen accepts);
 * hyper-express keeps its own bookkeeping of the listen socket (port, shutdown).
 * @returns the bound port (useful with port 0)
 * @throws PortInUseError when the port is taken
 */
export async function listenExclusive(app: HyperExpress.Server, port: number, host: string): Promise<number> {
  const uws = app.uws_instance;
  const native: unknown = Reflect.get(uws, 'listen'); // uWS's own, from the prototype
  const exclusive: ListenOnHost = (h, p, cb) => (native as ListenWithOptions).call(uws, h, p, LIBUS_LISTEN_EXCLUSIVE_PORT, cb);
  Object.defineProperty(uws, 'listen', { value: exclusive, configurable: true, writable: true });
  try {
    await app.listen(port, host);
  } catch {
    throw new PortInUseError(host, port);
  } finally {
    Reflect.deleteProperty(uws, 'listen'); // the prototype's listen again
  }
  return app.port;
}

/**
 * Sends a 204. hyper-express 6.18 passes `endWithoutBody(undefined, undefined)` to uWS, which this uWS
 * build reads as a `Content-Length` of 2^63 and then drops the connection, so clients lose keep-alive
 * (and some see ECONNRESET). uWS called without arguments writes no length. The hook is removed when used.
 */
export function endWithoutBody(res: HyperExpress.Response): void {
  const raw = res.raw as unknown as { endWithoutBody: (...args: unknown[]) => unknown };
  const original = raw.endWithoutBody;
  raw.endWithoutBody = function (this: unknown, length?: unknown, close?: unknown) {
    raw.endWithoutBody = original;
    return length === undefined && close === undefined ? original.call(this) : original.call(this, length, close);
  };
  res.send();
}

/** hyper-express 6.18's private collector of a request body: one Uint8Array of the declared length. */
interface BodyCollector {
  _body_parser_get_received_data?: () => Promise<Uint8Array>;
}

/**
 * The whole body of a request with `Content-Length`, as a Buffer over the array hyper-express collected
 * it in. hyper-express's own `buffer()` collects the body into one Uint8Array and then returns
 * `Buffer.from` of it, which copies: a second allocation and copy of every body on the main thread
 * (527 KB per 1000-event batch; the `publish-batches` scenario of docs/benchmarks.md "Scenarios"). The
 * Buffer returned here has the collected array's ArrayBuffer to itself, so the publisher can transfer
 * it to a worker. Falls back to `buffer()` if the engine no longer has the collector.
 */
export function receiveDeclaredBody(req: HyperExpress.Request): Promise<Buffer> {
  const collector = req as unknown as BodyCollector;
  if (typeof collector._body_parser_get_received_data !== 'function') return req.buffer();
  return collector._body_parser_get_received_data.call(req).then((raw) => Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength));
}

/** hyper-express 6.18's private parts an answer written past its `send` must keep in step: the request's body parser and the server's count of open requests. */
interface RequestInternals {
  _body_parser_stop?: () => void;
}
interface ResponseInternals {
  route?: { app?: { _resolve_pending_request?: () => void } };
}

/**
 * Sends an answer decided on a request's headers alone at once, before its body arrived; the rest of the
 * body is then read and dropped as it comes, and the connection stays open for the client's next request.
 * hyper-express's `send` holds every answer until the whole body was received: under a storm of large
 * publishes a refusal waited behind the bodies of every connection in front of it (seconds at 256
 * connections; docs/decisions/0025-publish-admission-by-bytes-in-flight.md). Answering early is what HTTP/1.1
 * allows a server (the client still sends the body it started, and uWS skips it before parsing the next
 * request); closing the connection instead (uWS `end(body, true)`) was measured: clients still sending got
 * a reset instead of the answer. For a request whose body is in already, answer with the engine's `send`.
 * @param headers the answer's headers (without `Content-Length`: uWS writes it)
 */
export function answerBeforeBody(req: HyperExpress.Request, res: HyperExpress.Response, status: number, headers: Readonly<Record<string, string>>, body: string): void {
  if (res.completed) return;
  // What hyper-express's own `close` does before ending a response early: mark it answered, drop the chunks
  // still to come, and resume a body read it paused (uWS's response object is unusable once ended).
  res.completed = true;
  (req as unknown as RequestInternals)._body_parser_stop?.call(req);
  req.resume();
  (res as unknown as ResponseInternals).route?.app?._resolve_pending_request?.();
  const raw = res.raw;
  raw.cork(() => {
    raw.writeStatus(`${status} ${STATUS_CODES[status] ?? ''}`);
    for (const [key, value] of Object.entries(headers)) raw.writeHeader(key, value);
    raw.end(body);
  });
}
