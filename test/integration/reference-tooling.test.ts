import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../scripts/local-processes.js';
import { formatOffset } from '../../src/domain/cursor/offsets.js';
import type { RedisClient } from '../../src/storage/redis/redis-connection.js';
import { call, harnessRedis, startTestBroker, type TestBroker } from '../support/broker.js';
import { runChild, type ChildRun } from '../support/child-process.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient } from '../support/stream-client.js';

// What tools written against the reference API send, and the answers they need to round-trip: an
// infrastructure-as-code tool reads an event type or subscription, compares it with the wanted one and
// sends it back (PUT) or posts it again (POST /subscriptions is idempotent); the command line retries
// the events a 207 answer says were not stored (docs/concepts.md "Event types"; docs/consuming.md
// "Subscriptions"; docs/publishing.md "The command line").

const CLI = path.join(repoRoot, 'dist', 'src', 'cli', 'main.js');
let broker: TestBroker;
let redis: RedisClient;
let dir: string;

beforeAll(async () => {
  broker = await startTestBroker();
  redis = harnessRedis();
  dir = mkdtempSync(path.join(os.tmpdir(), 'broker-tooling-'));
});
afterAll(async () => {
  await broker.stop();
  redis.disconnect();
  rmSync(dir, { recursive: true, force: true });
});

type Json = Record<string, unknown>;

async function getEventType(name: string): Promise<Json> {
  const answer = await call(broker.url, 'GET', `/event-types/${name}`);
  expect(answer.status, answer.text).toBe(200);
  return answer.json as Json;
}

async function listed(name: string): Promise<Json | undefined> {
  const answer = await call(broker.url, 'GET', '/event-types');
  expect(answer.status).toBe(200);
  return (answer.json as Json[]).find((et) => et.name === name);
}

/** `record` without the field `key`. */
function without(record: Json, key: string): Json {
  return Object.fromEntries(Object.entries(record).filter(([name]) => name !== key));
}

/** The record without `updated_at`, which every accepted PUT sets anew. */
function withoutUpdatedAt(record: Json): Json {
  return without(record, 'updated_at');
}

describe('event type audience', () => {
  it('is stored and served by create, GET and the listing, and changes with PUT', async () => {
    const name = 'tooling.audience';
    const created = await call(broker.url, 'POST', '/event-types', businessEventType(name, { audience: 'company-internal' }));
    expect(created.status, created.text).toBe(201);
    expect((created.json as Json).audience).toBe('company-internal');
    expect((await getEventType(name)).audience).toBe('company-internal');
    expect((await listed(name))?.audience).toBe('company-internal');

    const record = await getEventType(name);
    const changed = await call(broker.url, 'PUT', `/event-types/${name}`, { ...record, audience: 'external-partner' });
    expect(changed.status, changed.text).toBe(200);
    expect((await getEventType(name)).audience).toBe('external-partner');
    expect((await listed(name))?.audience).toBe('external-partner');

    // A PUT without it removes it, as for the other optional fields: the body replaces the record.
    expect((await call(broker.url, 'PUT', `/event-types/${name}`, without(await getEventType(name), 'audience'))).status).toBe(200);
    expect(await getEventType(name)).not.toHaveProperty('audience');
  });

  it('is optional, accepted in any case and served in lower case', async () => {
    const plain = await call(broker.url, 'POST', '/event-types', businessEventType('tooling.no-audience'));
    expect(plain.status, plain.text).toBe(201);
    expect(plain.json).not.toHaveProperty('audience');
    expect(await getEventType('tooling.no-audience')).not.toHaveProperty('audience');

    const upper = await call(broker.url, 'POST', '/event-types', businessEventType('tooling.upper-audience', { audience: 'External-Public' }));
    expect(upper.status, upper.text).toBe(201);
    expect((upper.json as Json).audience).toBe('external-public');
  });

  it('refuses any other value with 422 naming the field and the allowed values, on create and on update', async () => {
    const refused = await call(broker.url, 'POST', '/event-types', businessEventType('tooling.bad-audience', { audience: 'everyone' }));
    expect(refused.status).toBe(422);
    const detail = (refused.json as { detail: string }).detail;
    expect(detail).toContain('audience');
    expect(detail).toContain('everyone');
    for (const allowed of ['component-internal', 'business-unit-internal', 'company-internal', 'external-partner', 'external-public']) expect(detail).toContain(allowed);
    expect((await call(broker.url, 'GET', '/event-types/tooling.bad-audience')).status).toBe(404);

    await call(broker.url, 'POST', '/event-types', businessEventType('tooling.audience-update', { audience: 'component-internal' }));
    const record = await getEventType('tooling.audience-update');
    const update = await call(broker.url, 'PUT', '/event-types/tooling.audience-update', { ...record, audience: 'internal' });
    expect(update.status).toBe(422);
    expect((update.json as { detail: string }).detail).toContain('audience');
    expect((await getEventType('tooling.audience-update')).audience).toBe('component-internal');
  });
});

