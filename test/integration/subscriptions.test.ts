import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { subscriptionKey, type Subscription } from '../../src/domain/subscription/subscription.js';
import type { RedisClient } from '../../src/storage/redis/redis-connection.js';
import { Scripts } from '../../src/storage/scripts.js';
import { DELETED_TOPOLOGY_TTL_MS, SubscriptionStore } from '../../src/storage/subscription-store.js';
import { call, harnessRedis, harnessShardedSubscriber, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';

let broker: TestBroker;
let small: TestBroker;
let redis: RedisClient;

const partitions = (n: number) => ({ default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: n, write_parallelism: 1 } });

beforeAll(async () => {
  broker = await startTestBroker();
  // Same data, but a subscription may have at most 2 partitions.
  small = await startTestBroker({ BROKER_REDIS_KEY_PREFIX: broker.prefix, BROKER_SUBSCRIPTIONS_MAX_PARTITIONS: '2' });
  redis = harnessRedis();
  for (const [name, count] of [['sub.orders', 1], ['sub.payments', 2]] as const) {
    expect((await call(broker.url, 'POST', '/event-types', businessEventType(name, partitions(count)))).status).toBe(201);
  }
  // sub.orders partition 0 holds offsets 0..2.
  expect((await call(broker.url, 'POST', '/event-types/sub.orders/events', [orderEvent('A'), orderEvent('B'), orderEvent('C')])).status).toBe(200);
});
afterAll(async () => {
  await Promise.all([broker.stop(), small.stop()]);
  redis.disconnect();
});

interface Sub {
  id: string;
  owning_application: string;
  event_types: string[];
  consumer_group: string;
  read_from: string;
  initial_cursors: { event_type: string; partition: string; offset: string }[];
  authorization?: unknown;
  annotations?: Record<string, string>;
  created_at: string;
  updated_at: string;
}

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

async function create(body: Record<string, unknown>, expected = 201, on: TestBroker = broker): Promise<Sub> {
  const answer = await call(on.url, 'POST', '/subscriptions', body);
  expect(answer.status, answer.text).toBe(expected);
  return answer.json as Sub;
}

