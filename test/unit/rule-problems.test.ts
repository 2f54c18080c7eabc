import { describe, expect, it } from 'vitest';
import { Problems } from '../../src/domain/event-type/rule-problems.js';

/**
 * src/domain/event-type/rule-problems.ts: the collector of the problems the input rules find, one
 * `Field "<field>" ...` line each, 400 when any is malformed, else 422 (docs/http-api.md "Requests").
 */
describe('Problems', () => {
  it('writes a broken rule as a `Field "<field>"` line (422)', () => {
    const p = new Problems();
    p.rule('owning_application', 'must not be null');
    expect(p.list).toEqual([{ status: 422, detail: 'Field "owning_application" must not be null' }]);
    expect(p.result(undefined, 'unused')).toEqual({ ok: false, status: 422, details: ['Field "owning_application" must not be null'] });
  });

  it('answers 400 when any problem is malformed, and the value when there is none', () => {
    const p = new Problems();
    p.rule('name', 'must not be null');
    p.malformed('category', 'must be a string');
    expect(p.result({ name: 'x' }, 'unused')).toEqual({ ok: false, status: 400, details: ['Field "name" must not be null', 'Field "category" must be a string'] });
    expect(new Problems().result({ name: 'x' }, 'unused')).toEqual({ ok: true, value: { name: 'x' } });
    expect(new Problems().result(undefined, 'no value')).toEqual({ ok: false, status: 422, details: ['no value'] });
  });
});
