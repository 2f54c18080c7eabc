/** Request targets of streams and commits, for the stream client (src/client/stream-client.ts). */

/**
 * Query parameters of a stream (docs/consuming.md "Stream parameters"); the broker's defaults apply
 * to those left out. Seconds and counts, as integers. `max_uncommitted_events` and `commit_timeout`
 * only apply to subscription streams.
 */
export interface StreamParameters {
  readonly batch_limit?: number;
  readonly stream_limit?: number;
  readonly batch_flush_timeout?: number;
  readonly stream_timeout?: number;
  readonly stream_keep_alive_limit?: number;
  readonly max_uncommitted_events?: number;
  readonly commit_timeout?: number;
}

/** What a stream reads: an event type without a subscription (low-level), or a subscription. */
export type StreamSource = { readonly eventType: string } | { readonly subscription: string };

/**
 * The request target (path and query) of a stream: `/event-types/{name}/events?…` or
 * `/subscriptions/{id}/events?…`, the name or id URL-encoded, the parameters in the order given.
 */
export function streamPath(source: StreamSource, parameters: StreamParameters = {}): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(parameters)) if (value !== undefined) query.set(name, String(value));
  const base = 'eventType' in source ? `/event-types/${encodeURIComponent(source.eventType)}/events` : `/subscriptions/${encodeURIComponent(source.subscription)}/events`;
  const search = query.toString();
  return search === '' ? base : `${base}?${search}`;
}

/** The request target of a subscription's commits (`POST`, with the stream id header, `X-Broker-StreamId`). */
export function commitPath(subscription: string): string {
  return `/subscriptions/${encodeURIComponent(subscription)}/cursors`;
}
