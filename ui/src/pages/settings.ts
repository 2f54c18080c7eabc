// Settings for administrators: feature toggles, the blacklist and publishing quotas (changed by the
// admin writers), the administrators, storages and timelines (read-only here).
import { useState } from 'preact/hooks';
import { api, seg } from '../api.js';
import { AuthorizationView, ErrorBox, formText, html, Section, useLoad, type View } from '../ui.js';
import type { Access, Admins, Blacklist, EventType, PublishQuotaList } from '../wire.js';

/** The settings page (offered to subjects on an admin list). */
export function SettingsPage({ access }: { access: Access }): View {
  return html`<div>
    <h1>Settings</h1>
    <div class="columns">
      <${Features} mayWrite=${access.settings.write} />
      <${BlacklistView} mayWrite=${access.settings.write} />
    </div>
    <${QuotasView} mayWrite=${access.settings.write} />
    <${AdminsView} />
    <div class="columns">
      <${Storages} />
      <${Timelines} />
    </div>
  </div>`;
}

function Features({ mayWrite }: { mayWrite: boolean }): View {
  const features = useLoad(() => api<{ items: { feature: string; enabled: boolean }[] }>('GET', '/settings/features'), []);
  const [error, setError] = useState<unknown>(undefined);
  const toggle = async (feature: string, enabled: boolean): Promise<void> => {
    setError(undefined);
    try {
      await api('POST', '/settings/features', { feature, enabled });
    } catch (err) {
      setError(err);
    }
    features.reload();
  };
  return html`<${Section} title="Feature toggles">
    <${ErrorBox} error=${features.error ?? error} />
    <ul class="plain" data-test="features">${(features.value?.items ?? []).map(
      (f) => html`<li><label><input type="checkbox" name=${f.feature} checked=${f.enabled} disabled=${!mayWrite} onChange=${(e: Event) => void toggle(f.feature, (e.target as HTMLInputElement).checked)} /> <code>${f.feature}</code></label></li>`,
    )}</ul>
    ${mayWrite ? null : html`<p class="muted">Only the admin writers may change them.</p>`}
  <//>`;
}

const BLACKLIST_TYPES = [
  ['PRODUCER_APP', 'producers', 'apps'],
  ['PRODUCER_ET', 'producers', 'event_types'],
  ['CONSUMER_APP', 'consumers', 'apps'],
  ['CONSUMER_ET', 'consumers', 'event_types'],
] as const;

function BlacklistView({ mayWrite }: { mayWrite: boolean }): View {
  const blacklist = useLoad(() => api<Blacklist>('GET', '/settings/blacklist'), []);
  const [error, setError] = useState<unknown>(undefined);
  const change = async (method: 'PUT' | 'DELETE', type: string, name: string): Promise<void> => {
    setError(undefined);
    try {
      await api(method, `/settings/blacklist/${type}/${seg(name)}`);
    } catch (err) {
      setError(err);
    }
    blacklist.reload();
  };
  const add = (e: Event): void => {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    const data = new FormData(form);
    const name = formText(data, 'name');
    if (name !== '') void change('PUT', formText(data, 'type'), name);
    form.reset();
  };
  const value = blacklist.value;
  return html`<${Section} title="Blacklist">
    <${ErrorBox} error=${blacklist.error ?? error} />
    <dl class="kv" data-test="blacklist">${BLACKLIST_TYPES.map(([type, side, kind]) => {
      const names = value?.[side][kind] ?? [];
      return html`<dt>${type}</dt><dd>${names.length === 0 ? html`<span class="muted">none</span>` : names.map((n) => html`<span class="tag">${n}${mayWrite ? html` <button type="button" class="link" title="Unblock" onClick=${() => void change('DELETE', type, n)}>×</button>` : null}</span>`)}</dd>`;
    })}</dl>
    ${mayWrite
      ? html`<form class="toolbar" onSubmit=${add}><select name="type" aria-label="Blacklist type">${BLACKLIST_TYPES.map(([t]) => html`<option>${t}</option>`)}</select><input name="name" placeholder="subject id or event type" aria-label="Name" /><button type="submit">Block</button></form>`
      : null}
  <//>`;
}

/** A positive integer of a form field, or undefined when the field is empty. */
function perSecond(data: FormData, field: string): number | undefined {
  const text = formText(data, field);
  return text === '' ? undefined : Number(text);
}

