import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';

let broker: TestBroker;

beforeAll(async () => {
  broker = await startTestBroker();
});
afterAll(async () => {
  await broker.stop();
});

interface AvroSchemaAnswer {
  version: string;
  avro_schema: { type: string; name: string; namespace: string; fields: { name: string }[] };
}

describe('GET /avro-schemas', () => {
  it.each([
    ['batch.publishing', 'PublishingBatch'],
    ['batch.consumption', 'ConsumptionBatch'],
    ['metadata', 'Metadata'],
  ])('lists the versions of %s, newest first, and serves version 1', async (name, recordName) => {
    const list = await call(broker.url, 'GET', `/avro-schemas/${name}/versions`);
    expect(list.status).toBe(200);
    const { items } = list.json as { items: AvroSchemaAnswer[] };
    expect(items.map((i) => i.version)).toEqual(['1']);
    expect(items[0]?.avro_schema).toMatchObject({ type: 'record', name: recordName, namespace: 'io.broker' });

    const one = await call(broker.url, 'GET', `/avro-schemas/${name}/versions/1`);
    expect(one.status).toBe(200);
    expect(one.json).toEqual(items[0]);
  });

  it('describes the consumption batch as cursor, events and info', async () => {
    const one = (await call(broker.url, 'GET', '/avro-schemas/batch.consumption/versions/1')).json as AvroSchemaAnswer;
    expect(one.avro_schema.fields.map((f) => f.name)).toEqual(['cursor', 'events', 'info']);
  });

  it('answers 404 problems for an unknown name or version', async () => {
    for (const path of ['/avro-schemas/nope/versions', '/avro-schemas/nope/versions/1', '/avro-schemas/metadata/versions/2']) {
      const answer = await call(broker.url, 'GET', path);
      expect(answer.status, path).toBe(404);
      expect(answer.headers.get('content-type')).toContain('application/problem+json');
      expect(answer.json).toMatchObject({ title: 'Not Found', status: 404 });
    }
    expect((await call(broker.url, 'GET', '/avro-schemas/metadata/versions/2')).json).toMatchObject({ detail: 'Version "2" of the Avro schema "metadata" does not exist.' });
  });
});
