import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { afterChangeNotice, call, harnessRedis, startTestBroker, type Answer, type TestBroker } from '../support/broker.js';

const NOT_US = '[{"data_type":"user","value":"someone-else"}]';
import { businessEventType, orderEvent, schemaText } from '../support/fixtures.js';
import { parseExposition, valueOf } from '../support/prometheus-text.js';

let broker: TestBroker;
let other: TestBroker;

beforeAll(async () => {
  // The development subject `unauthenticated` is not an administrator here, so the non-admin rules apply.
  broker = await startTestBroker({ BROKER_AUTH_INITIAL_ADMINS: NOT_US });
  other = await startTestBroker({ BROKER_REDIS_KEY_PREFIX: broker.prefix, BROKER_AUTH_INITIAL_ADMINS: NOT_US });
});
afterAll(async () => {
  await Promise.all([broker.stop(), other.stop()]);
});

type Record_ = Record<string, unknown> & { schema: { version: string; schema: string } };

describe('event type registry', () => {
  it('creates an event type (201 with the record and Location), refuses a duplicate with 409, reads and lists it', async () => {
    const created = await call(broker.url, 'POST', '/event-types', businessEventType('registry.created'));
    expect(created.status).toBe(201);
    expect(created.headers.get('location')).toBe('/event-types/registry.created');
    const record = created.json as Record_;
    expect(record).toMatchObject({
      name: 'registry.created',
      partition_strategy: 'random',
      compatibility_mode: 'forward',
      cleanup_policy: 'delete',
      options: { retention_time: 172_800_000 },
      schema: { type: 'json_schema', version: '1.0.0' },
    });
    expect(typeof record.created_at).toBe('string');

    const duplicate = await call(broker.url, 'POST', '/event-types', businessEventType('registry.created'));
    expect(duplicate.status).toBe(409);
    expect(duplicate.headers.get('content-type')).toBe('application/problem+json');
    expect(duplicate.json).toMatchObject({ title: 'Conflict', status: 409 });
    // A taken name is refused before the schema is checked: no worker task (guard, compilation) runs for
    // it, and a schema that would be refused still gets 409.
    const tasksDone = async (): Promise<number> => valueOf(parseExposition((await call(broker.url, 'GET', '/metrics')).text), 'broker_worker_pool_tasks_completed_total') ?? NaN;
    const tasksBefore = await tasksDone();
    expect((await call(broker.url, 'POST', '/event-types', businessEventType('registry.created'))).status).toBe(409);
    const refusedSchema = businessEventType('registry.created', { schema: { type: 'json_schema', schema: '{"type": "no such type"}' } });
    expect((await call(broker.url, 'POST', '/event-types', refusedSchema)).status).toBe(409);
    expect(await tasksDone()).toBe(tasksBefore);

    const read = await call(other.url, 'GET', '/event-types/registry.created');
    expect(read.status).toBe(200);
    expect(read.json).toEqual(record);

    const listed = await call(broker.url, 'GET', '/event-types?owning_application=test-app');
    expect((listed.json as Record_[]).map((e) => e.name)).toContain('registry.created');
    const none = await call(broker.url, 'GET', '/event-types?owning_application=nobody');
    expect(none.json).toEqual([]);
  });

  it('answers 404 with the reference detail for unknown names, and for names that cannot exist', async () => {
    const missing = await call(broker.url, 'GET', '/event-types/does.not.exist');
    expect(missing.status).toBe(404);
    expect(missing.json).toEqual({ type: '/problems/event-type-not-found', title: 'Not Found', status: 404, detail: 'EventType "does.not.exist" does not exist.' });
    for (const bad of ['..%2F..%2Fetc', '%7Bregistry%7D', 'a:b', '1abc']) {
      expect((await call(broker.url, 'GET', `/event-types/${bad}`)).status).toBe(404);
    }
  });

  it('sets the partition count from default_statistic, capped by the installation maximum', async () => {
    const stat = (n: number) => ({ messages_per_minute: 1, message_size: 1, read_parallelism: n, write_parallelism: 1 });
    await call(broker.url, 'POST', '/event-types', businessEventType('registry.three', { default_statistic: stat(3) }));
    await call(broker.url, 'POST', '/event-types', businessEventType('registry.capped', { default_statistic: stat(50) }));
    await call(broker.url, 'POST', '/event-types', businessEventType('registry.one'));
    expect(((await call(broker.url, 'GET', '/event-types/registry.three/partitions')).json as unknown[]).length).toBe(3);
    expect(((await call(broker.url, 'GET', '/event-types/registry.capped/partitions')).json as unknown[]).length).toBe(8);
    expect(((await call(broker.url, 'GET', '/event-types/registry.one/partitions')).json as unknown[]).length).toBe(1);
  });

  it.each([
    ['a body that is not JSON', '{"name":', 400],
    ['an invalid category', businessEventType('registry.bad1', { category: 'nonsense' }), 400],
    ['an invalid compatibility mode', businessEventType('registry.bad2', { compatibility_mode: 'sometimes' }), 400],
    ['a missing owning_application', businessEventType('registry.bad3', { owning_application: undefined }), 422],
    ['a name breaking the pattern', businessEventType('9lives'), 422],
    ['an unknown partition strategy', businessEventType('registry.bad4', { partition_strategy: 'round_robin' }), 422],
    ['an unknown enrichment strategy', businessEventType('registry.bad5', { enrichment_strategies: ['magic'] }), 422],
    ['hash without key fields', businessEventType('registry.bad6', { partition_strategy: 'hash' }), 422],
    ['a hash key that is not required', businessEventType('registry.bad7', { partition_strategy: 'hash', partition_key_fields: ['amount'] }), 422],
    ['an ordering key field not in the schema', businessEventType('registry.bad8', { ordering_key_fields: ['nope'] }), 422],
    ['compact for category undefined', businessEventType('registry.bad9', { category: 'undefined', enrichment_strategies: [], cleanup_policy: 'compact' }), 422],
    ['a reserved annotation prefix', businessEventType('registry.bad10', { annotations: { 'broker.io/x': 'y' } }), 422],
    ['an avro schema type', businessEventType('registry.bad11', { schema: { type: 'avro_schema', schema: '{}' } }), 422],
    ['a business schema defining metadata', businessEventType('registry.bad12', { schema: { type: 'json_schema', schema: schemaText({ metadata: { type: 'object' } }) } }), 422],
  ])('refuses %s', async (_what, body, status) => {
    const answer = await call(broker.url, 'POST', '/event-types', body);
    expect(answer.status).toBe(status);
    expect(answer.headers.get('content-type')).toBe('application/problem+json');
    expect((answer.json as { detail: string }).detail.length).toBeGreaterThan(0);
  });

  it.each([
    ['bad JSON', '{"type":'],
    ['an unknown type', JSON.stringify({ type: 'object', properties: { a: { type: 'strnig' } } })],
    ['a remote $ref', JSON.stringify({ type: 'object', properties: { a: { $ref: 'http://127.0.0.1:9/evil.json' } } })],
    ['a pattern RE2 cannot run (backreference)', JSON.stringify({ type: 'object', properties: { a: { type: 'string', pattern: '(a)\\1' } } })],
    ['a root that is not an object schema', JSON.stringify({ type: 'string' })],
    ['a huge schema', JSON.stringify({ type: 'object', description: 'x'.repeat(1_100_000) })],
    ['a deeply nested schema', '{"type":"object","properties":{"a":'.repeat(200) + '{}' + '}}'.repeat(200)],
  ])('answers 422 for a hostile schema: %s, and keeps serving', async (_what, schema) => {
    const answer = await call(broker.url, 'POST', '/event-types', businessEventType('registry.hostile', { schema: { type: 'json_schema', schema } }));
    expect(answer.status).toBe(422);
    expect((await call(broker.url, 'GET', '/health')).status).toBe(200);
  });

  it('accepts a catastrophic-backtracking pattern because validators run it on RE2 in linear time', async () => {
    const schema = schemaText({ word: { type: 'string', pattern: '^(a+)+$' } }, ['word']);
    const created = await call(broker.url, 'POST', '/event-types', businessEventType('registry.redos', { schema: { type: 'json_schema', schema } }));
    expect(created.status).toBe(201);
    const started = Date.now();
    const published = await call(broker.url, 'POST', '/event-types/registry.redos/events', [orderEvent('x', { word: 'a'.repeat(100_000) + '!' })]);
    expect(published.status).toBe(422);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('gzips large answers for clients that accept it, answers 405 with Allow for a wrong method and 404 problems for unknown routes', async () => {
    for (let i = 0; i < 5; i++) await call(broker.url, 'POST', '/event-types', businessEventType(`registry.many${i}`));
    const res = await fetch(`${broker.url}/event-types`, { headers: { 'accept-encoding': 'gzip' } });
    expect(res.headers.get('content-encoding')).toBe('gzip');
    expect(((await res.json()) as unknown[]).length).toBeGreaterThanOrEqual(5);
    const plain = await fetch(`${broker.url}/event-types`, { headers: { 'accept-encoding': 'identity' } });
    expect(plain.headers.get('content-encoding')).toBeNull();
    await plain.arrayBuffer();

    const wrongMethod = await call(broker.url, 'PATCH', '/event-types/registry.many0', {});
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('GET, PUT, DELETE');
    expect(wrongMethod.headers.get('content-type')).toBe('application/problem+json');
    const unknown = await call(broker.url, 'GET', '/no/such/route');
    expect(unknown.status).toBe(404);
    expect(unknown.json).toMatchObject({ title: 'Not Found', status: 404 });
    expect(unknown.headers.get('x-flow-id')).toBeTruthy();
  });

  it('serves the strategy registries', async () => {
    expect((await call(broker.url, 'GET', '/registry/partition-strategies')).json).toEqual(['random', 'hash', 'user_defined']);
    expect((await call(broker.url, 'GET', '/registry/enrichment-strategies')).json).toEqual(['metadata_enrichment']);
  });
});

describe('schema versions and compatibility', () => {
  const base = { order_number: { type: 'string' } };

  async function put(name: string, schema: string, extra: Record<string, unknown> = {}) {
    return call(broker.url, 'PUT', `/event-types/${name}`, businessEventType(name, { schema: { type: 'json_schema', schema }, ...extra }));
  }

  it('bumps PATCH for descriptions, MINOR for new properties, keeps the version for an identical schema, and lists versions newest first', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('versions.forward', { schema: { type: 'json_schema', schema: schemaText(base, ['order_number']) } }));
    const same = await put('versions.forward', schemaText(base, ['order_number']));
    expect(same.status).toBe(200);
    expect((same.json as Record_).schema.version).toBe('1.0.0');

    const described = await put('versions.forward', schemaText(base, ['order_number'], { description: 'orders' }));
    expect((described.json as Record_).schema.version).toBe('1.0.1');

    const added = await put('versions.forward', schemaText({ ...base, amount: { type: 'number' } }, ['order_number'], { description: 'orders' }));
    expect((added.json as Record_).schema.version).toBe('1.1.0');

    const versions = await call(broker.url, 'GET', '/event-types/versions.forward/schemas');
    expect((versions.json as { items: { version: string }[] }).items.map((s) => s.version)).toEqual(['1.1.0', '1.0.1', '1.0.0']);
    const one = await call(broker.url, 'GET', '/event-types/versions.forward/schemas/1.0.1');
    expect(one.json).toMatchObject({ version: '1.0.1' });
    expect((await call(broker.url, 'GET', '/event-types/versions.forward/schemas/latest')).json).toMatchObject({ version: '1.1.0' });
    expect((await call(broker.url, 'GET', '/event-types/versions.forward/schemas/9.9.9')).status).toBe(404);
    const paged = await call(broker.url, 'GET', '/event-types/versions.forward/schemas?limit=1&offset=1');
    expect(paged.json).toMatchObject({ items: [{ version: '1.0.1' }], _links: { prev: {}, next: {} } });
  });

  it('refuses a MAJOR change under forward and compatible, accepts it with a MAJOR bump under none', async () => {
    for (const mode of ['forward', 'compatible', 'none']) {
      const name = `versions.major.${mode}`;
      await call(broker.url, 'POST', '/event-types', businessEventType(name, { compatibility_mode: mode, schema: { type: 'json_schema', schema: schemaText(base, ['order_number']) } }));
      const retyped = await put(name, schemaText({ order_number: { type: 'integer' } }, ['order_number']), { compatibility_mode: mode });
      if (mode === 'none') {
        expect(retyped.status).toBe(200);
        expect((retyped.json as Record_).schema.version).toBe('2.0.0');
      } else {
        expect(retyped.status).toBe(422);
        expect((retyped.json as { detail: string }).detail).toContain('#/properties/order_number');
      }
    }
  });

  it('refuses keywords compatible mode forbids, and relaxing the compatibility mode', async () => {
    const refused = await call(broker.url, 'POST', '/event-types', businessEventType('versions.compat.bad', {
      compatibility_mode: 'compatible',
      schema: { type: 'json_schema', schema: schemaText(base, [], { additionalProperties: false }) },
    }));
    expect(refused.status).toBe(422);
    await call(broker.url, 'POST', '/event-types', businessEventType('versions.strict', { compatibility_mode: 'compatible' }));
    const relaxed = await call(broker.url, 'PUT', '/event-types/versions.strict', businessEventType('versions.strict', { compatibility_mode: 'none' }));
    expect(relaxed.status).toBe(422);
  });

  it('keeps name, category and default_statistic fixed', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('versions.fixed'));
    expect((await call(broker.url, 'PUT', '/event-types/versions.fixed', businessEventType('versions.other'))).status).toBe(422);
    expect((await call(broker.url, 'PUT', '/event-types/versions.fixed', businessEventType('versions.fixed', { category: 'data' }))).status).toBe(422);
    const stat = { messages_per_minute: 1, message_size: 1, read_parallelism: 2, write_parallelism: 2 };
    expect((await call(broker.url, 'PUT', '/event-types/versions.fixed', businessEventType('versions.fixed', { default_statistic: stat }))).status).toBe(422);
    expect((await call(broker.url, 'PUT', '/event-types/versions.missing', businessEventType('versions.missing'))).status).toBe(404);
  });

  it('makes a schema change on one node govern publishing on another node as soon as its change notice arrives', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('versions.cache'));
    // Warm node `other`'s cache with the first version.
    expect((await call(other.url, 'POST', '/event-types/versions.cache/events', [orderEvent('A1')])).status).toBe(200);
    const changed = await put('versions.cache', schemaText({ order_number: { type: 'string' }, amount: { type: 'number' }, currency: { type: 'string' } }, ['order_number', 'currency']));
    expect(changed.status).toBe(200);
    // The other node drops its cached copy when the notice reaches it (pub/sub, across the cluster bus in
    // the cluster project): usually before the next request, not always (a cluster run saw 200 once).
    let withoutCurrency: Answer | undefined;
    await expect
      .poll(async () => (withoutCurrency = await call(other.url, 'POST', '/event-types/versions.cache/events', [orderEvent('A2')])).status, { timeout: 5_000 })
      .toBe(422);
    expect((withoutCurrency?.json as { detail: string }[])[0]?.detail).toContain('currency');
    expect((await call(other.url, 'GET', '/event-types/versions.cache')).json).toMatchObject({ schema: { version: '1.1.0' } });
  });

  it('makes a node that lost a change notice read its cached event types again within two seconds', async () => {
    const name = 'versions.lost-notice';
    // Created, and its creation notice heard back by every node, before `other` caches it.
    await afterChangeNotice(broker, name, () => call(broker.url, 'POST', '/event-types', businessEventType(name)));
    expect((await call(other.url, 'POST', `/event-types/${name}/events`, [orderEvent('L1')])).status).toBe(200);
    // Deleted from the registry (its partitions stay) as a deletion would, but its notice lost on the way:
    // the count of notices announced rises, no notice arrives. Until `other` notices, it writes to its cached copy.
    const redis = harnessRedis();
    try {
      await redis.srem(broker.keys.eventTypeNames, name);
      await redis.del(broker.keys.eventType(name), broker.keys.eventTypeSchemas(name));
      expect((await call(other.url, 'POST', `/event-types/${name}/events`, [orderEvent('L2')])).status).toBe(200);
      await redis.incr(broker.keys.metadataChanges);
      const started = Date.now();
      await expect.poll(async () => (await call(other.url, 'POST', `/event-types/${name}/events`, [orderEvent('L3')])).status, { timeout: 5_000, interval: 50 }).toBe(404);
      expect(Date.now() - started).toBeLessThan(3_000);
    } finally {
      redis.disconnect();
    }
  });

  it('deletes an event type (200) and its events; afterwards it is 404 on every node', async () => {
    await call(broker.url, 'POST', '/event-types', businessEventType('versions.deleted'));
    expect((await call(other.url, 'POST', '/event-types/versions.deleted/events', [orderEvent('A1')])).status).toBe(200);
    expect((await call(broker.url, 'DELETE', '/event-types/versions.deleted')).status).toBe(200);
    // The other node drops its cached copy when the change notice reaches it (as for the schema change
    // above): on the cluster project the notice crosses the cluster bus and can arrive after this request.
    await expect.poll(async () => (await call(other.url, 'POST', '/event-types/versions.deleted/events', [orderEvent('A1')])).status, { timeout: 5_000 }).toBe(404);
    expect((await call(other.url, 'GET', '/event-types/versions.deleted')).status).toBe(404);
    expect((await call(broker.url, 'DELETE', '/event-types/versions.deleted')).status).toBe(404);
    // Recreated, it starts from offset 0 again.
    await call(broker.url, 'POST', '/event-types', businessEventType('versions.deleted'));
    expect((await call(broker.url, 'GET', '/event-types/versions.deleted/partitions/0')).json).toMatchObject({ newest_available_offset: '001-0001--1' });
  });
});
