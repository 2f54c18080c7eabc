import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { eventTypeName, loadGithubEventTypes, wrapAsDataEvent, type GithubEventType } from '../../scripts/github-event-types.js';
import { EXCLUDED_PAYLOADS, SCHEMA_FIXES } from '../../scripts/github-schema-fixes.js';
import { translateToDraft04 } from '../../scripts/json-schema-draft04.js';
import { buildEffectiveSchema, lookupField } from '../../src/domain/schema/effective-schema.js';
import { isJsonObject, walkSchema, type JsonObject, type JsonValue } from '../../src/domain/schema/json-schema-walk.js';
import { compileSchema, createSchemaCompiler, describeValidationError, type SchemaCompiler } from '../../src/domain/schema/schema-compiler.js';

const require = createRequire(import.meta.url);
const EID = '1b4e28ba-2fa1-11d2-883f-0016d3cca427';
const MIB = 1024 * 1024;
/** The event type name pattern (docs/concepts.md "Event types"). */
const NAME_PATTERN = /^[a-zA-Z][-0-9a-zA-Z_]*(\.[0-9a-zA-Z][-0-9a-zA-Z_]*)*$/;

/** Reads the examples package directly (not through the module under test): event name → payload count. */
function packageExampleCounts(): Map<string, number> {
  const raw: unknown = require('@octokit/webhooks-examples');
  if (!Array.isArray(raw)) throw new Error('unexpected examples package shape');
  const counts = new Map<string, number>();
  for (const entry of raw as unknown[]) {
    if (!isJsonObject(entry) || typeof entry.name !== 'string' || !Array.isArray(entry.examples)) throw new Error('unexpected examples entry');
    counts.set(entry.name, entry.examples.length);
  }
  return counts;
}

function parsedSchema(type: GithubEventType): JsonObject {
  const parsed: unknown = JSON.parse(type.definition.schema.schema);
  if (!isJsonObject(parsed)) throw new Error(`${type.name}: schema is not an object`);
  return parsed;
}

/** Validates every payload of an event type against the broker's effective schema; returns failures. */
function failures(ajv: SchemaCompiler, type: GithubEventType, stopAtFirst = false): string[] {
  const effective = buildEffectiveSchema(parsedSchema(type), 'data', 'delete', 'forward');
  if (!effective.ok) return [`${type.name}: ${effective.reason}`];
  const validate = compileSchema(ajv, effective.schema);
  const out: string[] = [];
  for (const [index, payload] of type.payloads.entries()) {
    if (validate(wrapAsDataEvent(type.name, payload, EID))) continue;
    out.push(`${type.name}[${index}]${typeof payload.action === 'string' ? ` (${payload.action})` : ''}: ${describeValidationError(validate.errors)}`);
    if (stopAtFirst) break;
  }
  return out;
}

/** Draft-06+ keywords a translated schema must not contain (at schema positions). */
const DRAFT_06_KEYWORDS = ['const', '$id', 'if', 'then', 'else', 'contains', 'propertyNames', 'examples', '$comment'];

function schemaProblems(schema: JsonObject): string[] {
  const problems: string[] = [];
  walkSchema(schema, (node, pointer) => {
    for (const keyword of DRAFT_06_KEYWORDS) if (keyword in node) problems.push(`${pointer}: ${keyword}`);
    for (const keyword of ['exclusiveMinimum', 'exclusiveMaximum']) if (typeof node[keyword] === 'number') problems.push(`${pointer}: numeric ${keyword}`);
    for (const keyword of Object.keys(node)) if (keyword.startsWith('ts')) problems.push(`${pointer}: ${keyword}`);
    const ref = node.$ref;
    if (ref === undefined) return;
    if (typeof ref !== 'string' || !ref.startsWith('#/')) problems.push(`${pointer}: non-local $ref ${JSON.stringify(ref)}`);
    else if (resolvePointer(schema, ref) === undefined) problems.push(`${pointer}: dangling $ref ${ref}`);
  });
  if ('$schema' in schema && schema.$schema !== 'http://json-schema.org/draft-04/schema#') problems.push(`#: $schema ${JSON.stringify(schema.$schema)}`);
  return problems;
}

function resolvePointer(document: JsonValue, ref: string): JsonValue | undefined {
  let node: JsonValue | undefined = document;
  for (const raw of ref.slice(2).split('/')) {
    const segment = decodeURIComponent(raw).replaceAll('~1', '/').replaceAll('~0', '~');
    node = isJsonObject(node) ? node[segment] : Array.isArray(node) ? node[Number(segment)] : undefined;
    if (node === undefined) return undefined;
  }
  return node;
}

