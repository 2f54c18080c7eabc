import { describe, expect, it } from 'vitest';
import { compileSchema, createSchemaCompiler, describeValidationError, instantiateValidator, standaloneValidatorCode } from '../../src/domain/schema/schema-compiler.js';
import type { JsonObject } from '../../src/domain/schema/json-schema-walk.js';

/**
 * The main thread instantiates validators from standalone code a worker generated, so it never compiles
 * a schema itself. The
 * code must judge every event exactly as the compiled validator does — with RE2 patterns, ajv-formats'
 * fast formats, ajv's runtime helpers (uniqueItems, string length in code points, URIs) — and describe
 * the first error the same way.
 */

const schema: JsonObject = {
  type: 'object',
  required: ['id', 'at', 'tags'],
  additionalProperties: false,
  properties: {
    id: { type: 'string', format: 'uuid' },
    at: { type: 'string', format: 'date-time' },
    mail: { type: 'string', format: 'email' },
    site: { type: 'string', format: 'uri' },
    code: { type: 'string', pattern: '^[A-Z]{2}-\\d+$' },
    name: { type: 'string', minLength: 2, maxLength: 4 },
    tags: { type: 'array', items: { type: 'string' }, uniqueItems: true, maxItems: 3 },
    amount: { type: 'number', minimum: 0, exclusiveMinimum: true, multipleOf: 0.5 },
    kind: { enum: ['a', 'b', { deep: [1, 2] }] },
    extra: { patternProperties: { '^x-': { type: 'integer' } }, additionalProperties: false },
    nested: { $ref: '#/definitions/node' },
  },
  definitions: { node: { type: 'object', properties: { child: { $ref: '#/definitions/node' }, v: { type: 'boolean' } } } },
};

const valid = { id: '4f1c2a8e-1b2c-4d5e-8f90-1234567890ab', at: '2026-11-25T02:00:00Z', tags: ['a', 'b'] };
const events: unknown[] = [
  valid,
  { ...valid, mail: 'ops@example.org', site: 'https://example.org/a?b=c', code: 'AB-12', name: '😀😀', amount: 2.5, kind: { deep: [1, 2] } },
  { ...valid, id: 'not-a-uuid' },
  { ...valid, at: '2026-11-25 02:00' },
  { ...valid, mail: 'nobody' },
  { ...valid, site: 'not a uri' },
  { ...valid, code: 'ab-12' },
  { ...valid, name: '😀' },
  { ...valid, name: 'abcde' },
  { ...valid, tags: ['a', 'a'] },
  { ...valid, tags: ['a', 'b', 'c', 'd'] },
  { ...valid, amount: 0 },
  { ...valid, amount: 1.25 },
  { ...valid, kind: { deep: [2, 1] } },
  { ...valid, extra: { 'x-a': 1 } },
  { ...valid, extra: { 'x-a': 1.5 } },
  { ...valid, extra: { y: 1 } },
  { ...valid, nested: { child: { child: { v: true } } } },
  { ...valid, nested: { child: { child: { v: 'yes' } } } },
  { ...valid, unknown: 1 },
  { id: valid.id },
  [],
  null,
];

describe('standalone validator code', () => {
  const compiled = compileSchema(createSchemaCompiler({ metaSchemaCheck: false }), schema);
  const instantiated = instantiateValidator(standaloneValidatorCode(schema));

  it('judges every event as the compiled validator does, and describes the first error the same way', () => {
    let refused = 0;
    for (const event of events) {
      const expected = compiled(event);
      expect(instantiated(event), JSON.stringify(event)).toBe(expected);
      if (!expected) {
        refused++;
        expect(describeValidationError(instantiated.errors)).toBe(describeValidationError(compiled.errors));
      }
    }
    // Valid: the first two, `extra` with an integer `x-a`, and the nested booleans.
    expect(refused).toBe(events.length - 4);
  });

  it('runs patterns on RE2, as the compiled validator does', () => {
    const code = standaloneValidatorCode({ type: 'string', pattern: '^[a-z]+$' });
    expect(code).toContain('require("re2")');
    expect(code).not.toContain('new RegExp');
    // RE2 has no backreferences: both refuse such a pattern.
    const backreference: JsonObject = { type: 'string', pattern: '(a)\\1' };
    expect(() => compileSchema(createSchemaCompiler({ metaSchemaCheck: false }), backreference)).toThrow();
    expect(() => standaloneValidatorCode(backreference)).toThrow();
  });

  it('refuses code that does not export a function, and schemas that do not compile', () => {
    expect(() => instantiateValidator('module.exports = 1;')).toThrow(/did not export a function/);
    expect(() => standaloneValidatorCode({ $ref: 'https://example.org/remote.json' })).toThrow();
  });
});