describe('creating subscriptions', () => {
  it('answers 201 with the record, the defaults and Location, and indexes it in the registry keys', async () => {
    const answer = await call(broker.url, 'POST', '/subscriptions', { owning_application: 'app-a', event_types: ['sub.orders'] });
    expect(answer.status).toBe(201);
    const record = answer.json as Sub;
    expect(record.id).toMatch(UUID_V4);
    expect(answer.headers.get('location')).toBe(`/subscriptions/${record.id}`);
    expect(record).toMatchObject({ owning_application: 'app-a', event_types: ['sub.orders'], consumer_group: 'default', read_from: 'end', initial_cursors: [] });
    expect(Date.parse(record.created_at)).not.toBeNaN();
    expect(record.updated_at).toBe(record.created_at);

    const read = await call(small.url, 'GET', `/subscriptions/${record.id}`);
    expect(read.status).toBe(200);
    expect(read.json).toEqual(record);

    const k = broker.keys;
    expect(JSON.parse((await redis.get(k.subscription(record.id))) ?? 'null')).toEqual(record);
    expect(Number(await redis.zscore(k.subscriptionIds, record.id))).toBe(Date.parse(record.created_at));
    expect(await redis.hget(k.subscriptionsByKey, subscriptionKey(record))).toBe(record.id);
    expect(await redis.sismember(k.eventTypeSubscriptions('sub.orders'), record.id)).toBe(1);
  });

  it('answers 200 with the existing record (and Location) for the same key, event types in another order; nothing is updated', async () => {
    const first = await create({ owning_application: 'app-b', event_types: ['sub.orders', 'sub.payments'], consumer_group: 'g1' });
    const again = await call(broker.url, 'POST', '/subscriptions', {
      owning_application: 'app-b',
      event_types: ['sub.payments', 'sub.orders'],
      consumer_group: 'g1',
      read_from: 'begin',
      annotations: { 'team.io/x': 'y' },
    });
    expect(again.status).toBe(200);
    expect(again.headers.get('location')).toBe(`/subscriptions/${first.id}`);
    expect(again.json).toEqual(first);
    expect((await call(broker.url, 'GET', `/subscriptions/${first.id}`)).json).toEqual(first);

    const otherGroup = await create({ owning_application: 'app-b', event_types: ['sub.orders', 'sub.payments'], consumer_group: 'g2' });
    expect(otherGroup.id).not.toBe(first.id);
    const otherOwner = await create({ owning_application: 'app-c', event_types: ['sub.orders', 'sub.payments'], consumer_group: 'g1' });
    expect(otherOwner.id).not.toBe(first.id);
  });

  it('creates one subscription when the same key is posted concurrently to two nodes', async () => {
    const body = { owning_application: 'app-race', event_types: ['sub.payments'] };
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => call((i % 2 ? broker : small).url, 'POST', '/subscriptions', { ...body, consumer_group: 'race' })));
    expect(answers.filter((a) => a.status === 201)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 200)).toHaveLength(11);
    expect(new Set(answers.map((a) => (a.json as Sub).id)).size).toBe(1);
    const listed = (await call(broker.url, 'GET', '/subscriptions?owning_application=app-race')).json as { items: Sub[] };
    expect(listed.items).toHaveLength(1);
  });

  it('stores nothing when the key is taken at script time (the createSubscription script decides, not the lookup before it)', async () => {
    const store = new SubscriptionStore(redis, new Scripts(redis), broker.keys);
    const now = new Date().toISOString();
    const record = (id: string): Subscription => ({
      id,
      owning_application: 'app-script',
      event_types: ['sub.orders'],
      consumer_group: 'default',
      read_from: 'end',
      initial_cursors: [],
      created_at: now,
      updated_at: now,
    });
    const first = record(randomUUID());
    const second = record(randomUUID());
    expect(await store.create(first)).toBe(first.id);
    expect(await store.create(second)).toBe(first.id);
    expect(await redis.exists(broker.keys.subscription(second.id))).toBe(0);
    expect(await redis.zscore(broker.keys.subscriptionIds, second.id)).toBeNull();
    expect(await redis.sismember(broker.keys.eventTypeSubscriptions('sub.orders'), second.id)).toBe(0);
    expect(await store.delete(first)).toBe(true);
    expect(await store.delete(first)).toBe(false);
  });

  it('answers 422 for an event type that does not exist, and stores nothing', async () => {
    const before = await redis.zcard(broker.keys.subscriptionIds);
    const answer = await call(broker.url, 'POST', '/subscriptions', { owning_application: 'app-a', event_types: ['sub.orders', 'sub.nowhere'] });
    expect(answer.status).toBe(422);
    expect(answer.headers.get('content-type')).toBe('application/problem+json');
    expect(answer.json).toMatchObject({ title: 'Unprocessable Entity', status: 422 });
    expect((answer.json as { detail: string }).detail).toContain('"sub.nowhere"');
    expect(await redis.zcard(broker.keys.subscriptionIds)).toBe(before);
  });

  describe('read_from cursors', () => {
    const body = (initial_cursors: unknown[]) => ({ owning_application: 'app-cursors', event_types: ['sub.orders', 'sub.payments'], read_from: 'cursors', initial_cursors });
    const all = [
      { event_type: 'sub.orders', partition: '0', offset: '1' },
      { event_type: 'sub.payments', partition: '0', offset: 'BEGIN' },
      { event_type: 'sub.payments', partition: '1', offset: '001-0001--1' },
    ];

    it.each<[string, unknown[], string]>([
      ['no cursors', [], 'must not be empty when read_from is "cursors"'],
      ['a missing partition', all.slice(0, 2), 'has no cursor for partition "1" of event type "sub.payments"'],
      ['an extra partition', [...all, { event_type: 'sub.payments', partition: '2', offset: 'begin' }], 'names partition "2"'],
      ['a cursor of another event type', [...all, { event_type: 'sub.other', partition: '0', offset: 'begin' }], 'not one of event_types'],
      ['two cursors for one partition', [...all, { event_type: 'sub.orders', partition: '0', offset: '0' }], 'repeats the cursor'],
      ['an offset beyond the newest', [{ event_type: 'sub.orders', partition: '0', offset: '3' }, ...all.slice(1)], 'beyond the newest'],
      ['a malformed offset', [{ event_type: 'sub.orders', partition: '0', offset: 'latest' }, ...all.slice(1)], 'is not a valid offset'],
    ])('answers 422 for %s', async (_what, cursors, detail) => {
      const answer = await call(broker.url, 'POST', '/subscriptions', body(cursors));
      expect(answer.status).toBe(422);
      expect((answer.json as { detail: string }).detail).toContain(detail);
    });

    it('answers 201 for one valid cursor per partition and stores them normalized', async () => {
      const record = await create(body(all));
      expect(record.read_from).toBe('cursors');
      expect(record.initial_cursors).toEqual([
        { event_type: 'sub.orders', partition: '0', offset: '001-0001-000000000000000001' },
        { event_type: 'sub.payments', partition: '0', offset: 'begin' },
        { event_type: 'sub.payments', partition: '1', offset: '001-0001--1' },
      ]);
    });
  });

  it('answers 422 when the event types have more partitions than subscriptions.maxPartitions', async () => {
    await create({ owning_application: 'app-max', event_types: ['sub.payments'] }, 201, small);
    const answer = await call(small.url, 'POST', '/subscriptions', { owning_application: 'app-max', event_types: ['sub.payments', 'sub.orders'] });
    expect(answer.status).toBe(422);
    expect((answer.json as { detail: string }).detail).toContain('3 partitions');
    // The same body is fine where the limit is the default.
    await create({ owning_application: 'app-max', event_types: ['sub.payments', 'sub.orders'] });
  });

  it.each<[string, unknown, number]>([
    ['a body that is not JSON', '{"owning_application":', 400],
    ['a body that is an array', [{ owning_application: 'x', event_types: ['sub.orders'] }], 400],
    ['event_types that is a string', { owning_application: 'x', event_types: 'sub.orders' }, 400],
    ['an invalid read_from', { owning_application: 'x', event_types: ['sub.orders'], read_from: 'sometimes' }, 400],
    ['owning_application that is a number', { owning_application: 1, event_types: ['sub.orders'] }, 400],
    ['authorization that is a list', { owning_application: 'x', event_types: ['sub.orders'], authorization: [] }, 400],
    ['a missing owning_application', { event_types: ['sub.orders'] }, 422],
    ['empty event_types', { owning_application: 'x', event_types: [] }, 422],
    ['a repeated event type', { owning_application: 'x', event_types: ['sub.orders', 'sub.orders'] }, 422],
    ['authorization without readers', { owning_application: 'x', event_types: ['sub.orders'], authorization: { admins: [{ data_type: 'user', value: 'a' }] } }, 422],
    ['a reserved annotation prefix', { owning_application: 'x', event_types: ['sub.orders'], annotations: { 'broker.io/x': 'y' } }, 422],
  ])('refuses %s', async (_what, body, status) => {
    const answer = await call(broker.url, 'POST', '/subscriptions', body);
    expect(answer.status).toBe(status);
    expect(answer.headers.get('content-type')).toBe('application/problem+json');
    expect((answer.json as { detail: string }).detail.length).toBeGreaterThan(0);
  });
});

