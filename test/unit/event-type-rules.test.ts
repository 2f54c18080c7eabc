import { describe, expect, it } from 'vitest';
import { buildEffectiveSchema } from '../../src/domain/schema/effective-schema.js';
import type { EventType } from '../../src/domain/event-type/event-type.js';
import { annotationProblems, MAX_ANNOTATIONS, validateAnnotations } from '../../src/domain/event-type/annotation-rules.js';
import { parseEventTypeInput } from '../../src/domain/event-type/event-type-input.js';
import {
  checkFieldsAgainstSchema,
  checkUpdate,
  cleanupPolicyProblems,
  enrichmentProblems,
  partitionCountOf,
  partitionKeyFieldsProblems,
  partitionStrategyProblems,
  retentionProblems,
  type EventTypeInput,
  type EventTypeLimits,
} from '../../src/domain/event-type/event-type-rules.js';
import type { JsonObject } from '../../src/domain/schema/json-schema-walk.js';

const HOUR = 3_600_000;
const limits: EventTypeLimits = {
  defaultPartitionCount: 1,
  maxPartitionCount: 8,
  defaultRetentionTimeMs: 48 * HOUR,
  minRetentionTimeMs: 3 * HOUR,
  maxRetentionTimeMs: 96 * HOUR,
};

type Body = Record<string, unknown>;

const userSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    opt: { type: 'string' },
    nested: { type: 'object', properties: { x: { type: 'string' }, y: { type: 'string' } }, required: ['x'] },
  },
  required: ['id', 'nested'],
};

/** A valid business event type body. */
function base(): Body {
  return {
    name: 'order.created',
    owning_application: 'shop',
    category: 'business',
    enrichment_strategies: ['metadata_enrichment'],
    schema: { type: 'json_schema', schema: JSON.stringify(userSchema) },
  };
}

/** The base body with top-level fields replaced (`undefined` removes a field). */
function body(patch: Body): Body {
  const out: Body = { ...base(), ...patch };
  for (const [key, value] of Object.entries(patch)) if (value === undefined) delete out[key];
  return out;
}

const undefinedCategory: Body = { category: 'undefined', enrichment_strategies: [] };
const attr = (data_type: string, value: string): Body => ({ data_type, value });
const authorization = (): Body => ({ admins: [attr('user', 'alice')], readers: [attr('*', '*')], writers: [attr('service', 'shop')] });

function mustParse(b: Body, isAdmin = false): EventTypeInput {
  const result = parseEventTypeInput(b, limits, isAdmin);
  if (!result.ok) throw new Error(`expected a valid body: ${result.details.join('; ')}`);
  return result.value;
}

function stored(b: Body): EventType {
  const input = mustParse(b);
  return { ...input, schema: { ...input.schema, version: '1.0.0', created_at: '2024-01-01T00:00:00Z' }, created_at: '2024-01-01T00:00:00Z', updated_at: '2024-01-01T00:00:00Z' };
}

