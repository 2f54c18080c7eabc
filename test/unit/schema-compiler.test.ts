import { describe, expect, it } from 'vitest';
import { compileSchema, createSchemaCompiler, describeValidationError } from '../../src/domain/schema/schema-compiler.js';

describe('schema compiler', () => {
  it('validates draft-04 schemas with formats', () => {
    const validate = compileSchema(createSchemaCompiler(), {
      type: 'object',
      properties: { id: { type: 'string', format: 'uuid' }, n: { type: 'number', minimum: 0, exclusiveMinimum: true } },
      required: ['id'],
    });
    expect(validate({ id: '1b4e28ba-2fa1-11d2-883f-0016d3cca427', n: 1 })).toBe(true);
    expect(validate({ id: 'nope' })).toBe(false);
    expect(describeValidationError(validate.errors)).toBe('#/id must match format "uuid"');
    expect(validate({ id: '1b4e28ba-2fa1-11d2-883f-0016d3cca427', n: 0 })).toBe(false);
  });

  it('runs patterns on RE2, so catastrophic backtracking is linear', () => {
    const validate = compileSchema(createSchemaCompiler(), { type: 'string', pattern: '^(a+)+$' });
    const started = process.hrtime.bigint();
    expect(validate('a'.repeat(50_000) + '!')).toBe(false);
    // A backtracking engine takes longer than the age of the universe here; RE2 well under a second.
    expect(Number(process.hrtime.bigint() - started) / 1e9).toBeLessThan(5);
  });

  it('refuses patterns RE2 cannot run and remote references', () => {
    expect(() => compileSchema(createSchemaCompiler(), { type: 'string', pattern: '(a)\\1' })).toThrow();
    expect(() => compileSchema(createSchemaCompiler(), { $ref: 'http://example.com/schema.json' })).toThrow();
  });
});