describe('listing subscriptions', () => {
  let s1: Sub;
  let s2: Sub;
  let s3: Sub;
  // Time that must pass: the three get distinct created_at (milliseconds), the order the listing sorts by.
  const pause = () => new Promise((resolve) => setTimeout(resolve, 5));

  beforeAll(async () => {
    s1 = await create({ owning_application: 'lister', event_types: ['sub.orders'] });
    await pause();
    s2 = await create({ owning_application: 'lister', event_types: ['sub.orders', 'sub.payments'] });
    await pause();
    s3 = await create({ owning_application: 'lister', event_types: ['sub.payments'] });
  });

  type Page = { items: Sub[]; _links: { prev?: { href: string }; next?: { href: string } } };
  const list = async (query: string): Promise<Page> => {
    const answer = await call(broker.url, 'GET', `/subscriptions${query}`);
    expect(answer.status, answer.text).toBe(200);
    return answer.json as Page;
  };

  it('lists newest first, filtered by owning_application and by every given event_type', async () => {
    expect(ids(await list('?owning_application=lister'))).toEqual([s3.id, s2.id, s1.id]);
    expect(ids(await list('?owning_application=lister&event_type=sub.payments'))).toEqual([s3.id, s2.id]);
    expect(ids(await list('?owning_application=lister&event_type=sub.orders&event_type=sub.payments'))).toEqual([s2.id]);
    expect(ids(await list('?owning_application=nobody'))).toEqual([]);
    expect(ids(await list('?event_type=sub.nowhere'))).toEqual([]);
    expect(ids(await list('?event_type=a:b'))).toEqual([]);
    // Unfiltered: s3 is the newest subscription of all.
    const newest = await list('?limit=1');
    expect(ids(newest)).toEqual([s3.id]);
    expect(newest._links).toEqual({ next: { href: '/subscriptions?offset=1&limit=1' } });
    // Without filters the ids sorted set gives the order, with them the records: both agree.
    const everything = await list('?limit=1000');
    const byOrders = await list('?event_type=sub.orders&limit=1000');
    expect(ids(everything).filter((id) => ids(byOrders).includes(id))).toEqual(ids(byOrders));
  });

  it('pages with offset and limit; links repeat only the given filters', async () => {
    const first = await list('?owning_application=lister&limit=2&show_status=false');
    expect(ids(first)).toEqual([s3.id, s2.id]);
    expect(first._links).toEqual({ next: { href: '/subscriptions?owning_application=lister&offset=2&limit=2' } });
    const second = await list('?owning_application=lister&offset=2&limit=2');
    expect(ids(second)).toEqual([s1.id]);
    expect(second._links).toEqual({ prev: { href: '/subscriptions?owning_application=lister&offset=0&limit=2' } });
    const middle = await list('?event_type=sub.payments&owning_application=lister&offset=1&limit=1');
    expect(ids(middle)).toEqual([s2.id]);
    expect(middle._links).toEqual({
      prev: { href: '/subscriptions?owning_application=lister&event_type=sub.payments&offset=0&limit=1' },
      next: { href: '/subscriptions?owning_application=lister&event_type=sub.payments&offset=2&limit=1' },
    });
    expect((await list('?owning_application=lister'))._links).toEqual({});
  });

  it.each(['?limit=0', '?limit=1001', '?limit=ten', '?offset=-1', '?offset=1.5'])('answers 400 for %s', async (query) => {
    const answer = await call(broker.url, 'GET', `/subscriptions${query}`);
    expect(answer.status).toBe(400);
    expect(answer.headers.get('content-type')).toBe('application/problem+json');
  });
});

