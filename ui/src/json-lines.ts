// Reads the broker's streams (`application/x-json-stream`: one JSON batch per line) with fetch and a
// streaming reader, so the bearer token travels in the Authorization header (EventSource cannot send
// headers). SSE: once the broker answers `Accept: text/event-stream` on the low-level and subscription
// streams (being built on another branch), `openJsonLines` is the one place to switch: read `data:`
// fields instead of lines (still with fetch, for the header); callers see the same batches.

import { ApiError, asProblem, authHeaders } from './api.js';

/** An open stream: its answer headers, and a promise that settles when it ends. */
export interface OpenStream {
  readonly headers: Headers;
  /** Resolves when the broker ends the stream or `signal` aborts it; rejects when reading fails. */
  readonly done: Promise<void>;
}

/**
 * Opens a stream and calls `onLine` with each line parsed as JSON, as the bytes arrive.
 * @throws ApiError when the broker answers with a problem instead of a stream
 */
export async function openJsonLines(path: string, init: { method?: string; headers?: Record<string, string>; body?: unknown }, onLine: (line: unknown) => void, signal: AbortSignal): Promise<OpenStream> {
  const headers = authHeaders({ Accept: 'application/x-json-stream', ...(init.body === undefined ? {} : { 'Content-Type': 'application/json' }), ...init.headers });
  const res = await fetch(path, { method: init.method ?? 'GET', headers, signal, ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }) });
  if (!res.ok || res.body === null) {
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    throw new ApiError(res.status, asProblem(parsed), parsed);
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  const done = (async () => {
    let rest = '';
    try {
      for (;;) {
        const { value, done: ended } = await reader.read();
        if (ended) break;
        rest += value;
        let newline = rest.indexOf('\n');
        while (newline >= 0) {
          const line = rest.slice(0, newline).trim();
          rest = rest.slice(newline + 1);
          if (line !== '') onLine(JSON.parse(line));
          newline = rest.indexOf('\n');
        }
      }
    } catch (err) {
      if (!signal.aborted) throw err;
    }
  })();
  return { headers: res.headers, done };
}
