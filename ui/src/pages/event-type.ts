// One event type: its record, schema with versions and a diff, partitions, subscriptions reading it,
// authorization, a test publish, and deletion.
import { useState } from 'preact/hooks';
import { api, ApiError, asProblem, request, seg } from '../api.js';
import { diffLines, prettyJson } from '../diff.js';
import { AuthorizationView, Confirm, ErrorBox, html, href, Section, useFeatures, useLoad, uuid, type View } from '../ui.js';
import type { Access, BatchItem, EventType, Page, Partition, SchemaRecord, Subscription } from '../wire.js';

/** The detail page of event type `name`. */
export function EventTypePage({ name }: { name: string; access: Access }): View {
  const record = useLoad(() => api<EventType>('GET', `/event-types/${seg(name)}`), [name]);
  const may = useLoad(async () => (await api<Access>('GET', `/ui/api/access?event_type=${seg(name)}`)).event_type, [name]);
  const features = useFeatures();
  const [deleting, setDeleting] = useState(false);
  const [deleteError, setDeleteError] = useState<unknown>(undefined);
  if (record.error !== undefined) return html`<div><h1>${name}</h1><${ErrorBox} error=${record.error} /></div>`;
  const et = record.value;
  if (et === undefined) return html`<p class="loading">Loading…</p>`;
  const rights = may.value;
  const readOnly = features.has('disable_db_write_operations');
  const mayDelete = rights?.admin === true && !readOnly;
  const remove = async (): Promise<void> => {
    setDeleting(false);
    try {
      await api('DELETE', `/event-types/${seg(name)}`);
      location.hash = href('/event-types');
    } catch (err) {
      setDeleteError(err);
    }
  };
  return html`<div>
    <h1>${et.name} ${mayDelete ? html`<button type="button" class="danger small" data-test="delete-event-type" onClick=${() => setDeleting(true)}>Delete</button>` : null}</h1>
    ${deleting ? html`<${Confirm} what=${`Delete the event type ${name}, with every event stored in it? This cannot be undone.`} typed=${name} action="Delete event type" onConfirm=${() => void remove()} onCancel=${() => setDeleting(false)} />` : null}
    <${ErrorBox} error=${deleteError} />
    <div class="columns">
      <${Section} title="Event type">
        <dl class="kv">
          <dt>Category</dt><dd>${et.category}</dd>
          <dt>Owning application</dt><dd>${et.owning_application}</dd>
          <dt>Partition strategy</dt><dd>${et.partition_strategy}${et.partition_key_fields?.length ? ` by ${et.partition_key_fields.join(', ')}` : ''}</dd>
          <dt>Compatibility mode</dt><dd>${et.compatibility_mode ?? ''}</dd>
          <dt>Cleanup policy</dt><dd>${et.cleanup_policy ?? 'delete'}</dd>
          ${et.audience !== undefined ? html`<dt>Audience</dt><dd>${et.audience}</dd>` : null}
          <dt>Enrichment</dt><dd>${(et.enrichment_strategies ?? []).join(', ') || 'none'}</dd>
          <dt>Created</dt><dd>${et.created_at ?? ''}</dd>
          <dt>Updated</dt><dd>${et.updated_at ?? ''}</dd>
          <dt>Your rights</dt><dd data-test="rights">${rights === undefined ? '…' : (['read', 'write', 'admin'] as const).filter((r) => rights[r]).join(', ') || 'none'}</dd>
        </dl>
      <//>
      <${Section} title="Authorization"><${AuthorizationView} authorization=${et.authorization} /><//>
    </div>
    <${Partitions} name=${name} mayRead=${rights?.read !== false} />
    <${Schemas} name=${name} current=${et.schema} />
    <${Readers} name=${name} />
    ${rights?.write === true ? html`<${Publish} eventType=${et} />` : null}
  </div>`;
}

