import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, repoRoot } from '../../scripts/local-processes.js';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { runChild, type ChildRun } from '../support/child-process.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';

// The `broker` command line (docs/cli.md) run as a process (`node dist/src/cli/main.js`) against a
// real node, as a user runs it.
const CLI = path.join(repoRoot, 'dist', 'src', 'cli', 'main.js');
let broker: TestBroker;
let dir: string;

beforeAll(async () => {
  broker = await startTestBroker();
  dir = mkdtempSync(path.join(os.tmpdir(), 'broker-cli-'));
});
afterAll(async () => {
  await broker.stop();
  rmSync(dir, { recursive: true, force: true });
});

type Run = ChildRun;

/** Runs the CLI with `--url` of the test node (unless `url` says otherwise); killed after 60 s. */
function cli(args: readonly string[], options: { input?: string; url?: string; env?: Record<string, string> } = {}): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, BROKER_URL: options.url ?? broker.url, ...options.env };
  delete env.BROKER_TOKEN;
  if (options.env?.BROKER_TOKEN !== undefined) env.BROKER_TOKEN = options.env.BROKER_TOKEN;
  return runChild(process.execPath, [CLI, ...args], { env, input: options.input ?? '' });
}

/** Writes a file into the test directory. @returns its path */
function file(name: string, text: string): string {
  const where = path.join(dir, name);
  writeFileSync(where, text);
  return where;
}

const fourPartitions = { default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: 4, write_parallelism: 4 } };

function eidOf(event: unknown): string {
  return ((event as { metadata: { eid: string } }).metadata).eid;
}

function ndjsonLines(text: string): unknown[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as unknown);
}

async function createEventType(name: string): Promise<void> {
  const created = await cli(['event-types', 'create', '-f', file(`${name}.json`, JSON.stringify(businessEventType(name, fourPartitions)))]);
  expect(created.code, created.stderr).toBe(0);
}

async function lagOf(id: string): Promise<number | null> {
  const lag = await cli(['lag', id, '--json']);
  expect(lag.code, lag.stderr).toBe(0);
  return (JSON.parse(lag.stdout) as { unconsumed_events: number | null }).unconsumed_events;
}