/** Publishing quotas per subject or owning application, counted for the cluster (docs/publishing.md "Quotas"). */
function QuotasView({ mayWrite }: { mayWrite: boolean }): View {
  const quotas = useLoad(() => api<PublishQuotaList>('GET', '/settings/quotas'), []);
  const [error, setError] = useState<unknown>(undefined);
  const change = async (method: 'PUT' | 'DELETE', kind: string, name: string, body?: unknown): Promise<void> => {
    setError(undefined);
    try {
      await api(method, `/settings/quotas/${kind}/${seg(name)}`, body);
    } catch (err) {
      setError(err);
    }
    quotas.reload();
  };
  const set = (e: Event): void => {
    e.preventDefault();
    const form = e.target as HTMLFormElement;
    const data = new FormData(form);
    const name = formText(data, 'name');
    const events = perSecond(data, 'events_per_second');
    const bytes = perSecond(data, 'bytes_per_second');
    if (name === '') return;
    void change('PUT', formText(data, 'kind'), name, { ...(events === undefined ? {} : { events_per_second: events }), ...(bytes === undefined ? {} : { bytes_per_second: bytes }) });
    form.reset();
  };
  const items = quotas.value?.items ?? [];
  return html`<${Section} title="Publishing quotas (per cluster)">
    <${ErrorBox} error=${quotas.error ?? error} />
    <table class="grid" data-test="quotas"><thead><tr><th>Kind</th><th>Name</th><th>Events/s</th><th>Bytes/s</th>${mayWrite ? html`<th></th>` : null}</tr></thead>
      <tbody>${items.length === 0
        ? html`<tr><td colspan="5" class="muted">none: every producer may publish as fast as the node admits</td></tr>`
        : items.map(
            (q) => html`<tr><td>${q.kind}</td><td>${q.name}</td><td>${q.events_per_second ?? ''}</td><td>${q.bytes_per_second ?? ''}</td>${mayWrite ? html`<td><button type="button" class="link" title="Remove" onClick=${() => void change('DELETE', q.kind, q.name)}>×</button></td>` : null}</tr>`,
          )}</tbody>
    </table>
    ${mayWrite
      ? html`<form class="toolbar" data-test="quota-form" onSubmit=${set}><select name="kind" aria-label="Quota kind"><option>owning_application</option><option>subject</option></select><input name="name" placeholder="application or subject id" aria-label="Name" /><input name="events_per_second" type="number" min="1" placeholder="events/s" aria-label="Events per second" /><input name="bytes_per_second" type="number" min="1" placeholder="bytes/s" aria-label="Bytes per second" /><button type="submit">Set quota</button></form>`
      : null}
  <//>`;
}

function AdminsView(): View {
  const admins = useLoad(() => api<Admins>('GET', '/settings/admins'), []);
  return html`<${Section} title="Administrators">
    <${ErrorBox} error=${admins.error} />
    ${admins.value === undefined ? null : html`<${AuthorizationView} authorization=${admins.value} />`}
    <p class="muted">Read-only here; <code>POST /settings/admins</code> (or <code>broker</code>) changes them.</p>
  <//>`;
}

/** A storage record as listed. */
interface Storage {
  readonly id: string;
  readonly storage_type: string;
  readonly default?: boolean;
  readonly redis_configuration?: Readonly<Record<string, unknown>>;
}

function Storages(): View {
  const storages = useLoad(() => api<Storage[]>('GET', '/storages'), []);
  return html`<${Section} title="Storages">
    <${ErrorBox} error=${storages.error} />
    <table class="grid"><thead><tr><th>Id</th><th>Type</th><th>Default</th><th>Configuration</th></tr></thead>
      <tbody>${(storages.value ?? []).map((s) => html`<tr><td>${s.id}</td><td>${s.storage_type}</td><td>${s.default === true ? 'yes' : ''}</td><td><code>${JSON.stringify(s.redis_configuration ?? {})}</code></td></tr>`)}</tbody>
    </table>
  <//>`;
}

/** A timeline record as listed. */
interface Timeline {
  readonly id: string;
  readonly order: number;
  readonly storage_id: string;
  readonly created_at?: string;
  readonly switched_at?: string;
  readonly cleaned_up_at?: string;
}

function Timelines(): View {
  const eventTypes = useLoad(() => api<EventType[]>('GET', '/event-types'), []);
  const [name, setName] = useState('');
  const timelines = useLoad(() => (name === '' ? Promise.resolve([]) : api<Timeline[]>('GET', `/event-types/${seg(name)}/timelines`)), [name]);
  return html`<${Section} title="Timelines">
    <select aria-label="Event type" value=${name} onChange=${(e: Event) => setName((e.target as HTMLSelectElement).value)}>
      <option value="">pick an event type</option>
      ${(eventTypes.value ?? []).map((e) => e.name).sort().map((n) => html`<option>${n}</option>`)}
    </select>
    <${ErrorBox} error=${timelines.error} />
    <table class="grid"><thead><tr><th>Order</th><th>Storage</th><th>Created</th><th>Switched</th><th>Cleaned up</th></tr></thead>
      <tbody>${(timelines.value ?? []).map((t) => html`<tr><td>${t.order}</td><td>${t.storage_id}</td><td>${t.created_at ?? ''}</td><td>${t.switched_at ?? ''}</td><td>${t.cleaned_up_at ?? ''}</td></tr>`)}</tbody>
    </table>
  <//>`;
}
