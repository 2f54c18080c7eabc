/**
 * How a consumption stream frames its batches (docs/server-sent-events.md):
 *
 * - `json-stream` — `application/x-json-stream`, one batch per line (`{"cursor":…,"events":[…]}\n`,
 *   docs/consuming.md "Subscription streams"): the default.
 * - `event-stream` — `text/event-stream` (WHATWG HTML "Server-sent events"), asked for with
 *   `Accept: text/event-stream` (what a browser's `EventSource` sends): each batch is one event,
 *   `id: <resume id>\ndata: <the same batch JSON, on one line>\n\n`; a keep-alive (a batch with neither
 *   events nor info) is the comment `: keep-alive\n\n`; the first frame starts with `retry: <ms>`.
 */
import type { StreamingAnswer } from './stream-sink.js';

/** The two framings of a stream. */
export type StreamFormat = 'json-stream' | 'event-stream';

/** Content type of each framing. */
export const STREAM_CONTENT_TYPES: Readonly<Record<StreamFormat, string>> = {
  'json-stream': 'application/x-json-stream',
  'event-stream': 'text/event-stream',
};

/**
 * Reconnection delay an `event-stream` asks of its client (`retry:` in its first frame), in ms: an
 * `EventSource` reconnects this long after the stream ended (browsers default to about 3 s).
 */
export const SSE_RETRY_MS = 1000;

/** The frame of a keep-alive on an `event-stream`: an SSE comment, which `EventSource` never dispatches. */
export const SSE_KEEP_ALIVE = ': keep-alive\n\n';

/**
 * The framing a stream answers with, from the request's `Accept` (RFC 9110 §12.5.1): `event-stream`
 * when `text/event-stream` is named with q > 0 and `application/x-json-stream` is not named with a
 * higher q-value; otherwise `json-stream` (also without the header, with wildcards only, or with types
 * the broker does not stream: streams keep answering as they always did, never 406).
 * @param accept the header's value as received
 */
export function negotiateStreamFormat(accept: string | undefined): StreamFormat {
  if (accept === undefined || !accept.toLowerCase().includes('text/event-stream')) return 'json-stream';
  let sse = 0;
  let jsonStream = 0;
  for (const part of accept.split(',')) {
    const [type = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    let weight = 1;
    for (const param of params) {
      const match = /^q\s*=\s*(.*)$/.exec(param);
      if (match) weight = /^(0(\.\d{0,3})?|1(\.0{0,3})?)$/.test(match[1] ?? '') ? Number(match[1]) : 0;
    }
    if (type === 'text/event-stream') sse = Math.max(sse, weight);
    else if (type === 'application/x-json-stream') jsonStream = Math.max(jsonStream, weight);
  }
  return sse > 0 && sse >= jsonStream ? 'event-stream' : 'json-stream';
}

/**
 * The answer that opens a subscription stream (docs/consuming.md "Subscription streams"): 200, the content
 * type of `format`, the stream's id in `X-Broker-StreamId` (with `Cache-Control: no-cache` for server-sent
 * events), then `stream` writes the batches.
 */
export function subscriptionStreamAnswer(streamId: string, format: StreamFormat, stream: StreamingAnswer['stream']): StreamingAnswer {
  return {
    status: 200,
    contentType: STREAM_CONTENT_TYPES[format],
    headers: format === 'event-stream' ? { 'X-Broker-StreamId': streamId, 'Cache-Control': 'no-cache' } : { 'X-Broker-StreamId': streamId },
    stream,
  };
}
