import type { PartitionAssignment, PartitionKey } from '../domain/subscription/rebalance.js';
import type { PartitionDeadLetterState } from '../domain/subscription/dead-letter.js';
import type { Keys } from './keys.js';
import { storageError, type RedisClient } from './redis/redis-connection.js';
import type { Scripts } from './scripts.js';
import { failureOf } from './script-failures.js';

/** What a streaming session records about itself (session info hash). */
export interface SessionInfo {
  /** Directly requested partitions; empty = automatic assignment. */
  readonly requested: readonly PartitionKey[];
  /** `streaming` while its HTTP stream is open; `closed` inside the commit window after it ended. */
  readonly state: 'streaming' | 'closed';
  /** The broker node serving it (for logs and stats). */
  readonly node: string;
}

/** A session with its lease expiry (ms on Redis's clock). */
export interface StoredSession {
  readonly id: string;
  readonly expiresAt: number;
  readonly info: SessionInfo;
}

/** The consumption state of a subscription, read atomically (MULTI on its slot). */
export interface SubscriptionState {
  /** Redis's clock at the read, ms. */
  readonly nowMs: number;
  /** Assignment version for compare-and-set; 0 before the first assignment. */
  readonly version: number;
  readonly assignments: readonly PartitionAssignment[];
  /** Every session still in the set, expired ones included (`expiresAt <= nowMs`). */
  readonly sessions: readonly StoredSession[];
  readonly resetRunning: boolean;
}

/** A change applied together with a new assignment by {@link SubscriptionStateStore.apply}. */
export interface TopologyChange {
  readonly expectedVersion: number;
  readonly assignments: readonly PartitionAssignment[];
  readonly removeSessions?: readonly string[];
  /** Adds or rewrites a session with a lease of `leaseMs` from now. */
  readonly upsertSession?: { readonly id: string; readonly info: SessionInfo; readonly leaseMs: number };
  /** Refuse with `reset` while a cursor reset runs (new streams). */
  readonly refuseDuringReset: boolean;
}

/** Result of a commit: per cursor committed or outdated, or why nothing was committed. */
/** `no_session`: the script's SESSION_GONE; `not_owned`: its PARTITION_NOT_OWNED (`index` 0-based). */
export type CommitOutcome = { readonly kind: 'ok'; readonly committed: readonly boolean[] } | { readonly kind: 'no_session' } | { readonly kind: 'not_owned'; readonly index: number };

/**
 * What a message on a subscription's notice channel says (`keys.subscriptionNotices`): the assignment or
 * sessions changed (`topology`, also when the subscription was deleted), an offset moved (`commit`), a
 * cursor reset starts (`reset`: streams end), its authorization changed (`authz`: streams end); in queue
 * mode, batches wait to be handed out again (`queue`) and a stream's batches were acknowledged or handed
 * back (`ack <stream id>`: it may take more).
 */
export type SubscriptionNoticeKind = 'topology' | 'commit' | 'reset' | 'authz' | 'queue' | `ack ${string}`;

/** The offsets hash field of a partition. */
export const offsetField = (eventType: string, partition: string): string => `${eventType}:${partition}`;

/**
 * Subscription consumption state in Redis under the subscription's hash tag (docs/architecture.md#43-subscription-sessions): committed
 * offsets, sessions with lease expiry on Redis's clock, the assignment with a version, the reset
 * marker. Multi-key changes are Lua scripts fenced against the assignment; Redis failures surface as
 * `STORAGE_UNAVAILABLE` (503).
 */
