import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { projectRoot } from '../config/load-config.js';
import type { RedisClient } from './redis/redis-connection.js';
import { DIRECT_ARGUMENT_MIN_BYTES, DirectArgumentsCommand } from './direct-arguments.js';

/**
 * Names of the Lua scripts in `src/storage/lua`: file `<name>-<numberOfKeys>.lua`, or `<name>-n.lua`
 * for a script whose header lists a fixed head of KEYS followed by a variable tail (every key still
 * travels in KEYS, never built inside Lua). test/unit/lua-scripts.test.ts compares the list with the files.
 */
export const SCRIPT_NAMES = [
  'publishBatch',
  'trimPartition',
  'createEventType',
  'updateEventType',
  'deleteEventType',
  'createSubscription',
  'deleteSubscription',
  'applyTopology',
  'heartbeat',
  'commitCursors',
  'initOffsets',
  'extendOffsets',
  'growPartitions',
  'publishCompacted',
  'publishIdempotent',
  'publishCompactedIdempotent',
  'confirmReplicated',
  'markDeleted',
  'compactPartition',
  'pruneCompactionIndex',
  'holdLock',
  'setTimelines',
  'deleteStorage',
  'setDefaultStorage',
  'claimQueueBatches',
  'settleQueueBatches',
  'chargeQuotas',
] as const;

/** The name of one Lua script of `src/storage/lua` ({@link SCRIPT_NAMES}). */
export type ScriptName = (typeof SCRIPT_NAMES)[number];

/** The line that pulls a shared snippet of `lua/includes/<name>.lua` into a script. */
const INCLUDE = '^--#include ([a-z][a-z0-9-]*)[ \\t]*$';

/**
 * Replaces each `--#include <name>` line of a script with the text of `includes/<name>.lua` (the
 * snippets several scripts share: failure codes, Redis time in ms, the time index, the closed-timeline
 * check), before the script is registered, so its SHA is that of the resolved text. An include may
 * include others; each is inserted once per script, at its first mention. Keys still only travel in
 * KEYS (an include defines local functions that take them as arguments).
 * @throws Error when an include does not exist (the node does not start)
 */
export function resolveIncludes(lua: string, includeDir: string, file: string, seen: Set<string> = new Set()): string {
  return lua.replace(new RegExp(INCLUDE, 'gm'), (_, name: string) => {
    if (seen.has(name)) return `-- include ${name}: already above`;
    seen.add(name);
    let text: string;
    try {
      text = readFileSync(path.join(includeDir, `${name}.lua`), 'utf8');
    } catch {
      throw new Error(`${file}: --#include ${name}: no file ${name}.lua in ${includeDir}`);
    }
    return resolveIncludes(text, includeDir, file, seen).trimEnd();
  });
}

/** An ARGV value of a script (numbers are sent as decimal text). */
export type ScriptArg = string | number | Buffer;

/**
 * The one script loader, so every script is registered and named the same way: registers every
 * `lua/*.lua` file, its `--#include` lines resolved ({@link resolveIncludes}), with ioredis
 * `defineCommand` (EVALSHA with a transparent EVAL fallback) and runs them by name. Expected failures
 * come back as the negative codes of `script-failures.ts`. On a standalone client without
 * auto-pipelining, a call with a Buffer argument of at least `DIRECT_ARGUMENT_MIN_BYTES` (a partition's
 * events) is sent as a {@link DirectArgumentsCommand}, which hands that argument to the socket without
 * ioredis's copy.
 */
export class Scripts {
  /** Declared key count; -1 = variable (`-n.lua`). */
  private readonly numberOfKeys = new Map<string, number>();
  /** Each script's resolved text and its SHA-1 (hex), for calls sent as {@link DirectArgumentsCommand}. */
  private readonly sources = new Map<string, { readonly lua: string; readonly sha: string }>();
  /** The client writes each command to its socket when sent: direct arguments are safe on it. */
  private readonly direct: Redis | undefined;

  constructor(private readonly redis: RedisClient) {
    this.direct = redis instanceof Redis && redis.options.enableAutoPipelining !== true ? redis : undefined;
    const dir = path.join(projectRoot, 'src', 'storage', 'lua');
    const variadic: string[] = [];
    for (const file of readdirSync(dir)) {
      const match = /^([a-zA-Z]+)-(\d+|n)\.lua$/.exec(file);
      if (!match) continue;
      const [, name, keys] = match as unknown as [string, string, string];
      const lua = resolveIncludes(readFileSync(path.join(dir, file), 'utf8'), path.join(dir, 'includes'), file);
      // Without numberOfKeys, ioredis takes the key count as the command's first argument.
      redis.defineCommand(name, keys === 'n' ? { lua } : { numberOfKeys: Number(keys), lua });
      this.numberOfKeys.set(name, keys === 'n' ? -1 : Number(keys));
      this.sources.set(name, { lua, sha: createHash('sha1').update(lua).digest('hex') });
      if (keys === 'n') variadic.push(name);
    }
    // Auto-pipelining picks a cluster node by a command's first string argument; a variadic script's
    // first argument is its key count, so it would be queued for the wrong node. Those scripts (registry
    // changes, rare) are sent on their own. A new array: the default one is shared by every client.
    redis.options.autoPipeliningIgnoredCommands = [...(redis.options.autoPipeliningIgnoredCommands ?? []), ...variadic];
  }

  /**
   * Runs a script. @param keys exactly the script's declared keys, in its header's order
   * @throws Error when the key count does not match the script's contract, or from Redis
   */
  run(name: ScriptName, keys: readonly string[], args: readonly ScriptArg[]): Promise<unknown> {
    const expected = this.numberOfKeys.get(name);
    if (expected === undefined) throw new Error(`script ${name} is not loaded`);
    if (expected !== -1 && expected !== keys.length) throw new Error(`script ${name} takes ${String(expected)} keys, got ${keys.length}`);
    if (this.direct !== undefined && args.some((arg) => Buffer.isBuffer(arg) && arg.length >= DIRECT_ARGUMENT_MIN_BYTES)) return this.runDirect(this.direct, name, keys, args);
    const command = (this.redis as unknown as Record<string, (...a: ScriptArg[]) => Promise<unknown>>)[name];
    if (!command) throw new Error(`script ${name} is not loaded`);
    return expected === -1 ? command.call(this.redis, keys.length, ...keys, ...args) : command.call(this.redis, ...keys, ...args);
  }

  /**
   * `EVALSHA` as a {@link DirectArgumentsCommand}, and `EVAL` of the script's text when Redis does not
   * hold it (`NOSCRIPT`: a restarted or flushed Redis), as ioredis's own script commands do.
   */
  private async runDirect(redis: Redis, name: string, keys: readonly string[], args: readonly ScriptArg[]): Promise<unknown> {
    const source = this.sources.get(name);
    if (source === undefined) throw new Error(`script ${name} is not loaded`);
    const send = (command: 'evalsha' | 'eval', script: string): Promise<unknown> =>
      redis.sendCommand(new DirectArgumentsCommand(command, [script, keys.length, ...keys, ...args], { replyEncoding: 'utf8' })) as Promise<unknown>;
    try {
      return await send('evalsha', source.sha);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return send('eval', source.lua);
    }
  }
}
