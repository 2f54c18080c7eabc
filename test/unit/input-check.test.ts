import { describe, expect, it } from 'vitest';
import { Type } from '@sinclair/typebox';
import { checkInput, fieldOf, MAX_INPUT_PROBLEMS } from '../../src/domain/json/input-check.js';

/** A body schema using every annotation of src/domain/json/input-check.ts. */
const Body = Type.Object(
  {
    name: Type.String({ minLength: 1 }),
    kind: Type.Optional(Type.String({ 'x-any-case-enum': ['alpha', 'beta'], 'x-status': 400 })),
    mode: Type.Optional(Type.String({ 'x-any-case-enum': ['x', 'y'], 'x-messages': { 'x-any-case-enum': 'has unknown mode {value}; allowed: {allowed}' } })),
    count: Type.Optional(Type.Integer({ minimum: 1, 'x-messages': { fraction: 'must be a whole count', minimum: 'must be at least one' } })),
    tags: Type.Optional(Type.Array(Type.String(), { maxItems: 3, 'x-limit': 'tags per body' })),
    labels: Type.Optional(Type.Record(Type.String(), Type.String({ 'x-map-value': true }), { maxProperties: 2, 'x-limit': 'entries per map' })),
    nested: Type.Optional(Type.Object({ list: Type.Array(Type.Object({ value: Type.String({ minLength: 1 }) })) })),
  },
  { 'x-messages': { type: 'must be a JSON object' } },
);