describe('partition_key_fields of event types without hash partitioning', () => {
  it('is served as [] and a record read and sent back unchanged is accepted without a change', async () => {
    const name = 'tooling.round-trip';
    const created = await call(broker.url, 'POST', '/event-types', businessEventType(name, { audience: 'business-unit-internal', labels: { team: 'orders' } }));
    expect(created.status, created.text).toBe(201);
    expect((created.json as Json).partition_key_fields).toEqual([]);
    const record = await getEventType(name);
    expect(record.partition_key_fields).toEqual([]);
    expect((await listed(name))?.partition_key_fields).toEqual([]);

    // The very record read back: partition_key_fields [], audience, created_at, updated_at and the schema's
    // version and created_at as served.
    const put = await call(broker.url, 'PUT', `/event-types/${name}`, record);
    expect(put.status, put.text).toBe(200);
    const after = await getEventType(name);
    expect(withoutUpdatedAt(after)).toEqual(withoutUpdatedAt(record));
    expect(withoutUpdatedAt(put.json as Json)).toEqual(withoutUpdatedAt(record));
    const schemas = await call(broker.url, 'GET', `/event-types/${name}/schemas`);
    expect((schemas.json as { items: unknown[] }).items).toHaveLength(1);
    // A second apply of the same record is accepted as well.
    expect((await call(broker.url, 'PUT', `/event-types/${name}`, after)).status).toBe(200);
  });

  it('counts [] as absent on create and update for random and user_defined, and keeps hash keys required', async () => {
    const userDefined = await call(broker.url, 'POST', '/event-types', businessEventType('tooling.user-defined', { partition_strategy: 'user_defined', partition_key_fields: [] }));
    expect(userDefined.status, userDefined.text).toBe(201);
    expect((userDefined.json as Json).partition_key_fields).toEqual([]);
    const record = await getEventType('tooling.user-defined');
    expect((await call(broker.url, 'PUT', '/event-types/tooling.user-defined', record)).status).toBe(200);
    expect((await call(broker.url, 'PUT', '/event-types/tooling.user-defined', without(record, 'partition_key_fields'))).status).toBe(200);
    expect((await getEventType('tooling.user-defined')).partition_key_fields).toEqual([]);

    // Non-empty keys stay refused without hash, and an empty list stays refused with it.
    const keysWithoutHash = await call(broker.url, 'POST', '/event-types', businessEventType('tooling.random-keys', { partition_key_fields: ['order_number'] }));
    expect(keysWithoutHash.status).toBe(422);
    const emptyHash = await call(broker.url, 'POST', '/event-types', businessEventType('tooling.empty-hash', { partition_strategy: 'hash', partition_key_fields: [] }));
    expect(emptyHash.status).toBe(422);

    // Hash keys are served as given and round-trip too.
    const hash = await call(broker.url, 'POST', '/event-types', businessEventType('tooling.hash', { partition_strategy: 'hash', partition_key_fields: ['order_number'] }));
    expect(hash.status, hash.text).toBe(201);
    const hashRecord = await getEventType('tooling.hash');
    expect(hashRecord.partition_key_fields).toEqual(['order_number']);
    expect((await call(broker.url, 'PUT', '/event-types/tooling.hash', hashRecord)).status).toBe(200);
  });

  it('serves [] for a record stored without the field, by GET and by the listing', async () => {
    const name = 'tooling.stored-before';
    expect((await call(broker.url, 'POST', '/event-types', businessEventType(name))).status).toBe(201);
    // A record as it was stored before partition_key_fields was always written.
    const key = broker.keys.eventType(name);
    const stored = JSON.parse((await redis.hget(key, 'record')) ?? '{}') as Json;
    await redis.hset(key, 'record', JSON.stringify(without(stored, 'partition_key_fields')));

    const record = await getEventType(name);
    expect(record.partition_key_fields).toEqual([]);
    expect(Object.keys(record).indexOf('partition_key_fields')).toBe(Object.keys(record).indexOf('partition_strategy') + 1);
    expect(await listed(name)).toEqual(record);
    expect((await call(broker.url, 'PUT', `/event-types/${name}`, record)).status).toBe(200);
  });
});

