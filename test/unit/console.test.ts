import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConsoleAssets } from '../../src/http/routes/console.js';
import { diffLines, prettyJson } from '../../ui/src/diff.js';

describe('the console asset manifest', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'console-assets-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('holds the files with served extensions, by relative path, with a CSP naming the inline import map', () => {
    mkdirSync(path.join(dir, 'app'));
    writeFileSync(path.join(dir, 'index.html'), '<script type="importmap">{"imports":{}}</script>');
    writeFileSync(path.join(dir, 'app', 'main.js'), 'export {};');
    writeFileSync(path.join(dir, 'app', 'main.js.map'), '{}');
    writeFileSync(path.join(dir, 'notes.md'), '# not served');
    const assets = loadConsoleAssets(dir);
    expect([...assets.keys()].sort()).toEqual(['app/main.js', 'index.html']);
    expect(assets.get('app/main.js')?.contentType).toBe('text/javascript; charset=utf-8');
    // sha256 of {"imports":{}}
    expect(assets.get('index.html')?.headers['Content-Security-Policy']).toContain("script-src 'self' 'sha256-");
    expect(assets.get('index.html')?.etag).toMatch(/^"[\w-]{32}"$/);
  });

  it('is empty when the console was not built', () => {
    expect(loadConsoleAssets(path.join(dir, 'absent')).size).toBe(0);
  });
});

describe('the schema diff', () => {
  it('keeps common lines and marks removed and added ones', () => {
    const before = prettyJson('{"type":"object","properties":{"a":{"type":"string"}}}');
    const after = prettyJson('{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number"}}}');
    const diff = diffLines(before, after);
    // Both texts come back from the diff, and only the new property's lines (and a comma) are added.
    expect(diff.filter((l) => l.op !== '+').map((l) => l.text).join('\n')).toBe(before);
    expect(diff.filter((l) => l.op !== '-').map((l) => l.text).join('\n')).toBe(after);
    expect(diff.filter((l) => l.op === '+').map((l) => l.text.trim())).toEqual(['},', '"b": {', '"type": "number"']);
    expect(diff.filter((l) => l.op === ' ').length).toBe(before.split('\n').length);
    expect(diffLines('x\ny', 'x\ny').every((l) => l.op === ' ')).toBe(true);
  });
});
