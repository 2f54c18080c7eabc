import { describe, expect, it } from 'vitest';
import { buildPublishSpec } from '../../src/services/event-types/event-type-cache.js';
import type { EventType } from '../../src/domain/event-type/event-type.js';
import { parseEventBatch } from '../../src/domain/batch/event-batch-parse.js';
import { scanEventBatch } from '../../src/domain/batch/event-batch-scan.js';
import { MAX_JSON_DEPTH, nestingBeyond, parseUntrustedJson } from '../../src/domain/json/json-limits.js';
import { processBatch } from '../../workers/publish-batch.js';
import { ValidatorCache } from '../../workers/validator-cache.js';
import type { PublishResult, PublishTask } from '../../workers/publish-protocol.js';
import { eventTypeRecord } from '../support/fixtures.js';
// mulberry32, seeded, so a failing case can be replayed from its seed.
import { prng } from '../../bench/events.js';

/**
 * The stored text of each event: the worker keeps the producer's own bytes and splices
 * the enrichment fields into them, or serializes the enriched event when splicing would be wrong. The
 * property: whatever the events and their formatting, every stored line is one line of valid JSON that
 * parses to exactly the object the serializing worker stored — `JSON.stringify` of the parsed event after
 * enrichment — `-0`, key order aside, deep equal.
 */

const now = '2026-01-01T00:00:00.000Z';
const NAME = 'unit.order';

type Random = () => number;

function pick<T>(random: Random, list: readonly T[]): T {
  const item = list[Math.floor(random() * list.length)];
  if (item === undefined) throw new Error('pick from an empty list');
  return item;
}

/** How a generated batch is formatted between tokens. */
type Layout = 'compact' | 'spaces' | 'any';

/** Whitespace between two tokens. */
function space(random: Random, layout: Layout): string {
  if (layout === 'compact') return '';
  const x = random();
  if (x < 0.6) return '';
  if (x < 0.9 || layout === 'spaces') return ' ';
  return pick(random, ['\n', '\t', '\r\n', '\n  ', '   ']);
}

/** A JSON string literal for `value`, each character written as is or as an escape at random. */
function literal(random: Random, value: string, escapeRate: number): string {
  let out = '"';
  for (const char of value) {
    const code = char.codePointAt(0) ?? 0;
    const units = char.length === 1 ? [code] : [char.charCodeAt(0), char.charCodeAt(1)];
    const lone = char.length === 1 && code >= 0xd800 && code <= 0xdfff;
    if (char === '"') out += '\\"';
    else if (char === '\\') out += '\\\\';
    else if (code < 0x20) out += random() < 0.5 ? `\\u${code.toString(16).padStart(4, '0')}` : (JSON.stringify(char).slice(1, -1));
    else if (lone || random() < escapeRate) out += units.map((u) => { const hex = u.toString(16).padStart(4, '0'); return `\\u${random() < 0.5 ? hex : hex.toUpperCase()}`; }).join('');
    else if (char === '/' && random() < 0.5) out += '\\/';
    else out += char;
  }
  return `${out}"`;
}

const STRINGS = ['', 'x', 'paid', 'Zürich 東京 🎉', 'line\nbreak', 'tab\tand "quotes" and \\', '\u2028\u2029', '\ud800 lone', '{"metadata":{}}', ',:[]{}', '\u0000\u001f'];
const KEYS = ['id', 'a', 'b', '1', '01', '0', '10', 'metadata', '__proto__', 'constructor', 'prototype', 'event_type', 'partition', 'flow_id', 'é', '日本', '', 'x y', '"q"', 'back\\slash'];
const NUMBERS = ['0', '-0', '-0.0', '1', '-1', '2.50', '-0.5', '3.14159', '100', '1e3', '1E-3', '-1e-400', '1e400', '12345678901234567890', '0.10000000000000000555', '9007199254740993', '123456.789'];

/** A random number as JSON text: mostly ordinary, sometimes one of the texts that do not survive as written. */
function numberText(random: Random): string {
  const x = random();
  if (x < 0.4) return String(Math.floor(random() * 1000) - 200);
  if (x < 0.7) return String(Math.round(random() * 1e6) / 100);
  return pick(random, NUMBERS);
}