describe('GitHub webhook event types', () => {
  const types = loadGithubEventTypes();
  const counts = packageExampleCounts();

  it('has one event type per webhook event of the examples package, and every example payload', () => {
    expect(types.map((t) => t.name).sort()).toEqual([...counts.keys()].sort());
    const packageTotal = [...counts.values()].reduce((a, b) => a + b, 0);
    const total = types.reduce((sum, t) => sum + t.payloads.length, 0);
    expect(packageTotal).toBeGreaterThan(0);
    expect(total + EXCLUDED_PAYLOADS.length).toBe(packageTotal);
    for (const t of types) expect(t.payloads.length + EXCLUDED_PAYLOADS.filter((x) => x.event === t.name).length).toBe(counts.get(t.name));
  });

  it('builds valid event type bodies', () => {
    const names = new Set<string>();
    for (const { name, definition } of types) {
      expect(definition.name).toBe(`github.${name}`);
      expect(definition.name).toMatch(NAME_PATTERN);
      names.add(definition.name);
      expect(definition).toMatchObject({
        owning_application: 'github-demo',
        category: 'data',
        enrichment_strategies: ['metadata_enrichment'],
        schema: { type: 'json_schema' },
        default_statistic: { messages_per_minute: 1000, message_size: 10000, read_parallelism: 2, write_parallelism: 2 },
      });
      const schema = parsedSchema({ name, definition, payloads: [] });
      expect(schema.type, name).toBe('object');
      // Hash partitioning exactly when the key is a required field (relative to `data` for category data;
      // docs/concepts.md "Partitions").
      const key = lookupField(schema, 'repository.id');
      if (definition.partition_strategy === 'hash') {
        expect(definition.partition_key_fields).toEqual(['repository.id']);
        expect(key, name).toEqual({ declared: true, required: true });
      } else {
        expect(definition.partition_strategy).toBe('random');
        expect(definition.partition_key_fields).toBeUndefined();
      }
    }
    expect(names.size).toBe(types.length);
    expect(types.find((t) => t.name === 'push')?.definition.partition_strategy).toBe('hash');
    expect(types.find((t) => t.name === 'pull_request')?.definition.partition_strategy).toBe('hash');
  });

  it('keeps every translated schema under 1 MiB', () => {
    for (const t of types) expect(Buffer.byteLength(t.definition.schema.schema), t.name).toBeLessThan(MIB);
  });

  it('translates to self-contained draft-04: local $refs that resolve, no draft-06+ or ts* keywords', () => {
    for (const t of types) expect(schemaProblems(parsedSchema(t)), t.name).toEqual([]);
  });

  it.each(types.map((t) => [t.name, t] as const))('validates every example payload of %s as a data event', (_name, type) => {
    expect(failures(createSchemaCompiler(), type)).toEqual([]);
  });

  it('rejects a payload that breaks the schema (the validation is real)', () => {
    const push = types.find((t) => t.name === 'push');
    const payload = push?.payloads[0];
    if (!push || !payload) throw new Error('no push payload');
    const broken: GithubEventType = { ...push, payloads: [{ ...payload, forced: 'yes' }] };
    expect(failures(createSchemaCompiler(), broken)).toEqual(['push[0]: #/data/forced must be boolean']);
  });

  describe('schema fixes', () => {
    it('are named uniquely and explained', () => {
      expect(new Set(SCHEMA_FIXES.map((f) => f.name)).size).toBe(SCHEMA_FIXES.length);
      for (const fix of SCHEMA_FIXES) expect(fix.reason.length, fix.name).toBeGreaterThan(20);
    });

    it('throw when a fix changes nothing (stale)', () => {
      const first = SCHEMA_FIXES[0];
      if (!first) return;
      expect(() => loadGithubEventTypes([...SCHEMA_FIXES, first])).toThrow(/changes nothing/);
    });

    // Each fix is needed: without it, some real payload fails (only the event types whose schema the fix
    // touches are compiled again).
    it.each(SCHEMA_FIXES.map((f) => [f.name, f] as const))('%s is needed', (_name, fix) => {
      const without = loadGithubEventTypes(SCHEMA_FIXES.filter((f) => f !== fix));
      const changed = without.filter((t, i) => t.definition.schema.schema !== types[i]?.definition.schema.schema);
      expect(changed.length).toBeGreaterThan(0);
      const ajv = createSchemaCompiler();
      expect(changed.some((t) => failures(ajv, t, true).length > 0)).toBe(true);
    });
  });
});