describe('parseEventTypeInput: accepted bodies', () => {
  const cases: [string, Body, boolean, Partial<Record<keyof EventTypeInput, unknown>>][] = [
    [
      'minimal business body gets the defaults',
      base(),
      false,
      {
        name: 'order.created',
        owning_application: 'shop',
        category: 'business',
        enrichment_strategies: ['metadata_enrichment'],
        partition_strategy: 'random',
        compatibility_mode: 'forward',
        cleanup_policy: 'delete',
        options: { retention_time: 48 * HOUR },
        schema: { type: 'json_schema', schema: JSON.stringify(userSchema) },
      },
    ],
    ['name with dots, dashes, underscores and digits', body({ name: 'a.b-c_1.2x' }), false, { name: 'a.b-c_1.2x' }],
    ['name of 255 characters', body({ name: 'a'.repeat(255) }), false, { name: 'a'.repeat(255) }],
    ['category in any case is normalized', body({ category: 'BUSINESS' }), false, { category: 'business' }],
    ['data category with metadata_enrichment', body({ category: 'data' }), false, { category: 'data' }],
    ['undefined category with no enrichment field', body({ category: 'undefined', enrichment_strategies: undefined }), false, { category: 'undefined', enrichment_strategies: [] }],
    ['undefined category with empty enrichment', body(undefinedCategory), false, { enrichment_strategies: [] }],
    ['enrichment in any case is normalized', body({ enrichment_strategies: ['METADATA_Enrichment'] }), false, { enrichment_strategies: ['metadata_enrichment'] }],
    ['partition strategy hash with key fields', body({ partition_strategy: 'HASH', partition_key_fields: ['id', 'nested.x'] }), false, { partition_strategy: 'hash', partition_key_fields: ['id', 'nested.x'] }],
    ['user_defined for business', body({ partition_strategy: 'user_defined' }), false, { partition_strategy: 'user_defined' }],
    ['random with empty key fields counts them as absent', body({ partition_strategy: 'random', partition_key_fields: [] }), false, { partition_key_fields: [] }],
    ['user_defined with empty key fields counts them as absent', body({ partition_strategy: 'user_defined', partition_key_fields: [] }), false, { partition_key_fields: [] }],
    ['random without key fields gets []', body({ partition_strategy: 'random' }), false, { partition_key_fields: [] }],
    ['audience is kept', body({ audience: 'company-internal' }), false, { audience: 'company-internal' }],
    ['audience in any case is normalized', body({ audience: 'External-Partner' }), false, { audience: 'external-partner' }],
    ['audience null counts as absent', body({ audience: null }), false, { audience: undefined }],
    ['compatibility mode in any case', body({ compatibility_mode: 'NONE' }), false, { compatibility_mode: 'none' }],
    ['compatibility mode compatible', body({ compatibility_mode: 'compatible' }), false, { compatibility_mode: 'compatible' }],
    ['cleanup compact for business', body({ cleanup_policy: 'Compact' }), false, { cleanup_policy: 'compact' }],
    ['cleanup compact_and_delete for data', body({ category: 'data', cleanup_policy: 'compact_and_delete' }), false, { cleanup_policy: 'compact_and_delete' }],
    ['cleanup delete for undefined', body({ ...undefinedCategory, cleanup_policy: 'delete' }), false, { cleanup_policy: 'delete' }],
    ['schema type json-schema in any case', body({ schema: { type: 'JSON-Schema', schema: '{}' } }), false, { schema: { type: 'json_schema', schema: '{}' } }],
    [
      'default statistic',
      body({ default_statistic: { messages_per_minute: 100, message_size: 1000, read_parallelism: 2, write_parallelism: 3 } }),
      false,
      { default_statistic: { messages_per_minute: 100, message_size: 1000, read_parallelism: 2, write_parallelism: 3 } },
    ],
    ['retention inside the bounds', body({ options: { retention_time: 3 * HOUR } }), false, { options: { retention_time: 3 * HOUR } }],
    ['retention at the upper bound', body({ options: { retention_time: 96 * HOUR } }), false, { options: { retention_time: 96 * HOUR } }],
    ['retention beyond the bounds for an admin', body({ options: { retention_time: 1000 * HOUR } }), true, { options: { retention_time: 1000 * HOUR } }],
    ['retention below the bounds for an admin', body({ options: { retention_time: 1 } }), true, { options: { retention_time: 1 } }],
    ['options without retention gets the default', body({ options: {} }), false, { options: { retention_time: 48 * HOUR } }],
    ['null retention gets the default', body({ options: { retention_time: null } }), false, { options: { retention_time: 48 * HOUR } }],
    ['authorization', body({ authorization: authorization() }), false, { authorization: authorization() }],
    ['annotations', body({ annotations: { 'example.com/team': 'checkout', owner: 'x' } }), false, { annotations: { 'example.com/team': 'checkout', owner: 'x' } }],
    ['labels with an empty value', body({ labels: { 'example.com/tier': '', env: 'prod-1' } }), false, { labels: { 'example.com/tier': '', env: 'prod-1' } }],
    ['ordering key fields', body({ ordering_key_fields: ['metadata.occurred_at', 'id'] }), false, { ordering_key_fields: ['metadata.occurred_at', 'id'] }],
    ['event owner selector in any case', body({ event_owner_selector: { type: 'PATH', name: 'team', value: 'nested.x' } }), false, { event_owner_selector: { type: 'path', name: 'team', value: 'nested.x' } }],
    ['static event owner selector', body({ event_owner_selector: { type: 'static', name: 'team', value: 'checkout' } }), false, { event_owner_selector: { type: 'static', name: 'team', value: 'checkout' } }],
    ['unknown properties are ignored', body({ something_else: 1, created_at: 'x' }), false, { name: 'order.created' }],
    [
      'null optional fields count as absent',
      body({ partition_strategy: null, compatibility_mode: null, cleanup_policy: null, default_statistic: null, options: null, authorization: null, annotations: null, labels: null, ordering_key_fields: null, event_owner_selector: null }),
      false,
      { partition_strategy: 'random', compatibility_mode: 'forward', cleanup_policy: 'delete', options: { retention_time: 48 * HOUR }, authorization: undefined, annotations: undefined },
    ],
  ];

  it.each(cases)('%s', (_title, input, isAdmin, expected) => {
    const result = parseEventTypeInput(input, limits, isAdmin);
    expect(result.ok, result.ok ? '' : result.details.join('; ')).toBe(true);
    if (!result.ok) return;
    for (const [key, value] of Object.entries(expected)) expect(result.value[key as keyof EventTypeInput], key).toEqual(value);
  });

  it('leaves absent optional fields out of the value', () => {
    expect(Object.keys(mustParse(base())).sort()).toEqual(
      ['category', 'cleanup_policy', 'compatibility_mode', 'enrichment_strategies', 'name', 'options', 'owning_application', 'partition_key_fields', 'partition_strategy', 'schema'].sort(),
    );
  });
});