describe('reading, updating and deleting a subscription', () => {
  it('answers 404 for an unknown id and for ids that are not uuids', async () => {
    const missing = await call(broker.url, 'GET', '/subscriptions/6f1c2f0e-3c2b-4b43-9f4e-2a7d1f0c9e11');
    expect(missing.status).toBe(404);
    expect(missing.json).toEqual({ type: '/problems/subscription-not-found', title: 'Not Found', status: 404, detail: 'Subscription with id "6f1c2f0e-3c2b-4b43-9f4e-2a7d1f0c9e11" does not exist.' });
    for (const bad of ['not-a-uuid', '%7Bregistry%7D', '6F1C2F0E-3C2B-4B43-9F4E-2A7D1F0C9E11']) {
      expect((await call(broker.url, 'GET', `/subscriptions/${bad}`)).status).toBe(404);
      expect((await call(broker.url, 'PUT', `/subscriptions/${bad}`, {})).status).toBe(404);
      expect((await call(broker.url, 'DELETE', `/subscriptions/${bad}`)).status).toBe(404);
    }
    expect((await call(broker.url, 'PUT', '/subscriptions/6f1c2f0e-3c2b-4b43-9f4e-2a7d1f0c9e11', { authorization: null })).status).toBe(404);
  });

  it('updates authorization, annotations and labels (204, updated_at moves) and refuses changes of other fields with 422', async () => {
    const record = await create({
      owning_application: 'app-put',
      event_types: ['sub.orders', 'sub.payments'],
      authorization: { admins: [{ data_type: 'user', value: 'alice' }], readers: [{ data_type: 'user', value: 'bob' }] },
    });
    const authorization = { admins: [{ data_type: 'user', value: 'carol' }], readers: [{ data_type: '*', value: '*' }] };
    await new Promise((resolve) => setTimeout(resolve, 5)); // time that must pass: updated_at (milliseconds) must move
    const updated = await call(broker.url, 'PUT', `/subscriptions/${record.id}`, { authorization });
    expect(updated.status, updated.text).toBe(204);
    expect(updated.text).toBe('');
    const read = (await call(broker.url, 'GET', `/subscriptions/${record.id}`)).json as Sub;
    expect(read.authorization).toEqual(authorization);
    expect(read.created_at).toBe(record.created_at);
    expect(Date.parse(read.updated_at)).toBeGreaterThan(Date.parse(record.updated_at));

    // The whole record sent back, event types reordered, new annotations: accepted.
    const whole = await call(broker.url, 'PUT', `/subscriptions/${record.id}`, { ...read, event_types: ['sub.payments', 'sub.orders'], annotations: { 'team.io/x': 'y' } });
    expect(whole.status, whole.text).toBe(204);
    expect(((await call(broker.url, 'GET', `/subscriptions/${record.id}`)).json as Sub).annotations).toEqual({ 'team.io/x': 'y' });

    for (const change of [{ consumer_group: 'other' }, { owning_application: 'other' }, { event_types: ['sub.orders'] }, { read_from: 'begin' }]) {
      const refused = await call(broker.url, 'PUT', `/subscriptions/${record.id}`, { ...read, ...change });
      expect(refused.status, JSON.stringify(change)).toBe(422);
      expect((refused.json as { detail: string }).detail).toContain(`Field "${Object.keys(change)[0] ?? ''}" cannot be changed`);
    }
    expect((await call(broker.url, 'PUT', `/subscriptions/${record.id}`, ['x'])).status).toBe(400);
    expect((await call(broker.url, 'PUT', `/subscriptions/${record.id}`, { authorization: { admins: [], readers: [] } })).status).toBe(422);
    // Refused updates changed nothing.
    expect(((await call(broker.url, 'GET', `/subscriptions/${record.id}`)).json as Sub).consumer_group).toBe('default');
  });

  it('deletes (204, then 404), removes the registry keys and the consumption state, and announces the id', async () => {
    const record = await create({ owning_application: 'app-del', event_types: ['sub.orders', 'sub.payments'] });
    const k = broker.keys;
    const { id } = record;
    // Consumption state as the streaming side would leave it.
    await redis.hset(k.subscriptionOffsets(id), 'sub.orders:0', '-1');
    await redis.set(k.subscriptionTopology(id), '{"version":1,"partitions":[]}');
    await redis.zadd(k.subscriptionSessions(id), Date.now() + 10_000, 'stream-1');
    const listener = harnessShardedSubscriber();
    const announced: string[] = [];
    listener.on('smessage', (channel: string, message: string) => announced.push(`${channel} ${message}`));
    await listener.ssubscribe(k.subscriptionNotices(id));

    try {
      const deleted = await call(broker.url, 'DELETE', `/subscriptions/${id}`);
      expect(deleted.status).toBe(204);
      expect((await call(broker.url, 'GET', `/subscriptions/${id}`)).status).toBe(404);
      expect((await call(broker.url, 'DELETE', `/subscriptions/${id}`)).status).toBe(404);
      expect((await call(broker.url, 'PUT', `/subscriptions/${id}`, { annotations: {} })).status).toBe(404);

      expect(await redis.exists(k.subscription(id))).toBe(0);
      expect(await redis.zscore(k.subscriptionIds, id)).toBeNull();
      expect(await redis.hget(k.subscriptionsByKey, subscriptionKey(record))).toBeNull();
      expect(await redis.sismember(k.eventTypeSubscriptions('sub.orders'), id)).toBe(0);
      expect(await redis.sismember(k.eventTypeSubscriptions('sub.payments'), id)).toBe(0);
      expect(await redis.exists(k.subscriptionOffsets(id), k.subscriptionSessions(id), k.subscriptionSessionInfo(id), k.subscriptionReset(id))).toBe(0);
      // The topology is left as an expiring tombstone, which a late session cannot write an assignment into.
      expect(await redis.hgetall(k.subscriptionTopology(id))).toEqual({ deleted: '1' });
      const ttl = await redis.pttl(k.subscriptionTopology(id));
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(DELETED_TOPOLOGY_TTL_MS);
      expect(ids((await call(broker.url, 'GET', '/subscriptions?owning_application=app-del')).json)).toEqual([]);

      const deadline = Date.now() + 2_000;
      const notice = `${k.subscriptionNotices(id)} topology`;
      while (!announced.includes(notice) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(announced).toContain(notice);
    } finally {
      listener.disconnect();
    }

    // The key is free again: the same body creates a new subscription.
    const again = await create({ owning_application: 'app-del', event_types: ['sub.payments', 'sub.orders'] });
    expect(again.id).not.toBe(id);
  });
});

function ids(page: unknown): string[] {
  return (page as { items: Sub[] }).items.map((s) => s.id);
}