/** Partitions with their oldest and newest offsets (needs the event type's readers). */
function Partitions({ name, mayRead }: { name: string; mayRead: boolean }): View {
  const partitions = useLoad(() => (mayRead ? api<Partition[]>('GET', `/event-types/${seg(name)}/partitions`) : Promise.resolve([])), [name, mayRead], 5000);
  return html`<${Section} title="Partitions" actions=${html`<button type="button" class="small" onClick=${partitions.reload}>Refresh</button>`}>
    ${mayRead ? null : html`<p class="muted">You are not among this event type's readers: partitions and offsets are not shown.</p>`}
    <${ErrorBox} error=${partitions.error} />
    <table class="grid" data-test="partitions">
      <thead><tr><th>Partition</th><th>Oldest available offset</th><th>Newest available offset</th><th>Events</th></tr></thead>
      <tbody>${(partitions.value ?? []).map((p) => html`<tr><td>${p.partition}</td><td><code>${p.oldest_available_offset}</code></td><td><code>${p.newest_available_offset}</code></td><td>${eventsIn(p)}</td></tr>`)}</tbody>
    </table>
  <//>`;
}

/** Events held by a partition on one timeline (the offsets' last field); '' when they span timelines. */
function eventsIn(p: Partition): string {
  const parse = (offset: string): [string, number] => {
    const m = /^(\d+-\d+)-(-?\d+)$/.exec(offset);
    return m === null ? ['', NaN] : [m[1] ?? '', Number(m[2])];
  };
  const [oldTimeline, oldest] = parse(p.oldest_available_offset);
  const [newTimeline, newest] = parse(p.newest_available_offset);
  return oldTimeline === newTimeline && Number.isFinite(oldest) ? String(Math.max(0, newest - oldest + 1)) : '';
}

/** The schema, pretty-printed, and the diff between two versions. */
function Schemas({ name, current }: { name: string; current: SchemaRecord }): View {
  const versions = useLoad(() => api<Page<SchemaRecord>>('GET', `/event-types/${seg(name)}/schemas?limit=1000`), [name, current.version]);
  const items = versions.value?.items ?? [];
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const older = from || items[1]?.version || items[0]?.version || '';
  const newer = to || items[0]?.version || '';
  const text = (v: string): string => prettyJson(items.find((s) => s.version === v)?.schema ?? '');
  const select = (value: string, set: (v: string) => void, label: string): View =>
    html`<select aria-label=${label} value=${value} onChange=${(e: Event) => set((e.target as HTMLSelectElement).value)}>${items.map((s) => html`<option value=${s.version}>${s.version} (${s.created_at ?? ''})</option>`)}</select>`;
  return html`<div class="columns">
    <${Section} title=${`Schema ${current.version ?? ''}`}><pre class="json" data-test="schema">${prettyJson(current.schema)}</pre><//>
    <${Section} title="Versions">
      <${ErrorBox} error=${versions.error} />
      <p>${items.length} version${items.length === 1 ? '' : 's'}. Compare ${select(older, setFrom, 'older version')} with ${select(newer, setTo, 'newer version')}</p>
      <pre class="diff" data-test="schema-diff">${diffLines(text(older), text(newer)).map((l) => html`<span class=${l.op === '+' ? 'add' : l.op === '-' ? 'del' : 'same'}>${`${l.op} ${l.text}`}</span>`)}</pre>
    <//>
  </div>`;
}

/** Subscriptions that read this event type. */
function Readers({ name }: { name: string }): View {
  const subs = useLoad(() => api<Page<Subscription>>('GET', `/subscriptions?event_type=${seg(name)}&limit=100`), [name]);
  const items = subs.value?.items ?? [];
  return html`<${Section} title="Subscriptions reading it">
    <${ErrorBox} error=${subs.error} />
    ${items.length === 0 && subs.value !== undefined ? html`<p class="muted">None.</p>` : null}
    <ul>${items.map((s) => html`<li><a href=${href(`/subscriptions/${s.id}`)}>${s.owning_application} / ${s.consumer_group}</a> <code>${s.id}</code></li>`)}</ul>
  <//>`;
}

/** Placeholder values for the schema's required properties (one level; the user edits the rest). */
function example(schemaText: string): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  try {
    const schema = JSON.parse(schemaText) as { properties?: Record<string, { type?: string }>; required?: string[] };
    for (const key of schema.required ?? []) {
      const type = schema.properties?.[key]?.type;
      out[key] = type === 'number' || type === 'integer' ? 1 : type === 'boolean' ? true : type === 'object' ? {} : type === 'array' ? [] : 'value';
    }
  } catch {
    // not JSON: no placeholders
  }
  return out;
}