describe('parseEventTypeInput: rejected bodies', () => {
  const cases: [string, unknown, boolean, 400 | 422, string][] = [
    // body
    ['body is null', null, false, 400, 'Request body must be a JSON object'],
    ['body is an array', [base()], false, 400, 'Request body must be a JSON object'],
    ['body is a string', 'x', false, 400, 'Request body must be a JSON object'],
    // name
    ['name missing', body({ name: undefined }), false, 422, 'Field "name" must not be null'],
    ['name null', body({ name: null }), false, 422, 'Field "name" must not be null'],
    ['name a number', body({ name: 42 }), false, 400, 'Field "name" must be a string'],
    ['name empty', body({ name: '' }), false, 422, 'Field "name" must be between 1 and 255 characters long'],
    ['name of 256 characters', body({ name: 'a'.repeat(256) }), false, 422, 'Field "name" must be between 1 and 255 characters long'],
    ['name starting with a digit', body({ name: '1abc' }), false, 422, 'Field "name" must match the pattern'],
    ['name with an empty segment', body({ name: 'a..b' }), false, 422, 'Field "name" must match the pattern'],
    ['name segment starting with a dash', body({ name: 'a.-b' }), false, 422, 'Field "name" must match the pattern'],
    ['name with a slash', body({ name: 'a/b' }), false, 422, 'Field "name" must match the pattern'],
    // owning_application
    ['owning_application missing', body({ owning_application: undefined }), false, 422, 'Field "owning_application" must not be null'],
    ['owning_application empty', body({ owning_application: '' }), false, 422, 'Field "owning_application" must not be empty'],
    ['owning_application an object', body({ owning_application: {} }), false, 400, 'Field "owning_application" must be a string'],
    // category
    ['category missing', body({ category: undefined }), false, 422, 'Field "category" must not be null'],
    ['category unknown', body({ category: 'private' }), false, 400, 'Field "category" has unknown value "private"'],
    ['category a number', body({ category: 1 }), false, 400, 'Field "category" must be a string'],
    // enrichment_strategies
    ['enrichment unknown', body({ enrichment_strategies: ['metadata_enrichment', 'magic'] }), false, 422, 'unknown enrichment strategy "magic"'],
    ['enrichment duplicated', body({ enrichment_strategies: ['metadata_enrichment', 'METADATA_ENRICHMENT'] }), false, 422, 'must not contain "metadata_enrichment" more than once'],
    ['enrichment missing for business', body({ enrichment_strategies: undefined }), false, 422, 'must contain "metadata_enrichment" for category "business"'],
    ['enrichment empty for data', body({ category: 'data', enrichment_strategies: [] }), false, 422, 'must contain "metadata_enrichment" for category "data"'],
    ['enrichment for undefined', body({ category: 'undefined' }), false, 422, 'Field "enrichment_strategies" must be empty for category "undefined"'],
    ['enrichment not an array', body({ enrichment_strategies: 'metadata_enrichment' }), false, 400, 'Field "enrichment_strategies" must be an array of strings'],
    ['enrichment item a number', body({ enrichment_strategies: [1] }), false, 400, 'Field "enrichment_strategies[0]" must be a string'],
    // partition_strategy
    ['partition strategy unknown', body({ partition_strategy: 'round_robin' }), false, 422, 'Field "partition_strategy" has unknown partition strategy "round_robin"'],
    ['audience unknown', body({ audience: 'everyone' }), false, 422, 'Field "audience" has unknown audience "everyone"; allowed: component-internal, business-unit-internal, company-internal, external-partner, external-public'],
    ['audience not a string', body({ audience: 3 }), false, 400, 'Field "audience"'],
    ['partition strategy a number', body({ partition_strategy: 3 }), false, 400, 'Field "partition_strategy" must be a string'],
    ['user_defined for undefined', body({ ...undefinedCategory, partition_strategy: 'user_defined' }), false, 422, '"user_defined" is not available for category "undefined"'],
    // partition_key_fields
    ['hash without key fields', body({ partition_strategy: 'hash' }), false, 422, 'Field "partition_key_fields" must not be null when partition_strategy is "hash"'],
    ['hash with empty key fields', body({ partition_strategy: 'hash', partition_key_fields: [] }), false, 422, 'Field "partition_key_fields" must not be empty'],
    ['key fields with random', body({ partition_key_fields: ['id'] }), false, 422, 'must be absent when partition_strategy is "random"'],
    ['key fields with user_defined', body({ partition_strategy: 'user_defined', partition_key_fields: ['id'] }), false, 422, 'must be absent when partition_strategy is "user_defined"'],
    ['key field empty', body({ partition_strategy: 'hash', partition_key_fields: [''] }), false, 422, 'Field "partition_key_fields[0]" must not be empty'],
    ['key field with an empty segment', body({ partition_strategy: 'hash', partition_key_fields: ['a..b'] }), false, 422, 'without empty segments'],
    ['key fields not an array', body({ partition_strategy: 'hash', partition_key_fields: 'id' }), false, 400, 'Field "partition_key_fields" must be an array of strings'],
    // compatibility_mode
    ['compatibility mode unknown', body({ compatibility_mode: 'strict' }), false, 400, 'Field "compatibility_mode" has unknown value "strict"'],
    // cleanup_policy
    ['cleanup unknown', body({ cleanup_policy: 'purge' }), false, 400, 'Field "cleanup_policy" has unknown value "purge"'],
    ['compact for undefined', body({ ...undefinedCategory, cleanup_policy: 'compact' }), false, 422, '"compact" is not available for category "undefined"'],
    ['compact_and_delete for undefined', body({ ...undefinedCategory, cleanup_policy: 'compact_and_delete' }), false, 422, '"compact_and_delete" is not available for category "undefined"'],
    // schema
    ['schema missing', body({ schema: undefined }), false, 422, 'Field "schema" must not be null'],
    ['schema a string', body({ schema: '{}' }), false, 400, 'Field "schema" must be an object'],
    ['schema type avro', body({ schema: { type: 'avro_schema', schema: '{}' } }), false, 422, 'schema type "avro_schema" is not supported'],
    ['schema type unknown', body({ schema: { type: 'xml', schema: '{}' } }), false, 422, 'schema type "xml" is not supported'],
    ['schema type missing', body({ schema: { schema: '{}' } }), false, 422, 'Field "schema.type" must not be null'],
    ['schema text missing', body({ schema: { type: 'json_schema' } }), false, 422, 'Field "schema.schema" must not be null'],
    ['schema text an object', body({ schema: { type: 'json_schema', schema: {} } }), false, 400, 'Field "schema.schema" must be a string'],
    // default_statistic
    ['statistic zero', body({ default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: 0, write_parallelism: 1 } }), false, 422, 'Field "default_statistic.read_parallelism" must be an integer of at least 1'],
    ['statistic fraction', body({ default_statistic: { messages_per_minute: 1.5, message_size: 1, read_parallelism: 1, write_parallelism: 1 } }), false, 422, 'Field "default_statistic.messages_per_minute" must be an integer'],
    ['statistic field missing', body({ default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: 1 } }), false, 422, 'Field "default_statistic.write_parallelism" must not be null'],
    ['statistic field a string', body({ default_statistic: { messages_per_minute: 1, message_size: '1', read_parallelism: 1, write_parallelism: 1 } }), false, 400, 'Field "default_statistic.message_size" must be an integer'],
    ['statistic not an object', body({ default_statistic: [1] }), false, 400, 'Field "default_statistic" must be an object'],
    // options
    ['retention below the minimum', body({ options: { retention_time: 3 * HOUR - 1 } }), false, 422, 'Field "options.retention_time" must be between 10800000 and 345600000 milliseconds'],
    ['retention above the maximum', body({ options: { retention_time: 96 * HOUR + 1 } }), false, 422, 'Field "options.retention_time" must be between'],
    ['retention a fraction', body({ options: { retention_time: 4.5 * HOUR + 0.5 } }), false, 422, 'Field "options.retention_time" must be a positive integer'],
    ['retention zero for an admin', body({ options: { retention_time: 0 } }), true, 422, 'Field "options.retention_time" must be a positive integer'],
    ['retention a string', body({ options: { retention_time: '1000' } }), false, 400, 'Field "options.retention_time" must be an integer'],
    ['options not an object', body({ options: 5 }), false, 400, 'Field "options" must be an object'],
    // authorization
    ['authorization without readers', body({ authorization: { ...authorization(), readers: undefined } }), false, 422, 'Field "authorization.readers" must not be null'],
    ['authorization with empty admins', body({ authorization: { ...authorization(), admins: [] } }), false, 422, 'Field "authorization.admins" must contain at least one attribute'],
    ['authorization with a duplicate', body({ authorization: { ...authorization(), writers: [attr('user', 'bob'), attr('user', 'bob')] } }), false, 422, 'Field "authorization.writers" must not contain the attribute'],
    ['attribute with empty data_type', body({ authorization: { ...authorization(), readers: [attr('', 'x')] } }), false, 422, 'Field "authorization.readers[0].data_type" must not be empty'],
    ['attribute without value', body({ authorization: { ...authorization(), readers: [{ data_type: 'user' }] } }), false, 422, 'Field "authorization.readers[0].value" must not be null'],
    ['attribute not an object', body({ authorization: { ...authorization(), readers: ['user:bob'] } }), false, 400, 'Field "authorization.readers[0]" must be an object'],
    ['authorization list not an array', body({ authorization: { ...authorization(), admins: attr('user', 'x') } }), false, 400, 'Field "authorization.admins" must be an array'],
    ['authorization not an object', body({ authorization: true }), false, 400, 'Field "authorization" must be an object'],
    // annotations and labels (key and value rules in detail below)
    ['reserved annotation prefix', body({ annotations: { 'broker.io/x': 'y' } }), false, 422, 'Field "annotations" key "broker.io/x" uses the prefix "broker.io/"'],
    ['annotation value a number', body({ annotations: { a: 1 } }), false, 400, 'Field "annotations" value of key "a" must be a string'],
    ['annotations an array', body({ annotations: ['a'] }), false, 400, 'Field "annotations" must be an object'],
    ['label value too long', body({ labels: { a: 'b'.repeat(64) } }), false, 422, 'Field "labels" value of key "a" must be at most 63 characters'],
    // ordering_key_fields
    ['ordering key field empty', body({ ordering_key_fields: ['id', ''] }), false, 422, 'Field "ordering_key_fields[1]" must not be empty'],
    ['ordering key field with an empty segment', body({ ordering_key_fields: ['.id'] }), false, 422, 'without empty segments'],
    ['ordering key fields not an array', body({ ordering_key_fields: { a: 1 } }), false, 400, 'Field "ordering_key_fields" must be an array of strings'],
    // event_owner_selector
    ['selector type unknown', body({ event_owner_selector: { type: 'header', name: 'team', value: 'x' } }), false, 422, 'Field "event_owner_selector.type" has unknown value "header"'],
    ['selector type missing', body({ event_owner_selector: { name: 'team', value: 'x' } }), false, 422, 'Field "event_owner_selector.type" must not be null'],
    ['selector name missing', body({ event_owner_selector: { type: 'static', value: 'x' } }), false, 422, 'Field "event_owner_selector.name" must not be null'],
    ['selector value empty', body({ event_owner_selector: { type: 'static', name: 'team', value: '' } }), false, 422, 'Field "event_owner_selector.value" must not be empty'],
    ['selector not an object', body({ event_owner_selector: 'path' }), false, 400, 'Field "event_owner_selector" must be an object'],
    // mixing kinds: any 400-kind problem makes the whole answer 400
    ['a 400 problem beside a 422 problem', body({ category: 'nope', owning_application: '' }), false, 400, 'Field "owning_application" must not be empty'],
  ];

  it.each(cases)('%s', (_title, input, isAdmin, status, detail) => {
    const result = parseEventTypeInput(input, limits, isAdmin);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.status).toBe(status);
    expect(result.details.some((line) => line.includes(detail)), result.details.join('\n')).toBe(true);
  });

  it('collects every problem of the body\'s shape, one line each, with its JSON pointer; the rules run once the shape is right', () => {
    const result = parseEventTypeInput({ name: 5, category: 'nope', schema: { type: 'avro_schema', schema: '{}' }, partition_strategy: 'hash' }, limits, false);
    expect(result).toEqual({
      ok: false,
      status: 400,
      details: [
        'Field "owning_application" must not be null',
        'Field "name" must be a string',
        'Field "category" has unknown value "nope"; allowed: undefined, data, business',
        'Field "schema.type" schema type "avro_schema" is not supported; the supported type is "json_schema" (JSON Schema draft 04)',
      ],
      errors: [
        { status: 422, pointer: '/owning_application', detail: 'Field "owning_application" must not be null' },
        { status: 400, pointer: '/name', detail: 'Field "name" must be a string' },
        { status: 400, pointer: '/category', detail: 'Field "category" has unknown value "nope"; allowed: undefined, data, business' },
        { status: 422, pointer: '/schema/type', detail: 'Field "schema.type" schema type "avro_schema" is not supported; the supported type is "json_schema" (JSON Schema draft 04)' },
      ],
    });
    const shaped = parseEventTypeInput({ name: 'a.b', owning_application: 'app', category: 'business', enrichment_strategies: ['metadata_enrichment'], schema: { type: 'json_schema', schema: '{}' }, partition_strategy: 'hash' }, limits, false);
    expect(shaped).toEqual({ ok: false, status: 422, details: ['Field "partition_key_fields" must not be null when partition_strategy is "hash"'] });
  });
});

