import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type Answer, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent, schemaText } from '../support/fixtures.js';
import { StreamClient } from '../support/stream-client.js';

/**
 * Schema endpoints (docs/publishing.md "Schema versions"): `POST /event-types/{name}/schemas` (a schema update under the
 * compatibility mode, like a PUT that changes only the schema; `?fetch=true` finds the stored version
 * equal to the schema sent) and `POST /event-types/{name}/schemas/{version}/compatibility-check`.
 * Node `admin`: the development subject is an administrator. Node `guarded`, on its own key prefix:
 * the development subject is no administrator, so only event types without an authorization section
 * (or listing it) may be changed by it.
 */

const NOT_US = '[{"data_type":"user","value":"someone-else"}]';

let admin: TestBroker;
let guarded: TestBroker;

beforeAll(async () => {
  [admin, guarded] = await Promise.all([startTestBroker(), startTestBroker({ BROKER_AUTH_INITIAL_ADMINS: NOT_US })]);
});
afterAll(async () => {
  await Promise.all([admin?.stop(), guarded?.stop()]);
});

// ---- helpers ----

interface SchemaRecord {
  type: string;
  schema: string;
  version: string;
  created_at: string;
}

type EventTypeRecord = Record<string, unknown> & { schema: SchemaRecord; updated_at: string };

const base = { order_number: { type: 'string' }, amount: { type: 'number' } };
const first = schemaText(base, ['order_number']);

async function create(node: TestBroker, name: string, extra: Record<string, unknown> = {}): Promise<EventTypeRecord> {
  const created = await call(node.url, 'POST', '/event-types', businessEventType(name, { schema: { type: 'json_schema', schema: first }, ...extra }));
  expect(created.status, created.text).toBe(201);
  return created.json as EventTypeRecord;
}

function addSchema(node: TestBroker, name: string, body: unknown, query = ''): Promise<Answer> {
  return call(node.url, 'POST', `/event-types/${name}/schemas${query}`, body);
}

function check(node: TestBroker, name: string, version: string, body: unknown): Promise<Answer> {
  return call(node.url, 'POST', `/event-types/${name}/schemas/${version}/compatibility-check`, body);
}

async function record(node: TestBroker, name: string): Promise<EventTypeRecord> {
  const answer = await call(node.url, 'GET', `/event-types/${name}`);
  expect(answer.status, answer.text).toBe(200);
  return answer.json as EventTypeRecord;
}

async function versions(node: TestBroker, name: string): Promise<string[]> {
  return ((await call(node.url, 'GET', `/event-types/${name}/schemas`)).json as { items: SchemaRecord[] }).items.map((s) => s.version);
}

const json = (text: string) => ({ type: 'json_schema', schema: text });
const detailOf = (answer: Answer): string => (answer.json as { detail?: string }).detail ?? '';

/** The exponential `$ref` fan-out the schema cost budget refuses (docs/publishing.md "Schema cost budget"). */
function fanOutSchema(levels: number): string {
  const definitions: Record<string, object> = { d0: { type: 'string' } };
  for (let i = 1; i <= levels; i++) definitions[`d${i}`] = { allOf: [{ $ref: `#/definitions/d${i - 1}` }, { $ref: `#/definitions/d${i - 1}` }] };
  return JSON.stringify({ type: 'object', definitions, properties: { order_number: { type: 'string' }, x: { $ref: `#/definitions/d${levels}` } }, required: ['order_number'] });
}

// ---- tests ----