/** A test batch in the shape the category needs, with fresh eids. */
function template(et: EventType): string {
  const metadata = (): Record<string, string> => ({ eid: uuid(), occurred_at: new Date().toISOString() });
  const fields = example(et.schema.schema);
  const one = (): unknown => (et.category === 'undefined' ? fields : et.category === 'data' ? { metadata: metadata(), data_op: 'C', data_type: et.name, data: fields } : { metadata: metadata(), ...fields });
  return JSON.stringify([one()], null, 2);
}

/** Replaces every `metadata.eid` in a batch text by a fresh one (so a batch can be sent again). */
function freshEids(text: string): string {
  const batch = JSON.parse(text) as unknown;
  if (!Array.isArray(batch)) return text;
  for (const event of batch) {
    const metadata = (event as { metadata?: Record<string, unknown> } | null)?.metadata;
    if (metadata !== undefined && typeof metadata === 'object') metadata.eid = uuid();
  }
  return JSON.stringify(batch, null, 2);
}

/** The test publish form: a JSON editor and the per-item results of a 422 or 207. */
function Publish({ eventType }: { eventType: EventType }): View {
  const [text, setText] = useState(() => template(eventType));
  const [result, setResult] = useState<{ status: number; items?: BatchItem[]; count: number } | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const send = async (): Promise<void> => {
    setError(undefined);
    setResult(undefined);
    let batch: unknown;
    try {
      batch = JSON.parse(text);
    } catch (err) {
      setError(new Error(`The batch is not JSON: ${err instanceof Error ? err.message : String(err)}`));
      return;
    }
    setBusy(true);
    try {
      const answer = await request<BatchItem[]>('POST', `/event-types/${seg(eventType.name)}/events`, text);
      const count = Array.isArray(batch) ? batch.length : 1;
      if (answer.status === 200) setResult({ status: 200, count });
      else if (answer.status === 422 || answer.status === 207) setResult({ status: answer.status, items: Array.isArray(answer.body) ? answer.body : [], count });
      else throw new ApiError(answer.status, asProblem(answer.body), answer.body);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const edit = (next: () => string): void => {
    try {
      setText(next());
    } catch (err) {
      setError(err);
    }
  };
  return html`<${Section} title="Publish a test batch">
    <p class="muted">A JSON array of events, sent as one batch (<code>POST /event-types/${eventType.name}/events</code>).</p>
    <textarea class="code" rows="12" spellcheck="false" data-test="batch" value=${text} onInput=${(e: Event) => setText((e.target as HTMLTextAreaElement).value)}></textarea>
    <div class="buttons">
      <button type="button" onClick=${() => edit(() => template(eventType))}>Reset to a template</button>
      <button type="button" onClick=${() => edit(() => freshEids(text))}>New eids</button>
      <button type="button" class="primary" data-test="publish" disabled=${busy} onClick=${() => void send()}>Publish</button>
    </div>
    <${ErrorBox} error=${error} />
    ${result === undefined ? null : html`<${PublishResult} result=${result} />`}
  <//>`;
}

function PublishResult({ result }: { result: { status: number; items?: BatchItem[]; count: number } }): View {
  if (result.status === 200) return html`<div class="ok" data-test="publish-result">200: all ${result.count} event${result.count === 1 ? '' : 's'} published.</div>`;
  const items = result.items ?? [];
  const failed = items.filter((i) => i.publishing_status === 'failed').length;
  const summary = result.status === 422 ? `422: nothing was published; ${String(failed)} of ${String(items.length)} events failed.` : `207: ${String(failed)} of ${String(items.length)} events were not stored; the others were.`;
  return html`<div data-test="publish-result">
    <div class="error">${summary}</div>
    <table class="grid" data-test="publish-items">
      <thead><tr><th>#</th><th>eid</th><th>Status</th><th>Step</th><th>Detail</th></tr></thead>
      <tbody>${items.map((item, i) => html`<tr class=${item.publishing_status}><td>${i}</td><td><code>${item.eid ?? ''}</code></td><td>${item.publishing_status}</td><td>${item.step ?? ''}</td><td>${item.detail ?? ''}</td></tr>`)}</tbody>
    </table>
  </div>`;
}