describe('translateToDraft04', () => {
  const compile = (schema: JsonObject) => compileSchema(createSchemaCompiler(), translateToDraft04(schema));

  it('turns const into enum and numeric exclusive bounds into draft-04 booleans', () => {
    expect(translateToDraft04({ type: 'object', properties: { a: { const: 'x' }, n: { exclusiveMinimum: 0, exclusiveMaximum: 10 } } })).toEqual({
      $schema: 'http://json-schema.org/draft-04/schema#',
      type: 'object',
      properties: { a: { enum: ['x'] }, n: { minimum: 0, exclusiveMinimum: true, maximum: 10, exclusiveMaximum: true } },
    });
    expect(translateToDraft04({ exclusiveMinimum: 1, minimum: 5 })).toEqual({ $schema: 'http://json-schema.org/draft-04/schema#', minimum: 5 });
    const validate = compile({ type: 'object', properties: { n: { type: 'number', exclusiveMinimum: 0 }, k: { const: 3 } } });
    expect(validate({ n: 0.5, k: 3 })).toBe(true);
    expect(validate({ n: 0 })).toBe(false);
    expect(validate({ k: 4 })).toBe(false);
  });

  it('translates if/then/else and contains with the same meaning', () => {
    const validate = compile({
      type: 'object',
      if: { properties: { kind: { const: 'a' } }, required: ['kind'] },
      then: { required: ['a'] },
      else: { required: ['b'] },
      properties: { tags: { type: 'array', contains: { const: 'x' } } },
    });
    expect(validate({ kind: 'a', a: 1 })).toBe(true);
    expect(validate({ kind: 'a', b: 1 })).toBe(false);
    expect(validate({ kind: 'z', b: 1 })).toBe(true);
    expect(validate({ kind: 'z', a: 1 })).toBe(false);
    expect(validate({ b: 1, tags: ['y', 'x'] })).toBe(true);
    expect(validate({ b: 1, tags: ['y'] })).toBe(false);
    expect(validate({ b: 1, tags: [] })).toBe(false);
  });

  it('drops annotations, ts* hints, $id and propertyNames, and makes $refs local', () => {
    const dropped = new Map<string, number>();
    const out = translateToDraft04(
      {
        $schema: 'http://json-schema.org/draft-07/schema#',
        $id: 'https://example.com/root.json',
        $comment: 'c',
        type: 'object',
        propertyNames: { pattern: '^[a-z]+$' },
        properties: {
          a: { $ref: 'common.json#/definitions/x' },
          b: { $ref: 'https://example.com/user.json', description: 'ignored sibling' },
          c: { $ref: '#thing' },
          d: true,
          e: false,
        },
        additionalProperties: false,
        tsAdditionalProperties: false,
        definitions: {
          x: { type: 'string', examples: ['e'], readOnly: true },
          user: { $id: 'https://example.com/user.json', type: 'object', required: [] },
          thing: { $id: '#thing', type: 'integer' },
        },
      },
      dropped,
    );
    expect(out).toEqual({
      $schema: 'http://json-schema.org/draft-04/schema#',
      type: 'object',
      properties: {
        a: { $ref: '#/definitions/x' },
        b: { $ref: '#/definitions/user' },
        c: { $ref: '#/definitions/thing' },
        d: {},
        e: { not: {} },
      },
      additionalProperties: false,
      definitions: { x: { type: 'string' }, user: { type: 'object' }, thing: { type: 'integer' } },
    });
    expect(Object.fromEntries(dropped)).toEqual({ $schema: 1, $id: 3, $comment: 1, propertyNames: 1, tsAdditionalProperties: 1, examples: 1, readOnly: 1 });
    expect(() => translateToDraft04({ properties: { a: { $ref: 'https://elsewhere.example/x.json' } } })).toThrow(/cannot make \$ref/);
  });
});

describe('wrapAsDataEvent', () => {
  it('wraps a payload as a data change event', () => {
    const event = wrapAsDataEvent('pull_request', { action: 'opened' }, EID);
    expect(event).toMatchObject({ metadata: { eid: EID }, data_type: 'github.pull_request', data_op: 'C', data: { action: 'opened' } });
    const metadata = event.metadata;
    expect(isJsonObject(metadata) && typeof metadata.occurred_at === 'string' && !Number.isNaN(Date.parse(metadata.occurred_at))).toBe(true);
    expect(eventTypeName('a.b/c d')).toBe('github.a_b_c_d');
  });
});