describe('GET /subscriptions?event_type=a,b', () => {
  it('finds the subscriptions reading every named event type, as repeated parameters do', async () => {
    const [a, b, c] = ['tooling.sub-a', 'tooling.sub-b', 'tooling.sub-c'];
    for (const name of [a, b, c]) expect((await call(broker.url, 'POST', '/event-types', businessEventType(name))).status).toBe(201);

    // Applying the same subscription twice: created, then the existing one (nothing changed), in any order of event types.
    const wanted = { owning_application: 'tooling-app', event_types: [a, b], consumer_group: 'tooling' };
    const first = await call(broker.url, 'POST', '/subscriptions', wanted);
    expect(first.status, first.text).toBe(201);
    const again = await call(broker.url, 'POST', '/subscriptions', wanted);
    expect(again.status).toBe(200);
    expect(again.json).toEqual(first.json);
    const reordered = await call(broker.url, 'POST', '/subscriptions', { ...wanted, event_types: [b, a] });
    expect(reordered.status).toBe(200);
    expect(reordered.json).toEqual(first.json);
    const id = (first.json as { id: string }).id;

    const onlyA = await call(broker.url, 'POST', '/subscriptions', { owning_application: 'tooling-app', event_types: [a], consumer_group: 'tooling' });
    const aAndC = await call(broker.url, 'POST', '/subscriptions', { owning_application: 'tooling-app', event_types: [a, c], consumer_group: 'tooling' });
    expect([onlyA.status, aAndC.status]).toEqual([201, 201]);

    const ids = async (query: string): Promise<string[]> => {
      const answer = await call(broker.url, 'GET', `/subscriptions?${query}`);
      expect(answer.status, answer.text).toBe(200);
      return (answer.json as { items: { id: string }[] }).items.map((s) => s.id).sort();
    };
    expect(await ids(`event_type=${a},${b}`)).toEqual([id]);
    expect(await ids(`event_type=${encodeURIComponent(`${b},${a}`)}`)).toEqual([id]);
    expect(await ids(`event_type=${a}&event_type=${b}`)).toEqual([id]);
    expect(await ids(`event_type=${a},${b}&event_type=${a}`)).toEqual([id]);
    expect(await ids(`event_type=${a}`)).toEqual([id, (onlyA.json as { id: string }).id, (aAndC.json as { id: string }).id].sort());
    expect(await ids(`event_type=${a},${c}`)).toEqual([(aAndC.json as { id: string }).id]);
    expect(await ids(`event_type=${a},tooling.no-such-type`)).toEqual([]);
    expect(await ids(`event_type=${a},${b}&owning_application=tooling-app`)).toEqual([id]);
  });
});

