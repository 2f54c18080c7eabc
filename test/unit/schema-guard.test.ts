import { describe, expect, it } from 'vitest';
import { guardSchema, MAX_SCHEMA_DEPTH, MAX_SUBSCHEMAS } from '../../src/domain/schema/schema-guard.js';

const LIMIT = { maxSchemaBytes: 64 * 1024 };
const LARGE_LIMIT = { maxSchemaBytes: 16 * 1024 * 1024 };

/** `levels` nested `{"properties":{"a": ...}}` around `{}` (each level adds two JSON nesting levels). */
function nestedProperties(levels: number): string {
  return '{"properties":{"a":'.repeat(levels) + '{}' + '}}'.repeat(levels);
}

/** A root object whose `enum` holds one value nested `levels` arrays deep. */
function nestedArraysInEnum(levels: number): string {
  return '{"enum":[' + '['.repeat(levels) + ']'.repeat(levels) + ']}';
}

/** A root object schema with `count` empty property subschemas (so `count + 1` subschemas in all). */
function manyProperties(count: number): string {
  const properties = Object.fromEntries(Array.from({ length: count }, (_, i) => [`p${i}`, {}]));
  return JSON.stringify({ type: 'object', properties });
}

describe('guardSchema accepts', () => {
  it.each([
    ['an empty schema', '{}'],
    ['an object schema', '{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}'],
    ['the draft-04 $schema with #', '{"$schema":"http://json-schema.org/draft-04/schema#","type":"object"}'],
    ['the draft-04 $schema without #', '{"$schema":"http://json-schema.org/draft-04/schema"}'],
    ['a reference to the root', '{"properties":{"self":{"$ref":"#"}}}'],
    ['a local pointer reference', '{"definitions":{"d":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/d"}}}'],
    ['a fragment-only id', '{"id":"#root"}'],
    ['a property named id (not the keyword)', '{"properties":{"id":{"type":"string","format":"uuid"}}}'],
    ['a property named $ref (not the keyword)', '{"properties":{"$ref":{"type":"string"}}}'],
    ['URLs inside non-schema values', '{"default":{"$ref":"http://evil/x.json","id":"http://evil/"},"enum":[{"$ref":"http://evil/"}]}'],
    ['a catastrophic-backtracking pattern (RE2 is linear)', '{"properties":{"a":{"type":"string","pattern":"(a+)+$"}}}'],
    ['a Unicode class pattern', '{"properties":{"a":{"type":"string","pattern":"^\\\\p{L}+$"}}}'],
    ['patternProperties with RE2 syntax', '{"patternProperties":{"^x-[a-z]+$":{"type":"string"}}}'],
    ['nesting of exactly the maximum depth (objects)', nestedProperties((MAX_SCHEMA_DEPTH - 2) / 2)],
    ['nesting of exactly the maximum depth (arrays)', nestedArraysInEnum(MAX_SCHEMA_DEPTH - 2)],
    ['exactly the maximum number of subschemas', manyProperties(MAX_SUBSCHEMAS - 1)],
  ])('%s', (_name, text) => {
    const result = guardSchema(text, LARGE_LIMIT);
    expect(result).toEqual({ ok: true, schema: JSON.parse(text) as unknown });
  });

  it('a schema of exactly maxSchemaBytes UTF-8 bytes', () => {
    const text = '{"description":"é"}'; // é is two bytes
    expect(guardSchema(text, { maxSchemaBytes: Buffer.byteLength(text) }).ok).toBe(true);
  });

  it('a 2 MB schema under a large enough limit', () => {
    const text = JSON.stringify({ type: 'object', description: 'x'.repeat(2 * 1024 * 1024) });
    expect(guardSchema(text, LARGE_LIMIT).ok).toBe(true);
  });
});

