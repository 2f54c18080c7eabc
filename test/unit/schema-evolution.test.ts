import { describe, expect, it } from 'vitest';
import type { CompatibilityMode } from '../../src/domain/event-type/event-type.js';
import type { JsonObject } from '../../src/domain/schema/json-schema-walk.js';
import {
  bumpVersion,
  classifySchemaChange,
  compatibleModeViolations,
  evolveSchema,
  isStricterOrEqualMode,
  type SchemaChangeLevel,
} from '../../src/domain/schema/schema-evolution.js';

const ALL_MODES: readonly CompatibilityMode[] = ['compatible', 'forward', 'none'];
const COMPATIBLE_NOTE = ' (allowed only in forward and none modes)';

const order: JsonObject = {
  type: 'object',
  title: 'Order',
  description: 'An order',
  properties: {
    id: { type: 'string', format: 'uuid' },
    price: { type: 'number', minimum: 0 },
    status: { type: 'string', enum: ['open', 'paid'] },
    lines: { type: 'array', items: { type: 'object', properties: { sku: { type: 'string' } } } },
  },
  required: ['id', 'price'],
  definitions: { money: { type: 'number' } },
};

/** `order` with `change` applied to a deep copy. */
function orderWith(change: (schema: JsonObject) => void): JsonObject {
  const copy = structuredClone(order);
  change(copy);
  return copy;
}

/** The object at `path` inside `schema` (test helper; the path must exist). */
function at(schema: JsonObject, ...path: string[]): JsonObject {
  let node: unknown = schema;
  for (const key of path) node = (node as JsonObject)[key];
  return node as JsonObject;
}

type Case = readonly [name: string, previous: JsonObject, next: JsonObject, level: SchemaChangeLevel, reasons: readonly string[]];