describe('broker CLI', () => {
  it('creates, shows, lists, updates and deletes event types', async () => {
    const name = `cli.types.${randomUUID().slice(0, 8)}`;
    const path = file('type.json', JSON.stringify(businessEventType(name, fourPartitions)));
    const created = await cli(['event-types', 'create', '-f', path]);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toBe(`created event type ${name}\n`);

    const again = await cli(['event-types', 'create', '-f', path]);
    expect(again.code).toBe(3);
    expect(again.stderr).toBe(`broker: Conflict: EventType "${name}" already exists.\n`);

    const shown = await cli(['event-types', 'get', name, '--json']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ name, category: 'business', schema: { version: '1.0.0' } });

    const listed = await cli(['--json', 'event-types', 'list']);
    expect(listed.code, listed.stderr).toBe(0);
    expect((JSON.parse(listed.stdout) as { name: string }[]).map((e) => e.name)).toContain(name);
    const table = await cli(['event-types', 'list']);
    expect(table.stdout.split('\n')[0]).toMatch(/^NAME\s+CATEGORY\s+OWNING APPLICATION\s+PARTITIONING\s+COMPATIBILITY$/);
    expect(table.stdout).toMatch(new RegExp(`^${name.replace(/\./g, '\\.')}\\s+business\\s+test-app\\s+random\\s+forward$`, 'm'));

    // A new optional property: a MINOR bump; the name comes from the file.
    const schema = JSON.stringify({ type: 'object', properties: { order_number: { type: 'string' }, amount: { type: 'number' }, note: { type: 'string' } }, required: ['order_number'] });
    const updated = await cli(['event-types', 'update', '-f', '-'], { input: JSON.stringify(businessEventType(name, { ...fourPartitions, schema: { type: 'json_schema', schema } })) });
    expect(updated.code, updated.stderr).toBe(0);
    expect(updated.stdout).toBe(`updated event type ${name}\n`);
    const after = await cli(['event-types', 'get', name, '--json']);
    expect(JSON.parse(after.stdout)).toMatchObject({ schema: { version: '1.1.0' } });

    const deleted = await cli(['event-types', 'delete', name]);
    expect(deleted.code, deleted.stderr).toBe(0);
    const gone = await cli(['event-types', 'get', name]);
    expect(gone.code).toBe(3);
    expect(gone.stderr).toBe(`broker: Not Found: EventType "${name}" does not exist.\n`);
  });

  it('prints the broker\'s Warning when an event type\'s declared traffic cannot fit the Redis memory budget, and creates it', async () => {
    const name = `cli.large.${randomUUID().slice(0, 8)}`;
    // A million 10 KB messages a minute for the default retention of two days: far beyond any machine's memory.
    const statistic = { default_statistic: { messages_per_minute: 1_000_000, message_size: 10_000, read_parallelism: 1, write_parallelism: 1 } };
    const created = await cli(['event-types', 'create', '-f', file('large.json', JSON.stringify(businessEventType(name, statistic)))]);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toBe(`created event type ${name}\n`);
    expect(created.stderr).toMatch(new RegExp(`^warning: event type "${name.replace(/\./g, '\\.')}" needs about .* of Redis memory .* but storage "default" has .* of room below its high-water mark`));
    const small = await cli(['event-types', 'create', '-f', file('small.json', JSON.stringify(businessEventType(`${name}.small`, fourPartitions)))]);
    expect(small.code, small.stderr).toBe(0);
    expect(small.stderr).toBe('');
    expect((await cli(['event-types', 'delete', name])).code).toBe(0);
    expect((await cli(['event-types', 'delete', `${name}.small`])).code).toBe(0);
  });

  it('two tails share a queue-mode subscription: every event printed once by one of them, and the lag reaches 0', async () => {
    const name = `cli.queue.${randomUUID().slice(0, 8)}`;
    await createEventType(name);
    const events = Array.from({ length: 2000 }, (_, i) => orderEvent(`q-${i}`));
    const published = await call(broker.url, 'POST', `/event-types/${name}/events`, events);
    expect(published.status, published.text).toBe(200);
    const created = await call(broker.url, 'POST', '/subscriptions', { owning_application: 'cli-test', event_types: [name], read_from: 'begin', annotations: { 'broker.io/consumption-mode': 'queue' } });
    const id = (created.json as { id: string }).id;
    const tails = await Promise.all([1, 2].map(() => cli(['tail', '--subscription', id, '--limit', '1000', '--batch-limit', '50', '--json'])));
    for (const t of tails) expect(t.code, t.stderr).toBe(0);
    const [first, second] = tails.map((t) => ndjsonLines(t.stdout).map(eidOf));
    expect(first).toHaveLength(1000);
    expect(second).toHaveLength(1000);
    expect([...(first ?? []), ...(second ?? [])].sort()).toEqual(events.map(eidOf).sort());
    expect(await lagOf(id)).toBe(0);
  });

  it('publishes a file of 10,000 events, tails them back from the event type and through a subscription, and the lag reaches 0', async () => {
    const name = `cli.orders.${randomUUID().slice(0, 8)}`;
    await createEventType(name);
    const events = Array.from({ length: 10_000 }, (_, i) => orderEvent(`o-${i}`));
    const eids = events.map(eidOf).sort();
    const input = file('orders.ndjson', events.map((e) => JSON.stringify(e)).join('\n') + '\n');

    const published = await cli(['publish', name, input, '--batch', '500', '--gzip', '--json']);
    expect(published.code, published.stderr).toBe(0);
    expect(JSON.parse(published.stdout)).toMatchObject({ event_type: name, events: 10_000, published: 10_000, failed: 0, requests: 20, failures: [] });

    const lowLevel = await cli(['tail', name, '--from', 'begin', '--limit', '10000', '--json']);
    expect(lowLevel.code, lowLevel.stderr).toBe(0);
    expect(ndjsonLines(lowLevel.stdout).map(eidOf).sort()).toEqual(eids);

    const human = await cli(['tail', name, '--from', 'begin', '--limit', '3']);
    expect(human.code, human.stderr).toBe(0);
    const lines = human.stdout.split('\n').filter((l) => l !== '');
    expect(lines).toHaveLength(3);
    for (const [i, line] of lines.entries()) expect(line).toMatch(new RegExp(`^${name.replace(/\./g, '\\.')}  \\d  001-0001-0{17}${i}  \\{"metadata"`));

    const subscribed = await cli(['subscriptions', 'create', '--owning-application', 'cli-test', '--event-type', name, '--read-from', 'begin', '--json']);
    expect(subscribed.code, subscribed.stderr).toBe(0);
    const id = (JSON.parse(subscribed.stdout) as { id: string }).id;
    const existing = await cli(['subscriptions', 'create', '--owning-application', 'cli-test', '--event-type', name, '--read-from', 'begin']);
    expect(existing.stdout).toBe(`${id} (existing)\n`);
    const list = await cli(['subscriptions', 'list', '--event-type', name, '--json']);
    expect((JSON.parse(list.stdout) as { id: string }[]).map((s) => s.id)).toEqual([id]);
    expect(await lagOf(id)).toBeNull(); // never streamed

    // Without commits the lag stays (the cursors start at the beginning: 10,000 unconsumed). The
    // stream keeps what it was sent for its commit window after it ended: 1 s instead of 60.
    const peek = await cli(['tail', '--subscription', id, '--no-commit', '--commit-timeout', '1', '--limit', '100', '--json']);
    expect(peek.code, peek.stderr).toBe(0);
    expect(ndjsonLines(peek.stdout)).toHaveLength(100);
    expect(await lagOf(id)).toBe(10_000);

    const consumed = await cli(['tail', '--subscription', id, '--limit', '10000', '--json']);
    expect(consumed.code, consumed.stderr).toBe(0);
    expect(ndjsonLines(consumed.stdout).map(eidOf).sort()).toEqual(eids);
    expect(await lagOf(id)).toBe(0);

    const cursors = await cli(['cursors', 'get', id, '--json']);
    expect(cursors.code, cursors.stderr).toBe(0);
    const items = JSON.parse(cursors.stdout) as { event_type: string; partition: string; offset: string }[];
    expect(items.map((c) => c.partition).sort()).toEqual(['0', '1', '2', '3']);

    const rewound = await cli(['cursors', 'reset', id, '--to', 'begin']);
    expect(rewound.code, rewound.stderr).toBe(0);
    expect(rewound.stdout).toBe(`reset 4 cursors of subscription ${id}\n`);
    expect(await lagOf(id)).toBe(10_000);
    const table = await cli(['lag', id]);
    expect(table.stdout).toMatch(/^unconsumed events: 10,000, the oldest \d+ s old$/m);
    const forward = await cli(['cursors', 'reset', id, '--to', 'end']);
    expect(forward.code, forward.stderr).toBe(0);
    expect(await lagOf(id)).toBe(0);
    const back = await cli(['cursors', 'reset', id, '-f', '-'], { input: cursors.stdout });
    expect(back.code, back.stderr).toBe(0);
    expect(await lagOf(id)).toBe(0);
  }, 90_000); // about 15 CLI processes; 5-12 s on 2 shared cores

  it('reports every event that was not published with its index, publishes the others, and exits 1', async () => {
    const name = `cli.mixed.${randomUUID().slice(0, 8)}`;
    await createEventType(name);
    const good = [orderEvent('a'), orderEvent('b'), orderEvent('c')];
    const invalid = orderEvent('x', { order_number: 5 });
    const lines = [JSON.stringify(good[0]), JSON.stringify(invalid), JSON.stringify(good[1]), 'not json', '', JSON.stringify(good[2])];

    const run = await cli(['publish', name, file('mixed.ndjson', lines.join('\n')), '--batch', '10', '--zstd', '--json']);
    expect(run.code, run.stderr).toBe(1);
    const summary = JSON.parse(run.stdout) as { published: number; failed: number; failures: { index: number; line: number; step: string; eid: string }[] };
    expect(summary).toMatchObject({ events: 5, published: 3, failed: 2 });
    expect(summary.failures).toMatchObject([
      { index: 1, line: 2, eid: eidOf(invalid), publishing_status: 'failed', step: 'validating' },
      { index: 3, line: 4, eid: '', publishing_status: 'failed', step: 'reading' },
    ]);

    // A JSON array from stdin, people's output: the failure on stderr by index, the rest written.
    const first = orderEvent('d');
    const human = await cli(['publish', name, '--all-or-nothing'], { input: JSON.stringify([first, invalid, orderEvent('e')]) });
    expect(human.code, human.stderr).toBe(1);
    expect(human.stderr).toContain(`event 1 ${eidOf(invalid)}: failed at validating: `);
    expect(human.stderr).toContain(`event 0 ${eidOf(first)}: aborted at validating: aborted: another event of the batch failed\n`);
    expect(human.stdout).toMatch(/^published 0 of 3 events to cli\.mixed\.\w+ in 1 request \(.*\); 3 failed\n$/);

    const tailed = await cli(['tail', name, '--from', 'begin', '--limit', '3', '--json']);
    expect(ndjsonLines(tailed.stdout).map(eidOf).sort()).toEqual(good.map(eidOf).sort());
  });

  it('exits 2 for usage errors, 3 for a 4xx answer, 4 for a 5xx answer or an unreachable broker', async () => {
    const usage = await cli(['event-types', 'list', '--frobnicate']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("unknown option '--frobnicate'");
    expect((await cli(['tail'])).code).toBe(2);
    expect((await cli(['publish', 'x', path.join(dir, 'missing.ndjson')])).code).toBe(2);
    const both = await cli(['publish', 'x', file('one.ndjson', JSON.stringify(orderEvent('z'))), '--zstd', '--gzip']);
    expect(both.code).toBe(2);
    expect((await cli(['event-types', 'create', '-f', file('bad.json', '{')])).code).toBe(2);
    expect((await cli(['--help'])).code).toBe(0);

    const notFound = await cli(['publish', 'no.such.type', file('two.ndjson', JSON.stringify(orderEvent('z')))]);
    expect(notFound.code).toBe(3);
    expect(notFound.stderr).toContain('broker: Not Found: EventType "no.such.type" does not exist.');
    expect((await cli(['lag', randomUUID()])).code).toBe(3);

    const closed = await freePort();
    const unreachable = await cli(['event-types', 'list'], { url: `http://127.0.0.1:${closed}` });
    expect(unreachable.code).toBe(4);
    expect(unreachable.stderr).toContain('cannot reach the broker');

    // A stand-in that answers 503 problems and records what it was sent.
    const seen: { method: string; authorization: string | undefined; contentType: string | undefined }[] = [];
    const server = http.createServer((req, res) => {
      seen.push({ method: req.method ?? '', authorization: req.headers.authorization, contentType: req.headers['content-type'] });
      req.resume();
      req.on('end', () => {
        res.writeHead(503, { 'content-type': 'application/problem+json' });
        res.end(JSON.stringify({ title: 'Service Unavailable', status: 503, detail: 'Redis is unavailable' }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const failed = await cli(['--token', 'secret-1', 'event-types', 'list'], { url });
      expect(failed.code).toBe(4);
      expect(failed.stderr).toBe('broker: Service Unavailable: Redis is unavailable\n');
      const viaEnv = await cli(['event-types', 'delete', 'x'], { url, env: { BROKER_TOKEN: 'secret-2' } });
      expect(viaEnv.code).toBe(4);
      expect(seen).toEqual([
        { method: 'GET', authorization: 'Bearer secret-1', contentType: undefined },
        { method: 'DELETE', authorization: 'Bearer secret-2', contentType: 'application/json' },
      ]);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
