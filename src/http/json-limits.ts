/**
 * Limits on untrusted JSON bodies (DESIGN.md §7: bad input never crashes a node — JSON depth limit,
 * strict UTF-8, no prototype pollution; WIRE.md "Conventions": malformed JSON is 400). Pure, no I/O:
 * used by the HTTP server for every JSON request body and by the publish worker for event batches.
 */

/**
 * Deepest nesting of arrays and objects accepted in a request body (the outermost array or object is
 * level 1). `JSON.parse` itself is iterative in V8, but much of what runs afterwards is recursive —
 * `JSON.stringify` of an event, `structuredClone`, ajv validators of recursive schemas — and throws
 * `RangeError` around 5,000-10,000 levels; 512 leaves a wide margin on any thread's stack while no real
 * payload comes close (a GitHub webhook nests about 6 levels).
 */
export const MAX_JSON_DEPTH = 512;

/** Result of {@link parseUntrustedJson}: the value, or why the body is malformed (a 400 problem detail). */
export type UntrustedJson = { ok: true; value: unknown } | { ok: false; reason: string };

const utf8 = new TextDecoder('utf-8', { fatal: true });

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/** Options of {@link parseUntrustedJson}. */
export interface UntrustedJsonOptions {
  /** Deepest nesting accepted; {@link MAX_JSON_DEPTH} by default. */
  readonly maxDepth?: number;
  /** Refuse a value holding a key {@link findPrototypeKey} finds (control-plane bodies); default false. */
  readonly refusePrototypeKeys?: boolean;
}

/**
 * Decodes and parses a body strictly, cheapest and most protective check first:
 * 1. nesting depth ({@link nestingBeyond}) before anything else, so a 1,000,000-level `[[[[…]]]]` costs one
 *    linear scan (a few ms), not a parse (about 300 ms);
 * 2. UTF-8 with `fatal` decoding: an invalid byte sequence (stray continuation byte, overlong form,
 *    encoded surrogate, truncated sequence) is refused, never replaced by U+FFFD;
 * 3. `JSON.parse`;
 * 4. with `refusePrototypeKeys`, no `__proto__` key and no `constructor.prototype` ({@link findPrototypeKey}),
 *    walked only when the text could spell one ({@link mayHavePrototypeKey}).
 *
 * @param bytes the body (already gunzipped)
 * @returns the parsed value, or the reason it is malformed (e.g. `the body is not valid UTF-8`), meant as
 *   the detail of a 400 problem; never throws
 */
export function parseUntrustedJson(bytes: Uint8Array, options: UntrustedJsonOptions = {}): UntrustedJson {
  const maxDepth = options.maxDepth ?? MAX_JSON_DEPTH;
  const tooDeep = nestingBeyond(bytes, maxDepth);
  if (tooDeep >= 0) return { ok: false, reason: `the body nests arrays and objects deeper than ${maxDepth} levels (at byte ${tooDeep})` };
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { ok: false, reason: 'the body is not valid UTF-8' };
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { ok: false, reason: `the body is not valid JSON: ${(err as Error).message}` };
  }
  if (options.refusePrototypeKeys === true && mayHavePrototypeKey(text)) {
    const at = findPrototypeKey(value);
    if (at !== undefined) return { ok: false, reason: `${at}: the body must not contain the key "${at.endsWith('/prototype') ? 'constructor.prototype' : '__proto__'}"` };
  }
  return { ok: true, value };
}

/**
 * Where a JSON body first nests deeper than `maxDepth`: one pass over the bytes counting `[`/`{` against
 * `]`/`}` outside strings, string contents skipped with the native `Buffer.indexOf`. Works on the raw
 * bytes: in UTF-8 these ASCII bytes never occur inside a multi-byte sequence. A body shorter than
 * `2 × (maxDepth + 1)` bytes cannot nest that deep and is not scanned. Costs about 1-2 ms per MB, a
 * tenth of what the publish worker spends on a batch. Invalid JSON may give any answer; `JSON.parse`
 * refuses it anyway.
 *
 * @returns the byte offset of the first opening bracket beyond `maxDepth`, or -1
 */
export function nestingBeyond(bytes: Uint8Array, maxDepth: number): number {
  const length = bytes.byteLength;
  if (length < 2 * (maxDepth + 1)) return -1;
  const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, length);
  let depth = 0;
  for (let i = 0; i < length; i++) {
    const c = buffer[i];
    if (c === QUOTE) {
      i = stringEnd(buffer, i);
      if (i < 0) return -1;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > maxDepth) return i;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    }
  }
  return -1;
}

/** Offset of the quote closing the string that opens at `start`, or -1 when it is unterminated. */
function stringEnd(buffer: Buffer, start: number): number {
  let end = start;
  for (;;) {
    end = buffer.indexOf(QUOTE, end + 1);
    if (end < 0) return -1;
    let backslashes = 0;
    while (buffer[end - 1 - backslashes] === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return end;
  }
}

/**
 * Path of a key (the first one met) in a parsed JSON value that would change a prototype if the value were ever
 * copied key by key into another object (`Object.assign`, a deep merge, `target[key] = value`):
 * `__proto__` anywhere, or `constructor` holding an object with a `prototype` key (the two shapes
 * Fastify's secure-json-parse refuses). `JSON.parse` itself only creates own properties, so the value
 * found is harmless as it is; request bodies of the control plane refuse it anyway (400) so no later
 * code has to be careful. Iterative, so any depth is safe.
 *
 * @returns a JSON pointer such as `#/options/__proto__`, or undefined
 */
export function findPrototypeKey(value: unknown): string | undefined {
  const pending: { node: unknown; pointer: string }[] = [{ node: value, pointer: '#' }];
  for (let item = pending.pop(); item !== undefined; item = pending.pop()) {
    const { node, pointer } = item;
    if (typeof node !== 'object' || node === null) continue;
    if (Array.isArray(node)) {
      node.forEach((child: unknown, i) => pending.push({ node: child, pointer: `${pointer}/${i}` }));
      continue;
    }
    for (const key of Object.keys(node)) {
      const child: unknown = (node as Record<string, unknown>)[key];
      const at = `${pointer}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`;
      if (key === '__proto__') return at;
      if (key === 'constructor' && typeof child === 'object' && child !== null && Object.hasOwn(child, 'prototype')) return `${at}/prototype`;
      pending.push({ node: child, pointer: at });
    }
  }
  return undefined;
}

/**
 * Whether JSON text may contain a key {@link findPrototypeKey} looks for: `__proto__` or `prototype`
 * spelled out, or any `\u` escape (which could spell them). Text without any of them needs no walk,
 * which keeps the check to a few native substring searches for nearly every body.
 */
export function mayHavePrototypeKey(text: string): boolean {
  return text.includes('__proto__') || text.includes('prototype') || text.includes('\\u');
}
