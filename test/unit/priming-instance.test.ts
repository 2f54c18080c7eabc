import { describe, expect, it } from 'vitest';
import { loadGithubEventTypes } from '../../scripts/github-event-types.js';
import { buildEffectiveSchema } from '../../src/domain/schema/effective-schema.js';
import { isJsonObject, type JsonObject, type JsonValue } from '../../src/domain/schema/json-schema-walk.js';
import { FORMAT_SAMPLES, PRIMING_LIMITS, primingInstance } from '../../src/domain/schema/priming-instance.js';
import { compileSchema, createSchemaCompiler, describeValidationError } from '../../src/domain/schema/schema-compiler.js';
import { businessEventType } from '../support/fixtures.js';

/**
 * A new validator is run once over a priming instance before the event type's first batch, so that batch
 * does not pay the validator's first run.
 * The instance must reach deep into the schema (valid where the schema allows it simply: the validator
 * stops at the first error) and stay bounded whatever the schema.
 */

function effective(schema: JsonObject, category: 'business' | 'data' = 'business'): JsonObject {
  const built = buildEffectiveSchema(schema, category, 'delete', 'forward');
  if (!built.ok) throw new Error(built.reason);
  return built.schema;
}

/** The first validation error of `value` against `schema`, or undefined when it is valid. */
function problemOf(schema: JsonObject, value: JsonValue): string | undefined {
  const validate = compileSchema(createSchemaCompiler({ metaSchemaCheck: false }), schema);
  return validate(value) ? undefined : describeValidationError(validate.errors);
}

/** JSON values in `value`, itself included. */
function countValues(value: JsonValue): number {
  if (Array.isArray(value)) return 1 + value.reduce<number>((sum, v) => sum + countValues(v), 0);
  if (isJsonObject(value)) return 1 + Object.values(value).reduce<number>((sum, v) => sum + countValues(v), 0);
  return 1;
}

/** Nesting depth of `value` (a scalar or an empty container is 0). */
function depthOf(value: JsonValue): number {
  const children = Array.isArray(value) ? value : isJsonObject(value) ? Object.values(value) : [];
  return children.length === 0 ? 0 : 1 + Math.max(...children.map(depthOf));
}

describe('priming instances reach the whole schema', () => {
  it('is valid for every GitHub webhook event type (58 data event types with large, nested schemas)', () => {
    const types = loadGithubEventTypes();
    expect(types.length).toBeGreaterThanOrEqual(58);
    for (const type of types) {
      const schema = effective(JSON.parse(type.definition.schema.schema) as JsonObject, 'data');
      const instance = primingInstance(schema);
      expect(problemOf(schema, instance), type.name).toBeUndefined();
      // It goes past the envelope into the payload's objects (`data.sender.login`, ...).
      expect(depthOf(instance), type.name).toBeGreaterThanOrEqual(3);
    }
    // It compiles 58 large schemas: seconds on a quiet machine, over a minute with every core busy.
  }, 180_000);

  it('is valid for a business event type: the service metadata gets a uuid eid and a date-time occurred_at', () => {
    const schema = effective(JSON.parse((businessEventType('x').schema as { schema: string }).schema) as JsonObject);
    const instance = primingInstance(schema);
    expect(problemOf(schema, instance)).toBeUndefined();
    expect(instance).toMatchObject({ metadata: { eid: FORMAT_SAMPLES.uuid, occurred_at: FORMAT_SAMPLES['date-time'] }, order_number: 'a', amount: 0 });
  });

  it('gives each format a string that passes its check', () => {
    for (const [format, sample] of Object.entries(FORMAT_SAMPLES)) expect(problemOf({ type: 'string', format }, sample), format).toBeUndefined();
  });

  it.each<[string, JsonObject]>([
    ['an allOf part narrowing an enum', { allOf: [{ properties: { state: { type: 'string', enum: ['open', 'closed'] } } }, { properties: { state: { enum: ['closed'] } }, required: ['state'] }] }],
    ['an allOf part narrowing a type to null', { allOf: [{ properties: { at: { type: ['string', 'null'], format: 'date-time' } } }, { properties: { at: { type: 'null' } }, required: ['at'] }] }],
    ['an enum listing null where only null is allowed', { allOf: [{ properties: { why: { type: ['string', 'null'], enum: ['a', null] } } }, { properties: { why: { type: 'null' } } }], required: ['why'] }],
    ['a oneOf of $refs (the first branch)', { definitions: { a: { type: 'object', properties: { n: { type: 'integer', minimum: 3 } }, required: ['n'] } }, oneOf: [{ $ref: '#/definitions/a' }, { type: 'string' }] }],
    ['a required name only additionalProperties describes', { type: 'object', required: ['extra'], additionalProperties: { type: 'boolean' } }],
    ['tuple items and an empty array', { type: 'object', properties: { pair: { type: 'array', items: [{ type: 'string' }, { type: 'integer' }] }, none: { type: 'array', items: { type: 'string' }, maxItems: 0 } }, required: ['pair', 'none'] }],
    ['exclusive bounds', { type: 'object', properties: { low: { type: 'integer', minimum: 5, exclusiveMinimum: true }, high: { type: 'number', maximum: -2, exclusiveMaximum: true } }, required: ['low', 'high'] }],
    ['a property typed only by its keywords', { properties: { url: { format: 'uri' }, list: { items: { type: 'number' } }, size: { minimum: 1 } }, required: ['url', 'list', 'size'] }],
  ])('is valid for %s', (_, schema) => {
    const instance = primingInstance(schema);
    expect(instance).not.toBeNull();
    expect(problemOf(schema, instance)).toBeUndefined();
  });

  it('is deterministic', () => {
    const schema = effective(JSON.parse(loadGithubEventTypes()[0]?.definition.schema.schema ?? '{}') as JsonObject, 'data');
    expect(primingInstance(schema)).toEqual(primingInstance(schema));
  });
});