/** A random JSON value as text, nested at most `depth` more levels. */
function valueText(random: Random, depth: number, layout: Layout, escapeRate: number): string {
  const x = random();
  if (depth <= 0 || x < 0.5) {
    const y = random();
    if (y < 0.45) return literal(random, random() < 0.5 ? pick(random, STRINGS) : `s${Math.floor(random() * 1e6)}`, escapeRate);
    if (y < 0.85) return numberText(random);
    return pick(random, ['true', 'false', 'null']);
  }
  const s = () => space(random, layout);
  if (x < 0.75) {
    const items = Array.from({ length: Math.floor(random() * 4) }, () => s() + valueText(random, depth - 1, layout, escapeRate) + s());
    return `[${items.join(',')}${items.length === 0 ? s() : ''}]`;
  }
  const members = Array.from({ length: Math.floor(random() * 4) }, () => `${s()}${literal(random, pick(random, KEYS), escapeRate)}${s()}:${s()}${valueText(random, depth - 1, layout, escapeRate)}${s()}`);
  return `{${members.join(',')}}`;
}

/** `metadata` of a business event: the required fields, sometimes fields enrichment sets or keeps, keys in any order. */
function metadataText(random: Random, index: number, layout: Layout, escapeRate: number): string {
  const s = () => space(random, layout);
  const member = (key: string, value: string) => `${s()}${literal(random, key, escapeRate)}${s()}:${s()}${value}${s()}`;
  const members = [member('eid', literal(random, `00000000-0000-4000-8000-${String(index).padStart(12, '0')}`, escapeRate)), member('occurred_at', literal(random, now, escapeRate))];
  if (random() < 0.25) members.push(member('event_type', literal(random, NAME, escapeRate)));
  if (random() < 0.3) members.push(member('flow_id', literal(random, pick(random, ['', 'producer-flow', 'flöw 🎉']), escapeRate)));
  if (random() < 0.1) members.push(member('partition', literal(random, '0', escapeRate)));
  if (random() < 0.05) members.unshift(member('eid', literal(random, 'first of two', escapeRate)));
  for (let i = members.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [members[i], members[j]] = [members[j] as string, members[i] as string];
  }
  return random() < 0.03 ? `{${s()}}` : `{${members.join(',')}}`;
}

/** A random event as text: `metadata`, the required `id`, and random members (now and then a second `metadata`). */
function eventText(random: Random, index: number, layout: Layout, escapeRate: number): string {
  const s = () => space(random, layout);
  const members = [`${s()}${literal(random, 'metadata', escapeRate)}${s()}:${s()}${metadataText(random, index, layout, escapeRate)}${s()}`, `${s()}"id"${s()}:${s()}${literal(random, `k${Math.floor(random() * 5)}`, escapeRate)}`];
  const extra = Math.floor(random() * 5);
  for (let i = 0; i < extra; i++) members.push(`${s()}${literal(random, pick(random, KEYS.filter((k) => k !== 'id')), escapeRate)}${s()}:${s()}${valueText(random, 3, layout, escapeRate)}${s()}`);
  for (let i = members.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [members[i], members[j]] = [members[j] as string, members[i] as string];
  }
  return `{${members.join(',')}}`;
}

/** A random batch body, formatted as `layout` says. */
function batchText(random: Random, layout: Layout, escapeRate: number): string {
  const count = 1 + Math.floor(random() * 8);
  const events = Array.from({ length: count }, (_, i) => `${pick(random, ['', ' ', '\n  '])}${eventText(random, i, layout, escapeRate)}${pick(random, ['', '\n'])}`);
  return `${pick(random, ['', ' ', '\n'])}[${events.join(',')}]`;
}

/** What the serializing worker stored for an event: its parsed value, enriched, through `JSON.stringify`. */
function serializedReference(event: Record<string, unknown>, partition: number, enrich: boolean, spanCtx?: string): string {
  const metadata = event.metadata;
  if (enrich && typeof metadata === 'object' && metadata !== null && !Array.isArray(metadata)) {
    const m = metadata as Record<string, unknown>;
    m.received_at = now;
    m.event_type = NAME;
    m.version = '1.0.0';
    m.partition = String(partition);
    m.published_by = 'tester';
    if (m.flow_id === undefined || m.flow_id === '') m.flow_id = 'flow-1';
    if (spanCtx !== undefined && m.span_ctx === undefined) m.span_ctx = JSON.parse(spanCtx) as unknown;
  }
  return JSON.stringify(event);
}

/** A batch's trace context as the main thread hands it to the worker (JSON.stringify of the object; docs/tracing.md). */
const SPAN_CTX = JSON.stringify({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'vendor=a "quoted" \\ value' });

/** Object members written in a JSON text (`:` outside strings). */
function membersInText(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === ':') count++;
    else if (c === '"') for (i++; text[i] !== '"'; i++) if (text[i] === '\\') i++;
  }
  return count;
}