describe('POST /event-types/{name}/schemas', () => {
  it('adds a schema version under the compatibility mode, changing nothing else; an unchanged schema writes nothing; the new version governs publishing', async () => {
    const name = 'sc.add';
    const created = await create(admin, name);

    const minor = schemaText({ ...base, note: { type: 'string' } }, ['order_number']);
    const added = await addSchema(admin, name, json(minor));
    expect(added.status, added.text).toBe(200);
    expect(added.json).toMatchObject({ type: 'json_schema', schema: minor, version: '1.1.0' });
    const after = await record(admin, name);
    expect({ ...after, schema: undefined, updated_at: undefined }).toEqual({ ...created, schema: undefined, updated_at: undefined });
    expect(after.schema).toEqual(added.json);

    // The same schema again: 200 with the current version, nothing stored.
    const same = await addSchema(admin, name, json(minor));
    expect(same.status).toBe(200);
    expect(same.json).toEqual(after.schema);
    expect((await record(admin, name)).updated_at).toBe(after.updated_at);
    expect(await versions(admin, name)).toEqual(['1.1.0', '1.0.0']);

    expect((await addSchema(admin, name, json(schemaText({ ...base, note: { type: 'string' } }, ['order_number'], { description: 'orders' })))).json).toMatchObject({ version: '1.1.1' });
    const required = await addSchema(admin, name, json(schemaText({ ...base, currency: { type: 'string' } }, ['order_number', 'currency'])));
    expect(required.status, required.text).toBe(422); // removing `note` is a MAJOR change
    expect(detailOf(required)).toContain('not allowed under compatibility mode forward');
    const withCurrency = await addSchema(admin, name, json(schemaText({ ...base, note: { type: 'string' }, currency: { type: 'string' } }, ['order_number', 'currency'], { description: 'orders' })));
    expect(withCurrency.json).toMatchObject({ version: '1.2.0' });
    expect(await versions(admin, name)).toEqual(['1.2.0', '1.1.1', '1.1.0', '1.0.0']);

    const publish = await call(admin.url, 'POST', `/event-types/${name}/events`, [orderEvent('A1')]);
    expect(publish.status).toBe(422);
    expect((publish.json as { detail: string }[])[0]?.detail).toContain('currency');
    expect((await call(admin.url, 'POST', `/event-types/${name}/events`, [orderEvent('A2', { currency: 'EUR' })])).status).toBe(200);
  });

  it('refuses a MAJOR change under forward and compatible and accepts it with a MAJOR bump under none', async () => {
    const retyped = json(schemaText({ order_number: { type: 'integer' }, amount: { type: 'number' } }, ['order_number']));
    for (const mode of ['forward', 'compatible', 'none']) {
      const name = `sc.major.${mode}`;
      await create(admin, name, { compatibility_mode: mode });
      const answer = await addSchema(admin, name, retyped);
      if (mode === 'none') {
        expect(answer.status, answer.text).toBe(200);
        expect(answer.json).toMatchObject({ version: '2.0.0' });
      } else {
        expect(answer.status, answer.text).toBe(422);
        expect(detailOf(answer)).toContain('#/properties/order_number');
        expect(await versions(admin, name)).toEqual(['1.0.0']);
      }
    }
  });

  it('runs exactly the checks of a PUT, those in a worker included: each bad schema gets the answer a PUT changing only the schema gets, and nothing is stored', async () => {
    const name = 'sc.checks';
    await create(admin, name, { partition_strategy: 'hash', partition_key_fields: ['order_number'], compatibility_mode: 'none' });
    await create(admin, 'sc.checks.compatible', { compatibility_mode: 'compatible' });
    const cases: [string, unknown, RegExp][] = [
      [name, json('{"type": "object",'), /invalid schema/],
      [name, json(JSON.stringify({ type: 'object', properties: { order_number: { type: 5 } } })), /invalid schema/],
      [name, json(fanOutSchema(30)), /would apply more than 256 subschemas/],
      [name, json(schemaText({ ...base, metadata: { type: 'object' } }, ['order_number'])), /metadata/],
      [name, json(schemaText({ amount: { type: 'number' } })), /partition_key_fields/],
      [name, json(JSON.stringify({ type: 'object', properties: { order_number: { $ref: 'http://example.com/s.json' } } })), /invalid schema/],
      [name, { type: 'avro_schema', schema: first }, /not supported/],
      [name, { type: 'json_schema' }, /schema\.schema/],
      ['sc.checks.compatible', json(schemaText(base, ['order_number'], { additionalProperties: false })), /not allowed in compatible mode/],
    ];
    for (const [target, body, detail] of cases) {
      const posted = await addSchema(admin, target, body);
      expect(posted.status, `${JSON.stringify(body).slice(0, 200)}: ${posted.text}`).toBe(422);
      expect(detailOf(posted)).toMatch(detail);
      const stored = await record(admin, target);
      const put = await call(admin.url, 'PUT', `/event-types/${target}`, { ...stored, schema: body });
      expect(put.status).toBe(422);
      expect(detailOf(put)).toBe(detailOf(posted));
    }
    expect(await versions(admin, name)).toEqual(['1.0.0']);
    expect((await addSchema(admin, name, [json(first)])).status).toBe(400);
    expect((await addSchema(admin, name, '{"type":')).status).toBe(400);
    expect((await addSchema(admin, 'sc.missing', json(first))).json).toMatchObject({ status: 404, detail: 'EventType "sc.missing" does not exist.' });
  });

  it('needs the event type admins (or an administrator), like PUT; is refused while the database is read-only', async () => {
    const everyone = [{ data_type: '*', value: '*' }];
    await create(guarded, 'sc.guarded', { authorization: { admins: [{ data_type: 'user', value: 'someone-else' }], readers: everyone, writers: everyone } });
    await create(guarded, 'sc.open');
    const minor = json(schemaText({ ...base, note: { type: 'string' } }, ['order_number']));
    const denied = await addSchema(guarded, 'sc.guarded', minor);
    expect(denied.json).toMatchObject({ status: 403, detail: 'Access on ADMIN event-type:sc.guarded denied' });
    expect(await versions(guarded, 'sc.guarded')).toEqual(['1.0.0']);
    // Without an authorization section every subject administers the event type.
    expect((await addSchema(guarded, 'sc.open', minor)).json).toMatchObject({ version: '1.1.0' });

    await create(admin, 'sc.readonly');
    expect((await call(admin.url, 'POST', '/settings/features', { feature: 'disable_db_write_operations', enabled: true })).status).toBe(204);
    try {
      const refused = await addSchema(admin, 'sc.readonly', minor);
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('60');
      // Finding and checking schemas only read.
      expect((await addSchema(admin, 'sc.readonly', json(first), '?fetch=true')).status).toBe(200);
      expect((await check(admin, 'sc.readonly', 'latest', { schema: first })).status).toBe(200);
    } finally {
      expect((await call(admin.url, 'POST', '/settings/features', { feature: 'disable_db_write_operations', enabled: false })).status).toBe(204);
    }
    expect(await versions(admin, 'sc.readonly')).toEqual(['1.0.0']);
  });

  it('is audited as an update of the event type when a new version is stored, and not when the schema is unchanged', async () => {
    const name = 'sc.audit';
    await create(admin, name);
    expect((await call(admin.url, 'POST', '/settings/features', { feature: 'audit_log_collection', enabled: true })).status).toBe(204);
    try {
      expect((await addSchema(admin, name, json(first))).status).toBe(200);
      const minor = schemaText({ ...base, note: { type: 'string' } }, ['order_number']);
      expect((await addSchema(admin, name, json(minor))).status).toBe(200);

      const stream = await StreamClient.open(`${admin.url}/event-types/broker.audit-log/events?batch_limit=100&batch_flush_timeout=1&stream_timeout=10`, {
        headers: { 'X-Broker-Cursors': JSON.stringify([{ partition: '0', offset: 'BEGIN' }]) },
      });
      expect(stream.status).toBe(200);
      type AuditEvent = { data_type: string; data_op: string; data: { resource_id: string; user: string; previous_object: EventTypeRecord; new_object: EventTypeRecord } };
      const updates: AuditEvent[] = [];
      try {
        while (updates.length === 0) {
          const [batch] = await stream.events(1, 10_000);
          for (const event of (batch?.events ?? []) as unknown as AuditEvent[]) {
            if (event.data_type === 'event_type' && event.data_op === 'U' && event.data.resource_id === name) updates.push(event);
          }
        }
      } finally {
        stream.close();
      }
      expect(updates.length).toBe(1);
      expect(updates[0]?.data.user).toBe('unauthenticated');
      expect(updates[0]?.data.previous_object.schema).toMatchObject({ version: '1.0.0', schema: first });
      expect(updates[0]?.data.new_object.schema).toMatchObject({ version: '1.1.0', schema: minor });
    } finally {
      expect((await call(admin.url, 'POST', '/settings/features', { feature: 'audit_log_collection', enabled: false })).status).toBe(204);
    }
  });
});

