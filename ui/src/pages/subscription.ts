// One subscription: per partition its committed offset, unconsumed events, time lag and the stream
// holding it, refreshed every few seconds; a lag chart over the last minutes; cursor reset.
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { api, seg } from '../api.js';
import { AuthorizationView, Confirm, duration, ErrorBox, html, href, Section, useFeatures, useLoad, type View } from '../ui.js';
import type { Access, Cursor, Partition, Stats, Subscription, SubscriptionCursor, SubscriptionCursorWithoutToken } from '../wire.js';

/** How often stats and cursors are read. */
const POLL_MS = 2000;
/** How much lag history the chart keeps (in memory, this page only). */
const HISTORY_SECONDS = 10 * 60;

/** One sample of the lag chart. */
interface LagPoint {
  readonly at: number;
  readonly unconsumed: number | null;
  readonly lagSeconds: number | null;
}

/** The detail page of subscription `id`. */
export function SubscriptionPage({ id }: { id: string }): View {
  const record = useLoad(() => api<Subscription>('GET', `/subscriptions/${seg(id)}`), [id]);
  const may = useLoad(async () => (await api<Access>('GET', `/ui/api/access?subscription=${seg(id)}`)).subscription, [id]);
  const live = useLoad(
    async () => {
      const [stats, cursors] = await Promise.all([
        api<Stats>('GET', `/subscriptions/${seg(id)}/stats?show_time_lag=true`),
        api<{ items: SubscriptionCursor[] }>('GET', `/subscriptions/${seg(id)}/cursors`),
      ]);
      return { stats, cursors: cursors.items, at: Date.now() / 1000 };
    },
    [id],
    POLL_MS,
  );
  const [history, setHistory] = useState<LagPoint[]>([]);
  useEffect(() => {
    const value = live.value;
    if (value === undefined) return;
    const partitions = value.stats.items.flatMap((i) => i.partitions);
    const known = partitions.filter((p) => p.unconsumed_events !== undefined);
    const lags = partitions.map((p) => p.consumer_lag_seconds).filter((l): l is number => l !== undefined);
    const point: LagPoint = {
      at: value.at,
      unconsumed: known.length === 0 ? null : known.reduce((sum, p) => sum + (p.unconsumed_events ?? 0), 0),
      lagSeconds: lags.length === 0 ? null : Math.max(...lags),
    };
    setHistory((h) => [...h.filter((p) => p.at > point.at - HISTORY_SECONDS), point]);
  }, [live.value]);

  const features = useFeatures();
  const sub = record.value;
  if (record.error !== undefined) return html`<div><h1>Subscription</h1><${ErrorBox} error=${record.error} /></div>`;
  if (sub === undefined) return html`<p class="loading">Loading…</p>`;
  const committed = new Map((live.value?.cursors ?? []).map((c) => [`${c.event_type}\u0000${c.partition}`, c.offset]));
  const rows = (live.value?.stats.items ?? []).flatMap((i) => i.partitions.map((p) => ({ eventType: i.event_type, ...p })));
  const mayReset = may.value?.reset === true && !features.has('disable_db_write_operations');
  const queueMode = sub.annotations?.['broker.io/consumption-mode'] === 'queue';
  return html`<div>
    <h1>Subscription <code>${sub.id}</code></h1>
    <div class="columns">
      <${Section} title="Subscription">
        <dl class="kv">
          <dt>Owning application</dt><dd>${sub.owning_application}</dd>
          <dt>Event types</dt><dd>${sub.event_types.map((n) => html`<a class="tag" href=${href(`/event-types/${seg(n)}`)}>${n}</a>`)}</dd>
          <dt>Consumer group</dt><dd>${sub.consumer_group}</dd>
          <dt>Read from</dt><dd>${sub.read_from}</dd>
          <dt>Consumption mode</dt><dd data-test="mode">${queueMode ? 'queue: any number of streams share the partitions, each batch acknowledged on its own' : 'stream: one stream per partition'}</dd>
          <dt>Filter</dt><dd>${sub.filter === undefined ? html`<span class="muted">none: every event</span>` : html`<pre class="json" data-test="filter">${JSON.stringify(sub.filter, null, 2)}</pre>`}</dd>
          <dt>Created</dt><dd>${sub.created_at}</dd>
        </dl>
        <p><a href=${href(`/tail?subscription=${sub.id}`)}>Tail this subscription</a></p>
      <//>
      <${Section} title="Authorization"><${AuthorizationView} authorization=${sub.authorization} /><//>
    </div>
    <${Section} title="Partitions" actions=${html`<span class="muted">refreshed every ${POLL_MS / 1000} s</span>`}>
      <${ErrorBox} error=${live.error} />
      <table class="grid" data-test="lag-table">
        <thead><tr><th>Event type</th><th>Partition</th><th>State</th><th>Committed offset</th><th>Unconsumed events</th><th>Time lag</th><th title="ok · lagging: commits advance, the lag grows · stalled: events wait, no commits while a stream holds the partition · stopped: events wait, no stream">Status</th><th title="Time until the unconsumed events are consumed at the recent commit rate">Drain time</th><th title="Events retention removed before this subscription read them">Expired unread</th>${queueMode ? html`<th title="Handed to streams, not acknowledged">In flight</th><th title="Of those, waiting to be handed out again">Redelivery</th>` : html`<th>Stream</th><th>Assignment</th>`}</tr></thead>
        <tbody>${rows.map(
          (r) => html`<tr>
            <td>${r.eventType}</td><td>${r.partition}</td><td>${r.state}</td>
            <td><code>${committed.get(`${r.eventType}\u0000${r.partition}`) ?? '–'}</code></td>
            <td class="num" data-test="unconsumed">${r.unconsumed_events ?? '–'}</td>
            <td class="num">${duration(r.consumer_lag_seconds)}</td>
            <td data-test="consumer-status">${r.consumer_status === undefined ? '–' : html`<span class=${`status status-${r.consumer_status}`}>${r.consumer_status}</span>`}</td>
            <td class="num" data-test="drain">${duration(r.drain_seconds)}</td>
            <td class="num" data-test="expired">${r.expired_events ?? 0}</td>
            ${queueMode ? html`<td class="num" data-test="in-flight">${r.in_flight_events ?? 0}</td><td class="num">${r.redelivery_events ?? 0}</td>` : html`<td><code>${r.stream_id || '–'}</code></td><td>${r.assignment_type}</td>`}
          </tr>`,
        )}</tbody>
        <tfoot><tr><th colspan="4">Total</th><th class="num" data-test="total-unconsumed">${totalUnconsumed(rows)}</th><th colspan="3"></th><th class="num" data-test="total-expired">${rows.reduce((s, r) => s + (r.expired_events ?? 0), 0)}</th><th colspan="2"></th></tr></tfoot>
      </table>
      ${rows.some((r) => r.unconsumed_events === undefined) ? html`<p class="muted">Unconsumed events are known once the subscription was first streamed or its cursors reset.</p>` : null}
      ${rows.some((r) => (r.expired_events ?? 0) > 0) ? html`<p class="muted" data-test="expired-note">Retention removed some events before this subscription read them: its streams continued at the oldest event kept.</p>` : null}
    <//>
    <${Section} title="Lag over the last minutes"><${LagChart} points=${history} /><//>
    ${mayReset ? html`<${ResetCursors} subscription=${sub} onReset=${live.reload} />` : null}
  </div>`;
}

