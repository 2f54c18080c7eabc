import { randomUUID } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { seeded } from '../support/seeded.js';
import { BrokerError } from '../../src/errors/catalog.js';
import { PARSE_PIECE_BYTES, parseEventBatch } from '../../src/domain/batch/event-batch-parse.js';
import { MAX_JSON_DEPTH, nestingBeyond, parseUntrustedJson } from '../../src/domain/json/json-limits.js';
import { findPrototypeKey } from '../../src/domain/json/prototype-keys.js';
import { parseJson } from '../../src/http/body-reader.js';
import { buildPublishSpec } from '../../src/services/event-types/event-type-cache.js';
import { processBatch } from '../../workers/publish-batch.js';
import { ValidatorCache } from '../../workers/validator-cache.js';
import { eventTypeRecord } from '../support/fixtures.js';

/**
 * The JSON limits of request bodies (docs/security.md "Hostile input"; src/domain/json/json-limits.ts): nesting depth, strict
 * UTF-8, and keys that could change prototypes — through the parser itself, the server's `parseJson`
 * (control-plane bodies) and the publish worker's `processBatch` (event batches).
 */

const bytes = (text: string): Buffer => Buffer.from(text);
const arrays = (depth: number, inner = ''): string => '['.repeat(depth) + inner + ']'.repeat(depth);
const objects = (depth: number): string => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);

/** Object.prototype has no enumerable or own property a hostile body could have added. */
function expectPrototypeUntouched(): void {
  expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(Object.getOwnPropertyNames(Object.getPrototypeOf({}) as object).sort());
  const probe: Record<string, unknown> = {};
  for (const key of ['polluted', 'isAdmin', 'flow_id', 'partition', 'event_type']) expect(probe[key]).toBeUndefined();
  expect(Object.keys(Object.prototype)).toEqual([]);
}

describe('nestingBeyond', () => {
  it.each([
    ['arrays', arrays],
    ['objects', objects],
    ['mixed', (d: number) => '[{"a":'.repeat(d / 2) + '1' + '}]'.repeat(d / 2)],
  ])('accepts %s nested exactly MAX_JSON_DEPTH levels and refuses one more', (_what, nest) => {
    expect(nestingBeyond(bytes(nest(MAX_JSON_DEPTH)), MAX_JSON_DEPTH)).toBe(-1);
    expect(nestingBeyond(bytes(nest(MAX_JSON_DEPTH + 2)), MAX_JSON_DEPTH)).toBeGreaterThan(0);
  });

  it('reports the offset of the first bracket beyond the limit', () => {
    expect(nestingBeyond(bytes(' ' + arrays(2000)), 1000)).toBe(1001);
  });

  it('ignores brackets inside strings, escaped quotes and escaped backslashes included', () => {
    const hidden = `"${'['.repeat(5000)}"`;
    expect(nestingBeyond(bytes(`[${hidden}]`), 10)).toBe(-1);
    expect(nestingBeyond(bytes(`["\\"${'['.repeat(5000)}"]`), 10)).toBe(-1);
    // `\\` ends in an escaped backslash, so the quote after it closes the string and the brackets count.
    expect(nestingBeyond(bytes(`["\\\\", ${arrays(50)}]`), 10)).toBeGreaterThan(0);
  });

  it('does not scan text too short to nest that deep, and gives up on an unterminated string', () => {
    expect(nestingBeyond(bytes('[[[[[['), 3)).toBe(-1);
    expect(nestingBeyond(bytes('[[[[[[[[[[[[[[[['), 3)).toBe(3);
    expect(nestingBeyond(bytes(`"${'['.repeat(100)}`), 3)).toBe(-1);
  });

  it('works on a Uint8Array view into a larger buffer', () => {
    const whole = Buffer.from(`xxxx${arrays(100)}yyyy`);
    const view = new Uint8Array(whole.buffer, whole.byteOffset + 4, whole.byteLength - 8);
    expect(nestingBeyond(view, 50)).toBe(50);
    expect(nestingBeyond(view, 100)).toBe(-1);
  });

  it('scans a 1,000,000-level body without parsing it', () => {
    const parse = vi.spyOn(JSON, 'parse');
    try {
      const result = parseUntrustedJson(bytes(arrays(1_000_000)));
      expect(result).toEqual({ ok: false, reason: `the body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels (at byte ${MAX_JSON_DEPTH})` });
      expect(parse).not.toHaveBeenCalled();
    } finally {
      parse.mockRestore();
    }
  });
});

