import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { SCRIPT_NAMES } from '../../src/storage/scripts.js';

const LUA_DIR = fileURLToPath(new URL('../../src/storage/lua/', import.meta.url));

describe('the list of Lua scripts', () => {
  it('SCRIPT_NAMES names every src/storage/lua/<name>-<keys>.lua file, and nothing else', () => {
    const files = readdirSync(LUA_DIR)
      .map((file) => /^([a-zA-Z]+)-(\d+|n)\.lua$/.exec(file)?.[1])
      .filter((name): name is string => name !== undefined);
    expect([...SCRIPT_NAMES].sort()).toEqual(files.sort());
  });
});
