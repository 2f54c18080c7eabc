// Live tail: events of an event type (low-level stream from the newest offsets or from BEGIN) or of a
// subscription (subscription stream, committing what arrived) as they are published; pause, filter by
// text, expand one event. Reads the streams through json-lines.ts (fetch + a streaming reader).
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, errorText, request, seg } from '../api.js';
import { openJsonLines } from '../json-lines.js';
import { formText, html, href, type View, useLoad } from '../ui.js';
import type { EventType, Partition, StreamBatch } from '../wire.js';

/** Events kept on screen (older ones are dropped). */
const KEEP = 1000;

/** One event as shown. */
interface Row {
  readonly key: number;
  readonly eventType: string;
  readonly partition: string;
  readonly text: string;
}

/** What to tail, from the route's query: `event_type` (+ `from=begin`, `filter`) or `subscription`. */
interface Source {
  readonly eventType?: string;
  readonly from: 'newest' | 'begin';
  readonly subscription?: string;
  /** Event types: a draft-04 JSON Schema (JSON text) the broker tests each event against (docs/consuming.md "Filters"). */
  readonly filter?: string;
}

/** The live tail page. */
export function TailPage({ query }: { query: URLSearchParams }): View {
  const source: Source = {
    eventType: query.get('event_type') ?? undefined,
    from: query.get('from') === 'begin' ? 'begin' : 'newest',
    subscription: query.get('subscription') ?? undefined,
    filter: query.get('filter') ?? undefined,
  };
  const eventTypes = useLoad(() => api<EventType[]>('GET', '/event-types'), []);
  const pick = (e: Event): void => {
    e.preventDefault();
    const data = new FormData(e.target as HTMLFormElement);
    const q = new URLSearchParams();
    const mode = formText(data, 'mode');
    if (mode === 'subscription') q.set('subscription', formText(data, 'subscription'));
    else {
      q.set('event_type', formText(data, 'event_type'));
      if (mode === 'begin') q.set('from', 'begin');
      const filter = formText(data, 'filter').trim();
      if (filter !== '') q.set('filter', filter);
    }
    location.hash = href(`/tail?${q.toString()}`);
  };
  const active = source.eventType !== undefined || source.subscription !== undefined;
  const names = (eventTypes.value ?? []).map((e) => e.name).sort();
  return html`<div>
    <h1>Live tail</h1>
    <form class="toolbar" data-test="tail-form" onSubmit=${pick}>
      <select name="event_type" aria-label="Event type" value=${source.eventType ?? ''}>${names.map((n) => html`<option value=${n}>${n}</option>`)}</select>
      <label><input type="radio" name="mode" value="newest" checked=${source.subscription === undefined && source.from === 'newest'} /> from the newest offsets</label>
      <label><input type="radio" name="mode" value="begin" checked=${source.subscription === undefined && source.from === 'begin'} /> from BEGIN</label>
      <label><input type="radio" name="mode" value="subscription" checked=${source.subscription !== undefined} /> subscription</label>
      <input name="subscription" placeholder="subscription id" aria-label="Subscription id" value=${source.subscription ?? ''} />
      <input name="filter" data-test="tail-schema-filter" placeholder='filter (event types): a JSON Schema, e.g. {"properties":{"amount":{"minimum":100}}}' aria-label="Filter: a JSON Schema events must match" value=${source.filter ?? ''} />
      <button type="submit" class="primary">Tail</button>
    </form>
    ${source.subscription === undefined ? null : html`<p class="muted">Reading a subscription consumes it: the console commits the cursor of every batch it shows, as a consumer would. A subscription applies its own filter (shown on its page).</p>`}
    ${active ? html`<${Tail} key=${JSON.stringify(source)} source=${source} />` : html`<p class="muted">Pick an event type or a subscription.</p>`}
  </div>`;
}

/** A running tail of `source` (restarts when the source changes: the component is keyed by it). */
function Tail({ source }: { source: Source }): View {
  const [rows, setRows] = useState<Row[]>([]);
  const [status, setStatus] = useState('connecting…');
  const [paused, setPaused] = useState(false);
  const [filter, setFilter] = useState('');
  const [open, setOpen] = useState<number | undefined>(undefined);
  const held = useRef<Row[]>([]);
  const pausedRef = useRef(false);
  const [heldCount, setHeldCount] = useState(0);

  useEffect(() => {
    const controller = new AbortController();
    let next = 0;
    const show = (batch: StreamBatch, eventType: string): void => {
      const events = batch.events ?? [];
      if (events.length === 0) return;
      const fresh = events.map((event) => ({ key: next++, eventType, partition: batch.cursor.partition, text: JSON.stringify(event) }));
      if (pausedRef.current) {
        held.current = [...held.current, ...fresh].slice(-KEEP);
        setHeldCount(held.current.length);
      } else setRows((r) => [...r, ...fresh].slice(-KEEP));
    };
    const run = async (): Promise<void> => {
      if (source.subscription !== undefined) await tailSubscription(source.subscription, show, setStatus, controller.signal);
      else if (source.eventType !== undefined) await tailEventType(source.eventType, source.from, source.filter, show, setStatus, controller.signal);
    };
    run().catch((err: unknown) => {
      if (!controller.signal.aborted) setStatus(`stopped: ${errorText(err)}`);
    });
    return () => controller.abort();
  }, []);

  const togglePause = (): void => {
    pausedRef.current = !paused;
    if (paused) {
      const resumed = held.current;
      held.current = [];
      setHeldCount(0);
      setRows((r) => [...r, ...resumed].slice(-KEEP));
    }
    setPaused(!paused);
  };
  const needle = filter.toLowerCase();
  const shown = needle === '' ? rows : rows.filter((r) => r.text.toLowerCase().includes(needle));
  return html`<div class="card">
    <div class="toolbar">
      <span data-test="tail-status" class="status">${status}</span>
      <button type="button" data-test="pause" onClick=${togglePause}>${paused ? `Resume (${String(heldCount)} held)` : 'Pause'}</button>
      <input type="search" placeholder="Filter by text" aria-label="Filter by text" data-test="tail-filter" value=${filter} onInput=${(e: Event) => setFilter((e.target as HTMLInputElement).value)} />
      <button type="button" onClick=${() => setRows([])}>Clear</button>
      <span class="muted" data-test="tail-count">${shown.length} of ${rows.length} events</span>
    </div>
    <table class="grid tail" data-test="tail">
      <thead><tr><th>Event type</th><th>Partition</th><th>Event</th></tr></thead>
      <tbody>${[...shown].reverse().map(
        (r) => html`<tr key=${r.key} class="event" onClick=${() => setOpen(open === r.key ? undefined : r.key)}>
          <td>${r.eventType}</td><td>${r.partition}</td>
          <td>${open === r.key ? html`<pre class="json">${JSON.stringify(JSON.parse(r.text), null, 2)}</pre>` : html`<code class="one-line">${r.text}</code>`}</td>
        </tr>`,
      )}</tbody>
    </table>
  </div>`;
}

