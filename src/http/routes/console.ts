import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Type } from '@sinclair/typebox';
import type { Subject } from '../../auth/subject.js';
import type { EventType } from '../../domain/event-type/event-type.js';
import type { Subscription } from '../../domain/subscription/subscription.js';
import { brokerError } from '../../errors/catalog.js';
import type { AccessControl } from '../../services/access-control.js';
import type { StorageHeadroomView } from '../../services/storage-headroom.js';
import { empty, json, problems, routesOf, type Route } from '../api/route-model.js';
import { ConsoleAccessSchema, StorageHeadroomSchema } from '../api/wire-schemas.js';
import type { HttpAnswer, RequestContext } from '../server.js';

/** One file of the console, read into memory at startup. */
export interface ConsoleAsset {
  readonly body: Buffer;
  readonly contentType: string;
  /** Strong validator: the SHA-256 of the body, quoted. */
  readonly etag: string;
  /** Extra answer headers (the page's Content-Security-Policy). */
  readonly headers: Readonly<Record<string, string>>;
}

/** Served extensions and their media types; files with any other extension are not served. */
const MEDIA_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.txt': 'text/plain; charset=utf-8',
};

/** `dist/ui`, beside `dist/src` (this module is `dist/src/http/routes/console.js`). */
export const DEFAULT_CONSOLE_DIR = fileURLToPath(new URL('../../../ui', import.meta.url));

/**
 * The console's assets: every file under `dir` with a served extension, keyed by its path
 * relative to `dir` with `/` separators. This manifest is the only thing the `/ui` routes serve, so no
 * request path ever reaches the file system. An absent directory (a build without the console) gives an
 * empty manifest: `/ui` then answers 404.
 */
export function loadConsoleAssets(dir: string = DEFAULT_CONSOLE_DIR): Map<string, ConsoleAsset> {
  const assets = new Map<string, ConsoleAsset>();
  if (!existsSync(dir)) return assets;
  const walk = (sub: string): void => {
    for (const entry of readdirSync(path.join(dir, sub), { withFileTypes: true })) {
      const relative = sub === '' ? entry.name : `${sub}/${entry.name}`;
      if (entry.isDirectory()) {
        walk(relative);
        continue;
      }
      const contentType = MEDIA_TYPES[path.extname(entry.name)];
      if (!entry.isFile() || contentType === undefined) continue;
      const body = readFileSync(path.join(dir, relative));
      const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 32)}"`;
      assets.set(relative, { body, contentType, etag, headers: relative.endsWith('.html') ? pageHeaders(body) : {} });
    }
  };
  walk('');
  return assets;
}

/**
 * The security headers of an HTML page: a Content-Security-Policy allowing scripts from this origin and
 * the page's inline import map (by its hash), data only from this origin, no framing.
 */
