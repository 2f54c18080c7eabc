/**
 * Reading request bodies within their route's limits (docs/http-api.md "Requests"): the limits
 * by route kind, the early refusal of a declared oversize body, receiving a body with `Content-Length`
 * or chunked, inflating gzip and zstd bodies without passing the limit, and strict JSON parsing.
 */
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type HyperExpress from 'hyper-express';
import { brokerError, type BrokerError } from '../errors/catalog.js';
import { parseUntrustedJson } from '../domain/json/json-limits.js';
import { inflateZstdBody } from './compression.js';
import { receiveDeclaredBody } from './engine-workarounds.js';

const gunzip = promisify(zlib.gunzip);

/** A body limit in bytes as sent and inflated, with the config keys that set them (named in 413 details). */
export interface BodyLimit {
  readonly sent: number;
  readonly sentKey: string;
  readonly inflated: number;
  readonly inflatedKey: string;
}

/** The body limits of the config (`http.*`), in bytes. */
export interface BodyLimitOptions {
  /** Largest body of `events` routes as sent. */
  readonly maxBodyBytes: number;
  /** Largest body of `events` routes after gunzip. */
  readonly maxInflatedBodyBytes: number;
  /** Largest body of every other route, as sent and after gunzip (capped by the two above). */
  readonly maxControlBodyBytes: number;
}

/**
 * The limit of each kind of route: `events` (publishing, deleted events) — `http.maxBodyBytes` as sent,
 * `http.maxInflatedBodyBytes` inflated; `control` (every other route) — `http.maxControlBodyBytes` both
 * as sent and inflated, or the `events` limit when that is smaller (the 413 then names that key).
 */
export function routeBodyLimits(options: BodyLimitOptions): { readonly events: BodyLimit; readonly control: BodyLimit } {
  const control = options.maxControlBodyBytes;
  return {
    events: { sent: options.maxBodyBytes, sentKey: 'http.maxBodyBytes', inflated: options.maxInflatedBodyBytes, inflatedKey: 'http.maxInflatedBodyBytes' },
    control: {
      sent: Math.min(control, options.maxBodyBytes),
      sentKey: control <= options.maxBodyBytes ? 'http.maxControlBodyBytes' : 'http.maxBodyBytes',
      inflated: Math.min(control, options.maxInflatedBodyBytes),
      inflatedKey: control <= options.maxInflatedBodyBytes ? 'http.maxControlBodyBytes' : 'http.maxInflatedBodyBytes',
    },
  };
}

/**
 * Refuses a request whose `Content-Length` is above its route's limit (`http.maxBodyBytes` or
 * `http.maxControlBodyBytes`) before anything reads it, on every route. The problem goes out once the client sent its body: hyper-express discards the rest
 * of the body and answers when it is in, so the connection stays usable and the client, still
 * writing, does not lose the answer to a reset. A trickled body cannot hold the answer back for long:
 * uWS drops a connection whose request arrives slower than 16 KB/s (`HTTP_RECEIVE_THROUGHPUT_BYTES`)
 * or that is idle for 10 s (`HTTP_IDLE_TIMEOUT_S`; measured: docs/decisions/0008-http-engine-uwebsockets.md,
 * "Figures the code relies on").
 * @throws BrokerError 413
 */
export function refuseDeclaredOversize(req: HyperExpress.Request, limit: BodyLimit): void {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit.sent) throw tooLarge(`the body is ${declared} bytes long, more`, limit);
}

/**
 * The body as sent, inflated when `Content-Encoding: gzip` or `zstd` (docs/http-api.md "Compression").
 * @param limit the route's limits (`http.maxBodyBytes` / `http.maxInflatedBodyBytes` for publishing,
 *   `http.maxControlBodyBytes` otherwise)
 * @throws BrokerError 413 above the limit as sent or inflated (a gzip or zstd bomb stops inflating at
 *   the limit; a zstd frame declaring a larger size is not inflated at all), 415 for another encoding,
 *   400 for a corrupt gzip or zstd body
 */
