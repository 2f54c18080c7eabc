import type { Redis } from 'ioredis';
import type { Logger } from '../../observability/logger.js';
import { masterNodes, type RedisClient } from './redis-connection.js';

/**
 * The oldest Redis the broker runs on. Sharded pub/sub came with Redis 7.0 and the broker depends on it:
 * the Lua scripts that append events and change subscriptions send their notices with `SPUBLISH`
 * (publishBatch, publishCompacted, growPartitions, commitCursors), and the partition wake-ups and
 * subscription notices listen with `SSUBSCRIBE`. Everything else the broker uses is older: `XTRIM … MINID`
 * (6.2), `XADD` with explicit ids, `XRANGE` with `COUNT`, `WAIT`, `HSCAN`, `cjson` in scripts. No Redis
 * Functions, `XAUTOCLAIM` or consumer groups are used. Valkey reports a `redis_version` it is compatible
 * with (7.2.4 for Valkey 7 and 8), which is what is compared.
 */
export const MIN_REDIS_VERSION = '7.0.0';

/**
 * The only eviction policy the broker accepts: with any other, a Redis at its `maxmemory` deletes keys
 * (events, offsets, cursors, sessions, event type records) instead of refusing the write, and data is
 * lost without an error. With `noeviction` a full Redis answers writes with an OOM error (answered 507
 * `STORAGE_FULL`, storage-full.ts; nothing is lost), and the nodes refuse publishes before that, at the
 * high-water mark (redis-memory.ts).
 */
export const REQUIRED_EVICTION_POLICY = 'noeviction';

/** What a Redis server says about itself; absent when it could not be read. */
export interface RedisServerFacts {
  /** `redis_version` from `INFO server`, e.g. `7.0.15`. */
  readonly version?: string;
  /** `maxmemory_policy` from `INFO memory` (or `CONFIG GET maxmemory-policy`), e.g. `noeviction`. */
  readonly policy?: string;
  /** Why a fact is absent (the command refused or unknown), for the warning. */
  readonly unreadable?: readonly string[];
}

/** The verdict on one server: reasons to refuse the start, and what could not be checked. */
export interface RedisServerVerdict {
  readonly refusals: readonly string[];
  readonly warnings: readonly string[];
}

/** Raised when a Redis the node would use does not meet the broker's requirements; the message says what to change. */
export class RedisRequirementError extends Error {
  override readonly name = 'RedisRequirementError';
}

/**
 * Compares dotted versions numerically (`7.0.15` < `7.2.4` < `10.0.0`); missing parts count as 0.
 * @returns negative, 0 or positive as `a` is older, the same or newer
 */