describe('parseUntrustedJson', () => {
  it('parses valid UTF-8 JSON, multi-byte characters and a leading BOM included', () => {
    expect(parseUntrustedJson(bytes('{"name":"Zürich 東京 🎉"}'))).toEqual({ ok: true, value: { name: 'Zürich 東京 🎉' } });
    expect(parseUntrustedJson(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes('[1]')]))).toEqual({ ok: true, value: [1] });
  });

  it.each([
    ['a stray continuation byte', [0x80]],
    ['an invalid lead byte', [0xff]],
    ['an overlong "/"', [0xc0, 0xaf]],
    ['an overlong NUL', [0xc0, 0x80]],
    ['a UTF-8 encoded surrogate (CESU-8)', [0xed, 0xa0, 0x80]],
    ['a truncated 3-byte sequence', [0xe2, 0x82]],
    ['a code point above U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
    ['Latin-1 "é"', [0xe9]],
  ])('refuses %s inside a string', (_what, sequence) => {
    const body = Buffer.concat([bytes('{"a":"x'), Buffer.from(sequence), bytes('y"}')]);
    expect(parseUntrustedJson(body)).toEqual({ ok: false, reason: 'the body is not valid UTF-8' });
  });

  it('refuses invalid JSON with the parser message', () => {
    const result = parseUntrustedJson(bytes('[{"a":'));
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toMatch(/^the body is not valid JSON: /);
  });

  it('keeps __proto__ as a plain own property unless told to refuse it', () => {
    const result = parseUntrustedJson(bytes('{"__proto__":{"polluted":true},"a":{"constructor":{"prototype":{"isAdmin":true}}}}'));
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const value = result.value as Record<string, unknown>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.hasOwn(value, '__proto__')).toBe(true);
    expect((value as { polluted?: unknown }).polluted).toBeUndefined();
    expectPrototypeUntouched();
  });

  it.each([
    ['__proto__ at the top', '{"__proto__":{"polluted":true}}', '#/__proto__'],
    ['__proto__ nested in an array', '{"items":[{"ok":1},{"__proto__":{"polluted":true}}]}', '#/items/1/__proto__'],
    ['__proto__ spelled with \\u escapes', '{"a":{"\\u005f\\u005fproto\\u005f\\u005f":{"polluted":true}}}', '#/a/__proto__'],
    ['__proto__ holding a scalar', '{"__proto__":null}', '#/__proto__'],
    ['constructor.prototype', '{"constructor":{"prototype":{"isAdmin":true}}}', '#/constructor/prototype'],
  ])('refuses %s when asked', (_what, text, pointer) => {
    const result = parseUntrustedJson(bytes(text), { refusePrototypeKeys: true });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason.startsWith(`${pointer}: the body must not contain the key`)).toBe(true);
    expectPrototypeUntouched();
  });

  it('accepts constructor and prototype keys that cannot reach a prototype', () => {
    const text = '{"constructor":"Maker Ltd","prototype":{"version":1},"x":{"constructor":{"name":"n"}},"s":"__proto__"}';
    expect(parseUntrustedJson(bytes(text), { refusePrototypeKeys: true }).ok).toBe(true);
  });
});

describe('findPrototypeKey', () => {
  it('walks iteratively, so a deep value cannot overflow the stack', () => {
    let deep: unknown = { name: '__proto__' };
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(findPrototypeKey(deep)).toBeUndefined();
    expect(findPrototypeKey([[[JSON.parse('{"a/b~c":{"__proto__":1}}')]]])).toBe('#/0/0/0/a~1b~0c/__proto__');
  });
});

