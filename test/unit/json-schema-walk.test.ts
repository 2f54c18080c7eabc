import { describe, expect, it } from 'vitest';
import { resolveLocalRef, walkSchema, type JsonObject } from '../../src/domain/schema/json-schema-walk.js';

/** The pointers `walkSchema` visits in `schema`, in visiting order. */
function visited(schema: JsonObject): string[] {
  const pointers: string[] = [];
  walkSchema(schema, (_node, pointer) => pointers.push(pointer));
  return pointers;
}

/**
 * src/domain/schema/json-schema-walk.ts: the walk over every subschema position of a draft-04 document
 * and the resolution of local `$ref`s, which the schema guard, the schema cost analysis and schema
 * evolution (docs/concepts.md "Schema versions") rely on.
 */
describe('walkSchema', () => {
  it('visits schema dependencies, escaping their names, and skips property dependencies', () => {
    const schema: JsonObject = { dependencies: { a: { properties: { x: {} } }, 'b/c~d': { type: 'object' }, e: ['a'] } };
    expect(visited(schema)).toEqual(['#', '#/dependencies/a', '#/dependencies/a/properties/x', '#/dependencies/b~1c~0d']);
  });

  it('ignores dependencies that are not a map', () => {
    expect(visited({ dependencies: [{ type: 'string' }] })).toEqual(['#']);
  });
});

describe('resolveLocalRef', () => {
  const root: JsonObject = { definitions: { 'a/b': { type: 'string' }, 'c%d': { type: 'number' } }, items: [{ type: 'null' }] };

  it('resolves the root, ~- and percent-escaped pointers and array positions', () => {
    expect(resolveLocalRef(root, '#')).toEqual({ ok: true, schema: root });
    expect(resolveLocalRef(root, '#/definitions/a~1b')).toEqual({ ok: true, schema: { type: 'string' } });
    expect(resolveLocalRef(root, '#/definitions/c%25d')).toEqual({ ok: true, schema: { type: 'number' } });
    expect(resolveLocalRef(root, '#/items/0')).toEqual({ ok: true, schema: { type: 'null' } });
  });

  it('names a $ref whose percent-escapes do not decode as not a valid JSON pointer', () => {
    expect(resolveLocalRef(root, '#/definitions/%E0%A4%A')).toEqual({ ok: false, problem: '$ref "#/definitions/%E0%A4%A" is not a valid JSON pointer' });
    expect(resolveLocalRef(root, '#/definitions/100%')).toEqual({ ok: false, problem: '$ref "#/definitions/100%" is not a valid JSON pointer' });
  });

  it('names a $ref that is not local, or points at no subschema', () => {
    expect(resolveLocalRef(root, 'other.json#/a')).toEqual({ ok: false, problem: '$ref "other.json#/a" is not a local reference' });
    expect(resolveLocalRef(root, '#/definitions/missing')).toEqual({ ok: false, problem: '$ref "#/definitions/missing" does not point at a subschema of this document' });
  });
});
