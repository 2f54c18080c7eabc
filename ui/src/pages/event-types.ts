// Event types: the list (search by name, filter by owning application) and the creation form.
import { useState } from 'preact/hooks';
import { api, seg } from '../api.js';
import { ErrorBox, html, href, Section, useFeatures, useLoad, type View } from '../ui.js';
import type { Access, EventType } from '../wire.js';

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
  const [form, setForm] = useState({ name: '', owning_application: '', category: 'business', partition_strategy: 'hash', partition_key_fields: 'order_number', partitions: '4', compatibility_mode: 'forward', schema: DEFAULT_SCHEMA, authorization: '' });
  const [error, setError] = useState<unknown>(undefined);
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
        default_statistic: { messages_per_minute: 100, message_size: 100, read_parallelism: partitions, write_parallelism: partitions },
        schema: { type: 'json_schema', schema: form.schema },
      };
      if (form.partition_strategy === 'hash') body.partition_key_fields = form.partition_key_fields.split(',').map((f) => f.trim()).filter((f) => f !== '');
      if (form.authorization.trim() !== '') body.authorization = JSON.parse(form.authorization) as unknown;
      await api('POST', '/event-types', body);
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
      <label>Compatibility mode <select name="compatibility_mode" value=${form.compatibility_mode} onChange=${field('compatibility_mode')}><option>forward</option><option>compatible</option><option>none</option></select></label>
      <label class="wide">JSON Schema <textarea name="schema" rows="10" spellcheck="false" value=${form.schema} onInput=${field('schema')}></textarea></label>
      <label class="wide">Authorization (JSON, optional: <code>{"admins": [...], "readers": [...], "writers": [...]}</code>) <textarea name="authorization" rows="3" spellcheck="false" value=${form.authorization} onInput=${field('authorization')}></textarea></label>
      <${ErrorBox} error=${error} />
      <div class="buttons"><button type="button" onClick=${onDone}>Cancel</button><button type="submit" class="primary" disabled=${busy}>Create</button></div>
    </form>
  <//>`;
}