/** Changes classified the same in every mode. */
const modeIndependentCases: readonly Case[] = [
  // none
  ['identical schemas', order, structuredClone(order), 'none', []],
  ['the same schema with keys in another order', { type: 'object', properties: { a: { type: 'string', minLength: 1 } } }, { properties: { a: { minLength: 1, type: 'string' } }, type: 'object' }, 'none', []],
  // patch
  ['a changed root title', order, orderWith((s) => (s.title = 'Purchase order')), 'patch', ['#: title changed from "Order" to "Purchase order"']],
  ['an added property description', order, orderWith((s) => (at(s, 'properties', 'id').description = 'The order id')), 'patch', ['#/properties/id: description added: "The order id"']],
  ['a removed root description', order, orderWith((s) => delete s.description), 'patch', ['#: description removed (was "An order")']],
  ['a title changed inside items', order, orderWith((s) => (at(s, 'properties', 'lines', 'items').title = 'Line')), 'patch', ['#/properties/lines/items: title added: "Line"']],
  ['required reordered', order, orderWith((s) => (s.required = ['price', 'id'])), 'patch', ['#: textual change with no structural difference']],
  ['enum reordered', order, orderWith((s) => (at(s, 'properties', 'status').enum = ['paid', 'open'])), 'patch', ['#: textual change with no structural difference']],
  ['a type written as a one-element list', order, orderWith((s) => (at(s, 'properties', 'id').type = ['string'])), 'patch', ['#: textual change with no structural difference']],
  ['additionalProperties absent → true', { type: 'object' }, { type: 'object', additionalProperties: true }, 'patch', ['#: textual change with no structural difference']],
  ['additionalItems true → absent', { items: [{}], additionalItems: true }, { items: [{}] }, 'patch', ['#: textual change with no structural difference']],
  ['a title changed inside not', { not: { title: 'a' } }, { not: { title: 'b' } }, 'patch', ['#/not: title changed from "a" to "b"']],
  // minor
  ['an added optional property', order, orderWith((s) => (at(s, 'properties').note = { type: 'string' })), 'minor', ['#/properties/note: property added']],
  ['an added property named like a keyword', { properties: {} }, { properties: { title: { type: 'string' }, required: {} } }, 'minor', ['#/properties/title: property added', '#/properties/required: property added']],
  ['an added property inside array items', order, orderWith((s) => (at(s, 'properties', 'lines', 'items', 'properties').qty = { type: 'integer' })), 'minor', ['#/properties/lines/items/properties/qty: property added']],
  ['a first properties map', { type: 'object' }, { type: 'object', properties: { a: {} } }, 'minor', ['#/properties/a: property added']],
  ['an added definition', order, orderWith((s) => (at(s, 'definitions').currency = { type: 'string' })), 'minor', ['#/definitions/currency: definition added']],
  ['a property added inside a definition', order, orderWith((s) => (at(s, 'definitions', 'money').properties = { cents: {} })), 'minor', ['#/definitions/money/properties/cents: property added']],
  ['a property added inside an anyOf branch', { anyOf: [{ properties: {} }, {}] }, { anyOf: [{ properties: { a: {} } }, {}] }, 'minor', ['#/anyOf/0/properties/a: property added']],
  ['a property added inside an additionalProperties schema', { additionalProperties: { properties: {} } }, { additionalProperties: { properties: { a: {} } } }, 'minor', ['#/additionalProperties/properties/a: property added']],
  ['a property with a slash in its name', { properties: {} }, { properties: { 'a/b~c': {} } }, 'minor', ['#/properties/a~1b~0c: property added']],
  ['a title change and an added property', order, orderWith((s) => { s.title = 'O'; at(s, 'properties').note = {}; }), 'minor', ['#: title changed from "Order" to "O"', '#/properties/note: property added']],
  // major
  ['a removed property', order, orderWith((s) => delete at(s, 'properties').status), 'major', ['#/properties/status: property removed']],
  ['a removed definition', order, orderWith((s) => delete at(s, 'definitions').money), 'major', ['#/definitions/money: definition removed']],
  ['a retyped property', order, orderWith((s) => (at(s, 'properties', 'price').type = 'string')), 'major', ['#/properties/price: type changed from "number" to "string"']],
  ['a widened type', order, orderWith((s) => (at(s, 'properties', 'price').type = ['number', 'null'])), 'major', ['#/properties/price: type changed from "number" to ["number","null"]']],
  ['a removed type', order, orderWith((s) => delete at(s, 'properties', 'price').type), 'major', ['#/properties/price: type removed (was "number")']],
  ['a changed enum', order, orderWith((s) => (at(s, 'properties', 'status').enum = ['open', 'paid', 'void'])), 'major', ['#/properties/status: enum changed from ["open","paid"] to ["open","paid","void"]']],
  ['an added enum', { type: 'string' }, { type: 'string', enum: ['a'] }, 'major', ['#: enum added: ["a"]']],
  ['a removed required name', order, orderWith((s) => (s.required = ['id'])), 'major', ['#: required property "price" removed']],
  ['a removed required list', order, orderWith((s) => delete s.required), 'major', ['#: required property "id" removed', '#: required property "price" removed']],
  ['an added format', order, orderWith((s) => (at(s, 'properties', 'status').format = 'email')), 'major', ['#/properties/status: format added: "email"']],
  ['a changed format', order, orderWith((s) => (at(s, 'properties', 'id').format = 'uri')), 'major', ['#/properties/id: format changed from "uuid" to "uri"']],
  ['a changed pattern', { properties: { a: { pattern: '^a' } } }, { properties: { a: { pattern: '^b' } } }, 'major', ['#/properties/a: pattern changed from "^a" to "^b"']],
  ['a changed minimum', order, orderWith((s) => (at(s, 'properties', 'price').minimum = 1)), 'major', ['#/properties/price: minimum changed from 0 to 1']],
  ['a removed minimum', order, orderWith((s) => delete at(s, 'properties', 'price').minimum), 'major', ['#/properties/price: minimum removed (was 0)']],
  ['an added maxLength', order, orderWith((s) => (at(s, 'properties', 'id').maxLength = 36)), 'major', ['#/properties/id: maxLength added: 36']],
  ['items schema → tuple', { items: { type: 'string' } }, { items: [{ type: 'string' }] }, 'major', ['#: items changed from a schema to [{"type":"string"}]']],
  ['a longer items tuple', { items: [{}] }, { items: [{}, {}] }, 'major', ['#: items changed from [{}] to [{},{}]']],
  ['a retyped tuple position', { items: [{ type: 'string' }] }, { items: [{ type: 'number' }] }, 'major', ['#/items/0: type changed from "string" to "number"']],
  ['an added items schema', { type: 'array' }, { type: 'array', items: { type: 'string' } }, 'major', ['#: items added: a schema']],
  ['an extra anyOf branch', { anyOf: [{}] }, { anyOf: [{}, { type: 'string' }] }, 'major', ['#: anyOf changed from [{}] to [{},{"type":"string"}]']],
  ['additionalProperties false → schema', { additionalProperties: false }, { additionalProperties: { type: 'string' } }, 'major', ['#: additionalProperties changed from false to a schema']],
  ['additionalProperties schema → true', { additionalProperties: { type: 'string' } }, { additionalProperties: true }, 'major', ['#: additionalProperties changed from a schema to true']],
  ['additionalProperties absent → false', { type: 'object' }, { type: 'object', additionalProperties: false }, 'major', ['#: additionalProperties changed from true to false']],
  ['a retyped additionalProperties schema', { additionalProperties: { type: 'string' } }, { additionalProperties: { type: 'number' } }, 'major', ['#/additionalProperties: type changed from "string" to "number"']],
  ['additionalItems true → false', { items: [{}] }, { items: [{}], additionalItems: false }, 'major', ['#: additionalItems changed from true to false']],
  ['an added patternProperties key', { patternProperties: {} }, { patternProperties: { '^x': {} } }, 'major', ['#/patternProperties/^x: pattern property added']],
  ['a property added inside not', { not: { properties: {} } }, { not: { properties: { a: {} } } }, 'major', ['#/not/properties/a: property added (inside "not")']],
  ['a changed property dependency', { dependencies: { a: ['b'] } }, { dependencies: { a: ['b', 'c'] } }, 'major', ['#/dependencies/a: dependency changed from ["b"] to ["b","c"]']],
  ['a retyped schema dependency', { dependencies: { a: { type: 'object' } } }, { dependencies: { a: { type: 'array' } } }, 'major', ['#/dependencies/a: type changed from "object" to "array"']],
  ['a boolean property schema changed', { properties: { a: true } }, { properties: { a: false } }, 'major', ['#/properties/a: changed from true to false']],
  ['a property schema replaced by a boolean', { properties: { a: { type: 'string' } } }, { properties: { a: true } }, 'major', ['#/properties/a: changed from a schema to true']],
  ['dependencies that are not a map', { dependencies: ['a'] }, { dependencies: ['b'] }, 'major', ['#: dependencies changed from ["a"] to ["b"]']],
  ['a dependencies map replaced by a list', { dependencies: { a: ['b'] } }, { dependencies: ['b'] }, 'major', ['#: dependencies changed from a schema to ["b"]']],
  ['required that is not a list of names', { required: ['a'] }, { required: [1] }, 'major', ['#: required changed from ["a"] to [1]']],
  ['required written as a boolean (draft-03)', { properties: { a: { required: true } } }, { properties: { a: {} } }, 'major', ['#/properties/a: required removed (was true)']],
  ['an added not', { type: 'object' }, { type: 'object', not: { required: ['a'] } }, 'major', ['#: not added: a schema']],
  ['a removed not', { not: { type: 'null' } }, {}, 'major', ['#: not removed (was a schema)']],
  ['a changed local $ref', { properties: { a: { $ref: '#/definitions/x' } } }, { properties: { a: { $ref: '#/definitions/y' } } }, 'major', ['#/properties/a: $ref changed from "#/definitions/x" to "#/definitions/y"']],
  ['a changed unknown keyword', { 'x-owner': 'a' }, { 'x-owner': 'b' }, 'major', ['#: x-owner changed from "a" to "b"']],
  ['a keyword named like an Object.prototype member', { constructor: 1 }, {}, 'major', ['#: constructor removed (was 1)']],
  ['a retyped property named like an Object.prototype member', { properties: { toString: { type: 'string' } } }, { properties: { toString: { type: 'number' } } }, 'major', ['#/properties/toString: type changed from "string" to "number"']],
  ['a long value, abbreviated', { enum: ['x'.repeat(100)] }, { enum: ['y'] }, 'major', [`#: enum changed from ["${'x'.repeat(77)}… to ["y"]`]],
  ['a minor and a major change together', order, orderWith((s) => { at(s, 'properties').note = {}; at(s, 'properties', 'price').type = 'integer'; }), 'major', ['#/properties/price: type changed from "number" to "integer"', '#/properties/note: property added']],
];

