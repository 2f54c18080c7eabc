import { describe, expect, it } from 'vitest';
import { buildEffectiveSchema } from '../../src/domain/schema/effective-schema.js';
import type { JsonObject } from '../../src/domain/schema/json-schema-walk.js';
import { analyseSchemaCost, keywordBoundProblem, SCHEMA_COST_LIMITS } from '../../src/domain/schema/schema-cost.js';
import { guardSchema } from '../../src/domain/schema/schema-guard.js';
import { loadGithubEventTypes } from '../../scripts/github-event-types.js';

/**
 * d_i = allOf of two refs to d_(i-1). Every `{"$ref"}` object is an application too, so d_i costs
 * 1 + 2 × (1 + d_(i-1)) and the value at `x` (itself a `$ref`) receives 2^(levels+2) - 2.
 */
function fanOut(levels: number): JsonObject {
  const definitions: JsonObject = { d0: { type: 'string' } };
  for (let i = 1; i <= levels; i++) definitions[`d${i}`] = { allOf: [{ $ref: `#/definitions/d${i - 1}` }, { $ref: `#/definitions/d${i - 1}` }] };
  return { type: 'object', definitions, properties: { x: { $ref: `#/definitions/d${levels}` } } };
}

function applications(schema: JsonObject): number {
  const result = analyseSchemaCost(schema);
  if (!result.ok) throw new Error(result.reason);
  return result.applicationsPerValue;
}

function refusal(schema: JsonObject): string {
  const result = analyseSchemaCost(schema);
  if (result.ok) throw new Error(`accepted with ${result.applicationsPerValue} applications per value`);
  return result.reason;
}

describe('analyseSchemaCost counts subschema applications per value', () => {
  it.each([
    ['a flat object', { type: 'object', properties: { a: { type: 'string' } } }, 1],
    ['allOf of two at the root', { allOf: [{ type: 'object' }, { required: ['a'] }] }, 3],
    ['a $ref to a definition', { type: 'object', definitions: { s: { type: 'string' } }, properties: { a: { $ref: '#/definitions/s' } } }, 2],
    ['not and anyOf', { type: 'object', properties: { a: { not: { anyOf: [{ type: 'string' }, { type: 'number' }] } } } }, 4],
    ['schema dependencies apply to the same value', { type: 'object', dependencies: { a: { required: ['b'] }, c: ['d'] } }, 2],
    ['fan-out of 3 levels', fanOut(3), 30],
    ['fan-out of 6 levels', fanOut(6), 254],
  ])('%s', (_name, schema, expected) => {
    expect(applications(schema as JsonObject)).toBe(expected);
  });

  it('follows properties, patternProperties (matched with RE2), additionalProperties, items and tuples', () => {
    const wide: JsonObject = { type: 'string', allOf: [{ minLength: 1 }, { maxLength: 9 }, { pattern: '^a' }] }; // 4 per value
    expect(applications({ type: 'object', properties: { a: wide } })).toBe(4);
    // "a" matches the pattern too, so it gets both; an undeclared "zzz" gets additionalProperties only.
    expect(applications({ type: 'object', properties: { a: wide }, patternProperties: { '^a': wide }, additionalProperties: { type: 'string' } })).toBe(8);
    expect(applications({ type: 'object', properties: { b: { type: 'string' } }, patternProperties: { '^a': wide } })).toBe(4);
    expect(applications({ type: 'array', items: wide })).toBe(4);
    expect(applications({ type: 'array', items: [{ type: 'string' }, wide], additionalItems: { allOf: [wide, wide] } })).toBe(9);
  });

  it('accepts recursion through the event (a tree) and counts one level', () => {
    const tree = { type: 'object', definitions: { node: { type: 'object', properties: { children: { type: 'array', items: { $ref: '#/definitions/node' } } } } }, properties: { root: { $ref: '#/definitions/node' } } };
    expect(applications(tree)).toBe(2);
  });

  it('refuses the fan-out over the budget, naming the value and the limit, in milliseconds even at 40 levels', () => {
    expect(applications(fanOut(6))).toBeLessThanOrEqual(SCHEMA_COST_LIMITS.maxApplicationsPerValue);
    for (const levels of [7, 30, 40]) expect(refusal(fanOut(levels))).toBe('validating the value at #/x of an event would apply more than 256 subschemas (through $ref, allOf, anyOf, oneOf, not or dependencies; the limit bounds validation time)');
  });

  it('refuses recursion that multiplies the applications with each level of the event', () => {
    const growing = { type: 'object', definitions: { n: { allOf: [{ $ref: '#/definitions/m' }, { $ref: '#/definitions/m' }] }, m: { properties: { x: { $ref: '#/definitions/n' } } } }, properties: { x: { $ref: '#/definitions/n' } } };
    expect(refusal(growing)).toMatch(/^validating the value at #(\/x)+ of an event would apply more than 256 subschemas/);
  });

  it('refuses a $ref loop on the same value and a $ref that does not resolve', () => {
    expect(refusal({ type: 'object', allOf: [{ $ref: '#' }] })).toBe('a $ref or combinator at # applies a subschema to the same value again, so validation would never end');
    expect(refusal({ type: 'object', properties: { a: { $ref: '#/properties/a' } } })).toContain('at #/a applies a subschema to the same value again');
    expect(refusal({ type: 'object', properties: { a: { $ref: '#/definitions/missing' } } })).toBe('$ref "#/definitions/missing" does not point at a subschema of this document');
  });

  it('resolves escaped pointers (~1, ~0, percent-encoding)', () => {
    expect(applications({ type: 'object', definitions: { 'a/b': { type: 'string' }, 'c~d': { type: 'string' }, 'e f': { type: 'string' } }, properties: { x: { allOf: [{ $ref: '#/definitions/a~1b' }, { $ref: '#/definitions/c~0d' }, { $ref: '#/definitions/e%20f' }] } } })).toBe(1 + 3 * 2);
  });

  it('refuses a schema with more distinct value positions than it explores', () => {
    const properties = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`p${i}`, { type: 'object', properties: Object.fromEntries(Array.from({ length: 50 }, (_, j) => [`q${j}`, { type: 'string', minLength: i }])) }]));
    const result = analyseSchemaCost({ type: 'object', properties }, { ...SCHEMA_COST_LIMITS, maxAnalysisStates: 1_000 });
    expect(result).toEqual({ ok: false, reason: 'the schema is too complex to bound its validation cost (more than 1000 distinct value positions)' });
  });

  it('accepts every GitHub webhook schema (the demo) within the budget', () => {
    const costs = loadGithubEventTypes().map(({ definition }) => {
      const effective = buildEffectiveSchema(JSON.parse(definition.schema.schema) as JsonObject, definition.category, 'delete', 'forward');
      if (!effective.ok) throw new Error(effective.reason);
      return applications(effective.schema);
    });
    expect(costs.length).toBe(58);
    expect(Math.max(...costs)).toBeLessThanOrEqual(SCHEMA_COST_LIMITS.maxApplicationsPerValue / 2);
  });
});

