import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../../scripts/local-processes.js';
import { CLUSTER_FILES } from '../../vitest.config.js';

// The `cluster` test project's files are listed in docs/getting-started.md "Run the tests" for the
// people who add tests; the list there must be the one vitest.config.ts runs.
describe('the cluster test project', () => {
  it('runs exactly the files docs/getting-started.md lists, and each exists', () => {
    const doc = readFileSync(path.join(repoRoot, 'docs', 'getting-started.md'), 'utf8');
    const block = /<!-- cluster-files:[^>]*-->([\s\S]*?)<!-- \/cluster-files -->/.exec(doc)?.[1];
    expect(block, 'the cluster-files block in docs/getting-started.md').toBeDefined();
    const listed = [...(block ?? '').matchAll(/`([a-z0-9-]+)`/g)].map((m) => `test/integration/${m[1] ?? ''}.test.ts`);
    expect([...listed].sort()).toEqual([...CLUSTER_FILES].sort());
    for (const file of CLUSTER_FILES) expect(() => readFileSync(path.join(repoRoot, file)), file).not.toThrow();
  });
});