/** Changes that forward and none accept as minor and compatible classifies as major. */
const forwardOnlyCases: readonly (readonly [name: string, previous: JsonObject, next: JsonObject, reason: string])[] = [
  ['an extended required', order, orderWith((s) => (s.required = ['id', 'price', 'status'])), '#: required property "status" added'],
  ['a first required list', { properties: { a: {} } }, { properties: { a: {} }, required: ['a'] }, '#: required property "a" added'],
  ['a type narrowed from empty to specific', { properties: { a: {} } }, { properties: { a: { type: 'string' } } }, '#/properties/a: type narrowed from any to "string"'],
  ['additionalProperties true → schema', { additionalProperties: true }, { additionalProperties: { type: 'string' } }, '#: additionalProperties changed from true to a schema'],
  ['additionalProperties absent → schema', { properties: { a: { type: 'object' } } }, { properties: { a: { type: 'object', additionalProperties: {} } } }, '#/properties/a: additionalProperties changed from true to a schema'],
];

describe('classifySchemaChange', () => {
  describe.each(ALL_MODES)('in mode %s', (mode) => {
    it.each(modeIndependentCases)('%s', (_name, previous, next, level, reasons) => {
      expect(classifySchemaChange(previous, next, mode)).toEqual({ level, reasons });
    });
  });

  describe.each(['forward', 'none'] as const)('in mode %s', (mode) => {
    it.each(forwardOnlyCases)('%s is minor', (_name, previous, next, reason) => {
      expect(classifySchemaChange(previous, next, mode)).toEqual({ level: 'minor', reasons: [reason] });
    });
  });

  describe('in mode compatible', () => {
    it.each(forwardOnlyCases)('%s is major', (_name, previous, next, reason) => {
      expect(classifySchemaChange(previous, next, 'compatible')).toEqual({ level: 'major', reasons: [reason + COMPATIBLE_NOTE] });
    });
  });

  it.each([
    ['forward', 'minor'],
    ['none', 'minor'],
    ['compatible', 'major'],
  ] as const)('adding a required property in mode %s is %s', (mode, level) => {
    const next = orderWith((s) => {
      at(s, 'properties').note = { type: 'string' };
      s.required = ['id', 'price', 'note'];
    });
    const result = classifySchemaChange(order, next, mode);
    expect(result.level).toBe(level);
    expect(result.reasons).toEqual(['#/properties/note: property added', `#: required property "note" added${mode === 'compatible' ? COMPATIBLE_NOTE : ''}`]);
  });

  it('does not modify its arguments', () => {
    const previous = structuredClone(order);
    const next = orderWith((s) => delete s.required);
    const nextCopy = structuredClone(next);
    classifySchemaChange(previous, next, 'forward');
    expect(previous).toEqual(order);
    expect(next).toEqual(nextCopy);
  });
});

