// Event types, the console's overview: the Redis memory headroom, the list (search by name, filter by
// owning application) and the creation form.
import { useState } from 'preact/hooks';
import { api, ApiError, asProblem, request, seg } from '../api.js';
import { duration, ErrorBox, html, href, Section, useFeatures, useLoad, type View } from '../ui.js';
import type { Access, EventType, StorageHeadroom } from '../wire.js';

/** Bytes in binary units (`512 B`, `1.50 MiB`, `12.4 GiB`). */
function bytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${String(Math.round(value))} B` : `${value.toPrecision(3)} ${units[unit] ?? ''}`;
}

/**
 * The Redis memory headroom (docs/operations.md "Memory and retention"): per master its use against its
 * limit with the high-water mark, whether publishes to it are refused, the projected time until the mark;
 * the event types holding the most; refreshed every 10 s.
 */
function Headroom(): View {
  const loaded = useLoad(() => api<StorageHeadroom>('GET', '/ui/api/storage-headroom'), [], 10_000);
  const view = loaded.value;
  if (view === undefined || view.masters.length === 0) return html`<${ErrorBox} error=${loaded.error} />`;
  return html`<${Section} title="Redis memory">
    <table class="grid" data-test="headroom">
      <thead><tr><th>Storage</th><th>Master</th><th>Used</th><th></th><th class="num">Limit</th><th class="num">Mark</th><th>Time to the mark</th></tr></thead>
      <tbody>
        ${view.masters.map((m) => {
          const limit = m.limit_bytes > 0 ? m.limit_bytes : undefined;
          const usedShare = limit === undefined ? 0 : Math.min(100, (m.used_bytes / limit) * 100);
          const markShare = limit === undefined || m.mark_bytes === null ? undefined : Math.min(100, (m.mark_bytes / limit) * 100);
          return html`<tr data-test="headroom-master">
            <td>${m.storage}</td><td><code>${m.master}</code></td>
            <td class="num">${bytes(m.used_bytes)}</td>
            <td><div class="meter" title=${`${usedShare.toFixed(1)} % of the limit`}><div class=${m.full ? 'used full' : 'used'} style=${`width: ${usedShare.toFixed(1)}%`}></div>${markShare === undefined ? null : html`<div class="mark" style=${`left: ${markShare.toFixed(1)}%`}></div>`}</div></td>
            <td class="num">${limit === undefined ? 'unknown' : bytes(limit)}${m.limit_source === 'system_memory' ? html` <span class="tag" title="the master has no maxmemory: the machine's memory is taken as its limit">no maxmemory</span>` : null}</td>
            <td class="num">${m.mark_bytes === null ? '–' : bytes(m.mark_bytes)}</td>
            <td>${m.full ? html`<span class="status" style="color: var(--bad)" data-test="headroom-full">full: publishes refused (507)</span>` : m.seconds_to_mark === null ? html`<span class="muted">not growing</span>` : duration(m.seconds_to_mark)}</td>
          </tr>`;
        })}
      </tbody>
    </table>
    ${view.event_types.length === 0
      ? null
      : html`<p class="muted">Largest event types: ${view.event_types.map(
          (e) => html`<span class="tag">${e.name} ${bytes(e.bytes)}${e.growth_bytes_per_second > 0 ? ` (+${bytes(e.growth_bytes_per_second)}/s)` : ''}</span>`,
        )}</p>`}
    <p class="muted">${view.redis_bytes_per_json_byte.toFixed(2)} Redis bytes per byte of event JSON (${view.ratio_measured ? 'measured on stored events' : 'assumed until enough is stored'}).</p>
  <//>`;
}

/** The event types list, with the creation form for subjects allowed to create. */
export function EventTypesPage({ access }: { access: Access }): View {
  const list = useLoad(() => api<EventType[]>('GET', '/event-types'), []);
  const features = useFeatures();
  const [search, setSearch] = useState('');
  const [owner, setOwner] = useState('');
  const [creating, setCreating] = useState(false);
  const all = list.value ?? [];
  const owners = [...new Set(all.map((e) => e.owning_application))].sort();
  const shown = all.filter((e) => e.name.toLowerCase().includes(search.toLowerCase()) && (owner === '' || e.owning_application === owner)).sort((a, b) => a.name.localeCompare(b.name));
  const mayCreate = !features.has('disable_event_type_creation') && !features.has('disable_db_write_operations');
  return html`<div>
    <${Headroom} />
    <h1>Event types</h1>
    <div class="toolbar">
      <input type="search" placeholder="Search by name" aria-label="Search by name" data-test="search" value=${search} onInput=${(e: Event) => setSearch((e.target as HTMLInputElement).value)} />
      <select aria-label="Owning application" value=${owner} onChange=${(e: Event) => setOwner((e.target as HTMLSelectElement).value)}>
        <option value="">every owning application</option>
        ${owners.map((o) => html`<option value=${o}>${o}</option>`)}
      </select>
      <span class="muted">${shown.length} of ${all.length}</span>
      ${mayCreate ? html`<button type="button" class="primary" data-test="new-event-type" onClick=${() => setCreating(!creating)}>New event type</button>` : null}
    </div>
    ${creating ? html`<${CreateEventType} access=${access} onDone=${() => setCreating(false)} />` : null}
    <${ErrorBox} error=${list.error} />
    <table class="grid" data-test="event-types">
      <thead><tr><th>Name</th><th>Category</th><th>Owning application</th><th>Partitioning</th><th>Compatibility</th></tr></thead>
      <tbody>
        ${shown.map(
          (e) => html`<tr>
            <td><a href=${href(`/event-types/${seg(e.name)}`)}>${e.name}</a></td>
            <td>${e.category}</td><td>${e.owning_application}</td>
            <td>${e.partition_strategy}${e.partition_key_fields?.length ? ` (${e.partition_key_fields.join(', ')})` : ''}</td>
            <td>${e.compatibility_mode ?? ''}</td>
          </tr>`,
        )}
      </tbody>
    </table>
  </div>`;
}

