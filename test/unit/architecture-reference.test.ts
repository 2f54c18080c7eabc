import { readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/config/load-config.js';
import { architectureReferenceDoc, committedText } from '../../scripts/generate-docs.js';

/** The folders (and top-level files) of src/ a reader meets, and workers/: each has a row in the layer table. */
function layers(): string[] {
  const src = readdirSync(path.join(projectRoot, 'src'), { withFileTypes: true });
  return [...src.filter((e) => e.isDirectory()).map((e) => `src/${e.name}/`), 'src/app.ts', 'workers/'];
}

/** The paths the first column of the layer table names (`src/domain/`, `src/app.ts`, `workers/`). */
function tableLayers(page: string): string[] {
  const section = page.slice(page.indexOf('## Layers'), page.indexOf('\n## ', page.indexOf('## Layers') + 1));
  const rows = section.split('\n').filter((line) => line.startsWith('| `'));
  return rows.flatMap((row) => [...(row.split(' | ')[0] ?? '').matchAll(/`((?:src\/[a-z-]+(?:\/|\.ts))|workers\/)`/g)].map((m) => m[1] ?? ''));
}

describe('docs/architecture-reference.md', () => {
  const page = committedText({ file: 'docs/architecture-reference.md', render: () => '' });

  it('has a row in the layer table for every folder of src/, src/app.ts and workers/, and names no other', () => {
    expect([...new Set(tableLayers(page))].sort()).toEqual(layers().sort());
  });

  it('lists the Lua scripts as npm run docs generates them from src/storage/lua/', () => {
    expect(page, 'docs/architecture-reference.md is stale: run npm run docs').toBe(architectureReferenceDoc());
  });
});
