import { describe, expect, it } from 'vitest';
import { FOLDER_MAX_FILES, FUNCTION_MAX_LINES, folderSizes, functionSizes, repositoryRoot } from '../../scripts/code-size.js';

/**
 * A newcomer finds their way: no function of src/ longer than FUNCTION_MAX_LINES, no folder of src/ with
 * more than FOLDER_MAX_FILES files side by side (`node dist/scripts/code-size.js` lists the largest).
 * src/storage/lua/ is the one exception: one file per Lua script, named by its contract and loaded from
 * that one folder (src/storage/scripts.ts).
 */
const FOLDER_EXCEPTIONS = new Set(['src/storage/lua']);

describe('the size of the code', () => {
  const root = repositoryRoot();

  it(`has no function in src/ over ${FUNCTION_MAX_LINES} lines`, () => {
    const sizes = functionSizes(root);
    expect(sizes.length).toBeGreaterThan(100);
    const long = sizes.filter((f) => f.lines > FUNCTION_MAX_LINES).map((f) => `${f.file}:${f.line} ${f.name} (${f.lines} lines)`);
    expect(long).toEqual([]);
  });

  it(`has no folder in src/ with more than ${FOLDER_MAX_FILES} files`, () => {
    const sizes = folderSizes(root);
    const full = sizes.filter((f) => f.files > FOLDER_MAX_FILES && !FOLDER_EXCEPTIONS.has(f.folder)).map((f) => `${f.folder}/ (${f.files} files)`);
    expect(full).toEqual([]);
  });
});