describe('bumpVersion', () => {
  it.each([
    ['1.0.0', 'none', '1.0.0'],
    ['1.0.0', 'patch', '1.0.1'],
    ['1.0.0', 'minor', '1.1.0'],
    ['1.0.0', 'major', '2.0.0'],
    ['1.2.3', 'patch', '1.2.4'],
    ['1.2.3', 'minor', '1.3.0'],
    ['1.2.3', 'major', '2.0.0'],
    ['9.9.9', 'patch', '9.9.10'],
    ['0.0.0', 'minor', '0.1.0'],
    ['10.20.30', 'none', '10.20.30'],
  ] as const)('%s + %s → %s', (version, level, expected) => {
    expect(bumpVersion(version, level)).toBe(expected);
  });

  it.each(['', '1', '1.0', '1.0.0.0', 'v1.0.0', '01.0.0', '1.00.0', '1.0.0-beta', ' 1.0.0', '1.a.0', '-1.0.0'])('refuses %j', (version) => {
    expect(() => bumpVersion(version, 'patch')).toThrow(RangeError);
    expect(() => bumpVersion(version, 'none')).toThrow(`"${version}" is not a MAJOR.MINOR.PATCH version`);
  });
});

describe('evolveSchema', () => {
  const retyped = orderWith((s) => (at(s, 'properties', 'price').type = 'string'));
  const extendedRequired = orderWith((s) => (s.required = ['id', 'price', 'status']));
  const addedAndRetyped = orderWith((s) => {
    at(s, 'properties').note = {};
    at(s, 'properties', 'price').type = 'string';
  });

  it.each([
    ['an identical schema', order, structuredClone(order), 'compatible', '1.2.3', { ok: true, level: 'none', version: '1.2.3' }],
    ['a title change', order, orderWith((s) => (s.title = 'O')), 'compatible', '1.2.3', { ok: true, level: 'patch', version: '1.2.4' }],
    ['an added property (compatible)', order, orderWith((s) => (at(s, 'properties').note = {})), 'compatible', '1.2.3', { ok: true, level: 'minor', version: '1.3.0' }],
    ['an added property (forward)', order, orderWith((s) => (at(s, 'properties').note = {})), 'forward', '1.2.3', { ok: true, level: 'minor', version: '1.3.0' }],
    ['an extended required (forward)', order, extendedRequired, 'forward', '1.2.3', { ok: true, level: 'minor', version: '1.3.0' }],
    ['an extended required (none)', order, extendedRequired, 'none', '1.2.3', { ok: true, level: 'minor', version: '1.3.0' }],
    ['an extended required (compatible)', order, extendedRequired, 'compatible', '1.2.3', { ok: false, reasons: ['#: required property "status" added' + COMPATIBLE_NOTE] }],
    ['a retyped property (compatible)', order, retyped, 'compatible', '1.2.3', { ok: false, reasons: ['#/properties/price: type changed from "number" to "string"'] }],
    ['a retyped property (forward)', order, retyped, 'forward', '1.2.3', { ok: false, reasons: ['#/properties/price: type changed from "number" to "string"'] }],
    ['a retyped property (none)', order, retyped, 'none', '1.2.3', { ok: true, level: 'major', version: '2.0.0' }],
    ['a minor and a major change: only the major reasons (forward)', order, addedAndRetyped, 'forward', '1.0.0', { ok: false, reasons: ['#/properties/price: type changed from "number" to "string"'] }],
    ['a removed property (none)', order, orderWith((s) => delete at(s, 'properties').lines), 'none', '3.4.5', { ok: true, level: 'major', version: '4.0.0' }],
  ] as const)('%s', (_name, previous, next, mode, version, expected) => {
    expect(evolveSchema(previous, next, version, mode)).toEqual(expected);
  });

  it('throws RangeError for a malformed previous version', () => {
    expect(() => evolveSchema(order, order, 'latest', 'forward')).toThrow(RangeError);
  });
});

