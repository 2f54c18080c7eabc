// Subscriptions: the list with filters and paging, and the creation form.
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { ErrorBox, formText, html, href, Section, useFeatures, useLoad, type View } from '../ui.js';
import type { Page, Subscription } from '../wire.js';

const PAGE = 50;

/** The subscriptions list (`owning_application` and `event_type` filters from the route's query). */
export function SubscriptionsPage({ query }: { query: URLSearchParams }): View {
  const owner = query.get('owning_application') ?? '';
  const eventType = query.get('event_type') ?? '';
  const offset = Number(query.get('offset') ?? '0') || 0;
  const list = useLoad(() => {
    const q = new URLSearchParams({ limit: String(PAGE), offset: String(offset) });
    if (owner !== '') q.set('owning_application', owner);
    if (eventType !== '') q.set('event_type', eventType);
    return api<Page<Subscription>>('GET', `/subscriptions?${q.toString()}`);
  }, [owner, eventType, offset]);
  const features = useFeatures();
  const [creating, setCreating] = useState(false);
  const go = (changes: Record<string, string>): void => {
    const q = new URLSearchParams({ owning_application: owner, event_type: eventType, offset: '0', ...changes });
    for (const [k, v] of [...q]) if (v === '' || (k === 'offset' && v === '0')) q.delete(k);
    location.hash = href(`/subscriptions${q.size > 0 ? `?${q.toString()}` : ''}`);
  };
  const filter = (e: Event): void => {
    e.preventDefault();
    const data = new FormData(e.target as HTMLFormElement);
    go({ owning_application: formText(data, 'owning_application'), event_type: formText(data, 'event_type') });
  };
  const items = list.value?.items ?? [];
  const mayCreate = !features.has('disable_subscription_creation') && !features.has('disable_db_write_operations');
  return html`<div>
    <h1>Subscriptions</h1>
    <form class="toolbar" onSubmit=${filter}>
      <input name="owning_application" placeholder="Owning application" aria-label="Owning application" value=${owner} />
      <input name="event_type" placeholder="Event type" aria-label="Event type" value=${eventType} />
      <button type="submit">Filter</button>
      ${mayCreate ? html`<button type="button" class="primary" data-test="new-subscription" onClick=${() => setCreating(!creating)}>New subscription</button>` : null}
    </form>
    ${creating ? html`<${CreateSubscription} onDone=${() => setCreating(false)} />` : null}
    <${ErrorBox} error=${list.error} />
    <table class="grid" data-test="subscriptions">
      <thead><tr><th>Id</th><th>Owning application</th><th>Event types</th><th>Consumer group</th><th>Read from</th><th>Created</th></tr></thead>
      <tbody>${items.map(
        (s) => html`<tr><td><a href=${href(`/subscriptions/${s.id}`)}><code>${s.id}</code></a></td><td>${s.owning_application}</td><td>${s.event_types.join(', ')}</td><td>${s.consumer_group}</td><td>${s.read_from}</td><td>${s.created_at}</td></tr>`,
      )}</tbody>
    </table>
    <div class="buttons">
      ${offset > 0 ? html`<button type="button" onClick=${() => go({ offset: String(Math.max(0, offset - PAGE)) })}>Previous</button>` : null}
      ${list.value?._links?.next ? html`<button type="button" onClick=${() => go({ offset: String(offset + PAGE) })}>Next</button>` : null}
    </div>
  </div>`;
}

/** The form of `POST /subscriptions`; on success the page moves to the subscription. */
function CreateSubscription({ onDone }: { onDone: () => void }): View {
  const [error, setError] = useState<unknown>(undefined);
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault();
    const data = new FormData(e.target as HTMLFormElement);
    const text = (k: string): string => formText(data, k);
    try {
      const body = {
        owning_application: text('owning_application'),
        event_types: text('event_types').split(',').map((s) => s.trim()).filter((s) => s !== ''),
        consumer_group: text('consumer_group') || 'default',
        read_from: text('read_from'),
      };
      const created = await api<Subscription>('POST', '/subscriptions', body);
      onDone();
      location.hash = href(`/subscriptions/${created.id}`);
    } catch (err) {
      setError(err);
    }
  };
  return html`<${Section} title="New subscription">
    <form class="form" data-test="create-subscription" onSubmit=${(e: Event) => void submit(e)}>
      <label>Owning application <input name="owning_application" required /></label>
      <label>Event types (comma-separated) <input name="event_types" required /></label>
      <label>Consumer group <input name="consumer_group" placeholder="default" /></label>
      <label>Read from <select name="read_from"><option value="end">end</option><option value="begin">begin</option></select></label>
      <${ErrorBox} error=${error} />
      <div class="buttons"><button type="button" onClick=${onDone}>Cancel</button><button type="submit" class="primary">Create</button></div>
    </form>
  <//>`;
}