export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map((p) => Number.parseInt(p, 10) || 0);
  const pb = b.split('.').map((p) => Number.parseInt(p, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** The `field:value` lines of an `INFO` answer (section headers and blank lines skipped). */
export function parseInfo(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    if (line === '' || line.startsWith('#')) continue;
    const colon = line.indexOf(':');
    if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  return fields;
}

/**
 * Judges one server against {@link MIN_REDIS_VERSION} and {@link REQUIRED_EVICTION_POLICY}
 * (docs/operations.md "Redis"). A fact that could not be read is a warning, not a refusal:
 * managed services that hide `CONFIG` still answer `INFO`, and one that hides both is trusted to be
 * configured as documented.
 * @param where the server's address, named in every message
 */
export function judgeRedisServer(where: string, facts: RedisServerFacts): RedisServerVerdict {
  const refusals: string[] = [];
  const warnings: string[] = [];
  if (facts.version === undefined) {
    warnings.push(`could not read the version of the Redis at ${where}; the broker needs Redis ${MIN_REDIS_VERSION} or later`);
  } else if (compareVersions(facts.version, MIN_REDIS_VERSION) < 0) {
    refusals.push(
      `the Redis at ${where} is version ${facts.version}; the broker needs Redis ${MIN_REDIS_VERSION} or later ` +
        '(its scripts send notices with SPUBLISH and it listens with SSUBSCRIBE: sharded pub/sub, new in Redis 7.0). Upgrade that Redis.',
    );
  }
  if (facts.policy === undefined) {
    warnings.push(`could not read maxmemory-policy of the Redis at ${where}; make sure it is ${REQUIRED_EVICTION_POLICY}, or Redis may evict the broker's data when memory is full`);
  } else if (facts.policy !== REQUIRED_EVICTION_POLICY) {
    refusals.push(
      `the Redis at ${where} has maxmemory-policy ${facts.policy}: when memory is full it would evict the broker's keys (events, offsets, sessions) ` +
        `and lose data without an error. Set it to ${REQUIRED_EVICTION_POLICY}: \`CONFIG SET maxmemory-policy ${REQUIRED_EVICTION_POLICY}\` ` +
        `and \`maxmemory-policy ${REQUIRED_EVICTION_POLICY}\` in redis.conf so that it survives a restart (on a managed service, its parameter maxmemory-policy).`,
    );
  }
  return { refusals, warnings };
}

/** A node's address as the operator configured it: `host:port` or the unix socket path. */
export function addressOf(node: Redis): string {
  const { path, host, port } = node.options;
  return path !== undefined && path !== '' ? path : `${host ?? 'localhost'}:${String(port ?? 6379)}`;
}

/** The message of a failed command, for a warning. */
function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Reads one server's version and eviction policy: `INFO server` and `INFO memory` (one section each, so
 * Redis before 7.0, which takes one section, answers too). When `INFO memory` lacks the policy, or
 * `INFO` is refused, `CONFIG GET maxmemory-policy` is tried; managed services often rename or forbid
 * `CONFIG`, so its failure only leaves the fact unread.
 */
export async function readServerFacts(node: Redis): Promise<RedisServerFacts> {
  const unreadable: string[] = [];
  let version: string | undefined;
  let policy: string | undefined;
  try {
    version = parseInfo(await node.info('server')).get('redis_version');
  } catch (err) {
    unreadable.push(`INFO server: ${messageOf(err)}`);
  }
  try {
    policy = parseInfo(await node.info('memory')).get('maxmemory_policy');
  } catch (err) {
    unreadable.push(`INFO memory: ${messageOf(err)}`);
  }
  if (policy === undefined) {
    try {
      const answer: unknown = await node.call('CONFIG', 'GET', 'maxmemory-policy');
      if (Array.isArray(answer) && typeof answer[1] === 'string') policy = answer[1];
    } catch (err) {
      unreadable.push(`CONFIG GET maxmemory-policy: ${messageOf(err)}`);
    }
  }
  return { ...(version === undefined ? {} : { version }), ...(policy === undefined ? {} : { policy }), unreadable };
}

/**
 * Checks, right after connecting and before anything else starts, that the Redis the node uses meets
 * the broker's requirements (docs/operations.md "Redis"): version at least
 * {@link MIN_REDIS_VERSION} and `maxmemory-policy` {@link REQUIRED_EVICTION_POLICY}. On a Redis Cluster
 * every master is checked (each holds a share of the data). What could not be read is logged as a
 * warning and the node starts.
 * @throws RedisRequirementError naming every server that fails and what to change
 */
export async function assertRedisRequirements(redis: RedisClient, logger: Logger): Promise<void> {
  const nodes = masterNodes(redis);
  const verdicts = await Promise.all(
    nodes.map(async (node) => {
      const where = addressOf(node);
      const facts = await readServerFacts(node);
      return { where, facts, verdict: judgeRedisServer(where, facts) };
    }),
  );
  for (const { where, facts, verdict } of verdicts) {
    for (const warning of verdict.warnings) logger.warn({ redis: where, unreadable: facts.unreadable }, warning);
  }
  const refusals = verdicts.flatMap(({ verdict }) => verdict.refusals);
  if (refusals.length > 0) throw new RedisRequirementError(refusals.join('\n'));
}
