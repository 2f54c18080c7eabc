import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';

/**
 * Cursor tools of an event type (docs/consuming.md "Cursor tools"): `POST /event-types/{name}/shifted-cursors`,
 * and `unconsumed_events` on `GET /event-types/{name}/partitions?cursors=` and
 * `GET /event-types/{name}/partitions/{partition}?consumed_offset=`. One node (the development subject
 * administers it) with a second key namespace of the harness Redis as storage `ns` for timelines, and a
 * retention check every 300 ms.
 */

let broker: TestBroker;
const nsPrefix = `ct-ns-${randomUUID().slice(0, 8)}:`;

beforeAll(async () => {
  broker = await startTestBroker({ BROKER_EVENT_TYPES_MIN_RETENTION_TIME_MS: '1000', BROKER_RETENTION_CHECK_INTERVAL_MS: '300' });
  const storage = await call(broker.url, 'POST', '/storages', { id: 'ns', storage_type: 'redis', redis_configuration: { key_prefix: nsPrefix } });
  expect(storage.status, storage.text).toBe(201);
});
afterAll(async () => {
  await broker?.stop();
});

// ---- helpers ----

interface PartitionRecord {
  partition: string;
  oldest_available_offset: string;
  newest_available_offset: string;
  unconsumed_events?: number;
}

interface Cursor {
  partition: string;
  offset: string;
}

const statistic = (n: number) => ({ default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: n, write_parallelism: n } });

/** A `user_defined` business event type with `partitions` partitions. */
async function eventType(name: string, partitions: number, extra: Record<string, unknown> = {}): Promise<void> {
  const created = await call(broker.url, 'POST', '/event-types', businessEventType(name, { partition_strategy: 'user_defined', ...statistic(partitions), ...extra }));
  expect(created.status, created.text).toBe(201);
}

/** Publishes `count` events to `partition` in one batch. */
async function publish(name: string, partition: string, count: number): Promise<void> {
  const events = Array.from({ length: count }, (_, i) => {
    const event = orderEvent(`${partition}-${i}`);
    (event.metadata as Record<string, unknown>).partition = partition;
    return event;
  });
  const answer = await call(broker.url, 'POST', `/event-types/${name}/events`, events);
  expect(answer.status, answer.text).toBe(200);
}

/** `POST /event-types/{name}/shifted-cursors`. */
function shift(name: string, body: unknown): ReturnType<typeof call> {
  return call(broker.url, 'POST', `/event-types/${name}/shifted-cursors`, body);
}

/** The cursors shifted, expecting 200. */
async function shifted(name: string, body: unknown): Promise<Cursor[]> {
  const answer = await shift(name, body);
  expect(answer.status, answer.text).toBe(200);
  return answer.json as Cursor[];
}

/** `cursor-distances` between two cursors of one partition. */
async function distance(name: string, initial: Cursor, final: Cursor): Promise<number> {
  const answer = await call(broker.url, 'POST', `/event-types/${name}/cursor-distances`, [{ initial_cursor: initial, final_cursor: final }]);
  expect(answer.status, answer.text).toBe(200);
  return (answer.json as { distance: number }[])[0]?.distance ?? Number.NaN;
}

function partitionsWith(name: string, cursors: string): ReturnType<typeof call> {
  return call(broker.url, 'GET', `/event-types/${name}/partitions?cursors=${encodeURIComponent(cursors)}`);
}

const at = (timeline: number, offset: number): string => (offset < 0 ? `001-000${timeline}--1` : `001-000${timeline}-${String(offset).padStart(18, '0')}`);

// ---- tests ----

