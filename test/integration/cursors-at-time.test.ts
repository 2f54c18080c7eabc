import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../scripts/local-processes.js';
import { formatOffset } from '../../src/domain/cursor/offsets.js';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient } from '../support/stream-client.js';

/**
 * Seeking by time (docs/consuming.md "Seeking by time"): `GET /event-types/{name}/cursors-at-time`
 * answers per partition the cursor from which a stream starts with the first event received at or
 * after a time. Each case opens a low-level stream with those cursors (X-Broker-Cursors) and reads it
 * until quiet (the broker ends it after a keep-alive on every partition), then compares what came with what the events' own
 * `metadata.received_at` says should come. Retention runs every 300 ms with a 1 s minimum so one case
 * can see the oldest events removed.
 */

let broker: TestBroker;

beforeAll(async () => {
  broker = await startTestBroker({ BROKER_EVENT_TYPES_MIN_RETENTION_TIME_MS: '1000', BROKER_RETENTION_CHECK_INTERVAL_MS: '300' });
});
afterAll(async () => {
  await broker.stop();
});

const PARTITIONS = ['0', '1'];
const LONG_RETENTION_MS = 172_800_000;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface Cursor {
  partition: string;
  offset: string;
}

/** An event as read back: its order number and `metadata.received_at` in ms. */
interface ReadEvent {
  order: string;
  receivedAt: number;
}

async function createEventType(name: string, options: Record<string, unknown> = {}): Promise<void> {
  const body = businessEventType(name, {
    partition_strategy: 'user_defined',
    default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: PARTITIONS.length, write_parallelism: PARTITIONS.length },
    ...options,
  });
  const created = await call(broker.url, 'POST', '/event-types', body);
  expect(created.status, created.text).toBe(201);
}

/** Publishes `n` events to every partition in one request. @returns their order numbers */
async function publish(name: string, tag: string, n: number): Promise<string[]> {
  const events = PARTITIONS.flatMap((partition) => Array.from({ length: n }, (_, i) => orderEvent(`${tag}-${partition}-${i}`, { metadata: { eid: randomUUID(), occurred_at: new Date().toISOString(), partition } })));
  const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, events);
  expect(answer.status, answer.text).toBe(200);
  return events.map((e) => String(e.order_number));
}

async function cursorsAt(name: string, time: string): Promise<Cursor[]> {
  const answer = await call(broker.url, 'GET', `/event-types/${name}/cursors-at-time?time=${encodeURIComponent(time)}`);
  expect(answer.status, answer.text).toBe(200);
  return answer.json as Cursor[];
}

/**
 * The events a low-level stream from `cursors` delivers until it goes quiet, in stream order: with
 * `stream_keep_alive_limit=1` the broker ends the stream once every partition sent a keep-alive in a row
 * (a flush window of one second without events).
 */
async function delivered(name: string, cursors: Cursor[]): Promise<ReadEvent[]> {
  const query = 'batch_limit=1000&batch_flush_timeout=1&stream_keep_alive_limit=1';
  const client = await StreamClient.open(`${broker.url}/event-types/${name}/events?${query}`, { headers: { 'X-Broker-Cursors': JSON.stringify(cursors) } });
  expect(client.status, JSON.stringify(client.problem)).toBe(200);
  try {
    const batches = await client.untilEnd(15_000);
    return batches.flatMap((batch) => (batch.events ?? []).map((e) => ({ order: String(e.order_number), receivedAt: Date.parse(String((e.metadata as { received_at: string }).received_at)) })));
  } finally {
    client.close();
  }
}

