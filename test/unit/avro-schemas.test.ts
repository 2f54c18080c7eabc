import { describe, expect, it } from 'vitest';
import { envelopeSchemas } from '../../src/avro/envelope-schemas.js';

const PRIMITIVES = new Set(['null', 'boolean', 'int', 'long', 'float', 'double', 'bytes', 'string']);
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The problems of one Avro schema document, checked structurally (the `avsc` package is not a
 * dependency): every named type has a valid name and the broker's namespace and is defined once, before
 * use; every record has fields, each with a unique name and a type; references name defined types;
 * unions are non-empty, not nested, without duplicate primitives, and an optional field (a union with
 * "null") puts "null" first and defaults to null.
 */
function avroProblems(document: unknown): string[] {
  const problems: string[] = [];
  const defined = new Set<string>();

  const define = (node: Record<string, unknown>, at: string): void => {
    const { name, namespace } = node;
    if (typeof name !== 'string' || !NAME.test(name)) problems.push(`${at}: bad name ${String(name)}`);
    if (namespace !== 'io.broker') problems.push(`${at}: namespace ${String(namespace)}, want io.broker`);
    const full = `${String(namespace)}.${String(name)}`;
    if (defined.has(full)) problems.push(`${at}: ${full} defined twice`);
    defined.add(full);
  };

  const walk = (type: unknown, at: string): void => {
    if (typeof type === 'string') {
      if (!PRIMITIVES.has(type) && !defined.has(type) && !defined.has(`io.broker.${type}`)) problems.push(`${at}: unknown type ${type}`);
      return;
    }
    if (Array.isArray(type)) {
      if (type.length === 0) problems.push(`${at}: empty union`);
      const primitives = type.filter((branch): branch is string => typeof branch === 'string' && PRIMITIVES.has(branch));
      if (new Set(primitives).size !== primitives.length) problems.push(`${at}: duplicate branch in union`);
      type.forEach((branch: unknown, i) => {
        if (Array.isArray(branch)) problems.push(`${at}[${i}]: nested union`);
        walk(branch, `${at}[${i}]`);
      });
      return;
    }
    if (!isObject(type)) {
      problems.push(`${at}: not a schema`);
      return;
    }
    if (typeof type.logicalType === 'string') {
      if (typeof type.type !== 'string' || !PRIMITIVES.has(type.type)) problems.push(`${at}: logical type over ${String(type.type)}`);
      return;
    }
    switch (type.type) {
      case 'record': {
        define(type, at);
        const fields = type.fields;
        if (!Array.isArray(fields) || fields.length === 0) {
          problems.push(`${at}: record without fields`);
          return;
        }
        const names = new Set<string>();
        fields.forEach((field: unknown, i) => {
          const where = `${at}.fields[${i}]`;
          if (!isObject(field)) return void problems.push(`${where}: not an object`);
          if (typeof field.name !== 'string' || !NAME.test(field.name)) problems.push(`${where}: bad field name ${String(field.name)}`);
          else if (names.has(field.name)) problems.push(`${where}: duplicate field ${field.name}`);
          else names.add(field.name);
          if (!('type' in field)) return void problems.push(`${where}: field without type`);
          if (Array.isArray(field.type) && field.type.includes('null')) {
            if (field.type[0] !== 'null') problems.push(`${where}: "null" must be the first branch of an optional field`);
            if (field.default !== null) problems.push(`${where}: optional field needs default null`);
          }
          walk(field.type, `${at}.${String(field.name)}`);
        });
        return;
      }
      case 'enum': {
        define(type, at);
        const symbols = type.symbols;
        if (!Array.isArray(symbols) || symbols.length === 0 || !symbols.every((s) => typeof s === 'string' && NAME.test(s)) || new Set(symbols).size !== symbols.length) {
          problems.push(`${at}: bad enum symbols`);
        }
        return;
      }
      case 'array':
        return walk(type.items, `${at}.items`);
      case 'map':
        return walk(type.values, `${at}.values`);
      default:
        if (typeof type.type === 'string' && PRIMITIVES.has(type.type)) return;
        problems.push(`${at}: unknown type ${JSON.stringify(type.type)}`);
    }
  };

  walk(document, '$');
  if (!isObject(document) || document.type !== 'record') problems.push('$: the top level must be a record');
  return problems;
}

describe('Avro envelope schemas', () => {
  it('serves batch.publishing, batch.consumption and metadata, each at version 1', () => {
    expect([...envelopeSchemas.keys()].sort()).toEqual(['batch.consumption', 'batch.publishing', 'metadata']);
    for (const versions of envelopeSchemas.values()) expect(versions.map((v) => v.version)).toEqual(['1']);
  });

  for (const [name, versions] of envelopeSchemas) {
    for (const { version, avro_schema } of versions) {
      it(`${name} v${version} is structurally valid Avro (as served JSON)`, () => {
        expect(avroProblems(JSON.parse(JSON.stringify(avro_schema)))).toEqual([]);
      });
    }
  }

  it('the checker catches what it should', () => {
    const bad = {
      type: 'record',
      name: 'Bad',
      namespace: 'io.broker',
      fields: [
        { name: 'a', type: ['string', 'null'], default: null },
        { name: 'b', type: 'io.broker.Missing' },
        { name: 'c' },
        { name: 'd', type: { type: 'record', name: 'Empty', namespace: 'io.broker', fields: [] } },
        { name: 'e', type: ['null', 'string'] },
      ],
    };
    expect(avroProblems(bad)).toEqual([
      '$.fields[0]: "null" must be the first branch of an optional field',
      '$.b: unknown type io.broker.Missing',
      '$.fields[2]: field without type',
      '$.d: record without fields',
      '$.fields[4]: optional field needs default null',
    ]);
  });

  it('publishing metadata carries the producer fields; consumed metadata adds the service-set ones', () => {
    const fieldNames = (name: string) => {
      const schema = envelopeSchemas.get(name)?.[0]?.avro_schema;
      return schema?.fields.map((f) => f.name);
    };
    expect(fieldNames('metadata')).toEqual([
      'eid', 'occurred_at', 'event_type', 'received_at', 'version', 'partition', 'published_by', 'flow_id', 'parent_eids', 'span_ctx', 'partition_compaction_key',
    ]);
    const text = JSON.stringify(envelopeSchemas.get('batch.publishing'));
    for (const field of ['eid', 'occurred_at', 'event_type', 'partition', 'parent_eids', 'flow_id', 'span_ctx', 'partition_compaction_key']) expect(text).toContain(`"name":"${field}"`);
    for (const field of ['received_at', 'version', 'published_by']) expect(text).not.toContain(`"name":"${field}"`);
  });
});
