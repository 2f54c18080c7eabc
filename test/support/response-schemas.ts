import { appendFileSync } from 'node:fs';
import ajvModule from 'ajv';
import ajvFormats from 'ajv-formats';
import type { TSchema } from '@sinclair/typebox';
import { DEFAULT_PROBLEM, JSON_STREAM_MEDIA, PROBLEM_MEDIA, type ResponseSpec } from '../../src/http/api/route-model.js';
import { findRoute } from '../../src/http/api/route-table.js';

// CommonJS modules seen as namespaces by NodeNext types: take `.default` (as src/domain/schema/schema-compiler.ts does).
const Ajv = ajvModule.default;
const addFormats = ajvFormats.default;

/**
 * Response validation for the integration tests: every JSON answer a test receives is
 * checked against the response schema its route declares in the route table (src/http/api), the
 * source of `/openapi.json` — so the document cannot drift from what the node sends.
 *
 * Answers are matched by method and path ({@link findRoute}); a status the route does not list must be
 * a problem (the `default` answer). Only JSON bodies (`application/json`, `application/problem+json`)
 * are checked; streams and text are not.
 */
const ajv = new Ajv({ allErrors: true, strict: true });
/** With `BROKER_TEST_SCHEMA_COVERAGE=<file>`, each checked answer appends `<operationId> <status> <media>` to it (which answers the tests exercise). */
const coverageFile = process.env.BROKER_TEST_SCHEMA_COVERAGE;
addFormats(ajv);
const compiled = new Map<TSchema, ReturnType<typeof ajv.compile>>();

function validatorOf(schema: TSchema): ReturnType<typeof ajv.compile> {
  let validate = compiled.get(schema);
  if (validate === undefined) {
    validate = ajv.compile(schema);
    compiled.set(schema, validate);
  }
  return validate;
}

/**
 * Why a JSON answer does not match its route's response schema, or undefined when it does (or is not
 * JSON). The text names the route, the status and each failing JSON pointer.
 * @param path the request path, query allowed
 * @param contentType the answer's `Content-Type`
 */
export function responseMismatch(method: string, path: string, status: number, contentType: string | null, body: unknown): string | undefined {
  const media = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  if (media !== 'application/json' && media !== PROBLEM_MEDIA) return undefined;
  const route = findRoute(method, path);
  const where = `${method} ${path} → ${status} (${route ? `route ${route.operationId} ${route.method} ${route.path}` : 'no route'})`;
  const spec: ResponseSpec | undefined = route?.responses[String(status)] ?? (status >= 400 ? DEFAULT_PROBLEM : undefined);
  if (spec === undefined) return `${where}: status ${status} is not described in the route table (src/http/api/route-table.ts)`;
  const schema = spec.content?.[media];
  if (schema === undefined) return `${where}: the route table describes no ${media} body for this status (it has: ${Object.keys(spec.content ?? {}).join(', ') || 'none'})`;
  const validate = validatorOf(schema);
  if (coverageFile !== undefined) appendFileSync(coverageFile, `${route?.operationId ?? '-'} ${status} ${media}\n`);
  if (validate(body)) return undefined;
  const problems = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}${e.keyword === 'additionalProperties' ? ` (${JSON.stringify(e.params)})` : ''} [schema ${e.schemaPath}]`);
  return `${where}: the body does not match the response schema:\n  ${problems.join('\n  ')}\n  body: ${JSON.stringify(body).slice(0, 600)}`;
}

/**
 * Why one line of an `application/x-json-stream` answer does not match the stream batch schema of its
 * route's 200 answer, or undefined when it does.
 * @param path the request path, query allowed
 */
export function streamBatchMismatch(method: string, path: string, batch: unknown): string | undefined {
  const route = findRoute(method, path);
  const schema = route?.responses['200']?.content?.[JSON_STREAM_MEDIA];
  const where = `${method} ${path} stream (${route ? `route ${route.operationId}` : 'no route'})`;
  if (schema === undefined) return `${where}: the route table describes no ${JSON_STREAM_MEDIA} answer`;
  const validate = validatorOf(schema);
  if (coverageFile !== undefined) appendFileSync(coverageFile, `${route?.operationId ?? '-'} 200 ${JSON_STREAM_MEDIA}\n`);
  if (validate(batch)) return undefined;
  const problems = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'} [schema ${e.schemaPath}]`);
  return `${where}: a batch does not match the stream batch schema:\n  ${problems.join('\n  ')}\n  batch: ${JSON.stringify(batch).slice(0, 600)}`;
}

/**
 * Throws when a JSON answer does not match its route's response schema (see {@link responseMismatch}).
 * @throws Error naming the route, status and JSON pointers
 */
export function assertResponseMatches(method: string, path: string, status: number, contentType: string | null, body: unknown): void {
  const mismatch = responseMismatch(method, path, status, contentType, body);
  if (mismatch !== undefined) throw new Error(`response schema mismatch: ${mismatch}`);
}