function totalUnconsumed(rows: readonly { unconsumed_events?: number }[]): string {
  const known = rows.filter((r) => r.unconsumed_events !== undefined);
  return known.length === 0 ? '–' : String(known.reduce((s, r) => s + (r.unconsumed_events ?? 0), 0));
}

/** Steps between the lag chart's time ticks, seconds: whole seconds to an hour. */
const TIME_TICKS_SECONDS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600];

/** Unconsumed events (left axis) and the largest time lag (right axis) over time, drawn with uPlot. */
function LagChart({ points }: { points: readonly LagPoint[] }): View {
  const box = useRef<HTMLDivElement>(null);
  const chart = useRef<uPlot | null>(null);
  const data = (): uPlot.AlignedData => [points.map((p) => p.at), points.map((p) => p.unconsumed), points.map((p) => p.lagSeconds)];
  useEffect(() => {
    const el = box.current;
    if (el === null) return undefined;
    const opts: uPlot.Options = {
      width: Math.max(300, el.clientWidth),
      height: 220,
      scales: { x: { time: true }, events: { range: (_u, _min, max) => [0, Math.max(1, max)] }, s: { range: (_u, _min, max) => [0, Math.max(1, max)] } },
      series: [
        {},
        { label: 'unconsumed events', scale: 'events', stroke: '#1f6feb', width: 2 },
        { label: 'time lag (s)', scale: 's', stroke: '#d1242f', width: 2 },
      ],
      // Samples come every 2 s: ticks at whole seconds or coarser, labelled with the time of day (uPlot
      // would otherwise label a few seconds of samples in 100 ms steps).
      axes: [{ incrs: TIME_TICKS_SECONDS, values: '{HH}:{mm}:{ss}' }, { scale: 'events', label: 'events' }, { scale: 's', side: 1, label: 'seconds', grid: { show: false } }],
    };
    const plot = new uPlot(opts, data(), el);
    chart.current = plot;
    const resize = (): void => plot.setSize({ width: Math.max(300, el.clientWidth), height: 220 });
    window.addEventListener('resize', resize);
    return () => {
      window.removeEventListener('resize', resize);
      plot.destroy();
      chart.current = null;
    };
    // created once; data follows in the next effect
  }, []);
  useEffect(() => {
    chart.current?.setData(data());
  }, [points]);
  return html`<div ref=${box} class="chart" data-test="lag-chart"></div>`;
}