describe('validateAnnotations', () => {
  const fine: [string, unknown, 'annotations' | 'labels'][] = [
    ['absent', undefined, 'annotations'],
    ['null', null, 'labels'],
    ['empty map', {}, 'annotations'],
    ['name only', { 'a.b_c-d': 'v' }, 'annotations'],
    ['single-character name', { x: 'v' }, 'labels'],
    ['name of 63 characters', { ['a'.repeat(63)]: 'v' }, 'annotations'],
    ['prefix and name', { 'team.example.com/owner': 'v' }, 'annotations'],
    ['prefix of 253 characters', { [`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}/n`]: 'v' }, 'annotations'],
    ['subdomain of the reserved prefix', { 'x.broker.io/n': 'v' }, 'annotations'],
    ['annotation value of 1000 bytes', { n: 'é'.repeat(500) }, 'annotations'],
    ['empty annotation value', { n: '' }, 'annotations'],
    ['label value of 63 characters', { n: 'a'.repeat(63) }, 'labels'],
    ['label value with inner punctuation', { n: 'a-b_c.d' }, 'labels'],
    ['empty label value', { n: '' }, 'labels'],
  ];

  it.each(fine)('accepts %s', (_title, map, field) => {
    expect(validateAnnotations(map, field)).toEqual([]);
  });

  const broken: [string, unknown, 'annotations' | 'labels', 400 | 422, string][] = [
    ['a non-object map', 'a=b', 'annotations', 400, 'Field "annotations" must be an object of string values'],
    ['a non-string value', { n: true }, 'labels', 400, 'Field "labels" value of key "n" must be a string'],
    ['an empty key', { '': 'v' }, 'annotations', 422, 'must have a name of 1 to 63 characters'],
    ['a name of 64 characters', { ['a'.repeat(64)]: 'v' }, 'annotations', 422, 'must have a name of 1 to 63 characters'],
    ['a name starting with a dash', { '-a': 'v' }, 'annotations', 422, 'must have a name that begins and ends with an alphanumeric character'],
    ['a name ending with a dot', { 'a.': 'v' }, 'labels', 422, 'must have a name that begins and ends with an alphanumeric character'],
    ['a name with a space', { 'a b': 'v' }, 'annotations', 422, 'must have a name that begins and ends'],
    ['an empty name after the prefix', { 'example.com/': 'v' }, 'annotations', 422, 'must have a name of 1 to 63 characters'],
    ['two slashes', { 'example.com/a/b': 'v' }, 'annotations', 422, 'must have a name that begins and ends'],
    ['an empty prefix', { '/a': 'v' }, 'annotations', 422, 'must have a prefix of 1 to 253 characters'],
    ['a prefix of 254 characters', { [`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(62)}/n`]: 'v' }, 'annotations', 422, 'must have a prefix of 1 to 253 characters'],
    ['an upper-case prefix', { 'Example.com/a': 'v' }, 'annotations', 422, 'must have a prefix that is a DNS subdomain'],
    ['a prefix label of 64 characters', { [`${'a'.repeat(64)}.com/a`]: 'v' }, 'annotations', 422, 'must have a prefix that is a DNS subdomain'],
    ['a prefix with an empty label', { 'example..com/a': 'v' }, 'annotations', 422, 'must have a prefix that is a DNS subdomain'],
    ['a prefix label ending with a dash', { 'example-.com/a': 'v' }, 'annotations', 422, 'must have a prefix that is a DNS subdomain'],
    ['the reserved prefix', { 'broker.io/owner': 'v' }, 'annotations', 422, 'uses the prefix "broker.io/", which is reserved for the service'],
    ['the reserved prefix on labels', { 'broker.io/owner': 'v' }, 'labels', 422, 'uses the prefix "broker.io/"'],
    ['an annotation value of 1001 bytes', { n: `${'é'.repeat(500)}x` }, 'annotations', 422, 'must be at most 1000 bytes (UTF-8)'],
    ['a label value of 64 characters', { n: 'a'.repeat(64) }, 'labels', 422, 'must be at most 63 characters'],
    ['a label value starting with a dash', { n: '-a' }, 'labels', 422, 'must be empty or begin and end with an alphanumeric character'],
    ['a label value with a slash', { n: 'a/b' }, 'labels', 422, 'must be empty or begin and end'],
  ];

  it.each(broken)('rejects %s', (_title, map, field, status, detail) => {
    const details = validateAnnotations(map, field);
    expect(details).toHaveLength(1);
    expect(details[0]).toContain(detail);
    expect(annotationProblems(map, field).map((problem) => problem.status)).toEqual([status]);
  });

  it(`refuses a map of more than ${MAX_ANNOTATIONS} entries with one 422 line, without looking at the entries`, () => {
    const fits = Object.fromEntries(Array.from({ length: MAX_ANNOTATIONS }, (_, i) => [`k${i}`, 'v']));
    expect(annotationProblems(fits, 'annotations')).toEqual([]);
    const tooMany = Object.fromEntries(Array.from({ length: MAX_ANNOTATIONS + 1 }, (_, i) => [i === 0 ? '-bad key' : `k${i}`, i === 1 ? 7 : 'v']));
    expect(annotationProblems(tooMany, 'labels')).toEqual([{ status: 422, detail: `Field "labels" has ${MAX_ANNOTATIONS + 1} entries; at most ${MAX_ANNOTATIONS} are allowed (entries per map)` }]);
  });
});

