/**
 * The compiled validators of a thread (a worker's, or the main thread's for the inline path;
 * docs/architecture.md "Inline or worker") and what each schema costs to validate against, which decides
 * whether the main thread may validate against it: compiled on first use, measured,
 * dropped least recently used first.
 */
import type { ValidateFunction } from 'ajv';
import { LRUCache } from 'lru-cache';
import { compileSchema, createSchemaCompiler, primeValidator } from '../src/domain/schema/schema-compiler.js';
import type { JsonObject } from '../src/domain/schema/json-schema-walk.js';
import { primingInstance } from '../src/domain/schema/priming-instance.js';
import { analyseSchemaCost, SCHEMA_COST_LIMITS, type SchemaCostLimits } from '../src/domain/schema/schema-cost.js';
import type { CompileResult, PublishTaskSpec, SchemaCost } from './publish-protocol.js';

/**
 * The main thread validates a small batch itself only against a schema a worker measured as cheap
 * (so no schema a user sent can hold up the thread that serves every request): at most this many subschema applications per value (a 4 KB batch, at most ~2,000
 * values, then costs at most ~130,000 applications, about a millisecond), and with standalone validator
 * code of at most 64 KB (`MAIN_THREAD_MAX_CODE_BYTES`, src/services/publisher.ts).
 */
export const INLINE_MAX_APPLICATIONS_PER_VALUE = 64;

/** The budget a publish worker measures schemas against: within it, the main thread may validate. */
const INLINE_COST_LIMITS: SchemaCostLimits = { ...SCHEMA_COST_LIMITS, maxApplicationsPerValue: INLINE_MAX_APPLICATIONS_PER_VALUE };

/** A compiled validator with what it costs (undefined: not measured, or over {@link INLINE_MAX_APPLICATIONS_PER_VALUE}). */
export interface CompiledSchema {
  readonly validate: ValidateFunction;
  readonly cost: SchemaCost | undefined;
}

/**
 * How many validators a {@link ValidatorCache} keeps, so its memory stays bounded however many event types exist: at most `maxEntries`,
 * and at most `maxBytes` of estimated heap together ({@link compiledValidatorBytes},
 * {@link instantiatedValidatorBytes}). A byte bound keeps many small schemas (1,000 event types published
 * to in turn thrashed a 256-entry bound: every miss compiles again) without letting a few large ones fill
 * the heap. A validator estimated larger than `maxBytes` is used but not kept.
 */
export interface ValidatorCacheBounds {
  readonly maxEntries: number;
  readonly maxBytes: number;
}

/**
 * Estimated heap of a validator compiled from an effective schema of `schemaLength` characters (its own
 * ajv instance, the generated code's bytecode): 32 KB + 10 bytes per character. Measured with
 * `node --expose-gc dist/bench/validator-memory.js` (docs/decisions/0015-validator-caches-by-estimated-heap.md): the order schema
 * (1,445 characters) 46.5 KB, the 58 GitHub webhook schemas (10–43 K characters) 25–579 KB, 8.7 bytes per
 * character over all.
 */
export function compiledValidatorBytes(schemaLength: number): number {
  return 32_000 + 10 * schemaLength;
}

/**
 * Estimated heap of a validator instantiated from standalone code of `codeLength` characters (the main
 * thread's): 2.3 bytes per character (measured for every schema of {@link compiledValidatorBytes}:
 * docs/decisions/0015-validator-caches-by-estimated-heap.md "Figures the code relies on").
 */
export function instantiatedValidatorBytes(codeLength: number): number {
  return Math.ceil(2.3 * codeLength);
}

/** `caches.workerValidatorEntries` and `caches.workerValidatorBytes` of config/default.json (for tests and tools that build a pool alone). */
export const DEFAULT_WORKER_VALIDATOR_BOUNDS: ValidatorCacheBounds = { maxEntries: 10_000, maxBytes: 64_000_000 };

/** `caches.mainThreadValidatorEntries` and `caches.mainThreadValidatorBytes` of config/default.json. */
export const DEFAULT_MAIN_THREAD_VALIDATOR_BOUNDS: ValidatorCacheBounds = { maxEntries: 10_000, maxBytes: 64_000_000 };

interface CachedSchema {
  readonly compiled: CompiledSchema;
  /** Its estimated heap, bytes (see {@link ValidatorCacheBounds}). */
  readonly bytes: number;
}

/**
 * Compiled validators per schema key, least recently used dropped first, within {@link ValidatorCacheBounds};
 * one per worker thread (and one on the main thread). Each validator has its own ajv instance, dropped
 * with it: a shared instance keeps every schema it ever compiled (its measured growth:
 * docs/decisions/0015-validator-caches-by-estimated-heap.md "Figures the code relies on").
 */
