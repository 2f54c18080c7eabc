// Shared pieces of the console: the htm binding, hooks for loading data, and small components.
import { h, type ComponentChildren, type VNode } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { api, errorText } from './api.js';

/** JSX-like templates without a build step (htm bound to Preact's `h`). */
export const html = htm.bind(h);

/** What a component renders. */
export type View = VNode | VNode[] | null;

/** The state of something loaded: its value once there, or the error that stopped it. */
export interface Loaded<T> {
  readonly value: T | undefined;
  readonly error: unknown;
  readonly loading: boolean;
  /** Loads again (keeps showing the old value meanwhile). */
  readonly reload: () => void;
}

/**
 * Loads `load()` when the component mounts and whenever `deps` change; `everyMs` reloads it on a timer
 * (the live tables). Failures are kept as `error` (shown with {@link ErrorBox}).
 */
export function useLoad<T>(load: () => Promise<T>, deps: readonly unknown[], everyMs?: number): Loaded<T> {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [loading, setLoading] = useState(true);
  const [round, setRound] = useState(0);
  const reload = useCallback(() => setRound((r) => r + 1), []);
  useEffect(() => {
    let live = true;
    setLoading(true);
    load().then(
      (v) => {
        if (!live) return;
        setValue(v);
        setError(undefined);
        setLoading(false);
      },
      (err: unknown) => {
        if (!live) return;
        setError(err);
        setLoading(false);
      },
    );
    return () => {
      live = false;
    };
  }, [...deps, round]);
  useEffect(() => {
    if (everyMs === undefined) return undefined;
    const timer = setInterval(reload, everyMs);
    return () => clearInterval(timer);
  }, [everyMs, reload]);
  return { value, error, loading, reload };
}

/** An error as a message box (a problem's `title (status): detail`), or nothing. */
export function ErrorBox({ error }: { error: unknown }): View {
  if (error === undefined || error === null) return null;
  return html`<div class="error" role="alert">${errorText(error)}</div>`;
}

/** A titled section of a page. */
export function Section({ title, children, actions }: { title: string; children?: ComponentChildren; actions?: ComponentChildren }): View {
  return html`<section class="card"><header><h2>${title}</h2><div class="actions">${actions}</div></header>${children}</section>`;
}

/**
 * A confirmation asked in the page (not `window.confirm`): `what` explains the consequence; with
 * `typed` the user must type that text (a name) before the button is enabled.
 */
export function Confirm({ what, typed, action, onConfirm, onCancel }: { what: string; typed?: string; action: string; onConfirm: () => void; onCancel: () => void }): View {
  const [text, setText] = useState('');
  const ready = typed === undefined || text === typed;
  return html`<div class="modal-backdrop">
    <div class="modal" role="dialog" aria-modal="true">
      <p>${what}</p>
      ${typed === undefined ? null : html`<label>Type <code>${typed}</code> to confirm <input data-test="confirm-text" value=${text} onInput=${(e: Event) => setText((e.target as HTMLInputElement).value)} /></label>`}
      <div class="buttons">
        <button type="button" onClick=${onCancel}>Cancel</button>
        <button type="button" class="danger" data-test="confirm" disabled=${!ready} onClick=${onConfirm}>${action}</button>
      </div>
    </div>
  </div>`;
}

/** An authorization section as lists of `data_type:value`, or the note that it is open. */
export function AuthorizationView({ authorization }: { authorization: Readonly<Record<string, readonly { data_type: string; value: string }[]>> | undefined }): View {
  if (authorization === undefined) return html`<p class="muted">No authorization section: open to every authenticated subject.</p>`;
  return html`<dl class="kv">${Object.entries(authorization).map(
    ([list, attributes]) => html`<dt>${list}</dt><dd>${attributes.map((a) => html`<span class="tag">${a.data_type}:${a.value}</span>`)}</dd>`,
  )}</dl>`;
}

/** A link inside the console (hash routes). */
export function href(path: string): string {
  return `#${path}`;
}

/** A random UUID v4 (crypto.randomUUID exists only in secure contexts; getRandomValues everywhere). */
export function uuid(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = ((b[6] ?? 0) & 0x0f) | 0x40;
  b[8] = ((b[8] ?? 0) & 0x3f) | 0x80;
  const hex = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Seconds as a short duration (`4.2 s`, `3 min 5 s`, `2 h 10 min`). */
export function duration(seconds: number | undefined): string {
  if (seconds === undefined) return '–';
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  if (seconds < 3600) return `${String(Math.floor(seconds / 60))} min ${String(Math.round(seconds % 60))} s`;
  return `${String(Math.floor(seconds / 3600))} h ${String(Math.round((seconds % 3600) / 60))} min`;
}

/** The feature toggles that are on (`GET /settings/features`; readable by every authenticated subject). */
export function useFeatures(): ReadonlySet<string> {
  const loaded = useLoad(async () => {
    const answer = await api<{ items: { feature: string; enabled: boolean }[] }>('GET', '/settings/features');
    return new Set(answer.items.filter((f) => f.enabled).map((f) => f.feature));
  }, []);
  return loaded.value ?? new Set();
}

/** The text of a form field (`''` when absent or a file). */
export function formText(data: FormData, key: string): string {
  const value = data.get(key);
  return typeof value === 'string' ? value.trim() : '';
}
