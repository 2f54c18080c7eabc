import { createRequire } from 'node:module';
import ajvDraft04 from 'ajv-draft-04';
import ajvFormats from 'ajv-formats';
import standalone from 'ajv/dist/standalone/index.js';
import RE2 from 're2';
import { _, type ValidateFunction, type ErrorObject } from 'ajv';
import type { JsonObject, JsonValue } from './json-schema-walk.js';

// Both packages are CommonJS whose module object is also exposed as `.default`; NodeNext types see
// the namespace, so take `.default` (the same class/function at run time).
const Ajv04 = ajvDraft04.default;
const addFormats = ajvFormats.default;
/** An ajv instance speaking draft-04. */
export type SchemaCompiler = InstanceType<typeof Ajv04>;
type AjvOptions = NonNullable<ConstructorParameters<typeof Ajv04>[0]>;
type RegExpEngine = NonNullable<NonNullable<AjvOptions['code']>['regExp']>;

/**
 * RE2 as ajv's regular expression engine. `code` is what generated standalone code calls to build one
 * (ajv emits `require("re2")(pattern, flags)`), so code made in a worker runs the same engine elsewhere.
 */
const re2Engine: RegExpEngine = Object.assign((pattern: string, flags: string) => new RE2(pattern, flags), { code: 'require("re2")' });

/** Resolves the modules generated standalone code requires (ajv's runtime helpers, ajv-formats, re2). */
const requireForGeneratedCode = createRequire(import.meta.url);

/**
 * The one way the broker compiles JSON Schemas (draft-04, the API's dialect), following ajv's
 * security guidance for untrusted schemas: `pattern`/`patternProperties` run on RE2 (linear time, no
 * catastrophic backtracking), no `$data`, no remote loading (`loadSchema` unset, so a remote `$ref`
 * fails to compile), formats from ajv-formats (`uuid`, `date-time`, ...).
 *
 * Used by the publish worker and by the registry's schema checks. An instance keeps what every schema it
 * compiled refers to (ajv's code scope only grows: about 12 KB of heap and more of code per effective
 * schema), so callers that compile schemas over a long life use a fresh instance per schema and drop it
 * with the validator (see `ValidatorCache`). Formats use ajv-formats' fast mode (shape, not calendar validity).
 * @param options.metaSchemaCheck whether `compile` first validates the schema against the draft-04
 *   meta-schema (default true; false for schemas the registry's guard already checked, which saves
 *   compiling the meta-schema in every fresh instance)
 */
export function createSchemaCompiler(options: { readonly metaSchemaCheck?: boolean; readonly standalone?: boolean } = {}): SchemaCompiler {
  const ajv = new Ajv04({
    validateSchema: options.metaSchemaCheck ?? true,
    allErrors: false,
    strict: false,
    validateFormats: true,
    $data: false,
    // Not `ownProperties`: it costs about a third of the publish throughput on large schemas. Field
    // names every object inherits are refused at registration instead (schema-guard.ts).
    code: {
      regExp: re2Engine,
      // Standalone code (see `standaloneValidatorCode`) needs the source kept and the formats reachable by `require`.
      ...(options.standalone === true ? { source: true, formats: _`require("ajv-formats/dist/formats").fastFormats` } : {}),
    },
  });
  // Fast mode: formats are checked by shape (RFC 3339 date-time, UUID, URI syntax) but not by calendar
  // validity (2026-02-30 passes); measured at ~0.35 instead of ~1.0 ms per 1000-event batch.
  addFormats(ajv, { mode: 'fast' });
  return ajv;
}

/** Compiles an effective schema. @throws Error from ajv when the schema is invalid (callers answer 422). */
export function compileSchema(ajv: SchemaCompiler, schema: JsonObject): ValidateFunction {
  return ajv.compile(schema);
}

/**
 * Compiles an effective schema in an instance of its own and returns the validator as standalone
 * JavaScript (a CommonJS module body exporting the validate function): a worker compiles,
 * the main thread only instantiates it with {@link instantiateValidator}, which costs a tenth of compiling
 * (docs/decisions/0019-validators-prepared-before-the-first-batch.md "Figures the code relies on").
 * @throws Error from ajv when the schema is invalid
 */
export function standaloneValidatorCode(schema: JsonObject): string {
  const ajv = createSchemaCompiler({ metaSchemaCheck: false, standalone: true });
  return standalone.default(ajv, ajv.compile(schema));
}

/**
 * The validate function of code made by {@link standaloneValidatorCode} (by ajv from a schema, never
 * from a request's text), evaluated once like ajv evaluates the code it generates.
 * @throws Error when the code does not define a function
 */
export function instantiateValidator(code: string): ValidateFunction {
  const module = { exports: {} as unknown };
  // ajv's own compile does the same with the code it generates.
  // eslint-disable-next-line @typescript-eslint/no-implied-eval
  const define = new Function('require', 'module', 'exports', code) as (require: NodeJS.Require, module: { exports: unknown }, exports: unknown) => void;
  define(requireForGeneratedCode, module, module.exports);
  if (typeof module.exports !== 'function') throw new Error('standalone validator code did not export a function');
  return module.exports as ValidateFunction;
}

/**
 * Runs a new validator before the first batch that needs it, so that batch does not pay the first run
 * (docs/decisions/0019-validators-prepared-before-the-first-batch.md): once on `{}`, so V8 compiles its
 * bytecode now (V8 compiles a function on its first call), and, when given, once on a
 * priming instance (src/domain/schema/priming-instance.ts) — a validator's first run over values that reach
 * its code costs 10–50× its later runs, and one run over a value of the same shape pays that here
 * instead of in the first batch. The results are ignored; nothing is thrown for an invalid instance.
 * @returns the same validator
 */
export function primeValidator(validate: ValidateFunction, instance?: JsonValue): ValidateFunction {
  validate({});
  if (instance !== undefined) validate(instance);
  return validate;
}

/** One-line description of the first validation error, e.g. `#/metadata/eid must match format "uuid"`. */
export function describeValidationError(errors: readonly ErrorObject[] | null | undefined): string {
  const first = errors?.[0];
  if (!first) return 'event does not match the schema';
  const where = '#' + first.instancePath;
  if (first.keyword === 'additionalProperties') return `${where} must not have additional property "${String(first.params.additionalProperty)}"`;
  if (first.keyword === 'required') return `${where} must have required property "${String(first.params.missingProperty)}"`;
  return `${where} ${first.message ?? 'is invalid'}`;
}