describe('partitionCountOf', () => {
  const statistic = (read: number, write: number): Body => ({ default_statistic: { messages_per_minute: 10, message_size: 10, read_parallelism: read, write_parallelism: write } });
  const cases: [string, Body, EventTypeLimits, number][] = [
    ['installation default without a statistic', {}, limits, 1],
    ['another installation default', {}, { ...limits, defaultPartitionCount: 4 }, 4],
    ['write parallelism wins', statistic(2, 3), limits, 3],
    ['read parallelism wins', statistic(5, 1), limits, 5],
    ['capped by the maximum', statistic(20, 1), limits, 8],
    ['at least one', statistic(1, 1), limits, 1],
  ];

  it.each(cases)('%s', (_title, patch, installation, expected) => {
    expect(partitionCountOf(mustParse(body(patch)), installation)).toBe(expected);
  });
});

describe('checkFieldsAgainstSchema', () => {
  function effective(input: EventTypeInput): JsonObject {
    const submitted = JSON.parse(input.schema.schema) as JsonObject;
    const result = buildEffectiveSchema(submitted, input.category, input.cleanup_policy, input.compatibility_mode);
    if (!result.ok) throw new Error(result.reason);
    return result.schema;
  }
  const hash = (...fields: string[]): Body => ({ partition_strategy: 'hash', partition_key_fields: fields });
  const data: Body = { category: 'data' };

  const cases: [string, Body, string[]][] = [
    ['business key field required at top level', hash('id'), []],
    ['business nested required key field', hash('id', 'nested.x'), []],
    ['business key field not required', hash('opt'), ['Field "partition_key_fields" entry "opt" must be a required field of the schema']],
    ['business nested key field not required', hash('nested.y'), ['Field "partition_key_fields" entry "nested.y" must be a required field of the schema']],
    ['business key field not declared', hash('nope'), ['Field "partition_key_fields" entry "nope" is not declared in the schema']],
    ['data key field relative to data', { ...data, ...hash('id') }, []],
    ['data key field given with the data prefix', { ...data, ...hash('data.id') }, ['Field "partition_key_fields" entry "data.id" is not declared in the schema (relative to "data")']],
    ['data key field not required', { ...data, ...hash('opt') }, ['Field "partition_key_fields" entry "opt" must be a required field of the schema (relative to "data")']],
    ['undefined key field over the submitted schema', { ...undefinedCategory, ...hash('nested.x') }, []],
    ['undefined key field not declared', { ...undefinedCategory, ...hash('metadata.eid') }, ['Field "partition_key_fields" entry "metadata.eid" is not declared in the schema']],
    ['ordering key fields over the whole business event', { ordering_key_fields: ['metadata.occurred_at', 'opt'] }, []],
    ['ordering key field not declared', { ordering_key_fields: ['id', 'nope.x'] }, ['Field "ordering_key_fields" entry "nope.x" is not declared in the schema']],
    ['ordering key fields over the whole data event', { ...data, ordering_key_fields: ['data.opt', 'data_op'] }, []],
    ['data ordering key field without the data prefix', { ...data, ordering_key_fields: ['opt'] }, ['Field "ordering_key_fields" entry "opt" is not declared in the schema']],
    ['no key or ordering fields', {}, []],
  ];

  it.each(cases)('%s', (_title, patch, expected) => {
    const input = mustParse(body(patch));
    expect(checkFieldsAgainstSchema(input, effective(input))).toEqual(expected);
  });
});