export class SubscriptionStateStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly scripts: Scripts,
    private readonly keys: Keys,
  ) {}

  /** Reads assignment, sessions and reset marker in one transaction. */
  async read(id: string): Promise<SubscriptionState> {
    const k = this.keys;
    const results = await this.redis
      .multi()
      .time()
      .hmget(k.subscriptionTopology(id), 'version', 'partitions')
      .zrange(k.subscriptionSessions(id), 0, -1, 'WITHSCORES')
      .hgetall(k.subscriptionSessionInfo(id))
      .exists(k.subscriptionReset(id))
      .exec()
      .catch(storageError);
    const values = (results ?? []).map(([err, value]) => {
      if (err) storageError(err);
      return value;
    });
    const [time, topology, sessionScores, infos, reset] = values as [[string, string], [string | null, string | null], string[], Record<string, string>, number];
    const sessions: StoredSession[] = [];
    for (let i = 0; i + 1 < sessionScores.length; i += 2) {
      const sid = sessionScores[i] as string;
      const info = infos[sid];
      sessions.push({ id: sid, expiresAt: Number(sessionScores[i + 1]), info: info ? (JSON.parse(info) as SessionInfo) : { requested: [], state: 'closed', node: '' } });
    }
    return {
      nowMs: Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000),
      version: Number(topology[0] ?? 0),
      assignments: topology[1] ? (JSON.parse(topology[1]) as PartitionAssignment[]) : [],
      sessions,
      resetRunning: reset === 1,
    };
  }

  /**
   * Applies an assignment and its session changes if the version did not move; tells the nodes that
   * stream the subscription (`topology` on its notice channel).
   * @returns `ok`, `VERSION_MOVED` (read again), `CURSOR_RESET_RUNNING` (with `refuseDuringReset`) or
   *   `NOT_FOUND` (the subscription was deleted: nothing is written)
   */
  async apply(id: string, change: TopologyChange): Promise<'ok' | 'VERSION_MOVED' | 'CURSOR_RESET_RUNNING' | 'NOT_FOUND'> {
    const k = this.keys;
    const upsert = change.upsertSession;
    const outcome = await this.scripts
      .run('applyTopology', [k.subscriptionTopology(id), k.subscriptionSessions(id), k.subscriptionSessionInfo(id), k.subscriptionReset(id), k.subscriptionNotices(id)], [
        change.expectedVersion,
        JSON.stringify(change.assignments),
        change.refuseDuringReset ? '1' : '0',
        (change.removeSessions ?? []).join(' '),
        upsert?.id ?? '',
        upsert ? JSON.stringify(upsert.info) : '',
        upsert?.leaseMs ?? 0,
      ])
      .catch(storageError);
    return failureOf(outcome, ['VERSION_MOVED', 'CURSOR_RESET_RUNNING', 'NOT_FOUND']) ?? 'ok';
  }

  /** Renews a session's lease. @returns `SESSION_GONE` when the session is gone or expired, else how many sessions expired */
  async heartbeat(id: string, streamId: string, leaseMs: number): Promise<number | 'SESSION_GONE'> {
    const reply = await this.scripts.run('heartbeat', [this.keys.subscriptionSessions(id)], [streamId, leaseMs]).catch(storageError);
    return failureOf(reply, ['SESSION_GONE']) ?? Number(reply);
  }

  /**
   * Commits cursors of one stream, fenced against the assignment (see `commitCursors-4.lua`); a commit
   * that moved an offset tells the nodes streaming the subscription (`commit` on its notice channel).
   */
  async commit(id: string, streamId: string, cursors: readonly { field: string; offset: number }[]): Promise<CommitOutcome> {
    const k = this.keys;
    const args: (string | number)[] = [streamId];
    for (const c of cursors) args.push(c.field, String(c.offset));
    const result = (await this.scripts.run('commitCursors', [k.subscriptionOffsets(id), k.subscriptionSessions(id), k.subscriptionTopology(id), k.subscriptionNotices(id)], args).catch(storageError)) as number[];
    const failure = failureOf(result, ['SESSION_GONE', 'PARTITION_NOT_OWNED']);
    if (failure === 'SESSION_GONE') return { kind: 'no_session' };
    if (failure === 'PARTITION_NOT_OWNED') return { kind: 'not_owned', index: Number(result[1]) - 1 };
    return { kind: 'ok', committed: result.map((r) => Number(r) === 1) };
  }

  /** Sets the offsets of partitions that have none. */
  async initOffsets(id: string, offsets: ReadonlyMap<string, number>): Promise<void> {
    if (offsets.size === 0) return;
    const args: string[] = [];
    for (const [field, offset] of offsets) args.push(field, String(offset));
    await this.scripts.run('initOffsets', [this.keys.subscriptionOffsets(id)], args).catch(storageError);
  }

  /**
   * Gives partitions added by repartitioning an offset (`extendOffsets-1.lua`), only if the subscription
   * is initialized; partitions that have one keep it.
   * @param offsets offsets field → last committed offset (-1 = before the first event)
   * @returns how many partitions got an offset now
   * @throws BrokerError 503 when Redis fails
   */
  async extendOffsets(id: string, offsets: ReadonlyMap<string, number>): Promise<number> {
    if (offsets.size === 0) return 0;
    const args: string[] = [];
    for (const [field, offset] of offsets) args.push(field, String(offset));
    return Number(await this.scripts.run('extendOffsets', [this.keys.subscriptionOffsets(id)], args).catch(storageError));
  }

  /** Committed offsets by field; empty before the subscription was initialized. */
  async offsets(id: string): Promise<Map<string, number>> {
    const all = await this.redis.hgetall(this.keys.subscriptionOffsets(id)).catch(storageError);
    return new Map(Object.entries(all).map(([field, value]) => [field, Number(value)]));
  }

  /** Overwrites offsets (cursor reset) and tells the nodes streaming the subscription. */
  async writeOffsets(id: string, offsets: ReadonlyMap<string, number>): Promise<void> {
    if (offsets.size > 0) {
      const flat: string[] = [];
      for (const [field, offset] of offsets) flat.push(field, String(offset));
      await this.redis.hset(this.keys.subscriptionOffsets(id), ...flat).catch(storageError);
    }
    await this.announce(id, 'commit');
  }

  /** Marks a cursor reset as running for `ttlMs`. @returns false when one runs already */
  async startReset(id: string, ttlMs: number): Promise<boolean> {
    const set = await this.redis.set(this.keys.subscriptionReset(id), '1', 'PX', ttlMs, 'NX').catch(storageError);
    if (set === 'OK') await this.announce(id, 'reset');
    return set === 'OK';
  }

  /**
   * Announces `kind` on the subscription's sharded notice channel (`SPUBLISH`; e.g. `authz`: every stream
   * of it ends), heard by every node that streams it. @throws BrokerError 503
   */
  async announce(id: string, kind: SubscriptionNoticeKind): Promise<void> {
    await this.redis.spublish(this.keys.subscriptionNotices(id), kind).catch(storageError);
  }

  /**
   * The dead-letter state of partitions (docs/architecture.md#44-dead-letter-queue-state), by offsets field; partitions without any are
   * absent. @throws BrokerError 503
   */
  async deadLetters(id: string, fields: readonly string[]): Promise<Map<string, PartitionDeadLetterState>> {
    if (fields.length === 0) return new Map();
    const names = fields.flatMap((f) => [`failed:${f}`, `until:${f}`]);
    const values = await this.redis.hmget(this.keys.subscriptionDeadLetters(id), ...names).catch(storageError);
    const out = new Map<string, PartitionDeadLetterState>();
    fields.forEach((field, i) => {
      const failed = values[2 * i];
      const until = values[2 * i + 1];
      if (failed == null && until == null) return;
      out.set(field, { failedSends: Number(failed ?? 0), searchUntil: until == null ? undefined : Number(until) });
    });
    return out;
  }

  /** Adds one failed send to each partition (a stream ended with its events uncommitted). @throws BrokerError 503 */
  async addFailedSends(id: string, fields: readonly string[]): Promise<void> {
    if (fields.length === 0) return;
    const key = this.keys.subscriptionDeadLetters(id);
    const pipeline = this.redis.pipeline();
    for (const field of fields) pipeline.hincrby(key, `failed:${field}`, 1);
    const results = await pipeline.exec().catch(storageError);
    for (const [err] of results ?? []) if (err) storageError(err);
  }

  /**
   * Writes a partition's dead-letter state: `failedSends` 0 and no window remove its fields.
   * @throws BrokerError 503
   */
  async setDeadLetter(id: string, field: string, state: PartitionDeadLetterState): Promise<void> {
    const key = this.keys.subscriptionDeadLetters(id);
    const pipeline = this.redis.pipeline();
    if (state.failedSends > 0) pipeline.hset(key, `failed:${field}`, String(state.failedSends));
    else pipeline.hdel(key, `failed:${field}`);
    if (state.searchUntil !== undefined) pipeline.hset(key, `until:${field}`, String(state.searchUntil));
    else pipeline.hdel(key, `until:${field}`);
    const results = await pipeline.exec().catch(storageError);
    for (const [err] of results ?? []) if (err) storageError(err);
  }

  /**
   * Adds `expired` to the events of partition `field` that retention removed before the subscription
   * read them (docs/consuming.md "Events removed before they were read"). @throws BrokerError 503
   */
  async addExpiredEvents(id: string, field: string, expired: number): Promise<void> {
    await this.redis.hincrby(this.keys.subscriptionExpiredEvents(id), field, expired).catch(storageError);
  }

  /**
   * Events that retention removed before the subscription read them, by offsets field; partitions
   * without any are absent. @throws BrokerError 503
   */
  async expiredEvents(id: string): Promise<Map<string, number>> {
    const all = await this.redis.hgetall(this.keys.subscriptionExpiredEvents(id)).catch(storageError);
    return new Map(Object.entries(all).map(([field, value]) => [field, Number(value)]));
  }

  /** Forgets every partition's dead-letter state (a cursor reset). @throws BrokerError 503 */
  async clearDeadLetters(id: string): Promise<void> {
    await this.redis.del(this.keys.subscriptionDeadLetters(id)).catch(storageError);
  }

  /** Ends a cursor reset. */
  async endReset(id: string): Promise<void> {
    await this.redis.del(this.keys.subscriptionReset(id)).catch(storageError);
  }
}