describe('broker publish after a 207', () => {
  it('sends only the events that were not stored again, and every event is stored exactly once', async () => {
    const name = 'tooling.cli-partial';
    const fourPartitions = { messages_per_minute: 1, message_size: 1, read_parallelism: 4, write_parallelism: 4 };
    expect((await call(broker.url, 'POST', '/event-types', businessEventType(name, { partition_strategy: 'user_defined', default_statistic: fourPartitions }))).status).toBe(201);
    const events = Array.from({ length: 40 }, (_, i) => {
      const event = orderEvent(`C${i}`);
      (event.metadata as Json).partition = String(i % 4);
      return event;
    });
    const eids = events.map((e) => (e.metadata as { eid: string }).eid);
    const file = path.join(dir, 'partial.ndjson');
    writeFileSync(file, events.map((e) => JSON.stringify(e)).join('\n'));

    // Partition 1's counters made unwritable, so its appends fail while the other partitions write.
    const meta = broker.keys.partitionMeta(name, 1, '1');
    const counters = await redis.hgetall(meta);
    expect(Object.keys(counters).length).toBeGreaterThan(0);
    await redis.del(meta);
    await redis.set(meta, 'not a hash');

    // Between the broker and the command line: once the broker answered 207, the counters are put back
    // before the answer goes on, so the retry finds the partition writable.
    const statuses: number[] = [];
    const bodies: unknown[] = [];
    const proxy = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        void (async () => {
          const body = Buffer.concat(chunks);
          bodies.push(JSON.parse(body.toString('utf8')));
          const answer = await fetch(broker.url + (req.url ?? '/'), { method: req.method ?? 'GET', headers: { 'content-type': req.headers['content-type'] ?? 'application/json' }, body });
          const text = await answer.text();
          statuses.push(answer.status);
          if (answer.status === 207) {
            await redis.del(meta);
            await redis.hset(meta, counters);
          }
          res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' });
          res.end(text);
        })();
      });
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    let run: { code: number | null; stdout: string; stderr: string };
    try {
      run = await runCli(['publish', name, file, '--batch', '100'], `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`);
    } finally {
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    }
    expect(run.code, run.stderr).toBe(0);
    expect(statuses).toEqual([207, 200]);
    expect(run.stderr).toContain('retrying 10 of 40 events that were not stored (attempt 2 of 5)');
    expect(run.stdout).toContain('published 40 of 40 events');
    // The retry carried exactly partition 1's events.
    expect((bodies[1] as { metadata: { eid: string } }[]).map((e) => e.metadata.eid)).toEqual(eids.filter((_, i) => i % 4 === 1));

    // Ten events in each partition (offsets 0..9), and the forty eids read back once each.
    const partitions = (await call(broker.url, 'GET', `/event-types/${name}/partitions`)).json as { partition: string; newest_available_offset: string }[];
    expect(partitions.map((p) => p.newest_available_offset)).toEqual(['0', '1', '2', '3'].map(() => formatOffset(1, 9)));
    const cursors = ['0', '1', '2', '3'].map((partition) => ({ partition, offset: 'BEGIN' }));
    const stream = await StreamClient.open(`${broker.url}/event-types/${name}/events?batch_limit=40&stream_limit=40&batch_flush_timeout=1&stream_timeout=10`, { headers: { 'X-Broker-Cursors': JSON.stringify(cursors) } });
    try {
      const read = (await stream.untilEnd(10_000)).flatMap((batch) => batch.events ?? []).map((e) => (e.metadata as { eid: string }).eid);
      expect(read.sort()).toEqual([...eids].sort());
    } finally {
      stream.close();
    }
  });
});

/** Runs the command line against `url`; killed after 60 s. */
function runCli(args: readonly string[], url: string): Promise<ChildRun> {
  const env: NodeJS.ProcessEnv = { ...process.env, BROKER_URL: url };
  delete env.BROKER_TOKEN;
  return runChild(process.execPath, [CLI, ...args], { env });
}
