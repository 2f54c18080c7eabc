import { describe, expect, it } from 'vitest';
import { canonicalJson, jsonEqual, sameSet } from '../../src/domain/json/json-equality.js';
import type { JsonValue } from '../../src/domain/schema/json-schema-walk.js';

/**
 * src/domain/json/json-equality.ts: the equality schema evolution compares with (docs/concepts.md
 * "Schema versions": key order is no change, `enum` and `required` are sets).
 */
describe('canonicalJson', () => {
  it('writes object keys sorted, at every level', () => {
    expect(canonicalJson({ b: 1, a: { d: [true, null], c: 'x' } })).toBe('{"a":{"c":"x","d":[true,null]},"b":1}');
    expect(canonicalJson([{ y: 1, x: 2 }])).toBe('[{"x":2,"y":1}]');
    expect(canonicalJson({})).toBe('{}');
  });

  it('gives the same text for values jsonEqual calls equal', () => {
    const a: JsonValue = { type: 'object', properties: { n: { minimum: 0, type: 'number' } } };
    const b: JsonValue = { properties: { n: { type: 'number', minimum: 0 } }, type: 'object' };
    expect(jsonEqual(a, b)).toBe(true);
    expect(canonicalJson(a)).toBe(canonicalJson(b));
  });
});

describe('sameSet', () => {
  it('compares arrays of objects as sets, whatever the key order', () => {
    expect(sameSet([{ a: 1, b: 2 }, 'x'], ['x', { b: 2, a: 1 }])).toBe(true);
    expect(sameSet([{ a: 1 }], [{ a: 2 }])).toBe(false);
  });
});