describe('parseJson (control-plane request bodies)', () => {
  it.each([
    ['invalid UTF-8', Buffer.from([0x7b, 0xff, 0x7d])],
    ['deep nesting', bytes(`{"name":${arrays(1000)}}`)],
    ['a __proto__ key', bytes('{"name":"x","options":{"__proto__":{"retention_time":1}}}')],
    ['not JSON', bytes('{name:')],
  ])('answers 400 for %s', (_what, body) => {
    let thrown: unknown;
    try {
      parseJson(body);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(BrokerError);
    expect((thrown as BrokerError).status).toBe(400);
    expect((thrown as BrokerError).code).toBe('BAD_REQUEST');
    expectPrototypeUntouched();
  });
});

describe('parseEventBatch in pieces (bodies over PARSE_PIECE_BYTES)', () => {
  const spaces = [' ', '\t', '\n', '\r\n', '  '];
  const texts = ['plain', 'Grüße', '日本語のテキスト', 'emoji 🎉', 'quote \\" and brace } { ] [', 'back\\\\slash'];

  /** A batch body of `count` events with random whitespace around its separators; one event may be large. */
  function body(random: () => number, count: number, large: boolean): string {
    const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;
    const ws = () => (random() < 0.5 ? '' : pick(spaces));
    const events = Array.from({ length: count }, (_, i) => {
      const note = large && i === Math.floor(count / 2) ? 'x'.repeat(PARSE_PIECE_BYTES * 2) : pick(texts).repeat(1 + Math.floor(random() * 40));
      return `{${ws()}"metadata":${ws()}{"eid":"${randomUUID()}","occurred_at":"2026-01-01T00:00:00Z"},"n":${Math.floor(random() * 1e6)},"note":"${note}","list":[1,${ws()}{"a":null}]}`;
    });
    return `${ws()}[${ws()}${events.map((e) => e + ws()).join(`,${ws()}`)}]${ws()}`;
  }

  it('gives exactly what JSON.parse of the whole body gives, parsing it in several pieces', () => {
    const random = seeded(17);
    for (let round = 0; round < 20; round++) {
      const text = body(random, 200 + Math.floor(random() * 400), round % 4 === 0);
      expect(Buffer.byteLength(text)).toBeGreaterThan(PARSE_PIECE_BYTES * 2);
      const parse = vi.spyOn(JSON, 'parse');
      let result: ReturnType<typeof parseEventBatch>;
      try {
        result = parseEventBatch(bytes(text));
        expect(parse.mock.calls.length).toBeGreaterThan(2);
      } finally {
        parse.mockRestore();
      }
      expect(result.ok).toBe(true);
      if (result.ok) expect(result.value).toEqual(JSON.parse(text));
    }
  });

  it.each([
    ['a missing comma between events', (events: string[], k: number) => `[${events.slice(0, k).join(',')} ${events.slice(k).join(',')}]`],
    ['two commas between events', (events: string[], k: number) => `[${events.slice(0, k).join(',')},,${events.slice(k).join(',')}]`],
    ['a broken event', (events: string[], k: number) => `[${events.slice(0, k).join(',')},{"metadata":{]},${events.slice(k).join(',')}]`],
    ['text after the closing bracket', (events: string[]) => `[${events.join(',')}] x`],
    ['no closing bracket', (events: string[]) => `[${events.join(',')}`],
  ])('answers %s, wherever it lies, with the detail JSON.parse gives for the whole body', (_what, build) => {
    const events = Array.from({ length: 200 }, (_, i) => `{"metadata":{"eid":"${randomUUID()}"},"i":${i},"pad":"${'p'.repeat(300)}"}`);
    // Every position between two events, so some of them fall between two pieces.
    for (let k = 1; k < events.length; k++) {
      const text = build(events, k);
      let expected = '';
      try {
        JSON.parse(text);
      } catch (err) {
        expected = (err as Error).message;
      }
      expect(expected).not.toBe('');
      expect(parseEventBatch(bytes(text))).toEqual({ ok: false, reason: `the body is not valid JSON: ${expected}` });
    }
  });

  it('parses a body that is not a plain array of objects, and one with a BOM, as a whole', () => {
    const events = Array.from({ length: 200 }, (_, i) => `{"i":${i},"pad":"${'p'.repeat(300)}"}`);
    const mixed = `[${events.slice(0, 100).join(',')},42,"text",[1],${events.slice(100).join(',')}]`;
    const parsedMixed = parseEventBatch(bytes(mixed));
    expect(parsedMixed.ok && parsedMixed.value).toEqual(JSON.parse(mixed));
    const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes(`[${events.join(',')}]`)]);
    const parsedBom = parseEventBatch(withBom);
    expect(parsedBom.ok && parsedBom.value).toEqual(JSON.parse(`[${events.join(',')}]`));
  });

  it('refuses invalid UTF-8 anywhere in a large body', () => {
    const text = `[${Array.from({ length: 200 }, (_, i) => `{"i":${i},"pad":"${'p'.repeat(300)}"}`).join(',')}]`;
    const broken = bytes(text);
    broken[broken.byteLength - 100] = 0xff;
    expect(parseEventBatch(broken)).toEqual({ ok: false, reason: 'the body is not valid UTF-8' });
  });
});