const DEFAULT_SCHEMA = JSON.stringify({ type: 'object', properties: { order_number: { type: 'string' }, amount: { type: 'number' } }, required: ['order_number'] }, null, 2);

/** The form of `POST /event-types`; on success the page moves to the new event type. */
function CreateEventType({ onDone }: { access: Access; onDone: () => void }): View {
  const [form, setForm] = useState({ name: '', owning_application: '', category: 'business', partition_strategy: 'hash', partition_key_fields: 'order_number', partitions: '4', messages_per_minute: '100', message_size: '100', compatibility_mode: 'forward', schema: DEFAULT_SCHEMA, authorization: '' });
  const [error, setError] = useState<unknown>(undefined);
  /** The broker's `Warning` (its declared traffic cannot fit the memory budget): shown before moving on. */
  const [warning, setWarning] = useState<string | undefined>(undefined);
  const [busy, setBusy] = useState(false);
  const field = (key: keyof typeof form) => (e: Event) => setForm({ ...form, [key]: (e.target as HTMLInputElement).value });
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      const partitions = Number(form.partitions);
      const body: Record<string, unknown> = {
        name: form.name.trim(),
        owning_application: form.owning_application.trim(),
        category: form.category,
        enrichment_strategies: form.category === 'undefined' ? [] : ['metadata_enrichment'],
        partition_strategy: form.partition_strategy,
        compatibility_mode: form.compatibility_mode,
        default_statistic: { messages_per_minute: Number(form.messages_per_minute), message_size: Number(form.message_size), read_parallelism: partitions, write_parallelism: partitions },
        schema: { type: 'json_schema', schema: form.schema },
      };
      if (form.partition_strategy === 'hash') body.partition_key_fields = form.partition_key_fields.split(',').map((f) => f.trim()).filter((f) => f !== '');
      if (form.authorization.trim() !== '') body.authorization = JSON.parse(form.authorization) as unknown;
      const answer = await request('POST', '/event-types', body);
      if (answer.status >= 400) throw new ApiError(answer.status, asProblem(answer.body), answer.body);
      const warned = warningText(answer.headers.get('Warning'));
      if (warned !== undefined) {
        setWarning(warned);
        return;
      }
      onDone();
      location.hash = href(`/event-types/${seg(form.name.trim())}`);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  return html`<${Section} title="New event type">
    <form class="form" data-test="create-event-type" onSubmit=${(e: Event) => void submit(e)}>
      <label>Name <input name="name" required value=${form.name} onInput=${field('name')} /></label>
      <label>Owning application <input name="owning_application" required value=${form.owning_application} onInput=${field('owning_application')} /></label>
      <label>Category <select name="category" value=${form.category} onChange=${field('category')}><option>business</option><option>data</option><option>undefined</option></select></label>
      <label>Partition strategy <select name="partition_strategy" value=${form.partition_strategy} onChange=${field('partition_strategy')}><option>hash</option><option>random</option><option>user_defined</option></select></label>
      ${form.partition_strategy === 'hash' ? html`<label>Partition key fields (comma-separated) <input name="partition_key_fields" value=${form.partition_key_fields} onInput=${field('partition_key_fields')} /></label>` : null}
      <label>Partitions <input name="partitions" type="number" min="1" value=${form.partitions} onInput=${field('partitions')} /></label>
      <label>Messages per minute <input name="messages_per_minute" type="number" min="1" value=${form.messages_per_minute} onInput=${field('messages_per_minute')} /></label>
      <label>Message size (bytes) <input name="message_size" type="number" min="1" value=${form.message_size} onInput=${field('message_size')} /></label>
      <label>Compatibility mode <select name="compatibility_mode" value=${form.compatibility_mode} onChange=${field('compatibility_mode')}><option>forward</option><option>compatible</option><option>none</option></select></label>
      <label class="wide">JSON Schema <textarea name="schema" rows="10" spellcheck="false" value=${form.schema} onInput=${field('schema')}></textarea></label>
      <label class="wide">Authorization (JSON, optional: <code>{"admins": [...], "readers": [...], "writers": [...]}</code>) <textarea name="authorization" rows="3" spellcheck="false" value=${form.authorization} onInput=${field('authorization')}></textarea></label>
      <${ErrorBox} error=${error} />
      ${warning === undefined
        ? html`<div class="buttons"><button type="button" onClick=${onDone}>Cancel</button><button type="submit" class="primary" disabled=${busy}>Create</button></div>`
        : html`<div class="warning wide" role="status" data-test="create-warning">Created, with a warning: ${warning}</div>
            <div class="buttons"><a class="button" href=${href(`/event-types/${seg(form.name.trim())}`)} onClick=${onDone}>Open ${form.name.trim()}</a></div>`}
    </form>
  <//>`;
}

/** The text of an RFC 9111 `Warning` header (`299 - "<text>"`), unquoted; undefined without one. */
function warningText(header: string | null): string | undefined {
  const match = header === null ? null : /^\d{3} \S+ "((?:[^"\\]|\\.)*)"/.exec(header);
  return match === null ? undefined : (match[1] ?? '').replace(/\\(.)/g, '$1');
}