/** Keys of every object in a parsed value. */
function keysInValue(value: unknown): number {
  if (typeof value !== 'object' || value === null) return 0;
  const children: unknown[] = Array.isArray(value) ? value : Object.values(value);
  return (Array.isArray(value) ? 0 : children.length) + children.reduce<number>((sum, child) => sum + keysInValue(child), 0);
}

const validators = new ValidatorCache();

function run(body: string | Buffer, record: EventType, partitionCount = 3, spanCtx?: string): PublishResult {
  const task: PublishTask = {
    kind: 'publish',
    body: typeof body === 'string' ? Buffer.from(body) : body,
    spec: buildPublishSpec({ record, topology: { partitionCount, timeline: 1 } }),
    maxEventBytes: 999_000,
    receivedAt: now,
    publishedBy: 'tester',
    flowId: 'flow-1',
    ...(spanCtx === undefined ? {} : { spanCtx }),
  };
  return processBatch(task, validators);
}

/** The stored lines of an accepted batch, in input order. */
function storedLines(result: PublishResult & { kind: 'accepted' }): string[] {
  const perPartition = new Map(result.partitions.map((p) => [p.partition, Buffer.from(p.data).toString('utf8').split('\n')]));
  for (const p of result.partitions) expect(perPartition.get(p.partition)?.length).toBe(p.count);
  const taken = new Map<number, number>();
  return Array.from(result.itemPartitions, (partition) => {
    const at = taken.get(partition) ?? 0;
    taken.set(partition, at + 1);
    const line = perPartition.get(partition)?.[at];
    if (line === undefined) throw new Error(`partition ${partition} has no line ${at}`);
    return line;
  });
}

/** Checks every stored line of `body` against the serializing worker's text; returns how many events were accepted. */
function expectStoredAsSerialized(body: string, record: EventType, enrich: boolean, spanCtx?: string): number {
  const result = run(body, record, 3, spanCtx);
  if (result.kind !== 'accepted') return 0;
  const parsed = JSON.parse(body) as Record<string, unknown>[];
  const lines = storedLines(result);
  lines.forEach((line, i) => {
    expect(line, body).not.toMatch(/[\r\n]/);
    const reference = serializedReference(parsed[i] as Record<string, unknown>, result.itemPartitions[i] ?? -1, enrich, spanCtx);
    // toEqual tells -0 from 0 (Object.is) and ignores key order, as JSON consumers do.
    const stored: unknown = JSON.parse(line);
    expect(stored, `event ${i} of ${body}\nstored ${line}`).toEqual(JSON.parse(reference));
    // No duplicate key in what is stored: a parser keeping the first value reads what was validated.
    expect(membersInText(line), `duplicate keys in ${line}`).toBe(keysInValue(stored));
  });
  expect(result.bytes).toBe(lines.reduce((sum, line) => sum + Buffer.byteLength(line), 0));
  return lines.length;
}