// Request bodies as docs/http-api.md "Requests" describes them.
describe('checkInput', () => {
  it('accepts a valid body and types it; enums in any case stay as sent', () => {
    const result = checkInput(Body, { name: 'a', kind: 'ALPHA', count: 2, unknown: true });
    expect(result).toEqual({ ok: true, value: { name: 'a', kind: 'ALPHA', count: 2, unknown: true } });
  });

  it('treats null as absent for declared properties only: a required one reads "must not be null"', () => {
    expect(checkInput(Body, { name: 'a', kind: null, count: null, other: null })).toEqual({ ok: true, value: { name: 'a', other: null } });
    const missing = checkInput(Body, { name: null });
    expect(missing).toEqual({ ok: false, status: 422, problems: [{ status: 422, pointer: '/name', detail: 'Field "name" must not be null' }] });
  });

  it('answers 400 for a wrong JSON type and an x-status 400 enum, 422 for the rest, with the JSON pointer of each', () => {
    const result = checkInput(Body, { name: '', kind: 'gamma', count: '3', nested: { list: [{ value: '' }] } });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.status).toBe(400);
    expect(result.problems).toEqual([
      { status: 422, pointer: '/name', detail: 'Field "name" must not be empty' },
      { status: 400, pointer: '/kind', detail: 'Field "kind" has unknown value "gamma"; allowed: alpha, beta' },
      { status: 400, pointer: '/count', detail: 'Field "count" must be an integer' },
      { status: 422, pointer: '/nested/list/0/value', detail: 'Field "nested.list[0].value" must not be empty' },
    ]);
    const rules = checkInput(Body, { name: 'a', mode: 'z', count: 0 });
    expect(rules).toMatchObject({ ok: false, status: 422 });
  });

  it('fills x-messages templates; a fraction where an integer is required is a broken rule (422)', () => {
    const result = checkInput(Body, { name: 'a', mode: 'Z', count: 1.5 });
    expect(result).toEqual({
      ok: false,
      status: 422,
      problems: [
        { status: 422, pointer: '/mode', detail: 'Field "mode" has unknown mode "Z"; allowed: x, y' },
        { status: 422, pointer: '/count', detail: 'Field "count" must be a whole count' },
      ],
    });
  });

  it('names a map value by its map and key', () => {
    const result = checkInput(Body, { name: 'a', labels: { team: 5 } });
    expect(result).toMatchObject({ ok: false, status: 400, problems: [{ pointer: '/labels/team', detail: 'Field "labels" value of key "team" must be a string' }] });
  });

  it('answers a list or map over its bound with one line naming the bound, not a line per entry', () => {
    const result = checkInput(Body, { name: 'a', tags: [1, 2, 3, 4, 5], labels: { a: 1, b: 2, c: 3 } });
    expect(result).toMatchObject({
      ok: false,
      problems: [
        { pointer: '/tags', detail: 'Field "tags" has 5 items; at most 3 are allowed (tags per body)' },
        { pointer: '/labels', detail: 'Field "labels" has 3 entries; at most 2 are allowed (entries per map)' },
      ],
    });
    if (!result.ok) expect(result.problems).toHaveLength(2);
  });

  it(`lists at most ${MAX_INPUT_PROBLEMS} problems and counts the rest`, () => {
    const list = Array.from({ length: 200 }, () => ({ value: 7 }));
    const result = checkInput(Body, { name: 'a', nested: { list } });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.problems).toHaveLength(MAX_INPUT_PROBLEMS + 1);
    expect(result.problems.at(-1)?.detail).toBe('... and 150 more problems');
  });

  it('refuses a body that is not an object with the whole-body line', () => {
    expect(checkInput(Body, [1])).toEqual({ ok: false, status: 400, problems: [{ status: 400, pointer: '', detail: 'Request body must be a JSON object' }] });
  });

  describe('query, path and header values (strings)', () => {
    const Query = Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 1 })), flag: Type.Optional(Type.Boolean()), name: Type.Optional(Type.String()) });

    it('coerces decimal integers and true/false, and nothing else', () => {
      expect(checkInput(Query, { limit: '12', flag: 'true', name: '12' }, 'query')).toEqual({ ok: true, value: { limit: 12, flag: true, name: '12' } });
      for (const text of ['0x10', '1e3', ' 5', '+5', '1.0', '']) {
        const result = checkInput(Query, { limit: text }, 'query');
        expect(result, text).toMatchObject({ ok: false, status: 400, problems: [{ pointer: '/limit', detail: 'Field "limit" must be an integer' }] });
      }
      expect(checkInput(Query, { flag: 'yes' }, 'query')).toMatchObject({ ok: false, status: 400 });
    });

    it('applies the rules after the coercion (422)', () => {
      expect(checkInput(Query, { limit: '0' }, 'query')).toMatchObject({ ok: false, status: 422, problems: [{ detail: 'Field "limit" must be at least 1' }] });
    });
  });

  describe('the default detail of each size, range and shape keyword (no x-messages)', () => {
    const Limits = Type.Object({
      code: Type.Optional(Type.String({ maxLength: 3 })),
      pair: Type.Optional(Type.Array(Type.String(), { minItems: 2 })),
      low: Type.Optional(Type.Number({ minimum: 5 })),
      high: Type.Optional(Type.Number({ maximum: 10 })),
      above: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
      below: Type.Optional(Type.Number({ exclusiveMaximum: 1 })),
      set: Type.Optional(Type.Array(Type.Integer(), { uniqueItems: true })),
      closed: Type.Optional(Type.Object({ a: Type.Optional(Type.String()) }, { additionalProperties: false })),
      step: Type.Optional(Type.Number({ multipleOf: 3 })),
    });

    it.each([
      ['maxLength', { code: 'abcd' }, '/code', 'Field "code" must be at most 3 characters long'],
      ['minItems above 1', { pair: ['a'] }, '/pair', 'Field "pair" must have at least 2 items'],
      ['minimum', { low: 4 }, '/low', 'Field "low" must be at least 5'],
      ['maximum', { high: 11 }, '/high', 'Field "high" must be at most 10'],
      ['exclusiveMinimum', { above: 0 }, '/above', 'Field "above" must be greater than 0'],
      ['exclusiveMaximum', { below: 1 }, '/below', 'Field "below" must be less than 1'],
      ['uniqueItems, naming both positions', { set: [1, 2, 1] }, '/set', 'Field "set" must not contain the same item more than once (items 2 and 0)'],
      ['additionalProperties false, naming the field', { closed: { a: 'x', b: 1 } }, '/closed', 'Field "closed" must not have the field "b"'],
      ['any other keyword: ajv\'s own message', { step: 4 }, '/step', 'Field "step" must be multiple of 3'],
    ])('%s', (_keyword, body, pointer, detail) => {
      expect(checkInput(Limits, body)).toEqual({ ok: false, status: 422, problems: [{ status: 422, pointer, detail }] });
    });
  });

  it('writes pointers in the reference service\'s field notation', () => {
    expect(fieldOf('/authorization/readers/0/value')).toBe('authorization.readers[0].value');
    expect(fieldOf('/0/offset')).toBe('[0].offset');
    expect(fieldOf('/a~1b/c~0d')).toBe('a/b.c~d');
    expect(fieldOf('')).toBe('');
  });
});