describe('checkUpdate', () => {
  const statistic = { messages_per_minute: 10, message_size: 100, read_parallelism: 2, write_parallelism: 2 };
  const selector = { type: 'path', name: 'team', value: 'nested.x' };

  const cases: [string, Body, Body, boolean, string[]][] = [
    ['an identical body', {}, {}, false, []],
    ['a changed name', {}, { name: 'order.updated' }, false, ['Changing the event type name is not allowed']],
    ['a changed category', {}, { category: 'data' }, false, ['Field "category" cannot be changed (from "business" to "data")']],
    ['a changed owning application', {}, { owning_application: 'billing' }, false, []],
    ['random to hash with key fields', {}, { partition_strategy: 'hash', partition_key_fields: ['id'] }, false, []],
    ['random to user_defined', {}, { partition_strategy: 'user_defined' }, false, []],
    ['hash to random', { partition_strategy: 'hash', partition_key_fields: ['id'] }, {}, false, ['Field "partition_strategy" can only be changed from "random", not from "hash"']],
    ['user_defined to hash', { partition_strategy: 'user_defined' }, { partition_strategy: 'hash', partition_key_fields: ['id'] }, true, ['Field "partition_strategy" can only be changed from "random", not from "user_defined"']],
    ['hash with other key fields', { partition_strategy: 'hash', partition_key_fields: ['id'] }, { partition_strategy: 'hash', partition_key_fields: ['nested.x'] }, false, ['Field "partition_key_fields" can only be changed together with partition_strategy']],
    ['hash with the same key fields', { partition_strategy: 'hash', partition_key_fields: ['id'] }, { partition_strategy: 'hash', partition_key_fields: ['id'] }, false, []],
    ['cleanup delete to compact_and_delete', {}, { cleanup_policy: 'compact_and_delete' }, false, []],
    ['cleanup delete to compact', {}, { cleanup_policy: 'compact' }, false, ['Field "cleanup_policy" can only be changed from "delete" to "compact_and_delete", not from "delete" to "compact"']],
    ['cleanup compact_and_delete to delete', { cleanup_policy: 'compact_and_delete' }, {}, true, ['Field "cleanup_policy" can only be changed from "delete" to "compact_and_delete", not from "compact_and_delete" to "delete"']],
    ['the same statistic', { default_statistic: statistic }, { default_statistic: statistic }, false, []],
    ['no statistic in the update', { default_statistic: statistic }, {}, false, []],
    ['a changed statistic', { default_statistic: statistic }, { default_statistic: { ...statistic, write_parallelism: 4 } }, true, ['Field "default_statistic" cannot be changed']],
    ['a statistic added later', {}, { default_statistic: statistic }, false, ['Field "default_statistic" cannot be changed']],
    ['compatibility forward to compatible', {}, { compatibility_mode: 'compatible' }, false, []],
    ['compatibility none to forward', { compatibility_mode: 'none' }, {}, false, []],
    ['compatibility forward to none', {}, { compatibility_mode: 'none' }, false, ['Field "compatibility_mode" can only become stricter (none, forward, compatible), not change from "forward" to "none"']],
    ['compatibility compatible to forward', { compatibility_mode: 'compatible' }, {}, false, ['Field "compatibility_mode" can only become stricter (none, forward, compatible), not change from "compatible" to "forward"']],
    ['compatibility loosened by an admin', { compatibility_mode: 'compatible' }, { compatibility_mode: 'none' }, true, []],
    ['authorization added', {}, { authorization: authorization() }, false, []],
    ['authorization changed', { authorization: authorization() }, { authorization: { ...authorization(), readers: [attr('user', 'carol')] } }, false, []],
    ['authorization removed', { authorization: authorization() }, {}, true, ['Field "authorization" cannot be removed once set']],
    ['owner selector added', {}, { event_owner_selector: selector }, false, []],
    ['owner selector kept', { event_owner_selector: selector }, { event_owner_selector: selector }, false, []],
    ['owner selector removed', { event_owner_selector: selector }, {}, true, ['Field "event_owner_selector" cannot be removed once set']],
    ['owner selector changed', { event_owner_selector: selector }, { event_owner_selector: { ...selector, value: 'id' } }, true, ['Field "event_owner_selector" cannot be changed once set']],
    ['retention, ordering key fields, annotations and labels changed', {}, { options: { retention_time: 4 * HOUR }, ordering_key_fields: ['id'], annotations: { a: 'b' }, labels: { c: 'd' } }, false, []],
    ['several problems at once', {}, { name: 'other', category: 'data', cleanup_policy: 'compact' }, false, [
      'Changing the event type name is not allowed',
      'Field "category" cannot be changed (from "business" to "data")',
      'Field "cleanup_policy" can only be changed from "delete" to "compact_and_delete", not from "delete" to "compact"',
    ]],
  ];

  it.each(cases)('%s', (_title, before, after, isAdmin, expected) => {
    expect(checkUpdate(stored(body(before)), mustParse(body(after)), isAdmin)).toEqual(expected);
  });

  it('allows enrichment strategies to change within the category rules (undefined has none)', () => {
    const existing = stored(body(undefinedCategory));
    expect(checkUpdate(existing, mustParse(body({ ...undefinedCategory, enrichment_strategies: undefined })), false)).toEqual([]);
  });
});

