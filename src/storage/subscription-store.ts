import { queueKeys } from './queue-state-store.js';
import { subscriptionKey, type Subscription } from '../domain/subscription/subscription.js';
import type { Keys } from './keys.js';
import { storageError, type RedisClient } from './redis/redis-connection.js';
import type { Scripts } from './scripts.js';
import { failureOf } from './script-failures.js';

/**
 * How long a deleted subscription's topology key stays as a tombstone (`deleted` = 1), in ms: longer than
 * any of its sessions can still be leaving (a lease, or a commit window of at most 60 s, and a margin).
 */
export const DELETED_TOPOLOGY_TTL_MS = 10 * 60_000;

/** Records fetched per MGET when a listing reads every subscription. */
const MGET_CHUNK = 500;

/**
 * Subscription records in Redis (keys.ts, `{registry}` slot): the record JSON per id, the ids by creation
 * time, the subscription key → id hash and, per event type, the set of its subscriptions' ids. Creation and
 * deletion of a record are one Lua script each; deletion then removes the consumption state (`{sub:<id>}`
 * slot) and announces the id on the subscription channel. Redis failures surface as `STORAGE_UNAVAILABLE` (503).
 */
export class SubscriptionStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly scripts: Scripts,
    private readonly keys: Keys,
  ) {}

  /**
   * Stores a new subscription unless its key is taken.
   * @returns `record.id` when stored, else the id of the subscription that holds the key (nothing written)
   */
  async create(record: Subscription): Promise<string> {
    const stored = await this.scripts
      .run(
        'createSubscription',
        [this.keys.subscriptionsByKey, this.keys.subscriptionIds, this.keys.subscription(record.id), ...record.event_types.map((name) => this.keys.eventTypeSubscriptions(name))],
        [record.id, subscriptionKey(record), JSON.stringify(record), Date.parse(record.created_at)],
      )
      .catch(storageError);
    return String(stored);
  }

  /** @returns the id of the subscription with this key (see `subscriptionKey`), or undefined */
  async idOfKey(key: string): Promise<string | undefined> {
    return (await this.redis.hget(this.keys.subscriptionsByKey, key).catch(storageError)) ?? undefined;
  }

  /** @returns the record, or undefined when there is none. @param id a valid subscription id (keys.ts throws otherwise) */
  async get(id: string): Promise<Subscription | undefined> {
    const value = await this.redis.get(this.keys.subscription(id)).catch(storageError);
    return value === null ? undefined : (JSON.parse(value) as Subscription);
  }

  /** The records of `ids` that exist, in the order of `ids`. */
  async getMany(ids: readonly string[]): Promise<Subscription[]> {
    const out: Subscription[] = [];
    for (let i = 0; i < ids.length; i += MGET_CHUNK) {
      const chunk = ids.slice(i, i + MGET_CHUNK).map((id) => this.keys.subscription(id));
      const values = await this.redis.mget(chunk).catch(storageError);
      for (const value of values) if (value !== null) out.push(JSON.parse(value) as Subscription);
    }
    return out;
  }

  /**
   * Ids newest first (created_at descending, then id descending), `count` of them from position `start`;
   * `count` undefined means all.
   */
  async idsNewestFirst(start: number, count?: number): Promise<string[]> {
    const stop = count === undefined ? -1 : start + count - 1;
    return this.redis.zrevrange(this.keys.subscriptionIds, start, stop).catch(storageError);
  }

  /** Ids of the subscriptions that read every one of `eventTypes` (valid names, at least one). */
  async idsOfEventTypes(eventTypes: readonly string[]): Promise<string[]> {
    return this.redis.sinter(eventTypes.map((name) => this.keys.eventTypeSubscriptions(name))).catch(storageError);
  }

  /**
   * Replaces a record that still exists (`SET … XX`), so an update racing a delete cannot bring it back.
   * Callers keep the key fields unchanged, so the key hash and event type sets stay right.
   * @returns false when the subscription is gone
   */
  async replace(record: Subscription): Promise<boolean> {
    const reply = await this.redis.set(this.keys.subscription(record.id), JSON.stringify(record), 'XX').catch(storageError);
    return reply === 'OK';
  }

  /**
   * Removes the record from the registry keys (one script), then the subscription's consumption state
   * (another slot: offsets, sessions, session info, topology, reset flag), then announces `topology` on
   * its notice channel so the live streams of it (whose sessions are gone) close.
   * @returns false when the subscription did not exist
   */
  async delete(record: Subscription): Promise<boolean> {
    const { id } = record;
    const removed = await this.scripts
      .run(
        'deleteSubscription',
        [this.keys.subscriptionsByKey, this.keys.subscriptionIds, this.keys.subscription(id), ...record.event_types.map((name) => this.keys.eventTypeSubscriptions(name))],
        [id, subscriptionKey(record)],
      )
      .catch(storageError);
    if (failureOf(removed, ['NOT_FOUND'])) return false;
    const k = this.keys;
    // The topology stays a while as a tombstone: a session of a stream still ending on some node would
    // otherwise write the assignment back when it leaves (applyTopology refuses a deleted subscription).
    const results = await this.redis
      .multi()
      .del(k.subscriptionOffsets(id), k.subscriptionSessions(id), k.subscriptionSessionInfo(id), k.subscriptionTopology(id), k.subscriptionReset(id), k.subscriptionDeadLetters(id), k.subscriptionExpiredEvents(id), ...queueKeys(k, id))
      .hset(k.subscriptionTopology(id), 'deleted', '1')
      .pexpire(k.subscriptionTopology(id), DELETED_TOPOLOGY_TTL_MS)
      .exec()
      .catch(storageError);
    for (const [err] of results ?? []) if (err) storageError(err);
    await this.redis.spublish(k.subscriptionNotices(id), 'topology').catch(storageError);
    return true;
  }
}
