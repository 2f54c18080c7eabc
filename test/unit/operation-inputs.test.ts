import { describe, expect, it } from 'vitest';
import { checkInput } from '../../src/domain/json/input-check.js';
import { checkBody } from '../../src/domain/event-type/rule-problems.js';
import { CompatibilityCheckInputSchema, SchemaAdditionCheck, SchemaFetchInputSchema } from '../../src/domain/schema/schema-version-input.js';
import { FeatureInputSchema, parseAdminsInput } from '../../src/domain/settings/settings-input.js';
import { TimelineInputSchema } from '../../src/domain/storages/timeline.js';
import { attributeOf, ListEventTypesQuery, SchemaListQuery } from '../../src/http/routes/event-types.js';
import { BlacklistParams } from '../../src/http/routes/settings.js';

const alice = { data_type: 'user', value: 'alice' };

/** The status and detail lines of a failed check, or the value. */
function outcome(result: { ok: true; value: unknown } | { ok: false; status: number; details: readonly string[] }): unknown {
  return result.ok ? result.value : { status: result.status, details: result.details };
}

describe('the administrators body', () => {
  it('accepts three non-empty lists', () => {
    expect(parseAdminsInput({ admins: [alice], readers: [alice], writers: [alice], other: 1 })).toMatchObject({ ok: true, value: { admins: [alice], readers: [alice], writers: [alice] } });
  });

  it('answers shape problems first (400 for a wrong JSON type), then an attribute named twice (422)', () => {
    expect(outcome(parseAdminsInput([]))).toEqual({ status: 400, details: ['Request body must be an object with admins, readers and writers'] });
    expect(outcome(parseAdminsInput({ admins: [], readers: 5, writers: [alice] }))).toEqual({
      status: 400,
      details: ['Field "admins" must contain at least one attribute', 'Field "readers" must be an array of authorization attributes'],
    });
    expect(outcome(parseAdminsInput({ admins: [alice], readers: [alice], writers: [alice, alice] }))).toEqual({
      status: 422,
      details: ['Field "writers" must not contain the attribute {data_type: "user", value: "alice"} more than once'],
    });
  });
});

describe('the feature body', () => {
  it('is 400 for every problem, with the texts the settings have always answered', () => {
    expect(outcome(checkBody(FeatureInputSchema, {}))).toEqual({ status: 400, details: ['Field "feature" must be a string', 'Field "enabled" must be true or false'] });
    expect(outcome(checkBody(FeatureInputSchema, { feature: 'x', enabled: 'yes' }))).toEqual({ status: 400, details: ['Field "enabled" must be true or false'] });
    expect(outcome(checkBody(FeatureInputSchema, { feature: 'X', enabled: false }))).toEqual({ feature: 'X', enabled: false });
  });
});

describe('the blacklist path parameters', () => {
  it('take a type in any case and a name of 1 to 255 characters; anything else is 400', () => {
    expect(checkInput(BlacklistParams, { type: 'consumer_Et', name: 'x' }, 'path')).toMatchObject({ ok: true });
    expect(checkInput(BlacklistParams, { type: 'EVERYONE', name: 'x' }, 'path')).toMatchObject({
      ok: false,
      status: 400,
      problems: [{ pointer: '/type', detail: 'Field "type" has unknown blacklist type "EVERYONE"; use CONSUMER_APP, CONSUMER_ET, PRODUCER_APP or PRODUCER_ET' }],
    });
    expect(checkInput(BlacklistParams, { type: 'PRODUCER_APP', name: 'x'.repeat(256) }, 'path')).toMatchObject({ ok: false, status: 400, problems: [{ detail: 'Field "name" must have 1 to 255 characters' }] });
  });
});

describe('the timeline body', () => {
  it('is 400 when not an object and 422 for a missing, empty or non-string storage_id', () => {
    expect(checkBody(TimelineInputSchema, [1])).toMatchObject({ ok: false, status: 400 });
    for (const body of [{}, { storage_id: 7 }, { storage_id: '' }, { storage_id: null }]) expect(checkBody(TimelineInputSchema, body), JSON.stringify(body)).toMatchObject({ ok: false, status: 422 });
    expect(checkBody(TimelineInputSchema, { storage_id: 'ns' })).toEqual({ ok: true, value: { storage_id: 'ns' } });
  });
});

describe('the schema version bodies', () => {
  it('names an addition\'s problems as the event type\'s schema field (as a PUT does); a non-object is 400', () => {
    expect(outcome(checkBody(SchemaAdditionCheck, { schema: [1] }))).toEqual({ status: 400, details: ['Field "schema" must be an object'] });
    expect(outcome(checkBody(SchemaAdditionCheck, { schema: { type: 'json_schema' } }))).toEqual({ status: 422, details: ['Field "schema.schema" must not be null'] });
  });

  it('finds with a json_schema type (any case) and a schema text: 422 otherwise, 400 for a non-object', () => {
    expect(checkBody(SchemaFetchInputSchema, { type: 'JSON-Schema', schema: '{}' })).toMatchObject({ ok: true });
    expect(outcome(checkBody(SchemaFetchInputSchema, { schema: 5, type: 'avro_schema' }))).toEqual({
      status: 422,
      details: ['Field "type" must be "json_schema" (JSON Schema draft 04)', 'Field "schema" must be a string: the JSON Schema as text'],
    });
    expect(checkBody(SchemaFetchInputSchema, 'x')).toMatchObject({ ok: false, status: 400 });
  });

  it('checks compatibility of a schema text: 422 without one, 400 for a non-object', () => {
    expect(outcome(checkBody(CompatibilityCheckInputSchema, {}))).toEqual({ status: 422, details: ['Field "schema" must be a string: the JSON Schema as text'] });
    expect(checkBody(CompatibilityCheckInputSchema, ['{}'])).toMatchObject({ ok: false, status: 400 });
  });
});

describe('the event type listing queries', () => {
  it('takes writer as <data_type>:<value>, split at the first colon; another form is 400', () => {
    const checked = checkInput(ListEventTypesQuery, { writer: 'team:a:b', owning_application: '' }, 'query');
    expect(checked).toEqual({ ok: true, value: { writer: 'team:a:b', owning_application: '' } });
    expect(attributeOf('team:a:b')).toEqual({ data_type: 'team', value: 'a:b' });
    for (const writer of ['alice', ':alice', 'user:']) {
      expect(checkInput(ListEventTypesQuery, { writer }, 'query'), writer).toMatchObject({ ok: false, status: 400, problems: [{ detail: 'Field "writer" must have the form <data_type>:<value>, e.g. user:alice' }] });
    }
  });

  it('pages schema versions with limit 1..1000 and offset ≥ 0; anything else is 400', () => {
    expect(checkInput(SchemaListQuery, { offset: '2', limit: '5' }, 'query')).toEqual({ ok: true, value: { offset: 2, limit: 5 } });
    for (const [query, detail] of [
      [{ limit: '0' }, 'Field "limit" must be between 1 and 1000'],
      [{ limit: '1001' }, 'Field "limit" must be between 1 and 1000'],
      [{ limit: 'ten' }, 'Field "limit" must be an integer'],
      [{ offset: '-1' }, 'Field "offset" must not be negative'],
      [{ offset: '1.5' }, 'Field "offset" must be an integer'],
    ] as const) {
      expect(checkInput(SchemaListQuery, { ...query }, 'query'), JSON.stringify(query)).toMatchObject({ ok: false, status: 400, problems: [{ detail }] });
    }
  });
});