/** The cross-field rules a schema cannot say, each alone: 422 problems, empty when the rule holds. */
describe('cross-field rules', () => {
  const details = (problems: readonly { status: number; detail: string }[]) => problems.map((problem) => `${problem.status} ${problem.detail}`);

  it.each([
    ['undefined', [], []],
    ['undefined', ['metadata_enrichment'], ['422 Field "enrichment_strategies" must be empty for category "undefined"']],
    ['data', ['METADATA_ENRICHMENT'], []],
    ['business', [], ['422 Field "enrichment_strategies" must contain "metadata_enrichment" for category "business"']],
    [undefined, ['x'], []],
  ] as const)('enrichment strategies of category %s: %j', (category, requested, expected) => {
    expect(details(enrichmentProblems(category, requested))).toEqual(expected);
  });

  it('user_defined partitioning needs a category other than undefined', () => {
    expect(details(partitionStrategyProblems('undefined', 'user_defined'))).toEqual(['422 Field "partition_strategy" "user_defined" is not available for category "undefined"']);
    expect(partitionStrategyProblems('data', 'user_defined')).toEqual([]);
    expect(partitionStrategyProblems('undefined', 'hash')).toEqual([]);
  });

  it.each([
    ['hash', undefined, false, ['422 Field "partition_key_fields" must not be null when partition_strategy is "hash"']],
    ['hash', [], true, ['422 Field "partition_key_fields" must not be empty when partition_strategy is "hash"']],
    ['hash', undefined, true, []],
    ['hash', ['id'], true, []],
    ['random', ['id'], true, ['422 Field "partition_key_fields" must be absent when partition_strategy is "random"; it is only used with "hash"']],
    ['random', [], true, []],
    [undefined, ['id'], true, []],
  ] as const)('partition_key_fields with %s: %j (sent: %s)', (strategy, keyFields, sent, expected) => {
    expect(details(partitionKeyFieldsProblems(strategy, keyFields, sent))).toEqual(expected);
  });

  it('compaction needs a category other than undefined', () => {
    expect(details(cleanupPolicyProblems('undefined', 'compact'))).toEqual(['422 Field "cleanup_policy" "compact" is not available for category "undefined"']);
    expect(cleanupPolicyProblems('undefined', 'delete')).toEqual([]);
    expect(cleanupPolicyProblems('business', 'compact_and_delete')).toEqual([]);
  });

  it('retention within the bounds unless admin', () => {
    expect(details(retentionProblems(HOUR, limits, false))).toEqual([`422 Field "options.retention_time" must be between ${3 * HOUR} and ${96 * HOUR} milliseconds`]);
    expect(retentionProblems(HOUR, limits, true)).toEqual([]);
    expect(retentionProblems(3 * HOUR, limits, false)).toEqual([]);
  });
});