export async function readBody(req: HyperExpress.Request, limit: BodyLimit): Promise<Buffer> {
  const raw = await receiveBody(req, limit);
  const encoding = (req.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding === 'identity' || raw.byteLength === 0) return raw;
  if (encoding === 'zstd') return inflateZstd(raw, limit);
  if (encoding !== 'gzip') throw brokerError('UNSUPPORTED_CONTENT_ENCODING', { encoding });
  try {
    return await gunzip(raw, { maxOutputLength: limit.inflated });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
      throw brokerError('INFLATED_BODY_TOO_LARGE', { coding: 'gzip', limit: limit.inflated, key: limit.inflatedKey });
    }
    throw brokerError('BAD_GZIP', { reason: (err as Error).message });
  }
}

/**
 * Parses a JSON request body strictly (docs/architecture.md "7. Hostile input and the schema cost
 * budget"; malformed JSON is 400, docs/http-api.md "Status codes"):
 * UTF-8 without invalid sequences, nesting at most `MAX_JSON_DEPTH` levels, and no `__proto__` or
 * `constructor.prototype` key anywhere (src/domain/json/json-limits.ts).
 * @throws BrokerError 400 (BAD_REQUEST) naming what is wrong
 */
export function parseJson(body: Buffer): unknown {
  const parsed = parseUntrustedJson(body, { refusePrototypeKeys: true });
  if (!parsed.ok) throw brokerError('BAD_REQUEST', { reason: parsed.reason });
  return parsed.value;
}

/**
 * Receives the body bytes as sent, at most `limit.sent`. A body with `Content-Length` is
 * already known to fit ({@link refuseDeclaredOversize}) and is received by hyper-express into one
 * buffer of that size; a chunked body is counted as it arrives and refused as soon as it passes the
 * limit, keeping nothing of it.
 * @throws BrokerError 413; 400 when the client leaves before its chunked body is complete
 */
function receiveBody(req: HyperExpress.Request, bodyLimit: BodyLimit): Promise<Buffer> {
  if (req.headers['transfer-encoding'] !== 'chunked') return receiveDeclaredBody(req);
  const limit = bodyLimit.sent;
  return new Promise((resolve, reject) => {
    let chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    // pipe(), not on('data'): hyper-express's Request starts its lazily made stream flowing only there.
    req.pipe(
      new Writable({
        write: (chunk: Buffer, _encoding, done) => {
          if (!refused) {
            size += chunk.byteLength;
            if (size > limit) {
              refused = true;
              chunks = [];
              reject(tooLarge('the chunked body is longer', bodyLimit));
            } else {
              chunks.push(chunk);
            }
          }
          done();
        },
        final: (done) => {
          // The stream also ends when the client goes away mid-body: a cut-off body is never used.
          if (!req.received) reject(brokerError('INCOMPLETE_BODY'));
          else if (!refused) resolve(Buffer.concat(chunks, size));
          done();
        },
      }),
    );
  });
}

/**
 * A `Content-Encoding: zstd` body inflated within the route's inflated limit (src/http/compression.ts).
 * @throws BrokerError 413 when it inflates (or declares it inflates) past the limit, 400 (BAD_ZSTD) when it does not decode
 */
function inflateZstd(raw: Buffer, limit: BodyLimit): Buffer {
  const inflated = inflateZstdBody(raw, limit.inflated);
  if (inflated.ok) return inflated.body;
  if (inflated.failure.kind === 'too-large') throw brokerError('INFLATED_BODY_TOO_LARGE', { coding: 'zstd', limit: limit.inflated, key: limit.inflatedKey });
  throw brokerError('BAD_ZSTD', { reason: inflated.failure.reason });
}

function tooLarge(what: string, limit: BodyLimit): BrokerError {
  return brokerError('BODY_TOO_LARGE', { what, limit: limit.sent, key: limit.sentKey });
}