/**
 * Cursor reset to the beginning or the end of every partition, to a time (the cursors at that time of each
 * event type: docs/consuming.md "Seeking by time"), or to cursors given as JSON, after a confirmation.
 */
function ResetCursors({ subscription, onReset }: { subscription: Subscription; onReset: () => void }): View {
  const [target, setTarget] = useState<'begin' | 'end' | 'time' | 'custom'>('end');
  const [custom, setCustom] = useState('[]');
  const [time, setTime] = useState('');
  const [asking, setAsking] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [done, setDone] = useState(false);
  const cursors = async (): Promise<SubscriptionCursorWithoutToken[]> => {
    if (target === 'custom') return JSON.parse(custom) as SubscriptionCursorWithoutToken[];
    const all: SubscriptionCursorWithoutToken[] = [];
    if (target === 'time') {
      // datetime-local is the browser's local time without a zone: Date reads it as local time.
      const at = new Date(time);
      if (Number.isNaN(at.getTime())) throw new Error('choose a date and time');
      for (const eventType of subscription.event_types) {
        const found = await api<Cursor[]>('GET', `/event-types/${seg(eventType)}/cursors-at-time?time=${encodeURIComponent(at.toISOString())}`);
        for (const c of found) all.push({ event_type: eventType, partition: c.partition, offset: c.offset });
      }
      return all;
    }
    for (const eventType of subscription.event_types) {
      const partitions = await api<Partition[]>('GET', `/event-types/${seg(eventType)}/partitions`);
      for (const p of partitions) all.push({ event_type: eventType, partition: p.partition, offset: target === 'begin' ? 'BEGIN' : p.newest_available_offset });
    }
    return all;
  };
  const reset = async (): Promise<void> => {
    setAsking(false);
    setError(undefined);
    setDone(false);
    try {
      await api('PATCH', `/subscriptions/${seg(subscription.id)}/cursors`, { items: await cursors() });
      setDone(true);
      onReset();
    } catch (err) {
      setError(err);
    }
  };
  return html`<${Section} title="Reset cursors">
    <div class="toolbar">
      <label><input type="radio" name="target" checked=${target === 'begin'} onChange=${() => setTarget('begin')} /> to the oldest available events</label>
      <label><input type="radio" name="target" checked=${target === 'end'} onChange=${() => setTarget('end')} /> to the newest events (skip everything)</label>
      <label><input type="radio" name="target" data-test="reset-to-time" checked=${target === 'time'} onChange=${() => setTarget('time')} /> to a time</label>
      <label><input type="radio" name="target" checked=${target === 'custom'} onChange=${() => setTarget('custom')} /> to these cursors</label>
      <button type="button" class="danger" data-test="reset" onClick=${() => setAsking(true)}>Reset…</button>
    </div>
    ${target === 'time' ? html`<input type="datetime-local" step="0.001" data-test="reset-time" value=${time} onInput=${(e: Event) => setTime((e.target as HTMLInputElement).value)} />` : null}
    ${target === 'custom' ? html`<textarea class="code" rows="4" spellcheck="false" value=${custom} onInput=${(e: Event) => setCustom((e.target as HTMLTextAreaElement).value)}></textarea>` : null}
    ${asking ? html`<${Confirm} what=${`Reset the cursors of this subscription ${target === 'custom' ? 'to the cursors given' : target === 'time' ? `to the first events received at or after ${time.replace('T', ' ')}` : target === 'begin' ? 'to the oldest available events' : 'to the newest events'}? Every open stream of it ends, and consumers continue from the new cursors.`} action="Reset cursors" onConfirm=${() => void reset()} onCancel=${() => setAsking(false)} />` : null}
    <${ErrorBox} error=${error} />
    ${done ? html`<div class="ok">Cursors reset.</div>` : null}
  <//>`;
}
