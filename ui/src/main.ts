// The console's entry: token prompt (auth modes jwt and tokeninfo), navigation, hash routes.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, errorText, onUnauthorized, setToken, token, type Problem } from './api.js';
import { html, href, type View } from './ui.js';
import type { Access } from './wire.js';
import { EventTypesPage } from './pages/event-types.js';
import { EventTypePage } from './pages/event-type.js';
import { SubscriptionsPage } from './pages/subscriptions.js';
import { SubscriptionPage } from './pages/subscription.js';
import { TailPage } from './pages/tail.js';
import { SettingsPage } from './pages/settings.js';

/** The current hash route: path segments and query parameters (`#/tail?event_type=x`). */
interface Route {
  readonly parts: readonly string[];
  readonly query: URLSearchParams;
}

function currentRoute(): Route {
  const hash = location.hash.replace(/^#/, '') || '/event-types';
  const [path = '', query = ''] = hash.split('?', 2);
  return { parts: path.split('/').filter((p) => p !== '').map((p) => decodeURIComponent(p)), query: new URLSearchParams(query) };
}

function useRoute(): Route {
  const [route, setRoute] = useState(currentRoute);
  useEffect(() => {
    const changed = (): void => setRoute(currentRoute());
    window.addEventListener('hashchange', changed);
    return () => window.removeEventListener('hashchange', changed);
  }, []);
  return route;
}

/** Asks for the bearer token; it stays in this tab's sessionStorage only. */
function TokenPrompt({ problem, onToken }: { problem: Problem | undefined; onToken: () => void }): View {
  const [value, setValue] = useState('');
  const submit = (e: Event): void => {
    e.preventDefault();
    setToken(value.trim());
    onToken();
  };
  return html`<main class="narrow">
    <h1>Event Broker console</h1>
    <form class="card" onSubmit=${submit} data-test="token-form">
      <p>This broker checks bearer tokens. Paste a token; the console keeps it in this browser tab's session only and sends it with every call.</p>
      ${problem === undefined ? null : html`<div class="error" role="alert" data-test="token-problem">${problem.title ?? 'Unauthorized'}: ${problem.detail ?? ''}</div>`}
      <label>Bearer token <input type="password" name="token" autocomplete="off" value=${value} onInput=${(e: Event) => setValue((e.target as HTMLInputElement).value)} /></label>
      <button type="submit" class="primary">Use token</button>
    </form>
  </main>`;
}

function App(): View {
  const route = useRoute();
  const [access, setAccess] = useState<Access | undefined>(undefined);
  const [needToken, setNeedToken] = useState<Problem | undefined | false>(false);
  const [error, setError] = useState<unknown>(undefined);
  const [round, setRound] = useState(0);

  useEffect(() => {
    onUnauthorized((problem) => setNeedToken(problem ?? { title: 'Unauthorized', detail: 'the token was refused' }));
  }, []);
  useEffect(() => {
    api<Access>('GET', '/ui/api/access').then(
      (a) => {
        setAccess(a);
        setNeedToken(false);
        setError(undefined);
      },
      (err: unknown) => {
        if (err instanceof ApiError && err.status === 401) setNeedToken(token() === null ? undefined : (err.problem ?? { title: 'Unauthorized' }));
        else setError(err);
      },
    );
  }, [round]);

  if (needToken !== false) return html`<${TokenPrompt} problem=${needToken} onToken=${() => setRound((r) => r + 1)} />`;
  if (error !== undefined) return html`<main class="narrow"><div class="error" role="alert">${errorText(error)}</div></main>`;
  if (access === undefined) return html`<p class="loading">Loading…</p>`;

  const [page = 'event-types', id] = route.parts;
  const nav = (target: string, label: string): View => html`<a href=${href(`/${target}`)} class=${page === target ? 'active' : ''}>${label}</a>`;
  let body: View;
  if (page === 'event-types' && id !== undefined) body = html`<${EventTypePage} key=${id} name=${id} access=${access} />`;
  else if (page === 'event-types') body = html`<${EventTypesPage} access=${access} />`;
  else if (page === 'subscriptions' && id !== undefined) body = html`<${SubscriptionPage} key=${id} id=${id} />`;
  else if (page === 'subscriptions') body = html`<${SubscriptionsPage} query=${route.query} />`;
  else if (page === 'tail') body = html`<${TailPage} query=${route.query} />`;
  else if (page === 'settings') body = html`<${SettingsPage} access=${access} />`;
  else body = html`<p>No such page. <a href=${href('/event-types')}>Event types</a></p>`;
  const signOut = (): void => {
    setToken(null);
    setAccess(undefined);
    setRound((r) => r + 1);
  };
  return html`<div class="shell">
    <nav class="top">
      <span class="brand">Event Broker</span>
      ${nav('event-types', 'Event types')} ${nav('subscriptions', 'Subscriptions')} ${nav('tail', 'Live tail')}
      ${access.settings.read ? nav('settings', 'Settings') : null}
      <span class="who" data-test="subject">${access.subject}${access.administrator ? ' (administrator)' : ''}</span>
      ${token() === null ? null : html`<button type="button" class="link" onClick=${signOut}>Forget token</button>`}
    </nav>
    <main>${body}</main>
  </div>`;
}

const root = document.getElementById('app');
if (root !== null) {
  root.textContent = '';
  render(html`<${App} />`, root);
}