describe('keywordBoundProblem', () => {
  it('refuses an enum over the limit and accepts one at it', () => {
    const values = (n: number) => Array.from({ length: n }, (_, i) => i);
    expect(keywordBoundProblem({ type: 'object', properties: { c: { enum: values(1_000) } } })).toBeUndefined();
    expect(keywordBoundProblem({ type: 'object', properties: { c: { enum: values(1_001) } } })).toBe('#/properties/c/enum: lists 1001 values, more than the limit of 1000');
  });

  it('asks a uniqueItems array of non-scalar items for a small maxItems; scalar item types need none', () => {
    const unique = (extra: JsonObject) => ({ type: 'object', properties: { l: { type: 'array', uniqueItems: true, ...extra } } });
    expect(keywordBoundProblem(unique({}))).toContain('#/properties/l/uniqueItems: an array with "uniqueItems" whose items are not all of scalar types must declare "maxItems" of at most 100');
    expect(keywordBoundProblem(unique({ items: { type: 'object' } }))).toContain('#/properties/l/uniqueItems');
    expect(keywordBoundProblem(unique({ items: { type: ['string', 'array'] } }))).toContain('#/properties/l/uniqueItems');
    expect(keywordBoundProblem(unique({ maxItems: 101 }))).toContain('#/properties/l/uniqueItems');
    expect(keywordBoundProblem(unique({ maxItems: 100 }))).toBeUndefined();
    expect(keywordBoundProblem(unique({ items: { type: 'string' } }))).toBeUndefined();
    expect(keywordBoundProblem(unique({ items: { type: ['integer', 'null'] } }))).toBeUndefined();
    expect(keywordBoundProblem(unique({ uniqueItems: false }))).toBeUndefined();
  });

  it('runs in guardSchema before the meta-schema check: a 100,000-value enum is refused at once', () => {
    // The meta-schema's own uniqueItems over this enum took 23 s; the bound answers before it runs. The
    // schema also breaks the meta-schema (minLength -1): had the meta-schema check run first, its
    // problem would be the answer.
    const text = JSON.stringify({ type: 'object', properties: { c: { enum: Array.from({ length: 100_000 }, (_, i) => `v${i}`) }, d: { type: 'string', minLength: -1 } } });
    const result = guardSchema(text, { maxSchemaBytes: 2 * 1024 * 1024 });
    expect(result).toEqual({ ok: false, reason: '#/properties/c/enum: lists 100000 values, more than the limit of 1000' });
    const withoutEnum = JSON.stringify({ type: 'object', properties: { d: { type: 'string', minLength: -1 } } });
    expect(guardSchema(withoutEnum, { maxSchemaBytes: 2 * 1024 * 1024 })).toEqual({ ok: false, reason: expect.stringContaining('minLength') as string });
  });
});