export class ValidatorCache {
  private readonly validators: LRUCache<string, CachedSchema>;

  /**
   * @param bounds validators kept (the least recently used is dropped first)
   * @param measureCost whether `get` also analyses each schema's validation cost (workers: yes; the
   *   main thread, which compiles only schemas a worker measured already: no)
   */
  constructor(
    bounds: ValidatorCacheBounds = DEFAULT_WORKER_VALIDATOR_BOUNDS,
    private readonly measureCost = true,
  ) {
    this.validators = new LRUCache({ max: bounds.maxEntries, maxSize: bounds.maxBytes, sizeCalculation: (cached) => Math.max(1, cached.bytes) });
  }

  /** The estimated heap of the validators held now, bytes (see {@link ValidatorCacheBounds}). */
  get bytes(): number {
    return this.validators.calculatedSize;
  }

  /** Validators held now. */
  get size(): number {
    return this.validators.size;
  }

  /** Whether the validator of this schema key is held (a check that does not make it more recently used). */
  has(schemaKey: string): boolean {
    return this.validators.has(schemaKey);
  }

  /**
   * The validator of a spec's effective schema, compiled on first use and then run over the schema's
   * priming instance (`primeValidator`, src/domain/schema/priming-instance.ts), with its cost (the static
   * analysis of src/domain/schema/schema-cost.ts against the main thread's budget, and the compilation time).
   * @throws Error when the schema does not compile, or is not held and the spec lacks its text
   */
  get(spec: Pick<PublishTaskSpec, 'schemaKey' | 'effectiveSchema'>): CompiledSchema {
    const cached = this.validators.get(spec.schemaKey);
    if (cached) return cached.compiled;
    if (spec.effectiveSchema === undefined) throw new Error(`no validator for schema key ${spec.schemaKey} and no schema text to compile`);
    const schema = JSON.parse(spec.effectiveSchema) as JsonObject;
    const started = performance.now();
    const validate = compileSchema(createSchemaCompiler({ metaSchemaCheck: false }), schema);
    const compileMs = performance.now() - started;
    primeValidator(validate, primingInstance(schema));
    const analysis = this.measureCost ? analyseSchemaCost(schema, INLINE_COST_LIMITS) : undefined;
    const compiled = { validate, cost: analysis?.ok === true ? { applicationsPerValue: analysis.applicationsPerValue, compileMs } : undefined };
    this.validators.set(spec.schemaKey, { compiled, bytes: compiledValidatorBytes(spec.effectiveSchema.length) });
    return compiled;
  }

  /**
   * Keeps a validator compiled elsewhere: the main thread's cache holds only validators instantiated from
   * code a worker generated, so it never compiles a schema itself.
   * @param codeLength the length of the standalone code it was instantiated from (characters; its size in
   *   the bounds is {@link instantiatedValidatorBytes} of it)
   */
  set(schemaKey: string, compiled: CompiledSchema, codeLength: number): void {
    this.validators.set(schemaKey, { compiled, bytes: instantiatedValidatorBytes(codeLength) });
  }

  /** Drops the validators of these schema keys (their event types were changed or deleted). */
  forget(schemaKeys: Iterable<string>): void {
    for (const key of schemaKeys) this.validators.delete(key);
  }

  /**
   * The registry's check that a new effective schema is usable: its validation cost is
   * within the budget (checked first: it bounds what compiling and validating can cost), then it
   * compiles (in an instance of its own, dropped afterwards). Nothing is cached.
   * @returns the cost, or the reason (a 422 detail)
   */
  check(effectiveSchema: string, limits: SchemaCostLimits): CompileResult {
    try {
      const schema = JSON.parse(effectiveSchema) as JsonObject;
      const analysis = analyseSchemaCost(schema, limits);
      if (!analysis.ok) return { ok: false, reason: analysis.reason };
      const started = performance.now();
      compileSchema(createSchemaCompiler({ metaSchemaCheck: false }), schema);
      const compileMs = performance.now() - started;
      return { ok: true, cost: { applicationsPerValue: analysis.applicationsPerValue, compileMs } };
    } catch (err) {
      return { ok: false, reason: `the schema cannot be compiled: ${firstLine((err as Error).message)}` };
    }
  }
}

/** The first line of an error message, at most 300 characters (ajv appends the whole generated code to some). */
function firstLine(message: string): string {
  const line = message.split('\n', 1)[0] ?? '';
  const cut = line.indexOf(', function code:');
  const text = cut >= 0 ? line.slice(0, cut) : line;
  return text.length > 300 ? `${text.slice(0, 300)}...` : text;
}
