import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../src/config/load-config.js';
import { errorCatalog } from '../../src/errors/catalog.js';
import { failureOf, SCRIPT_FAILURES, scriptError, scriptFailure, scriptFailureErrors, type ScriptFailure } from '../../src/storage/script-failures.js';
import { resolveIncludes } from '../../src/storage/scripts.js';

const LUA = path.join(projectRoot, 'src', 'storage', 'lua');
const INCLUDES = path.join(LUA, 'includes');
const scripts = readdirSync(LUA).filter((file) => file.endsWith('.lua'));
const failureNames = Object.keys(SCRIPT_FAILURES) as ScriptFailure[];

/** A script's code without comments. */
function withoutComments(lua: string): string {
  return lua.replace(/--\[\[[\s\S]*?\]\]/g, '').replace(/--[^\n]*/g, '');
}

/** A script's code without comments and string literals (only identifiers count). */
function code(lua: string): string {
  return withoutComments(lua).replace(/'(?:[^'\\]|\\.)*'/g, "''");
}

describe('script failures', () => {
  it('are the same numbers in Lua (includes/failures.lua) and in TypeScript', () => {
    const lua = readFileSync(path.join(INCLUDES, 'failures.lua'), 'utf8');
    const defined: Record<string, number> = {};
    for (const m of lua.matchAll(/^local ([A-Z_]+) = (-\d+)$/gm)) defined[m[1] ?? ''] = Number(m[2]);
    expect(defined).toEqual(SCRIPT_FAILURES);
    expect(new Set(Object.values(SCRIPT_FAILURES)).size).toBe(failureNames.length);
  });

  it('are mapped, script by script, exactly as the scripts answer them', () => {
    for (const file of scripts) {
      const name = file.replace(/-(\d+|n)\.lua$/, '');
      // What the script answers, its includes too (but not the list of every failure).
      const resolved = resolveIncludes(readFileSync(path.join(LUA, file), 'utf8'), INCLUDES, file, new Set(['failures']));
      const used = failureNames.filter((f) => new RegExp(`\\b${f}\\b`).test(code(resolved)));
      const mapped = Object.keys((scriptFailureErrors as Record<string, object>)[name] ?? {});
      expect(mapped.sort(), file).toEqual(used.sort());
      if (used.length > 0) expect(readFileSync(path.join(LUA, file), 'utf8'), file).toMatch(/^--#include failures$/m);
    }
    for (const [script, failures] of Object.entries(scriptFailureErrors)) {
      for (const code of Object.values(failures as Record<string, string | null>)) if (code !== null) expect(errorCatalog, script).toHaveProperty(code);
    }
  });

  it('are read from a reply: a negative integer alone or first in a table', () => {
    expect(scriptFailure(5)).toBeUndefined();
    expect(scriptFailure(0)).toBeUndefined();
    expect(scriptFailure([1, 0, 1])).toBeUndefined();
    expect(scriptFailure(['topology-json', ''])).toBeUndefined();
    expect(scriptFailure(SCRIPT_FAILURES.SESSION_GONE)).toBe('SESSION_GONE');
    expect(scriptFailure([SCRIPT_FAILURES.PARTITION_NOT_OWNED, 2])).toBe('PARTITION_NOT_OWNED');
    expect(() => scriptFailure(-99)).toThrow(/unknown failure code -99/);
    expect(failureOf(SCRIPT_FAILURES.NOT_FOUND, ['NOT_FOUND', 'VERSION_MOVED'])).toBe('NOT_FOUND');
    expect(() => failureOf(SCRIPT_FAILURES.LOCK_HELD, ['NOT_FOUND'])).toThrow(/LOCK_HELD, expected NOT_FOUND/);
  });

  it('become the catalog error the table names', () => {
    const moved = scriptError('updateEventType', 'VERSION_MOVED', { name: 'orders' });
    expect({ code: moved.code, status: moved.status, detail: moved.detail }).toEqual({ code: 'EVENT_TYPE_CHANGED_CONCURRENTLY', status: 409, detail: 'EventType "orders" was changed concurrently; retry' });
    expect(scriptError('applyTopology', 'CURSOR_RESET_RUNNING').detail).toBe('Cursors are being reset; try again shortly');
    expect(scriptError('deleteSubscription', 'NOT_FOUND', { id: 'x' }).code).toBe('SUBSCRIPTION_NOT_FOUND');
  });
});

describe('script includes', () => {
  it('are resolved in every script: no include line is left, each snippet once', () => {
    for (const file of scripts) {
      const resolved = resolveIncludes(readFileSync(path.join(LUA, file), 'utf8'), INCLUDES, file);
      expect(resolved, file).not.toMatch(/^--#include/m);
      for (const fn of ['now_ms', 'index_time', 'append_refusal']) expect(resolved.split(`local function ${fn}(`).length, `${file} ${fn}`).toBeLessThanOrEqual(2);
    }
  });

  it('replace what several scripts repeated: Redis time in ms, the time index, the append refusal (closed timeline, partition never opened)', () => {
    const bodies = scripts.map((file) => withoutComments(readFileSync(path.join(LUA, file), 'utf8')));
    expect(bodies.filter((b) => b.includes("redis.call('TIME')"))).toEqual([]);
    expect(bodies.filter((b) => b.includes("'closed'"))).toEqual([]);
    expect(bodies.filter((b) => b.includes('now_ms()')).length).toBeGreaterThanOrEqual(3);
    // The four append scripts: a batch's share of a partition, compacted or not, idempotent or not.
    expect(bodies.filter((b) => b.includes('index_time(')).length).toBe(4);
    expect(bodies.filter((b) => b.includes('append_refusal(')).length).toBe(4);
  });

  it('insert a snippet once, nested includes too, and refuse an unknown name', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'lua-includes-'));
    writeFileSync(path.join(dir, 'a.lua'), '--#include b\nlocal a = b + 1\n');
    writeFileSync(path.join(dir, 'b.lua'), 'local b = 1\n');
    expect(resolveIncludes('--#include a\n--#include b\nreturn a\n', dir, 'x-1.lua')).toBe('local b = 1\nlocal a = b + 1\n-- include b: already above\nreturn a\n');
    expect(() => resolveIncludes('--#include missing\n', dir, 'x-1.lua')).toThrow(/x-1.lua: --#include missing: no file missing.lua/);
  });
});
