import { describe, expect, it } from 'vitest';
import run from '../../workers/publish-worker.js';
import { matchEvents } from '../../workers/filter-events.js';
import { compileSchema, createSchemaCompiler } from '../../src/domain/schema/schema-compiler.js';
import { filterSpecOf } from '../../src/domain/subscription/event-filter.js';
import { EventFilters, joinSegments } from '../../src/services/event-filters.js';
import type { BrokerConfig } from '../../src/config/config-schema.js';
import type { FilterMatches, FilterNeeded, FilterTask } from '../../workers/publish-protocol.js';

/**
 * The worker side of consumer filters (docs/consuming.md "Filters"): stored texts joined by `\n` come in,
 * one match flag per event goes out; the filter's text travels only to a thread that asks for it.
 */

const filterText = '{"properties":{"metadata":{"properties":{"event_type":{"enum":["a"]}}},"n":{"minimum":10}},"required":["n"]}';
const event = (type: string, n?: number): string => JSON.stringify({ metadata: { eid: 'e', event_type: type, occurred_at: '2026-01-01T00:00:00Z' }, ...(n === undefined ? {} : { n }) });
const encode = (texts: string[]): Uint8Array => new Uint8Array(Buffer.from(texts.join('\n')));

/** Unwraps what `run` hands piscina (a value marked for transfer) into the answer it carries. */
function answer(result: unknown): FilterMatches | FilterNeeded {
  const symbols = Object.getOwnPropertySymbols(result);
  for (const symbol of symbols) {
    const value = (result as Record<symbol, unknown>)[symbol];
    if (value !== null && typeof value === 'object' && 'kind' in value) return value as FilterMatches | FilterNeeded;
  }
  return result as FilterMatches | FilterNeeded;
}

describe('filter tasks', () => {
  const spec = filterSpecOf(filterText);
  if (spec === undefined) throw new Error('the filter text is JSON');

  it('names a filter by its canonical text, whatever the key order and spacing', () => {
    const respelled = filterSpecOf('{ "required": ["n"], "properties": {"n": {"minimum": 10}, "metadata": {"properties": {"event_type": {"enum": ["a"]}}}} }');
    expect(respelled?.key).toBe(spec.key);
    expect(spec.key).toMatch(/^filter:[0-9a-f]{64}$/);
    expect(filterSpecOf('{"required":["m"]}')?.key).not.toBe(spec.key);
    expect(filterSpecOf('{not json')).toBeUndefined();
  });

  it('asks for the filter text once, then flags each event, metadata included', () => {
    const texts = [event('a', 10), event('b', 10), event('a', 9), event('a'), event('a', 11)];
    const lean: FilterTask = { kind: 'filter', filterKey: spec.key, data: encode(texts), count: texts.length };
    const first = answer(run(lean));
    expect(first.kind).toBe('filter-needed');
    if (first.kind !== 'filter-needed') return;
    expect(Buffer.from(first.data).toString()).toBe(texts.join('\n'));
    const full = answer(run({ ...lean, filter: spec.text, data: first.data }));
    expect(full.kind).toBe('matches');
    if (full.kind === 'matches') expect([...full.flags]).toEqual([1, 0, 0, 0, 1]);
    // The thread holds the validator now: the lean task is answered at once.
    const again = answer(run({ ...lean, data: encode(texts) }));
    expect(again.kind === 'matches' ? [...again.flags] : undefined).toEqual([1, 0, 0, 0, 1]);
  });

  it('flags a text that does not parse, and missing texts, as no match', () => {
    const validate = compileSchema(createSchemaCompiler(), JSON.parse(filterText) as Record<string, never>);
    expect([...matchEvents(validate, encode([event('a', 12), '{"n":', event('a', 13)]), 4)]).toEqual([1, 0, 1, 0]);
    expect([...matchEvents(validate, new Uint8Array(0), 1)]).toEqual([0]);
  });

  it('joins segments of several events each into one buffer of its own', () => {
    const one = Buffer.from(`${event('a', 10)}\n${event('b', 1)}`);
    const two = Buffer.from(event('a', 20));
    const joined = joinSegments([
      { first: 1, count: 2, data: one },
      { first: 3, count: 1, data: two },
    ]);
    expect(Buffer.from(joined).toString()).toBe(`${one.toString()}\n${two.toString()}`);
    expect(joined.byteOffset).toBe(0);
    expect(joined.buffer.byteLength).toBe(joined.byteLength);
  });
});

describe('EventFilters.check', () => {
  const config = { maxSchemaBytes: 1000, schemaMaxApplicationsPerValue: 1000, schemaMaxEnumValues: 1000, schemaMaxUniqueItems: 1000, schemaCompileTimeoutMs: 1000 } as BrokerConfig['eventTypes'];

  it('runs the guard and the compilation once per distinct filter, refuses what they refuse, and checks the size first', async () => {
    const calls: string[] = [];
    const pool = {
      guardSchema: (text: string) => {
        calls.push(`guard ${text}`);
        return Promise.resolve(text.includes('"bad"') ? { ok: false as const, reason: 'bad keyword' } : { ok: true as const });
      },
      compile: (text: string) => {
        calls.push(`compile ${text}`);
        return Promise.resolve({ ok: true as const, cost: { applicationsPerValue: 1, compileMs: 1 } });
      },
      matchFilter: () => Promise.resolve(new Uint8Array(0)),
    };
    const filters = new EventFilters(pool, config);
    const spec = await filters.check('{ "required": ["n"] }', 'Field "filter"');
    expect(spec.text).toBe('{"required":["n"]}');
    await filters.check('{"required":["n"]}', 'Field "filter"');
    expect(calls).toEqual(['guard {"required":["n"]}', 'compile {"required":["n"]}']);
    await expect(filters.check('{"bad":1}', 'Query parameter "filter"')).rejects.toThrow('Query parameter "filter" is not a usable filter: bad keyword');
    await expect(filters.check('{"bad":1}', 'Field "filter"')).rejects.toThrow('bad keyword');
    await expect(filters.check(`{"description":"${'x'.repeat(1000)}"}`, 'Field "filter"')).rejects.toThrow('more than the limit of 1000 bytes');
    await expect(filters.check('{"a":', 'Field "filter"')).rejects.toThrow('it is not valid JSON');
    expect(calls.filter((c) => c.startsWith('guard'))).toHaveLength(3);
  });
});