/**
 * The status once a stream ended: `the stream ended`, and why when its last batch said so —
 * `<stream_close_reason> (<debug>)` (docs/consuming.md "Why a stream ended").
 */
function endedStatus(last: StreamBatch['info']): string {
  const reason = last?.stream_close_reason;
  const debug = last?.debug;
  if (reason === undefined) return `the stream ended${debug === undefined ? '' : `: ${debug}`}`;
  return `the stream ended: ${reason}${debug === undefined ? '' : ` (${debug})`}`;
}

/**
 * Streams an event type with a low-level stream (every partition from BEGIN, or from the newest offsets),
 * only the events `filter` matches when given (the broker tests them; an unusable filter stops the tail with its 422).
 */
async function tailEventType(name: string, from: 'newest' | 'begin', filter: string | undefined, show: (b: StreamBatch, eventType: string) => void, setStatus: (s: string) => void, signal: AbortSignal): Promise<void> {
  const headers: Record<string, string> = {};
  if (from === 'begin') {
    const partitions = await api<Partition[]>('GET', `/event-types/${seg(name)}/partitions`);
    headers['X-Broker-Cursors'] = JSON.stringify(partitions.map((p) => ({ partition: p.partition, offset: 'BEGIN' })));
  }
  let last: StreamBatch['info'];
  const stream = await openJsonLines(
    `/event-types/${seg(name)}/events?batch_limit=100&batch_flush_timeout=1${filter === undefined ? '' : `&filter=${encodeURIComponent(filter)}`}`,
    { headers },
    (line) => {
      const batch = line as StreamBatch;
      if (batch.info !== undefined) last = batch.info;
      show(batch, name);
    },
    signal,
  );
  setStatus(`streaming ${name} from ${from === 'begin' ? 'BEGIN' : 'the newest offsets'}${filter === undefined ? '' : ', filtered by the broker'}`);
  await stream.done;
  if (!signal.aborted) setStatus(endedStatus(last));
}

/**
 * Streams a subscription and commits each batch that carried events (one commit in flight, carrying
 * every cursor that arrived meanwhile), as the CLI's tail does; without commits the broker would end the
 * stream after its commit timeout.
 */
async function tailSubscription(id: string, show: (b: StreamBatch, eventType: string) => void, setStatus: (s: string) => void, signal: AbortSignal): Promise<void> {
  let streamId = '';
  let last: StreamBatch['info'];
  const pending = new Map<string, StreamBatch['cursor']>();
  let committing = false;
  const commit = async (): Promise<void> => {
    if (committing || pending.size === 0 || streamId === '') return;
    committing = true;
    const items = [...pending.values()];
    pending.clear();
    try {
      const answer = await request('POST', `/subscriptions/${seg(id)}/cursors`, { items }, { 'X-Broker-StreamId': streamId });
      if (answer.status >= 300) setStatus(`commit refused: ${String(answer.status)}`);
    } finally {
      committing = false;
    }
    await commit();
  };
  const stream = await openJsonLines(
    `/subscriptions/${seg(id)}/events?batch_limit=100&batch_flush_timeout=1`,
    {},
    (line) => {
      const batch = line as StreamBatch;
      if (batch.info !== undefined) last = batch.info;
      show(batch, batch.cursor.event_type ?? '');
      if ((batch.events ?? []).length > 0) {
        // Every batch's cursor, not only the latest per partition: a queue-mode subscription's commit
        // acknowledges its own batch only (in stream mode the later cursors of a partition simply advance).
        pending.set(`${batch.cursor.event_type ?? ''}\u0000${batch.cursor.partition}\u0000${batch.cursor.offset}`, batch.cursor);
        void commit().catch((err: unknown) => setStatus(`commit failed: ${errorText(err)}`));
      }
    },
    signal,
  );
  streamId = stream.headers.get('X-Broker-StreamId') ?? '';
  setStatus(`streaming subscription ${id} (stream ${streamId})`);
  void commit().catch((err: unknown) => setStatus(`commit failed: ${errorText(err)}`));
  await stream.done;
  if (!signal.aborted) setStatus(endedStatus(last));
}
