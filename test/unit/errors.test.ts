import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { BrokerError, errorCatalog, reasonPhrase } from '../../src/errors/catalog.js';
import { toProblem } from '../../src/errors/problem.js';
import { projectRoot } from '../../src/config/load-config.js';

describe('error catalog', () => {
  it('gives every code a status with a reason phrase', () => {
    for (const [code, entry] of Object.entries(errorCatalog)) {
      expect(reasonPhrase(entry.status), code).not.toBe('Error');
      expect(entry.meaning.length, code).toBeGreaterThan(10);
    }
  });

  it('maps errors to RFC 7807 problems with the reason phrase as title', () => {
    expect(toProblem(new BrokerError('UNPROCESSABLE', 'bad field'))).toMatchObject({ status: 422, problem: { title: 'Unprocessable Entity', status: 422, detail: 'bad field' } });
    const internal = toProblem(new TypeError('boom'));
    expect(internal.status).toBe(500);
    expect(internal.problem.detail).toContain(internal.traceId);
    expect(internal.problem.detail).not.toContain('boom');
  });

  it('is documented in the README error table, code by code', () => {
    const readme = readFileSync(path.join(projectRoot, 'README.md'), 'utf8');
    for (const [code, entry] of Object.entries(errorCatalog)) {
      expect(readme, `README lacks ${code}`).toMatch(new RegExp(`\\| \`${code}\` \\| ${entry.status} \\|`));
    }
  });
});