describe('stored event text (the producer’s bytes, enrichment spliced in)', () => {
  const business = eventTypeRecord({ name: NAME });
  const undefinedCategory = eventTypeRecord({ name: NAME, category: 'undefined', enrichment_strategies: [] });

  it.each([
    ['compact', 'compact', 0],
    ['spaces', 'spaces', 0],
    ['any whitespace', 'any', 0],
    ['escapes', 'spaces', 0.2],
  ] as const)('stores what the serializing worker stored, property over random %s batches', (_what, layout, escapeRate) => {
    let accepted = 0;
    for (let seed = 1; seed <= 250; seed++) {
      const random = prng(seed * 7919 + escapeRate * 1000 + layout.length);
      const body = batchText(random, layout, escapeRate);
      accepted += expectStoredAsSerialized(body, business, true);
      accepted += expectStoredAsSerialized(body, undefinedCategory, false);
      // A sampled trace's context goes into every event without a span_ctx of its own, spliced in or serialized alike.
      accepted += expectStoredAsSerialized(body, business, true, SPAN_CTX);
    }
    // The generator must reach the splicing path, not only refusals.
    expect(accepted).toBeGreaterThan(500);
  });

  it('keeps the producer’s bytes: spaces, escapes and number spellings stay, enrichment goes before metadata’s closing brace', () => {
    const text = '{ "metadata" : { "eid" : "00000000-0000-4000-8000-000000000001", "occurred_at":"2026-01-01T00:00:00.000Z" } , "id":"\\u006b1", "n": 2.50, "u":"\\/" }';
    const result = run(`[${text}]`, business, 1);
    if (result.kind !== 'accepted') throw new Error(JSON.stringify(result));
    const [line] = storedLines(result);
    const close = text.indexOf('} ,');
    const enrichment = `,"received_at":"${now}","event_type":"${NAME}","version":"1.0.0","partition":"0","published_by":"tester","flow_id":"flow-1"`;
    expect(line).toBe(`${text.slice(0, close)}${enrichment}${text.slice(close)}`);
  });

  it('adds the batch\'s trace context as span_ctx after the other enrichment fields, byte for byte as serializing does; an event\'s own span_ctx stays', () => {
    const own = { traceparent: '00-11111111111111111111111111111111-2222222222222222-01' };
    const events = [0, 1, 2].map((i) => ({ metadata: { eid: `00000000-0000-4000-8000-00000000000${i}`, occurred_at: now, ...(i === 1 ? { span_ctx: own } : {}) }, id: `k${i}` }));
    const result = run(JSON.stringify(events), business, 1, SPAN_CTX);
    if (result.kind !== 'accepted') throw new Error(JSON.stringify(result));
    const lines = storedLines(result);
    expect(lines).toEqual(events.map((e) => serializedReference(structuredClone(e), 0, true, SPAN_CTX)));
    expect(lines[0]).toContain(`"flow_id":"flow-1","span_ctx":${SPAN_CTX}}`);
    expect((JSON.parse(lines[1] ?? '') as { metadata: { span_ctx: unknown } }).metadata.span_ctx).toEqual(own);
    // Serialized (a line break in the event) the same way.
    const broken = JSON.stringify(events[0]).replace(',"id"', ',\n"id"');
    const serialized = run(`[${broken}]`, business, 1, SPAN_CTX);
    if (serialized.kind !== 'accepted') throw new Error(JSON.stringify(serialized));
    expect(storedLines(serialized)).toEqual([lines[0]]);
  });

  it('stores compact input byte for byte as the serializing worker did', () => {
    const events = [0, 1, 2].map((i) => ({ metadata: { eid: `00000000-0000-4000-8000-00000000000${i}`, occurred_at: now, ...(i === 1 ? { event_type: NAME, flow_id: 'mine' } : {}) }, id: `k${i}`, nested: { metadata: { flow_id: 'not this one' }, list: [1, 'two', null] } }));
    const result = run(JSON.stringify(events), business, 1);
    if (result.kind !== 'accepted') throw new Error(JSON.stringify(result));
    expect(storedLines(result)).toEqual(events.map((e) => serializedReference(structuredClone(e), 0, true)));
  });

  it.each([
    ['a line break inside the event', '{"metadata":{"eid":"E","occurred_at":"T"},\n"id":"k"}'],
    ['a tab inside the event', '{"metadata":{"eid":"E","occurred_at":"T"},\t"id":"k"}'],
    ['an exponent', '{"metadata":{"eid":"E","occurred_at":"T"},"id":"k","n":1e2}'],
    ['a negative zero', '{"metadata":{"eid":"E","occurred_at":"T"},"id":"k","n":-0.0}'],
    ['more digits than a double keeps', '{"metadata":{"eid":"E","occurred_at":"T"},"id":"k","n":12345678901234567890}'],
    ['a duplicate key', '{"metadata":{"eid":"E","occurred_at":"T"},"id":"x","id":"k"}'],
    ['a duplicate key in a nested object', '{"metadata":{"eid":"E","occurred_at":"T"},"id":"k","o":{"a":1,"a":2}}'],
    ['metadata twice', '{"metadata":{"eid":"x","occurred_at":"T"},"id":"k","metadata":{"eid":"E","occurred_at":"T"}}'],
    ['an escaped top-level key', '{"m\\u0065tadata":{"eid":"E","occurred_at":"T"},"id":"k"}'],
    ['a __proto__ key', '{"metadata":{"eid":"E","occurred_at":"T"},"id":"k","__proto__":{"metadata":{"flow_id":"evil"}}}'],
    ['a partition it set', '{"metadata":{"eid":"E","occurred_at":"T","partition":"7"},"id":"k"}'],
    ['an empty flow_id', '{"metadata":{"eid":"E","occurred_at":"T","flow_id":""},"id":"k"}'],
  ])('serializes an event with %s', (_what, template) => {
    const text = template.replace('"E"', '"00000000-0000-4000-8000-000000000001"').replace(/"T"/g, `"${now}"`);
    const result = run(`[${text}]`, business, 1);
    if (result.kind !== 'accepted') throw new Error(JSON.stringify(result));
    expect(storedLines(result)).toEqual([serializedReference(JSON.parse(text) as Record<string, unknown>, 0, true)]);
  });

  it('measures the size limit on the stored text', () => {
    const text = `{ "metadata": { "eid": "00000000-0000-4000-8000-000000000001", "occurred_at": "${now}" }, "id": "k", "pad": "${'x'.repeat(300)}" }`;
    const enriched = run(`[${text}]`, business, 1);
    if (enriched.kind !== 'accepted') throw new Error(JSON.stringify(enriched));
    const size = enriched.bytes;
    const task = (maxEventBytes: number): PublishTask => ({ kind: 'publish', body: Buffer.from(`[${text}, ${text.replace('0001', '0002')}]`), spec: buildPublishSpec({ record: business, topology: { partitionCount: 1, timeline: 1 } }), maxEventBytes, receivedAt: now, publishedBy: 'tester', flowId: 'flow-1' });
    expect(processBatch(task(size), new ValidatorCache()).kind).toBe('accepted');
    const refused = processBatch(task(size - 1), new ValidatorCache());
    if (refused.kind !== 'rejected') throw new Error(JSON.stringify(refused));
    expect(refused.items[0]?.detail).toBe(`event size ${size} bytes exceeds the limit of ${size - 1} bytes`);
  });

  it('splices into a body whose bytes are a view into a larger buffer', () => {
    const text = `[{"metadata":{"eid":"00000000-0000-4000-8000-000000000001","occurred_at":"${now}"},"id":"k"}]`;
    const whole = Buffer.from(`xxxx${text}yyyy`);
    const view = whole.subarray(4, 4 + Buffer.byteLength(text));
    const result = run(view, business, 1);
    if (result.kind !== 'accepted') throw new Error(JSON.stringify(result));
    expect(storedLines(result)).toEqual([serializedReference((JSON.parse(text) as Record<string, unknown>[])[0] ?? {}, 0, true)]);
  });
});

