import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../scripts/local-processes.js';
import { runChild, type ChildRun } from '../support/child-process.js';
import { call, eventsInPartition, startTestBroker, type Answer, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { TokenIssuer } from '../support/token-issuer.js';

/**
 * Publishing quotas (docs/publishing.md "Quotas"): set by administrators per publishing subject or per
 * owning application (`PUT /settings/quotas/{kind}/{name}`), off by default. A producer over its quota
 * gets 429 `QUOTA_EXCEEDED` with `Retry-After` and nothing of its batch is written, while another producer
 * publishes on. Auth mode `jwt`, the administrator `admin`, producers `app-a` and `app-b`; two nodes on one
 * Redis (a quota set on one applies on the other with the settings' change notice). The quotas are set far
 * below one batch (a debt of tens of seconds), so the refusals do not depend on how fast the machine is.
 */

let issuer: TokenIssuer;
let node: TestBroker;
let other: TestBroker;
const tokens: Record<'admin' | 'a' | 'b', Record<string, string>> = { admin: {}, a: {}, b: {} };
const as = (who: keyof typeof tokens, base: string, method: string, path: string, body?: unknown): Promise<Answer> => call(base, method, path, body, tokens[who]);

const SHARED = 'quotas.shared';
const PACED = 'quotas.paced';
const OWNED = 'quotas.owned';

beforeAll(async () => {
  issuer = await TokenIssuer.start();
  const env = issuer.brokerEnv();
  node = await startTestBroker(env);
  other = await startTestBroker({ ...env, BROKER_REDIS_KEY_PREFIX: node.prefix });
  for (const [who, sub] of [['admin', 'admin'], ['a', 'app-a'], ['b', 'app-b']] as const) {
    tokens[who] = { Authorization: `Bearer ${await issuer.sign({ sub, audience: 'broker', expiresInSeconds: 3600 })}` };
  }
  expect((await as('admin', node.url, 'POST', '/event-types', businessEventType(SHARED))).status).toBe(201);
  expect((await as('admin', node.url, 'POST', '/event-types', businessEventType(OWNED, { owning_application: 'quota-owner' }))).status).toBe(201);
  expect((await as('admin', node.url, 'POST', '/event-types', businessEventType(PACED, { owning_application: 'paced-owner' }))).status).toBe(201);
});
afterAll(async () => {
  await Promise.all([node?.stop(), other?.stop()]);
  await issuer?.close();
});

/** Runs `broker` (dist/src/cli/main.js) against `node` with the token of `who`. */
function cli(who: keyof typeof tokens, args: readonly string[]): Promise<ChildRun> {
  const env: NodeJS.ProcessEnv = { ...process.env, BROKER_URL: node.url, BROKER_TOKEN: (tokens[who].Authorization ?? '').replace(/^Bearer /, '') };
  return runChild(process.execPath, [path.join(repoRoot, 'dist', 'src', 'cli', 'main.js'), ...args], { env });
}

/** Events stored in partition 0 of `name` (the position of its newest offset + 1). */
async function stored(name: string): Promise<number> {
  return eventsInPartition(await as('admin', node.url, 'GET', `/event-types/${name}/partitions/0`));
}

/** `n` order events whose batch is about `n` × 500 bytes. */
function batch(tag: string, n: number): Record<string, unknown>[] {
  return Array.from({ length: n }, (_, i) => orderEvent(`${tag}-${i}`, { note: 'x'.repeat(400) }));
}

/** The quota problem: 429 with `Retry-After` between `min` and `max` seconds, naming the quota. */
function expectQuotaProblem(answer: Answer, detail: RegExp, min: number, max: number): void {
  expect(answer.status, answer.text).toBe(429);
  expect(answer.headers.get('content-type')).toBe('application/problem+json');
  expect((answer.json as { type: string }).type).toBe('/problems/quota-exceeded');
  expect((answer.json as { detail: string }).detail).toMatch(detail);
  const retryAfter = Number(answer.headers.get('retry-after'));
  expect(retryAfter).toBeGreaterThanOrEqual(min);
  expect(retryAfter).toBeLessThanOrEqual(max);
}

describe('publishing quotas', () => {
  it('are off by default, and only the settings writers set them', async () => {
    expect((await as('a', node.url, 'GET', '/settings/quotas')).json).toEqual({ items: [] });
    expect((await as('a', node.url, 'PUT', '/settings/quotas/subject/app-a', { bytes_per_second: 100 })).status).toBe(403);
    expect((await as('admin', node.url, 'PUT', '/settings/quotas/nobody/app-a', { bytes_per_second: 100 })).status).toBe(400);
    expect((await as('admin', node.url, 'PUT', '/settings/quotas/subject/app-a', {})).status).toBe(422);
    expect((await as('admin', node.url, 'PUT', '/settings/quotas/subject/app-a', { bytes_per_second: 0 })).status).toBe(422);
    expect((await as('admin', node.url, 'GET', '/settings/quotas')).json).toEqual({ items: [] });
  });

  it('a subject over its bytes per second gets 429 with Retry-After, nothing written; another producer publishes on', async () => {
    const set = await as('admin', node.url, 'PUT', '/settings/quotas/subject/app-a', { bytes_per_second: 100 });
    expect(set.status, set.text).toBe(200);
    expect(set.json).toEqual({ kind: 'subject', name: 'app-a', bytes_per_second: 100 });
    const before = await stored(SHARED);
    // The first batch (~5 KB) takes the quota ~50 s into debt; the next is refused until it is paid back.
    expect((await as('a', node.url, 'POST', `/event-types/${SHARED}/events`, batch('a-first', 10))).status).toBe(200);
    const refused = await as('a', node.url, 'POST', `/event-types/${SHARED}/events`, batch('a-second', 10));
    expectQuotaProblem(refused, /^The subject "app-a" is over its publishing quota of 100 bytes per second; nothing was written/, 10, 60);
    // app-b is not held back by app-a's flood.
    for (let i = 0; i < 3; i++) expect((await as('b', node.url, 'POST', `/event-types/${SHARED}/events`, batch(`b-${i}`, 10))).status).toBe(200);
    expect(await stored(SHARED)).toBe(before + 40);
    // The other node learns the quota from the settings' change notice.
    const deadline = Date.now() + 10_000;
    let seen: unknown;
    while (Date.now() < deadline) {
      seen = (await as('a', other.url, 'GET', '/settings/quotas')).json;
      if (JSON.stringify(seen).includes('app-a')) break;
    }
    expect(seen).toEqual({ items: [{ kind: 'subject', name: 'app-a', bytes_per_second: 100 }] });
    // Removed, it no longer applies.
    expect((await as('admin', node.url, 'DELETE', '/settings/quotas/subject/app-a')).status).toBe(204);
    expect((await as('a', node.url, 'POST', `/event-types/${SHARED}/events`, batch('a-third', 10))).status).toBe(200);
    expect((await as('admin', node.url, 'GET', '/settings/quotas')).json).toEqual({ items: [] });
  });

  it('the events per second of an owning application are charged after validation: a batch over it is refused with nothing written', async () => {
    expect((await as('admin', node.url, 'PUT', '/settings/quotas/owning_application/quota-owner', { events_per_second: 1 })).status).toBe(200);
    const before = await stored(OWNED);
    expect((await as('a', node.url, 'POST', `/event-types/${OWNED}/events`, batch('owned-first', 30))).status).toBe(200);
    // The quota counts the producers to the application's event types together: app-b is refused too.
    const refused = await as('b', node.url, 'POST', `/event-types/${OWNED}/events`, batch('owned-second', 30));
    expectQuotaProblem(refused, /^The owning_application "quota-owner" is over its publishing quota of 1 events per second; nothing was written/, 10, 30);
    expect(await stored(OWNED)).toBe(before + 30);
    // Event types of other applications are not affected.
    expect((await as('b', node.url, 'POST', `/event-types/${SHARED}/events`, batch('elsewhere', 10))).status).toBe(200);
    expect((await as('admin', node.url, 'DELETE', '/settings/quotas/owning_application/quota-owner')).status).toBe(204);
  });

  it('answers where a quota applies carry RateLimit-Policy and RateLimit; a 429 carries them with Retry-After', async () => {
    // No quota: no headers.
    const free = await as('b', node.url, 'POST', `/event-types/${SHARED}/events`, batch('free', 2));
    expect(free.status).toBe(200);
    expect(free.headers.get('ratelimit-policy')).toBeNull();
    expect(free.headers.get('ratelimit')).toBeNull();
    expect((await as('admin', node.url, 'PUT', '/settings/quotas/subject/app-b', { events_per_second: 100, bytes_per_second: 1_000_000 })).status).toBe(200);
    expect((await as('admin', node.url, 'PUT', '/settings/quotas/owning_application/paced-owner', { events_per_second: 1000 })).status).toBe(200);
    try {
      const first = await as('b', node.url, 'POST', `/event-types/${PACED}/events`, batch('headers-1', 60));
      expect(first.status, first.text).toBe(200);
      expect(first.headers.get('ratelimit-policy')).toBe('"subject-events";q=100;qu="events";w=1, "subject-bytes";q=1000000;qu="content-bytes";w=1, "application-events";q=1000;qu="events";w=1');
      // 40 of the subject's 100 events are left (a little more refilled by the time of the charge), 940 of the application's 1,000.
      const current = first.headers.get('ratelimit') ?? '';
      const [subjectEvents, subjectBytes, applicationEvents] = current.split(', ');
      expect(subjectEvents).toMatch(/^"subject-events";r=(4\d|5\d);t=1$/);
      expect(subjectBytes).toMatch(/^"subject-bytes";r=9\d{5};t=1$/);
      expect(applicationEvents).toMatch(/^"application-events";r=9[45]\d;t=1$/);
      // 100 more take the subject's bucket into debt; the next publish is refused, with the headers.
      expect((await as('b', node.url, 'POST', `/event-types/${PACED}/events`, batch('headers-2', 100))).status).toBe(200);
      const refused = await as('b', node.url, 'POST', `/event-types/${PACED}/events`, batch('headers-3', 1));
      expect(refused.status, refused.text).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(refused.headers.get('ratelimit-policy')).toContain('"subject-events";q=100;qu="events";w=1');
    } finally {
      expect((await as('admin', node.url, 'DELETE', '/settings/quotas/subject/app-b')).status).toBe(204);
      expect((await as('admin', node.url, 'DELETE', '/settings/quotas/owning_application/paced-owner')).status).toBe(204);
    }
  });

  it('broker publish paces itself by the RateLimit headers: it stays under its quota without a single 429', async () => {
    const quota = 1000;
    const events = 3000;
    expect((await as('admin', node.url, 'PUT', '/settings/quotas/owning_application/paced-owner', { events_per_second: quota })).status).toBe(200);
    const dir = await mkdtemp(path.join(tmpdir(), 'paced-'));
    try {
      const file = path.join(dir, 'events.ndjson');
      await writeFile(file, batch('paced', events).map((e) => JSON.stringify(e)).join('\n'));
      const before = await stored(PACED);
      const run = await cli('a', ['--json', 'publish', PACED, file, '--batch', '150', '--no-progress']);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).not.toMatch(/429/);
      const summary = JSON.parse(run.stdout) as { published: number; requests: number; seconds: number };
      expect(summary.published).toBe(events);
      // One request per batch: none was refused and sent again.
      expect(summary.requests).toBe(events / 150);
      // Under its quota: at most one second's burst above quota × elapsed time.
      expect(events).toBeLessThanOrEqual(quota * (summary.seconds + 1));
      expect(await stored(PACED)).toBe(before + events);
    } finally {
      await rm(dir, { recursive: true, force: true });
      expect((await as('admin', node.url, 'DELETE', '/settings/quotas/owning_application/paced-owner')).status).toBe(204);
    }
  });

  it('broker quotas sets, lists and removes them', async () => {
    const set = await cli('admin', ['quotas', 'set', 'subject', 'cli-app', '--events-per-second', '5000', '--bytes-per-second', '2000000']);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toBe('set the publishing quota of subject cli-app: 5,000 events/s, 2,000,000 bytes/s\n');
    const listed = await cli('a', ['quotas', 'list']);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout.split('\n').map((line) => line.trim().split(/\s+/))).toEqual([['KIND', 'NAME', 'EVENTS/S', 'BYTES/S'], ['subject', 'cli-app', '5,000', '2,000,000'], ['']]);
    expect(JSON.parse((await cli('a', ['--json', 'quotas', 'list'])).stdout)).toEqual([{ kind: 'subject', name: 'cli-app', events_per_second: 5000, bytes_per_second: 2000000 }]);
    const refused = await cli('a', ['quotas', 'set', 'subject', 'cli-app', '--events-per-second', '1']);
    expect(refused.code).toBe(3);
    expect((await cli('admin', ['quotas', 'set', 'subject', 'cli-app'])).code).toBe(2);
    const removed = await cli('admin', ['quotas', 'remove', 'subject', 'cli-app']);
    expect(removed.code, removed.stderr).toBe(0);
    expect((await as('admin', node.url, 'GET', '/settings/quotas')).json).toEqual({ items: [] });
  });
});