describe('compatibleModeViolations', () => {
  it.each([
    ['a plain object schema', order, []],
    ['an empty schema', {}, []],
    ['properties named like the forbidden keywords', { properties: { not: {}, additionalProperties: {}, patternProperties: {}, additionalItems: {} } }, []],
    ['the keywords inside non-schema values', { default: { not: 1 }, enum: [{ additionalProperties: false }] }, []],
    ['root additionalProperties false', { type: 'object', additionalProperties: false }, ['#: "additionalProperties" is not allowed in compatible mode']],
    ['nested additionalProperties', { properties: { a: { type: 'object', additionalProperties: { type: 'string' } } } }, ['#/properties/a: "additionalProperties" is not allowed in compatible mode']],
    ['additionalItems in items', { properties: { l: { items: [{}], additionalItems: false } } }, ['#/properties/l: "additionalItems" is not allowed in compatible mode']],
    ['not inside a definition', { definitions: { d: { not: { type: 'null' } } } }, ['#/definitions/d: "not" is not allowed in compatible mode']],
    ['patternProperties inside anyOf', { anyOf: [{}, { patternProperties: { '^x': {} } }] }, ['#/anyOf/1: "patternProperties" is not allowed in compatible mode']],
    [
      'all four, and one nested in another',
      { not: { additionalProperties: false }, patternProperties: {}, additionalProperties: true, items: [], additionalItems: {} },
      [
        '#: "not" is not allowed in compatible mode',
        '#: "patternProperties" is not allowed in compatible mode',
        '#: "additionalProperties" is not allowed in compatible mode',
        '#: "additionalItems" is not allowed in compatible mode',
        '#/not: "additionalProperties" is not allowed in compatible mode',
      ],
    ],
  ] as const satisfies readonly (readonly [string, JsonObject, readonly string[]])[])('%s', (_name, schema, expected) => {
    expect(compatibleModeViolations(schema)).toEqual(expected);
  });
});

describe('isStricterOrEqualMode', () => {
  it.each([
    ['none', 'none', true],
    ['none', 'forward', true],
    ['none', 'compatible', true],
    ['forward', 'none', false],
    ['forward', 'forward', true],
    ['forward', 'compatible', true],
    ['compatible', 'none', false],
    ['compatible', 'forward', false],
    ['compatible', 'compatible', true],
  ] as const)('%s → %s: %s', (from, to, expected) => {
    expect(isStricterOrEqualMode(from, to)).toBe(expected);
  });
});