describe('priming instances are bounded whatever the schema', () => {
  it('a $ref fan-out describing 10^12 values: at most maxValues of them', () => {
    const definitions: JsonObject = { d0: { type: 'string' } };
    const names = 'abcdefghij'.split('');
    for (let i = 1; i <= 12; i++) definitions[`d${i}`] = { type: 'object', properties: Object.fromEntries(names.map((n) => [n, { $ref: `#/definitions/d${i - 1}` }])) };
    const instance = primingInstance({ definitions, $ref: '#/definitions/d12' });
    expect(countValues(instance)).toBeLessThanOrEqual(PRIMING_LIMITS.maxValues);
    expect(countValues(instance)).toBeGreaterThan(PRIMING_LIMITS.maxValues / 2);
  });

  it('an allOf fan-out of 2^30 applications to one value: each subschema applied once', () => {
    const definitions: JsonObject = { d0: { type: 'object', properties: { leaf: { type: 'string' } }, required: ['leaf'] } };
    for (let i = 1; i <= 30; i++) definitions[`d${i}`] = { allOf: [{ $ref: `#/definitions/d${i - 1}` }, { $ref: `#/definitions/d${i - 1}` }] };
    expect(primingInstance({ definitions, $ref: '#/definitions/d30' })).toEqual({ leaf: 'a' });
  });

  it('a required recursive property: objects down to maxDepth, then null', () => {
    const instance = primingInstance({ type: 'object', properties: { child: { $ref: '#' } }, required: ['child'] });
    // The object at depth maxDepth holds `child: null` (one level deeper).
    expect(depthOf(instance)).toBe(PRIMING_LIMITS.maxDepth + 1);
  });

  it('huge minItems and minLength: one item, a short string', () => {
    const instance = primingInstance({ type: 'object', properties: { many: { type: 'array', minItems: 1e9, items: { type: 'string', minLength: 1e9 } } } });
    expect(instance).toEqual({ many: ['a'.repeat(PRIMING_LIMITS.maxStringLength)] });
  });

  it('a $ref that does not resolve, or a $ref loop, gives null there', () => {
    expect(primingInstance({ properties: { x: { $ref: '#/definitions/missing' }, y: { $ref: 'http://example.com/s.json' } } })).toEqual({ x: null, y: null });
    expect(primingInstance({ definitions: { a: { $ref: '#/definitions/b' }, b: { $ref: '#/definitions/a' } }, properties: { x: { $ref: '#/definitions/a' } } })).toEqual({ x: null });
  });
});