describe('POST /event-types/{name}/schemas?fetch=true', () => {
  it('answers the newest stored version whose schema equals the one sent as JSON (key order and whitespace aside), 404 when none does; stores nothing; open to every subject', async () => {
    const name = 'sc.fetch';
    const everyone = [{ data_type: '*', value: '*' }];
    await create(guarded, name, { authorization: { admins: [{ data_type: 'user', value: 'someone-else' }], readers: everyone, writers: everyone } });
    const v100 = (await record(guarded, name)).schema;

    const reordered = JSON.stringify({ required: ['order_number'], properties: { amount: { type: 'number' }, order_number: { type: 'string' } }, type: 'object' }, null, 2);
    const found = await addSchema(guarded, name, json(reordered), '?fetch=true');
    expect(found.status, found.text).toBe(200);
    expect(found.json).toEqual(v100);
    expect((await addSchema(guarded, name, { type: 'JSON_SCHEMA', schema: first }, '?fetch=TRUE')).json).toEqual(v100);

    const missing = await addSchema(guarded, name, json(schemaText({ order_number: { type: 'string' } }, ['order_number'])), '?fetch=true');
    expect(missing.json).toMatchObject({ status: 404, detail: `no schema version of EventType "${name}" equals the schema sent` });
    expect(await versions(guarded, name)).toEqual(['1.0.0']);

    // With several versions, each is found; the update path is not involved.
    await create(admin, 'sc.fetch.versions');
    const minor = schemaText({ ...base, note: { type: 'string' } }, ['order_number']);
    expect((await addSchema(admin, 'sc.fetch.versions', json(minor))).status).toBe(200);
    expect((await addSchema(admin, 'sc.fetch.versions', json(first), '?fetch=true')).json).toMatchObject({ version: '1.0.0' });
    expect((await addSchema(admin, 'sc.fetch.versions', json(minor), '?fetch=true')).json).toMatchObject({ version: '1.1.0' });
    expect((await addSchema(admin, 'sc.fetch.versions', json(minor), '?fetch=false')).json).toMatchObject({ version: '1.1.0' });

    expect((await addSchema(admin, 'sc.fetch.versions', json('{"type":'), '?fetch=true')).status).toBe(422);
    expect((await addSchema(admin, 'sc.fetch.versions', { schema: first }, '?fetch=true')).status).toBe(422);
    expect((await addSchema(admin, 'sc.fetch.versions', json(first), '?fetch=maybe')).status).toBe(400);
    expect((await addSchema(admin, 'sc.missing', json(first), '?fetch=true')).status).toBe(404);
  });
});