describe('POST /event-types/{name}/shifted-cursors', () => {
  it('moves cursors forward and back by their shift (0 when absent), answering [{partition, offset}] in request order; the distance between a cursor and its shifted one is the shift', async () => {
    const name = 'ct.shift';
    await eventType(name, 2);
    await publish(name, '0', 5);
    await publish(name, '1', 2);

    const moved = await shifted(name, [
      { partition: '0', offset: at(1, 1), shift: 2 },
      { partition: '0', offset: at(1, 3), shift: -2 },
      { partition: '0', offset: at(1, 1), shift: -2 },
      { partition: '1', offset: 'BEGIN', shift: 2 },
      { partition: '0', offset: at(1, 4) },
      { partition: '1', offset: '0', shift: 0 },
    ]);
    expect(moved).toEqual([
      { partition: '0', offset: at(1, 3) },
      { partition: '0', offset: at(1, 1) },
      // Just before the first event is available: it is where BEGIN points.
      { partition: '0', offset: at(1, -1) },
      { partition: '1', offset: at(1, 1) },
      { partition: '0', offset: at(1, 4) },
      { partition: '1', offset: at(1, 0) },
    ]);
    expect(await distance(name, { partition: '0', offset: at(1, 1) }, moved[0] as Cursor)).toBe(2);
    expect(await distance(name, { partition: '0', offset: at(1, 3) }, moved[1] as Cursor)).toBe(-2);
    expect((await shifted(name, [])).length).toBe(0);
  });

  it('answers 422 for a result before the oldest available offset or after the newest one, and for invalid cursors or shifts; 400 for a body that is not an array; 404 for an unknown event type', async () => {
    const name = 'ct.shift.refused';
    await eventType(name, 2);
    await publish(name, '0', 3);

    const cases: [unknown, RegExp][] = [
      [[{ partition: '0', offset: at(1, 1), shift: -3 }], /1 event\(s\) before the oldest available offset/],
      [[{ partition: '0', offset: 'BEGIN', shift: -1 }], /before the oldest available offset/],
      [[{ partition: '0', offset: at(1, 1), shift: 2 }], /1 event\(s\) after the newest available offset/],
      [[{ partition: '1', offset: 'BEGIN', shift: 1 }], /after the newest available offset/],
      // One bad item refuses the whole request.
      [[{ partition: '0', offset: at(1, 0), shift: 1 }, { partition: '0', offset: at(1, 0), shift: 5 }], /after the newest/],
      [[{ partition: '7', offset: 'BEGIN', shift: 0 }], /partition not found/],
      [[{ partition: '0', offset: 'nonsense', shift: 0 }], /malformed offset/],
      [[{ partition: '0', offset: at(1, 5), shift: -5 }], /beyond the newest/],
      [[{ partition: '0', offset: at(2, 0), shift: 0 }], /timeline 2 does not exist/],
      [[{ partition: '0', offset: at(1, 0), shift: 'one' }], /integer field shift/],
      [[{ partition: '0', offset: at(1, 0), shift: 1.5 }], /integer field shift/],
      [[{ partition: '0', shift: 1 }], /partition and offset/],
      [['0'], /must be an object/],
    ];
    for (const [body, detail] of cases) {
      const answer = await shift(name, body);
      expect(answer.status, JSON.stringify(body)).toBe(422);
      expect(answer.headers.get('content-type')).toBe('application/problem+json');
      expect((answer.json as { detail: string }).detail, JSON.stringify(body)).toMatch(detail);
    }
    expect((await shift(name, { partition: '0', offset: 'BEGIN', shift: 1 })).status).toBe(400);
    expect((await shift(name, '[{"partition":')).status).toBe(400);
    expect((await shift('ct.missing', [])).json).toMatchObject({ status: 404, detail: 'EventType "ct.missing" does not exist.' });
  });

  it('crosses timelines both ways: positions name the timeline that holds them, and the end of timeline 1 is the position before timeline 2', async () => {
    const name = 'ct.shift.timelines';
    await eventType(name, 1);
    await publish(name, '0', 3); // timeline 1: offsets 0..2
    const switched = await call(broker.url, 'POST', `/event-types/${name}/timelines`, { storage_id: 'ns' });
    expect(switched.status, switched.text).toBe(201);
    await publish(name, '0', 2); // timeline 2: offsets 0..1

    const moved = await shifted(name, [
      { partition: '0', offset: at(1, 1), shift: 1 },
      { partition: '0', offset: at(1, 1), shift: 2 },
      { partition: '0', offset: at(1, 1), shift: 3 },
      { partition: '0', offset: at(2, 0), shift: -1 },
      { partition: '0', offset: at(2, -1), shift: 1 },
      { partition: '0', offset: at(2, 1), shift: -5 },
      { partition: '0', offset: 'BEGIN', shift: 5 },
    ]);
    expect(moved).toEqual([
      { partition: '0', offset: at(1, 2) },
      { partition: '0', offset: at(2, 0) },
      { partition: '0', offset: at(2, 1) },
      { partition: '0', offset: at(1, 2) },
      { partition: '0', offset: at(2, 0) },
      { partition: '0', offset: at(1, -1) },
      { partition: '0', offset: at(2, 1) },
    ]);
    expect(await distance(name, { partition: '0', offset: at(1, 1) }, moved[2] as Cursor)).toBe(3);
    expect(await distance(name, { partition: '0', offset: at(2, 1) }, moved[5] as Cursor)).toBe(-5);
    expect((await shift(name, [{ partition: '0', offset: at(2, 1), shift: -6 }])).status).toBe(422);
    expect((await shift(name, [{ partition: '0', offset: at(1, 2), shift: 3 }])).status).toBe(422);
  });

  it('refuses a result before the oldest available offset once retention removed events', async () => {
    const name = 'ct.shift.expired';
    await eventType(name, 1, { options: { retention_time: 1000 } });
    await publish(name, '0', 3);
    const started = Date.now();
    let record: PartitionRecord | undefined;
    do {
      record = (await call(broker.url, 'GET', `/event-types/${name}/partitions/0`)).json as PartitionRecord;
      if (Date.now() - started > 10_000) throw new Error(`retention did not remove the events within 10 s: ${JSON.stringify(record)}`);
    } while (record.oldest_available_offset !== at(1, 3));
    expect(record.newest_available_offset).toBe(at(1, 2));

    expect(await shifted(name, [{ partition: '0', offset: 'BEGIN', shift: 0 }])).toEqual([{ partition: '0', offset: at(1, 2) }]);
    expect(await shifted(name, [{ partition: '0', offset: at(1, 2), shift: 0 }])).toEqual([{ partition: '0', offset: at(1, 2) }]);
    const before = await shift(name, [{ partition: '0', offset: 'BEGIN', shift: -1 }]);
    expect(before.status).toBe(422);
    expect((before.json as { detail: string }).detail).toMatch(/before the oldest available offset/);
    expect((await shift(name, [{ partition: '0', offset: 'BEGIN', shift: 1 }])).status).toBe(422);
    const expired = await shift(name, [{ partition: '0', offset: at(1, 1), shift: 1 }]);
    expect((expired.json as { detail: string }).detail).toMatch(/expired/);
  });
});