describe('parseEventBatch (the worker\u2019s single scan)', () => {
  const arrays = (depth: number): string => '['.repeat(depth) + ']'.repeat(depth);
  const bodies: [string, Buffer][] = [
    ['an event batch', Buffer.from(`[{"metadata":{"eid":"e"},"id":"k"}, {"a":[1,{"b":"\\"}]}]`)],
    ['a BOM', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('[{"a":1}]')])],
    ['invalid UTF-8', Buffer.concat([Buffer.from('[{"id":"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"}]')])],
    ['nesting beyond the limit', Buffer.from(`[{"deep":${arrays(MAX_JSON_DEPTH + 5)}}]`)],
    ['a short unclosed run of brackets', Buffer.from('['.repeat(MAX_JSON_DEPTH + 1))],
    ['brackets inside strings', Buffer.from(`["\\"${'['.repeat(2000)}"]`)],
    ['not JSON', Buffer.from('[{"a":')],
    ['an object', Buffer.from('{"a":[{"b":1}]}')],
  ];

  it.each(bodies)('answers %s as parseUntrustedJson does', (_what, body) => {
    const batch = parseEventBatch(body);
    const reference = parseUntrustedJson(body);
    expect(batch.ok).toBe(reference.ok);
    if (batch.ok && reference.ok) expect(batch.value).toEqual(reference.value);
    if (!batch.ok && !reference.ok) expect(batch.reason).toBe(reference.reason);
    if (body.byteLength >= 2 * (MAX_JSON_DEPTH + 1)) expect(scanEventBatch(body, MAX_JSON_DEPTH).tooDeepAt).toBe(nestingBeyond(body, MAX_JSON_DEPTH));
  });

  it('finds each event of the top-level array with its metadata object', () => {
    const text = '[ {"metadata":{},"x":{"metadata":{"a":1}}} ,{"id":1,"metadata":{"eid":"e"}},{"metadata":"m"}]';
    const { layout } = scanEventBatch(Buffer.from(text), MAX_JSON_DEPTH);
    expect(layout.count).toBe(3);
    const events = layout.starts.map((start, i) => text.slice(start, layout.ends[i]));
    expect(events.map((e) => JSON.parse(e) as unknown)).toEqual(JSON.parse(text));
    expect(layout.metadataEnds.map((end) => (end < 0 ? '' : text.slice(end - 3, end + 1)))).toEqual(['":{}', '"e"}', '']);
    expect(layout.metadataEmpty).toEqual([true, false, false]);
    expect(layout.members).toEqual([4, 3, 1]);
    expect(layout.flags).toEqual([0, 0, 0]);
  });
});
