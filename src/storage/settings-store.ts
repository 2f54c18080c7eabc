import type { AdminAuthorization } from '../domain/settings/admin-authorization.js';
import type { PublishQuota } from '../domain/batch/publish-quota.js';
import type { Keys } from './keys.js';
import type { RedisClient } from './redis/redis-connection.js';

/** Everything in the settings, read together. */
export interface SettingsSnapshot {
  /** Feature name → enabled, for the features ever set. */
  readonly features: ReadonlyMap<string, boolean>;
  /** Blacklist entries `<BLACKLIST_TYPE>:<name>`. */
  readonly blacklist: ReadonlySet<string>;
  /** Undefined until initialized. */
  readonly admins: AdminAuthorization | undefined;
  /** Publishing quotas by `<kind>:<name>` (docs/publishing.md "Quotas"). */
  readonly quotas: ReadonlyMap<string, PublishQuota>;
}

/**
 * Administrator settings in Redis (docs/operations.md "Administrator settings"): features, blacklist,
 * administrators and publishing quotas under the `{settings}` hash tag. Every change is announced on `settingsChannel`.
 */
export class SettingsStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  /** Reads all settings in one round trip. @throws Error when Redis fails */
  async read(): Promise<SettingsSnapshot> {
    const results = await this.redis.multi().hgetall(this.keys.settingsFeatures).smembers(this.keys.settingsBlacklist).get(this.keys.settingsAdmins).hgetall(this.keys.settingsQuotas).exec();
    const [features, blacklist, admins, quotas] = (results ?? []).map(([err, value]) => {
      if (err) throw err;
      return value;
    }) as [Record<string, string>, string[], string | null, Record<string, string>];
    return {
      features: new Map(Object.entries(features).map(([name, value]) => [name, value === '1'])),
      blacklist: new Set(blacklist),
      admins: admins === null ? undefined : (JSON.parse(admins) as AdminAuthorization),
      quotas: new Map(Object.entries(quotas ?? {}).map(([entry, value]) => [entry, JSON.parse(value) as PublishQuota])),
    };
  }

  /** Stores the first administrators unless some are stored already. @returns true when stored */
  async initializeAdmins(admins: AdminAuthorization): Promise<boolean> {
    return (await this.redis.set(this.keys.settingsAdmins, JSON.stringify(admins), 'NX')) === 'OK';
  }

  async setAdmins(admins: AdminAuthorization): Promise<void> {
    await this.redis.multi().set(this.keys.settingsAdmins, JSON.stringify(admins)).publish(this.keys.settingsChannel, 'admins').exec();
  }

  async setFeature(name: string, enabled: boolean): Promise<void> {
    await this.redis.multi().hset(this.keys.settingsFeatures, name, enabled ? '1' : '0').publish(this.keys.settingsChannel, 'features').exec();
  }

  /** Sets (a quota) or removes (undefined) the publishing quota of `<kind>:<name>`. */
  async setQuota(entry: string, quota: PublishQuota | undefined): Promise<void> {
    const multi = this.redis.multi();
    if (quota === undefined) multi.hdel(this.keys.settingsQuotas, entry);
    else multi.hset(this.keys.settingsQuotas, entry, JSON.stringify(quota));
    await multi.publish(this.keys.settingsChannel, 'quotas').exec();
  }

  /** Adds (`blocked`) or removes an entry `<type>:<name>`. */
  async setBlocked(entry: string, blocked: boolean): Promise<void> {
    const multi = this.redis.multi();
    if (blocked) multi.sadd(this.keys.settingsBlacklist, entry);
    else multi.srem(this.keys.settingsBlacklist, entry);
    await multi.publish(this.keys.settingsChannel, 'blacklist').exec();
  }
}
