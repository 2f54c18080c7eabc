import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { brokerError, BrokerError, errorCatalog, errorDetail, problemType, reasonPhrase, type CatalogEntry, type ErrorCode } from '../../src/errors/catalog.js';
import { toProblem } from '../../src/errors/problem.js';
import { projectRoot } from '../../src/config/load-config.js';
import { committedText, errorsDoc, generatedDocs } from '../../scripts/generate-docs.js';

const entries = Object.entries(errorCatalog) as [ErrorCode, CatalogEntry][];

/** Every .ts file under a directory of the project. */
function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    if (statSync(file).isDirectory()) return sources(file);
    return file.endsWith('.ts') ? [file] : [];
  });
}

describe('error catalog', () => {
  it('gives every code a status with a reason phrase, a template and a meaning', () => {
    for (const [code, entry] of entries) {
      expect(code, code).toMatch(/^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$/);
      expect(reasonPhrase(entry.status), code).not.toBe('Error');
      expect(entry.template.length, code).toBeGreaterThan(0);
      expect(entry.meaning.length, code).toBeGreaterThan(10);
    }
  });

  it('gives every code its own problem type URI, /problems/<code in lower-case kebab>', () => {
    expect(problemType('EVENT_TYPE_NOT_FOUND')).toBe('/problems/event-type-not-found');
    const types = entries.map(([code]) => problemType(code));
    for (const type of types) expect(type).toMatch(/^\/problems\/[a-z0-9]+(-[a-z0-9]+)*$/);
    expect(new Set(types).size).toBe(types.length);
  });

  it('fills the template and header placeholders from the values the call site passes', () => {
    const notFound = brokerError('EVENT_TYPE_NOT_FOUND', { name: 'orders' });
    expect({ code: notFound.code, status: notFound.status, detail: notFound.detail, type: notFound.type }).toEqual({
      code: 'EVENT_TYPE_NOT_FOUND', status: 404, detail: 'EventType "orders" does not exist.', type: '/problems/event-type-not-found',
    });
    const notAllowed = brokerError('METHOD_NOT_ALLOWED', { method: 'PATCH', path: '/event-types', allowed: 'GET, POST' });
    expect(notAllowed.detail).toBe('PATCH is not supported on /event-types');
    expect(notAllowed.headers).toEqual({ Allow: 'GET, POST' });
    expect(brokerError('NO_FREE_SLOT').detail).toBe('No free slots for streaming available');
    expect(errorDetail('INCOMPATIBLE_SCHEMA', { mode: 'forward', reasons: 'a\nb' })).toBe('the schema change is not allowed under compatibility mode forward:\na\nb');
    expect(brokerError('SHUTTING_DOWN').headers).toEqual({ 'Retry-After': '1' });
    // A value is inserted as it is, never read as a template itself.
    expect(brokerError('UNPROCESSABLE', { reason: 'Field "{name}" is bad' }).detail).toBe('Field "{name}" is bad');
  });

  it('maps errors to RFC 7807 problems with the code\'s type and the reason phrase as title', () => {
    expect(toProblem(brokerError('UNPROCESSABLE', { reason: 'bad field' }))).toMatchObject({
      status: 422, problem: { type: '/problems/unprocessable', title: 'Unprocessable Entity', status: 422, detail: 'bad field' },
    });
    expect(toProblem(brokerError('UNAUTHORIZED', { reason: 'The token has expired.' })).headers).toEqual({ 'WWW-Authenticate': 'Bearer' });
    const internal = toProblem(new TypeError('boom'));
    expect(internal.status).toBe(500);
    expect(internal.problem.type).toBe('/problems/internal');
    expect(internal.problem.detail).toBe(`An internal error occurred; trace id ${internal.traceId ?? 'missing'}`);
    expect(internal.problem.detail).not.toContain('boom');
    expect(brokerError('INTERNAL', { traceId: 'x' })).toBeInstanceOf(BrokerError);
  });

  it('is documented in docs/errors.md, code by code, with status, type, detail template and meaning', () => {
    const doc = errorsDoc();
    const sections = [...doc.matchAll(/^## (\d{3}) .+$/gm)];
    const documented = [...doc.matchAll(/^\| `([A-Z0-9_]+)` \| `(\/problems\/[a-z0-9-]+)` \| (.+?) \| (.+) \|$/gm)].map((m) => {
      const status = sections.filter((s) => (s.index ?? 0) < (m.index ?? 0)).at(-1)?.[1];
      return { code: m[1], status, type: m[2], template: m[3], meaning: m[4] };
    });
    for (const [code, entry] of entries) {
      const row = documented.find((r) => r.code === code);
      expect(row, `docs/errors.md lacks ${code}`).toBeDefined();
      expect(row?.status, code).toBe(String(entry.status));
      expect(row?.type, code).toBe(problemType(code));
      expect(row?.template, code).toBe(`\`${entry.template.replaceAll('|', '\\|').replaceAll('\n', '\\n')}\``);
      expect(row?.meaning?.startsWith(entry.meaning.replaceAll('|', '\\|')), code).toBe(true);
    }
    expect(documented.map((r) => r.code).sort()).toEqual(entries.map(([code]) => code).sort());
  });

  it('docs/errors.md is what npm run docs generates from the catalog', () => {
    const page = generatedDocs.find((d) => d.file === 'docs/errors.md');
    expect(page).toBeDefined();
    if (page) expect(committedText(page), 'docs/errors.md is stale: run npm run docs').toBe(page.render());
  });

  it('has no code that no source file raises', () => {
    const text = [...sources(path.join(projectRoot, 'src')), ...sources(path.join(projectRoot, 'workers'))]
      .filter((file) => !file.endsWith(path.join('errors', 'catalog.ts')))
      .map((file) => readFileSync(file, 'utf8'))
      .join('\n');
    for (const [code] of entries) expect(text, `${code} is never raised`).toContain(`'${code}'`);
  });
});