/** Runs the built command line (`node dist/src/cli/main.js`, docs/cli.md) against the test node. */
function cli(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(repoRoot, 'dist', 'src', 'cli', 'main.js'), ...args], { env: { ...process.env, BROKER_URL: broker.url }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const BEGIN: Cursor[] = PARTITIONS.map((partition) => ({ partition, offset: 'BEGIN' }));
const sorted = (orders: string[]): string[] => [...orders].sort();

describe('cursors at a time', () => {
  it('starts each partition with the first event received at or after the time, to the millisecond', async () => {
    const name = `seek-${randomUUID()}`;
    await createEventType(name);
    // The pauses of over a second put the batches into different seconds of the time index: they are
    // part of the scenario (events received at different times), not a wait for the broker.
    await publish(name, 'a', 3);
    await sleep(1100);
    await publish(name, 'b1', 2);
    await publish(name, 'b2', 2);
    await sleep(1100);
    await publish(name, 'c', 3);

    const all = await delivered(name, BEGIN);
    expect(all).toHaveLength(20);
    const times = [...new Set(all.map((e) => e.receivedAt))].sort((x, y) => x - y);
    expect(times.length).toBeGreaterThanOrEqual(3);
    // Every moment at which a batch was received, and the millisecond after each: the stream from the
    // cursors at that moment gives exactly the events received at or after it. Each stream ends after a
    // quiet second, so they all run at once.
    await Promise.all(
      times
        .flatMap((t) => [t, t + 1])
        .map(async (at) => {
          const cursors = await cursorsAt(name, new Date(at).toISOString());
          expect(cursors.map((c) => c.partition)).toEqual(PARTITIONS);
          const got = (await delivered(name, cursors)).map((e) => e.order);
          expect(sorted(got), `at ${new Date(at).toISOString()}`).toEqual(sorted(all.filter((e) => e.receivedAt >= at).map((e) => e.order)));
        }),
    );
    const middle = times[1] as number;
    // Before the first event: the offset before the oldest one, as BEGIN; the stream gives everything.
    const before = await cursorsAt(name, new Date((times[0] as number) - 60_000).toISOString());
    expect(before).toEqual(PARTITIONS.map((partition) => ({ partition, offset: formatOffset(1, -1) })));
    const [fromMiddle, fromBefore] = await Promise.all([delivered(name, await cursorsAt(name, new Date(middle).toISOString())), delivered(name, before)]);
    expect(fromMiddle.some((e) => e.order.startsWith('a-'))).toBe(false);
    expect(fromMiddle.filter((e) => e.order.startsWith('c-'))).toHaveLength(6);
    expect(sorted(fromBefore.map((e) => e.order))).toEqual(sorted(all.map((e) => e.order)));

    // The command line prints the same cursors: JSON with --json, a table otherwise, exit 3 for a 422.
    const middleTime = new Date(middle).toISOString();
    const printed = await cli(['--json', 'cursors', 'at', name, middleTime]);
    expect(printed.code, printed.stderr).toBe(0);
    expect(JSON.parse(printed.stdout)).toEqual(await cursorsAt(name, middleTime));
    const table = await cli(['cursors', 'at', name, middleTime]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/^PARTITION\s+OFFSET\n0\s+001-0001-\d{18}\n1\s+001-0001-\d{18}\n$/);
    expect((await cli(['cursors', 'at', name, 'yesterday'])).code).toBe(3);

    // After the last event: the newest offsets; the stream gives nothing.
    const partitions = (await call(broker.url, 'GET', `/event-types/${name}/partitions`)).json as { partition: string; newest_available_offset: string }[];
    const after = await cursorsAt(name, new Date(Date.now() + 3_600_000).toISOString().replace('Z', '+00:00'));
    expect(after).toEqual(partitions.map((p) => ({ partition: p.partition, offset: p.newest_available_offset })));
    expect(await delivered(name, after)).toEqual([]);
  }, 120_000);

  it('answers the offset before the oldest retained event for a time before retention removed events', async () => {
    const name = `seek-retained-${randomUUID()}`;
    await createEventType(name, { options: { retention_time: 1000 } });
    const beforeAll = new Date(Date.now() - 1000).toISOString();
    await publish(name, 'old', 3);
    // Retention removes the three old events of each partition within about a second and a half.
    const deadline = Date.now() + 20_000;
    for (const p of PARTITIONS) {
      for (;;) {
        const partition = (await call(broker.url, 'GET', `/event-types/${name}/partitions/${p}`)).json as { oldest_available_offset: string };
        if (partition.oldest_available_offset === formatOffset(1, 3)) break;
        if (Date.now() > deadline) throw new Error(`retention did not remove the old events of partition ${p}`);
        await sleep(100);
      }
    }
    const current = (await call(broker.url, 'GET', `/event-types/${name}`)).json as Record<string, unknown>;
    const updated = await call(broker.url, 'PUT', `/event-types/${name}`, { ...current, options: { retention_time: LONG_RETENTION_MS } });
    expect(updated.status, updated.text).toBe(200);
    const fresh = await publish(name, 'new', 2);

    const cursors = await cursorsAt(name, beforeAll);
    expect(cursors).toEqual(PARTITIONS.map((partition) => ({ partition, offset: formatOffset(1, 2) })));
    expect(sorted((await delivered(name, cursors)).map((e) => e.order))).toEqual(sorted(fresh));
  }, 60_000);

  it('answers 422 for a missing or malformed time and 404 for an unknown event type', async () => {
    const name = `seek-errors-${randomUUID()}`;
    await createEventType(name);
    for (const query of ['', '?time=yesterday', '?time=2026-13-01T00:00:00Z', '?time=2026-01-01T00:00:00']) {
      const answer = await call(broker.url, 'GET', `/event-types/${name}/cursors-at-time${query}`);
      expect(answer.status, `${query}: ${answer.text}`).toBe(422);
      expect(answer.headers.get('content-type')).toContain('application/problem+json');
    }
    const unknown = await call(broker.url, 'GET', `/event-types/no-such-${randomUUID()}/cursors-at-time?time=2026-01-01T00:00:00Z`);
    expect(unknown.status).toBe(404);
  });
});