function pageHeaders(html: Buffer): Record<string, string> {
  const inline = [...html.toString('utf8').matchAll(/<script type="importmap">([\s\S]*?)<\/script>/g)].map((m) => `'sha256-${createHash('sha256').update(m[1] ?? '').digest('base64')}'`);
  const policy = [
    "default-src 'none'",
    `script-src 'self' ${inline.join(' ')}`.trim(),
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  return { 'Content-Security-Policy': policy, 'Referrer-Policy': 'no-referrer' };
}

/** What the console's access answer needs of the registries. */
export interface ConsoleLookups {
  /** The event type; throws BrokerError 404 when it does not exist. */
  eventType(name: string): Promise<Pick<EventType, 'name' | 'authorization'>>;
  /** The subscription's authorization and event types; throws BrokerError 404 when it does not exist. */
  subscription(id: string): Promise<Pick<Subscription, 'id' | 'authorization' | 'event_types'>>;
}

/** What the console routes serve and ask. */
export interface ConsoleDeps {
  /** The console's files ({@link loadConsoleAssets}). */
  readonly assets: ReadonlyMap<string, ConsoleAsset>;
  readonly access: AccessControl;
  readonly lookups: ConsoleLookups;
  /** The Redis memory headroom the overview shows (absent: nothing known). */
  readonly headroom?: () => StorageHeadroomView;
}

/** A console file: `/ui` and `/ui/` are `index.html`. */
const serve = (ctx: Pick<RequestContext, 'path' | 'headers'>, { assets }: ConsoleDeps): Promise<HttpAnswer> => {
  const relative = ctx.path === '/ui' || ctx.path === '/ui/' ? 'index.html' : ctx.path.slice('/ui/'.length);
  const asset = assets.get(relative);
  if (asset === undefined) {
    throw assets.size === 0 ? brokerError('CONSOLE_NOT_BUILT') : brokerError('CONSOLE_ASSET_NOT_FOUND', { path: ctx.path });
  }
  const headers = { 'Cache-Control': 'no-cache', ETag: asset.etag, 'X-Content-Type-Options': 'nosniff', ...asset.headers };
  if (ctx.headers['if-none-match'] === asset.etag) return Promise.resolve({ status: 304, headers });
  return Promise.resolve({ status: 200, body: asset.body, contentType: asset.contentType, headers });
};

const TEXT_ASSET = Type.String({ description: 'the file' });

const route = routesOf<ConsoleDeps>();

/**
 * The console (docs/console.md): its assets, public, and two authenticated helper routes.
 *
 * - `GET /ui`, `GET /ui/` → `index.html`; `GET /ui/<path>` → the asset of that path in the manifest
 *   ({@link loadConsoleAssets}), else 404. Public: the files carry no data; every API call the console
 *   makes carries the token its user typed. `Cache-Control: no-cache` with an `ETag` (304 on
 *   `If-None-Match`), so a new build is picked up at once; `X-Content-Type-Options: nosniff`.
 * - `GET /ui/api/access[?event_type=<name>][&subscription=<id>]` → what the subject may do, decided by
 *   the node's access control (so an authorization plugin's rules hold here too), for the console to
 *   offer only that: `{subject, administrator, settings: {read, write, admin}, event_type?: {name, read,
 *   write, admin}, subscription?: {id, read, admin, reset}}` (`subscription.read`: its stats and cursors
 *   and streaming it; `reset`: admin plus reading every event type). Authenticated like the API (401
 *   without a valid token in modes `jwt` and `tokeninfo`); 404 for an unknown event type or subscription.
 * - `GET /ui/api/storage-headroom` → the Redis memory headroom of the overview (authenticated).
 */
export const CONSOLE_ROUTES: readonly Route<ConsoleDeps>[] = [
  route({
    method: 'GET', path: '/ui', operationId: 'console', tag: 'Console', access: 'public',
    summary: 'The console (web page)', responses: { '200': { description: 'the page', content: { 'text/html': TEXT_ASSET } }, '304': empty('not modified (If-None-Match)'), ...problems(404) },
    handler: serve,
  }),
  route({
    method: 'GET', path: '/ui/{asset}', restOfPath: true, operationId: 'consoleAsset', tag: 'Console', access: 'public',
    params: Type.Object({ asset: Type.String({ description: 'path of a console file (may contain /)' }) }),
    summary: 'A file of the console', responses: { '200': { description: 'the file (html, js, css, json, png, svg, txt)', content: { 'application/octet-stream': TEXT_ASSET } }, '304': empty('not modified (If-None-Match)'), ...problems(404) },
    handler: serve,
  }),
  route({
    method: 'GET', path: '/ui/api/access', operationId: 'consoleAccess', tag: 'Console', access: 'authenticated',
    summary: 'What the caller may do (for the console)',
    query: Type.Object({ event_type: Type.Optional(Type.String()), subscription: Type.Optional(Type.String()) }),
    responses: { '200': json('the caller\'s rights', ConsoleAccessSchema), ...problems(404) },
    handler: async (ctx, { access, lookups }) => {
      const subject = ctx.subject;
      const body: Record<string, unknown> = {
        subject: subject.id,
        administrator: access.isAdministrator(subject),
        settings: { read: may(() => access.requireSettings(subject, 'read')), write: may(() => access.requireSettings(subject, 'write')), admin: may(() => access.requireSettings(subject, 'admin')) },
      };
      const name = ctx.query.get('event_type');
      if (name !== null) {
        const eventType = await lookups.eventType(name);
        body.event_type = { name, read: access.mayAccessEventType(subject, eventType, 'read'), write: access.mayAccessEventType(subject, eventType, 'write'), admin: access.mayAccessEventType(subject, eventType, 'admin') };
      }
      const id = ctx.query.get('subscription');
      if (id !== null) {
        const subscription = await lookups.subscription(id);
        const readsAll = await readsEveryEventType(subject, subscription.event_types, access, lookups);
        const admin = access.maySubscription(subject, subscription, 'admin');
        body.subscription = { id, read: readsAll && access.maySubscription(subject, subscription, 'read'), admin, reset: admin && readsAll };
      }
      return { status: 200, body };
    },
  }),
  route({
    method: 'GET', path: '/ui/api/storage-headroom', operationId: 'consoleStorageHeadroom', tag: 'Console', access: 'authenticated',
    summary: 'The Redis memory headroom (for the console\'s overview)',
    description: 'Each Redis master this node writes to with its used bytes, limit, high-water mark and the projected seconds until the mark; the event types holding the most Redis bytes; the ratio of Redis bytes to event JSON bytes (docs/operations.md "Memory and retention"). What the node last read: no Redis round trip.',
    responses: { '200': json('the headroom', StorageHeadroomSchema) },
    handler: (_ctx, { headroom }) => {
      const view = headroom?.() ?? { masters: [], eventTypes: [], ratio: { value: 0, measured: false } };
      const body = {
        masters: view.masters.map((m) => ({
          storage: m.storage,
          master: m.master,
          used_bytes: m.usedBytes,
          limit_bytes: m.limitBytes,
          limit_source: m.limitSource,
          mark_bytes: Number.isFinite(m.markBytes) ? m.markBytes : null,
          full: m.full,
          seconds_to_mark: Number.isFinite(m.secondsToMark) ? m.secondsToMark : null,
        })),
        event_types: view.eventTypes.map((e) => ({ name: e.eventType, bytes: e.bytes, growth_bytes_per_second: e.growthBytesPerSecond })),
        redis_bytes_per_json_byte: view.ratio.value,
        ratio_measured: view.ratio.measured,
      };
      return Promise.resolve({ status: 200, body });
    },
  }),
];

/** True when `check` does not throw (a 403 means false). */
function may(check: () => void): boolean {
  try {
    check();
    return true;
  } catch {
    return false;
  }
}

/** True when `subject` may read every one of `names` (a deleted one counts as not readable). */
async function readsEveryEventType(subject: Subject, names: readonly string[], access: AccessControl, lookups: ConsoleLookups): Promise<boolean> {
  for (const name of names) {
    try {
      if (!access.mayAccessEventType(subject, await lookups.eventType(name), 'read')) return false;
    } catch {
      return false;
    }
  }
  return true;
}