describe('processBatch (event batches in the publish worker)', () => {
  const now = '2026-01-01T00:00:00.000Z';
  const record = eventTypeRecord({ name: 'unit.hostile' });
  const spec = buildPublishSpec({ record, topology: { partitionCount: 2, timeline: 1 } });
  const cache = new ValidatorCache();
  const run = (body: string | Buffer) =>
    processBatch({ kind: 'publish', body: typeof body === 'string' ? bytes(body) : body, spec, maxEventBytes: 999_000, receivedAt: now, publishedBy: 'tester', flowId: 'real-flow' }, cache);

  it('refuses an event nested deeper than MAX_JSON_DEPTH (400) before JSON.stringify could overflow', () => {
    const eid = randomUUID();
    const result = run(`[{"metadata":{"eid":"${eid}","occurred_at":"${now}"},"id":"a","deep":${arrays(20_000)}}]`);
    expect(result.kind).toBe('malformed');
    if (result.kind === 'malformed') expect(result.detail).toContain(`deeper than ${MAX_JSON_DEPTH} levels`);
    expect(run(arrays(1000)).kind).toBe('malformed');
  });

  it('refuses invalid UTF-8 (400)', () => {
    const result = run(Buffer.concat([bytes('[{"id":"'), Buffer.from([0xed, 0xa0, 0x80]), bytes('"}]')]));
    expect(result).toEqual({ kind: 'malformed', detail: 'the body is not valid UTF-8' });
  });

  it('stores __proto__ and constructor keys of events as data; enrichment ignores them', () => {
    const eid = randomUUID();
    const text = `[{"metadata":{"eid":"${eid}","occurred_at":"${now}"},"id":"k","__proto__":{"polluted":true,"metadata":{"flow_id":"evil"}},"constructor":{"prototype":{"isAdmin":true}}}]`;
    const result = run(text);
    expect(result.kind, JSON.stringify(result)).toBe('accepted');
    if (result.kind !== 'accepted') return;
    const stored = JSON.parse(Buffer.from(result.partitions[0]?.data ?? []).toString()) as Record<string, unknown> & { metadata: Record<string, unknown> };
    expect(stored.metadata.flow_id).toBe('real-flow');
    expect(stored.metadata.published_by).toBe('tester');
    expect(Object.hasOwn(stored, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(stored)).toBe(Object.prototype);
    expect(stored.constructor).toEqual({ prototype: { isAdmin: true } });
    expectPrototypeUntouched();
  });

  it('refuses __proto__ in metadata like any unknown metadata field (422), never reading service fields from it', () => {
    const eid = randomUUID();
    const text = `[{"metadata":{"eid":"${eid}","occurred_at":"${now}","__proto__":{"flow_id":"evil","published_by":"evil","event_type":"other"}},"id":"k"}]`;
    const result = run(text);
    expect(result.kind).toBe('rejected');
    if (result.kind === 'rejected') expect(result.items[0]?.detail).toBe('#/metadata must not have additional property "__proto__"');
    expectPrototypeUntouched();
  });
});