describe('unconsumed_events on the partitions resource', () => {
  it('GET /partitions?cursors= adds unconsumed_events to the partitions named, as cursors-lag counts them; the others keep their plain record, in partition order', async () => {
    const name = 'ct.partitions';
    await eventType(name, 3);
    await publish(name, '0', 4);
    await publish(name, '2', 2);
    const cursors = [
      { partition: '2', offset: 'BEGIN' },
      { partition: '0', offset: at(1, 1) },
    ];
    const answer = await partitionsWith(name, JSON.stringify(cursors));
    expect(answer.status, answer.text).toBe(200);
    expect(answer.json).toEqual([
      { partition: '0', oldest_available_offset: at(1, 0), newest_available_offset: at(1, 3), unconsumed_events: 2 },
      { partition: '1', oldest_available_offset: at(1, 0), newest_available_offset: at(1, -1) },
      { partition: '2', oldest_available_offset: at(1, 0), newest_available_offset: at(1, 1), unconsumed_events: 2 },
    ]);
    const lag = await call(broker.url, 'POST', `/event-types/${name}/cursors-lag`, cursors);
    const records = answer.json as PartitionRecord[];
    expect(lag.json).toEqual([records[2], records[0]]);

    const newest = await partitionsWith(name, JSON.stringify([{ partition: '0', offset: at(1, 3) }]));
    expect((newest.json as PartitionRecord[])[0]?.unconsumed_events).toBe(0);
    const plain = (await call(broker.url, 'GET', `/event-types/${name}/partitions`)).json;
    expect((await partitionsWith(name, '[]')).json).toEqual(plain);
    expect((await call(broker.url, 'GET', `/event-types/${name}/partitions?cursors=`)).json).toEqual(plain);
  });

  it('GET /partitions?cursors= answers 422 for a malformed parameter, an invalid or unknown cursor and a partition named twice', async () => {
    const name = 'ct.partitions.refused';
    await eventType(name, 2);
    await publish(name, '0', 2);
    const cases: [string, RegExp][] = [
      ['[{"partition":"0"', /malformed cursors/],
      ['{"partition":"0","offset":"BEGIN"}', /must be a JSON array/],
      ['[[[[{"partition":"0"}]]]]', /malformed cursors/],
      ['[{"partition":"0"}]', /partition and offset/],
      ['[{"partition":"7","offset":"BEGIN"}]', /partition not found/],
      ['[{"partition":"0","offset":"x"}]', /malformed offset/],
      [`[{"partition":"0","offset":"${at(1, 2)}"}]`, /beyond the newest/],
      [`[{"partition":"0","offset":"${at(2, 0)}"}]`, /timeline 2 does not exist/],
      ['[{"partition":"0","offset":"BEGIN"},{"partition":"0","offset":"0"}]', /duplicate partition/],
    ];
    for (const [cursors, detail] of cases) {
      const answer = await partitionsWith(name, cursors);
      expect(answer.status, cursors).toBe(422);
      expect(answer.headers.get('content-type')).toBe('application/problem+json');
      expect((answer.json as { detail: string }).detail, cursors).toMatch(detail);
    }
    expect((await partitionsWith('ct.missing', '[]')).status).toBe(404);
  });

  it('GET /partitions/{partition}?consumed_offset= adds unconsumed_events after that offset; 422 for an invalid one or an unknown partition, 404 for an unknown partition without it', async () => {
    const name = 'ct.partition';
    await eventType(name, 2);
    await publish(name, '0', 4);
    const get = (path: string) => call(broker.url, 'GET', `/event-types/${name}/partitions/${path}`);

    expect((await get(`0?consumed_offset=${at(1, 1)}`)).json).toEqual({ partition: '0', oldest_available_offset: at(1, 0), newest_available_offset: at(1, 3), unconsumed_events: 2 });
    expect((await get('0?consumed_offset=BEGIN')).json).toMatchObject({ unconsumed_events: 4 });
    expect((await get('0?consumed_offset=2')).json).toMatchObject({ unconsumed_events: 1 });
    expect((await get(`0?consumed_offset=${at(1, 3)}`)).json).toMatchObject({ unconsumed_events: 0 });
    expect((await get('1?consumed_offset=BEGIN')).json).toEqual({ partition: '1', oldest_available_offset: at(1, 0), newest_available_offset: at(1, -1), unconsumed_events: 0 });
    expect((await get('0')).json).toEqual({ partition: '0', oldest_available_offset: at(1, 0), newest_available_offset: at(1, 3) });

    for (const [query, detail] of [
      ['0?consumed_offset=', /malformed offset/],
      ['0?consumed_offset=abc', /malformed offset/],
      [`0?consumed_offset=${at(1, 4)}`, /beyond the newest/],
      ['7?consumed_offset=BEGIN', /partition not found/],
    ] as const) {
      const answer = await get(query);
      expect(answer.status, query).toBe(422);
      expect((answer.json as { detail: string }).detail, query).toMatch(detail);
    }
    expect((await get('7')).json).toMatchObject({ status: 404, detail: 'partition not found' });
  });

  it('counts unconsumed_events across timelines', async () => {
    const name = 'ct.partitions.timelines';
    await eventType(name, 1);
    await publish(name, '0', 3);
    expect((await call(broker.url, 'POST', `/event-types/${name}/timelines`, { storage_id: 'ns' })).status).toBe(201);
    await publish(name, '0', 2);
    const listed = await partitionsWith(name, JSON.stringify([{ partition: '0', offset: at(1, 0) }]));
    expect(listed.json).toEqual([{ partition: '0', oldest_available_offset: at(1, 0), newest_available_offset: at(2, 1), unconsumed_events: 4 }]);
    // The position before timeline 2 is the end of timeline 1: both leave the two events of timeline 2.
    for (const offset of [at(2, -1), at(1, 2)]) {
      expect((await call(broker.url, 'GET', `/event-types/${name}/partitions/0?consumed_offset=${offset}`)).json).toMatchObject({ unconsumed_events: 2 });
    }
  });
});

describe('authorization of the cursor tools', () => {
  it('needs the event type readers for shifted-cursors and unconsumed_events, like cursors-lag', async () => {
    const name = 'ct.guarded';
    const everyone = [{ data_type: '*', value: '*' }];
    await eventType(name, 1, { authorization: { admins: everyone, writers: everyone, readers: [{ data_type: 'user', value: 'someone-else' }] } });
    for (const answer of [
      await shift(name, [{ partition: '0', offset: 'BEGIN', shift: 0 }]),
      await partitionsWith(name, '[{"partition":"0","offset":"BEGIN"}]'),
      await call(broker.url, 'GET', `/event-types/${name}/partitions/0?consumed_offset=BEGIN`),
      await call(broker.url, 'POST', `/event-types/${name}/cursors-lag`, [{ partition: '0', offset: 'BEGIN' }]),
    ]) {
      expect(answer.json).toMatchObject({ status: 403, detail: `Access on READ event-type:${name} denied` });
    }
  });
});