describe('POST /event-types/{name}/schemas/{version}/compatibility-check', () => {
  it('answers {compatible, compatibility_mode, validated_against_version, error?} against latest or a stored version, and stores nothing', async () => {
    const name = 'sc.check';
    await create(admin, name);
    const minor = schemaText({ ...base, note: { type: 'string' } }, ['order_number']);
    expect((await addSchema(admin, name, json(minor))).status).toBe(200);

    const compatible = await check(admin, name, 'latest', { schema: schemaText({ ...base, note: { type: 'string' }, extra: { type: 'string' } }, ['order_number']) });
    expect(compatible.status, compatible.text).toBe(200);
    expect(compatible.json).toEqual({ compatible: true, compatibility_mode: 'forward', validated_against_version: '1.1.0' });

    const incompatible = await check(admin, name, 'latest', { schema: first });
    expect(incompatible.status).toBe(200);
    expect(incompatible.json).toMatchObject({ compatible: false, compatibility_mode: 'forward', validated_against_version: '1.1.0' });
    expect((incompatible.json as { error: string }).error).toContain('#/properties/note');

    // Against the first version, dropping `note` is no change at all.
    expect((await check(admin, name, '1.0.0', { schema: first })).json).toEqual({ compatible: true, compatibility_mode: 'forward', validated_against_version: '1.0.0' });
    expect(await versions(admin, name)).toEqual(['1.1.0', '1.0.0']);
    expect((await record(admin, name)).schema.version).toBe('1.1.0');
  });

  it('follows the mode: a MAJOR change is compatible only under none; a schema the checks refuse (in a worker too) is 422; 404 for an unknown version or event type; open to every subject', async () => {
    const retyped = schemaText({ order_number: { type: 'integer' }, amount: { type: 'number' } }, ['order_number']);
    await create(admin, 'sc.check.none', { compatibility_mode: 'none' });
    expect((await check(admin, 'sc.check.none', 'latest', { schema: retyped })).json).toEqual({ compatible: true, compatibility_mode: 'none', validated_against_version: '1.0.0' });
    await create(admin, 'sc.check.compatible', { compatibility_mode: 'compatible' });
    expect((await check(admin, 'sc.check.compatible', 'latest', { schema: retyped })).json).toMatchObject({ compatible: false, compatibility_mode: 'compatible' });
    expect(await versions(admin, 'sc.check.none')).toEqual(['1.0.0']);

    for (const [target, schema, detail] of [
      ['sc.check.none', '{"type":', /invalid schema/],
      ['sc.check.none', fanOutSchema(30), /would apply more than 256 subschemas/],
      ['sc.check.none', schemaText({ ...base, metadata: { type: 'object' } }, ['order_number']), /metadata/],
      ['sc.check.compatible', schemaText(base, ['order_number'], { additionalProperties: false }), /not allowed in compatible mode/],
    ] as const) {
      const answer = await check(admin, target, 'latest', { schema });
      expect(answer.status, answer.text).toBe(422);
      expect(detailOf(answer)).toMatch(detail);
    }
    expect((await check(admin, 'sc.check.none', 'latest', {})).status).toBe(422);
    expect((await check(admin, 'sc.check.none', 'latest', [first])).status).toBe(400);
    expect((await check(admin, 'sc.check.none', '9.9.9', { schema: first })).json).toMatchObject({ status: 404, detail: 'schema version "9.9.9" of EventType "sc.check.none" does not exist.' });
    expect((await check(admin, 'sc.missing', 'latest', { schema: first })).status).toBe(404);

    const everyone = [{ data_type: '*', value: '*' }];
    await create(guarded, 'sc.check.guarded', { authorization: { admins: [{ data_type: 'user', value: 'someone-else' }], readers: [{ data_type: 'user', value: 'someone-else' }], writers: everyone } });
    expect((await check(guarded, 'sc.check.guarded', 'latest', { schema: first })).json).toMatchObject({ compatible: true });
  });
});