describe('guardSchema refuses', () => {
  it.each([
    // size, JSON, shape
    ['a schema one byte over the limit', '{"type":"object"}', { maxSchemaBytes: 16 }, 'the schema is 17 bytes long, more than the limit of 16 bytes'],
    ['a schema over the limit in UTF-8 bytes (not characters)', '{"description":"éé"}', { maxSchemaBytes: 21 }, 'the schema is 22 bytes long'],
    ['a 2 MB schema under a 1 MB limit', JSON.stringify({ description: 'x'.repeat(2 * 1024 * 1024) }), { maxSchemaBytes: 1024 * 1024 }, 'more than the limit of 1048576 bytes'],
    ['invalid JSON', '{"type":', LIMIT, 'the schema is not valid JSON: '],
    ['an empty text', '', LIMIT, 'the schema is not valid JSON: '],
    ['a JSON array', '[]', LIMIT, 'the schema must be a JSON object, not an array'],
    ['a JSON string', '"object"', LIMIT, 'the schema must be a JSON object, not a string'],
    ['JSON null', 'null', LIMIT, 'the schema must be a JSON object, not null'],
    ['a JSON number', '42', LIMIT, 'the schema must be a JSON object, not a number'],
    // depth and size of the schema tree
    ['nesting one level too deep (objects)', nestedProperties((MAX_SCHEMA_DEPTH - 2) / 2 + 1), LARGE_LIMIT, `the schema nests deeper than ${MAX_SCHEMA_DEPTH} levels`],
    ['nesting one level too deep (arrays)', nestedArraysInEnum(MAX_SCHEMA_DEPTH - 1), LARGE_LIMIT, `#/enum/${'0/'.repeat(MAX_SCHEMA_DEPTH - 2)}0: the schema nests deeper than 64 levels`],
    ['one subschema too many', manyProperties(MAX_SUBSCHEMAS), LARGE_LIMIT, `the schema has ${MAX_SUBSCHEMAS + 1} subschemas, more than the limit of ${MAX_SUBSCHEMAS}`],
    // field names every JavaScript object inherits (the validator would see them as present)
    ['a required field named constructor', '{"type":"object","required":["constructor"]}', LIMIT, '#: the field name "constructor" is not supported'],
    ['a nested property named toString', '{"type":"object","properties":{"a":{"type":"object","properties":{"toString":{"type":"string"}}}}}', LIMIT, '#/properties/a: the field name "toString" is not supported'],
    // meta-schema
    ['a misspelled type', '{"type":"strnig"}', LIMIT, 'the schema is not valid JSON Schema draft-04: #/type must be equal to one of the allowed values: "array", "boolean", "integer", "null", "number", "object", "string"'],
    ['a misspelled nested type', '{"properties":{"a":{"type":"strnig"}}}', LIMIT, '#/properties/a/type must be equal to one of the allowed values'],
    ['required as a string', '{"required":"x"}', LIMIT, 'the schema is not valid JSON Schema draft-04: #/required must be array'],
    ['an empty required (draft-04 needs one name)', '{"required":[]}', LIMIT, '#/required must NOT have fewer than 1 items'],
    ['minimum as a string', '{"minimum":"1"}', LIMIT, 'the schema is not valid JSON Schema draft-04: #/minimum must be number'],
    ['a property that is not a schema', '{"properties":{"a":5}}', LIMIT, '#/properties/a must be object'],
    ['a draft-07 $schema', '{"$schema":"http://json-schema.org/draft-07/schema#"}', LIMIT, '#/$schema: only JSON Schema draft-04'],
    ['a remote $schema', '{"$schema":"http://evil/x.json"}', LIMIT, '#/$schema: only JSON Schema draft-04'],
    // root must be an object schema
    ['a string root', '{"type":"string"}', LIMIT, '#/type: the root of the schema must be an object schema (type "object"), got "string"'],
    ['a list of types at the root', '{"type":["object"]}', LIMIT, '#/type: the root of the schema must be an object schema (type "object"), got ["object"]'],
    ['a nullable object root', '{"type":["object","null"]}', LIMIT, 'the root of the schema must be an object schema'],
    // references and ids
    ['a remote $ref', '{"$ref":"http://evil/x.json"}', LIMIT, '#/$ref: only local references ("#" or "#/...") are allowed, got "http://evil/x.json"'],
    ['a nested remote $ref', '{"properties":{"a":{"items":{"$ref":"http://evil/x.json"}}}}', LIMIT, '#/properties/a/items/$ref: only local references'],
    ['a relative file $ref', '{"definitions":{"d":{"$ref":"other.json#/x"}}}', LIMIT, '#/definitions/d/$ref: only local references'],
    ['a scheme-relative $ref', '{"allOf":[{"$ref":"//evil/x.json"}]}', LIMIT, '#/allOf/0/$ref: only local references'],
    ['an id-fragment $ref', '{"$ref":"#foo"}', LIMIT, '#/$ref: only local references'],
    ['a non-string $ref', '{"properties":{"a":{"$ref":5}}}', LIMIT, '#/properties/a/$ref: "$ref" must be a string'],
    ['an absolute http id', '{"id":"http://evil/"}', LIMIT, '#/id: "id" must not be an absolute URI (it changes the resolution base), got "http://evil/"'],
    ['a nested URN id', '{"properties":{"a":{"id":"urn:example:a"}}}', LIMIT, '#/properties/a/id: "id" must not be an absolute URI'],
    ['an id containing ://', '{"not":{"id":"x/://y"}}', LIMIT, '#/not/id: "id" must not be an absolute URI'],
    // patterns RE2 cannot run
    ['a lookahead pattern', '{"properties":{"a":{"type":"string","pattern":"(?=a)"}}}', LIMIT, '#/properties/a/pattern: the regular expression "(?=a)" is not supported'],
    ['a backreference pattern', '{"items":{"pattern":"(a)\\\\1"}}', LIMIT, '#/items/pattern: the regular expression "(a)\\\\1" is not supported'],
    ['an unbalanced pattern', '{"pattern":"("}', LIMIT, '#/pattern: the regular expression "(" is not supported'],
    ['a lookbehind patternProperties key', '{"patternProperties":{"(?<!x)y":{}}}', LIMIT, '#/patternProperties/(?<!x)y: the regular expression "(?<!x)y" is not supported'],
    ['a patternProperties key with a slash', '{"properties":{"a":{"patternProperties":{"a/(?=b)":{}}}}}', LIMIT, '#/properties/a/patternProperties/a~1(?=b): the regular expression'],
  ])('%s', (_name, text, options, reason) => {
    const result = guardSchema(text, options);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toContain(reason);
  });

  it.each([
    ['properties', nestedProperties(100_000), /^#\/properties\/a\/properties\/a\/.*: the schema nests deeper than 64 levels$/],
    ['arrays in enum', nestedArraysInEnum(100_000), /^#\/enum\/0\/0\/.*: the schema nests deeper than 64 levels$/],
    ['arrays at the root', '['.repeat(100_000) + ']'.repeat(100_000), /^the schema must be a JSON object, not an array$/],
  ])('100,000 levels of nesting (%s) without overflowing the stack', (_name, text, reason) => {
    const result = guardSchema(text, LARGE_LIMIT);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toMatch(reason);
  });

  it('reports the pointer of the first level beyond the limit', () => {
    const result = guardSchema(nestedProperties(1000), LARGE_LIMIT);
    expect(result).toEqual({ ok: false, reason: `#${'/properties/a'.repeat(32)}: the schema nests deeper than 64 levels` });
  });

  it('checks the size before parsing', () => {
    // Not JSON at all, but refused for its size rather than its syntax.
    const result = guardSchema('x'.repeat(100), { maxSchemaBytes: 99 });
    expect(result).toEqual({ ok: false, reason: 'the schema is 100 bytes long, more than the limit of 99 bytes' });
  });
});
