/**
 * What a cached validator holds in heap against the length of its source: the byte bounds
 * of the validator caches (`caches.workerValidatorBytes`, `caches.mainThreadValidatorBytes`) estimate each
 * validator's heap from its source's length (`compiledValidatorBytes`, `instantiatedValidatorBytes` in
 * workers/validator-cache.ts), and this measures what those estimates stand on.
 *
 * For the benchmarks' order schema (business category) and each GitHub webhook schema (data category),
 * as the registry builds their effective schemas: compiles `copies` validators of it (each its own ajv
 * instance, as `ValidatorCache` does; each with a property of its own so that no two generate the same code), calls each once (V8
 * makes its bytecode then), forces a full collection and reads `heapUsed`; likewise instantiates the
 * standalone code a worker would hand the main thread. Prints one line per schema and the totals.
 *
 * Run: `npm run build && node --expose-gc dist/bench/validator-memory.js` (not part of `npm run bench`:
 * it measures a ratio that does not depend on the machine's load).
 */
import { buildEffectiveSchema } from '../src/domain/schema/effective-schema.js';
import { compileSchema, createSchemaCompiler, instantiateValidator, primeValidator, standaloneValidatorCode } from '../src/domain/schema/schema-compiler.js';
import type { JsonObject } from '../src/domain/schema/json-schema-walk.js';
import { loadGithubEventTypes } from '../scripts/github-event-types.js';
import { ORDER_SCHEMA } from './events.js';

/** One schema's figures: heap bytes per validator and per source character, on each path. */
interface ValidatorMemory {
  readonly name: string;
  readonly schemaChars: number;
  readonly workerHeapBytes: number;
  readonly codeChars: number;
  readonly mainThreadHeapBytes: number;
}

const gc = (globalThis as { gc?: () => void }).gc;

/** Heap used after a full collection (bytes). */
function settledHeap(): number {
  if (!gc) throw new Error('run with node --expose-gc');
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/** Heap per object that `make` returns, over `copies` of them kept alive (bytes). */
function heapPerCopy(copies: number, make: (index: number) => unknown): number {
  const before = settledHeap();
  const kept = Array.from({ length: copies }, (_, i) => make(i));
  const after = settledHeap();
  if (kept.length !== copies) throw new Error('unreachable');
  return (after - before) / copies;
}

/** Measures one effective schema on both paths. */
function measure(name: string, effective: JsonObject, copies: number): ValidatorMemory {
  // Each copy gets a property of its own with a distinct bound, which ajv writes into the generated code:
  // V8 shares the compiled code of identical function sources, and distinct schemas do not share code.
  const properties = effective.properties as JsonObject;
  const variant = (i: number): JsonObject => ({ ...effective, properties: { ...properties, [`copy_${i}`]: { type: 'integer', maximum: i } } });
  const schemaChars = JSON.stringify(variant(0)).length;
  const workerHeapBytes = heapPerCopy(copies, (i) => primeValidator(compileSchema(createSchemaCompiler({ metaSchemaCheck: false }), variant(i))));
  const codes = Array.from({ length: copies }, (_, i) => standaloneValidatorCode(variant(i)));
  const codeChars = codes[0]?.length ?? 0;
  const mainThreadHeapBytes = heapPerCopy(copies, (i) => primeValidator(instantiateValidator(codes[i] ?? '')));
  return { name, schemaChars, workerHeapBytes, codeChars, mainThreadHeapBytes };
}

function effectiveOf(schema: JsonObject, category: 'business' | 'data'): JsonObject {
  const built = buildEffectiveSchema(schema, category, 'delete', 'compatible');
  if (!built.ok) throw new Error(built.reason);
  return built.schema;
}

const rows: ValidatorMemory[] = [measure('bench.order', effectiveOf(ORDER_SCHEMA as unknown as JsonObject, 'business'), 200)];
for (const eventType of loadGithubEventTypes()) {
  rows.push(measure(eventType.definition.name, effectiveOf(JSON.parse(eventType.definition.schema.schema) as JsonObject, 'data'), 10));
}

const kb = (bytes: number): string => (bytes / 1024).toFixed(1);
console.log('schema | schema text (chars) | worker validator heap (KB) | heap ÷ text | standalone code (chars) | main-thread validator heap (KB) | heap ÷ code');
for (const r of rows) {
  console.log(`${r.name} | ${r.schemaChars} | ${kb(r.workerHeapBytes)} | ${(r.workerHeapBytes / r.schemaChars).toFixed(1)} | ${r.codeChars} | ${kb(r.mainThreadHeapBytes)} | ${(r.mainThreadHeapBytes / r.codeChars).toFixed(1)}`);
}
const sum = (pick: (r: ValidatorMemory) => number): number => rows.reduce((total, r) => total + pick(r), 0);
const ratios = rows.map((r) => r.workerHeapBytes / r.schemaChars).sort((a, b) => a - b);
console.log(`all ${rows.length}: worker heap ÷ schema text ${(sum((r) => r.workerHeapBytes) / sum((r) => r.schemaChars)).toFixed(1)} (per schema ${ratios[0]?.toFixed(1)}–${ratios.at(-1)?.toFixed(1)}), main-thread heap ÷ code ${(sum((r) => r.mainThreadHeapBytes) / sum((r) => r.codeChars)).toFixed(1)}`);
