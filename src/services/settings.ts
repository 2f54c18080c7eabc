import { onResubscribed, type RedisClient } from '../storage/redis/redis-connection.js';
import { brokerError } from '../errors/catalog.js';
import type { Logger } from '../observability/logger.js';
import type { Keys } from '../storage/keys.js';
import type { AdminAuthorization } from '../domain/settings/admin-authorization.js';
import type { SettingsSnapshot, SettingsStore } from '../storage/settings-store.js';
import { quotaEntry, type PublishQuota, type PublishQuotaEntry, type QuotaKind } from '../domain/batch/publish-quota.js';

/** The feature toggles (docs/operations.md "Feature toggles"); all are off until enabled. */
export const FEATURES = [
  'disable_event_type_creation',
  'disable_event_type_deletion',
  'delete_event_type_with_subscriptions',
  'event_type_deletion_only_admins',
  'disable_subscription_creation',
  'remote_tokeninfo',
  'kpi_collection',
  'audit_log_collection',
  'disable_db_write_operations',
  'force_event_type_authz',
  'force_subscription_authz',
  'repartitioning',
  'token_subscription_iteration',
] as const;

export type Feature = (typeof FEATURES)[number];

/** Blacklist entry types (docs/operations.md "Blacklist"). */
export const BLACKLIST_TYPES = ['CONSUMER_APP', 'CONSUMER_ET', 'PRODUCER_APP', 'PRODUCER_ET'] as const;

export type BlacklistType = (typeof BLACKLIST_TYPES)[number];

/** `GET /settings/blacklist` (docs/operations.md "Blacklist"). */
export interface BlacklistView {
  readonly producers: { readonly event_types: string[]; readonly apps: string[] };
  readonly consumers: { readonly event_types: string[]; readonly apps: string[] };
}

/** How often a node re-reads the settings even without a change notice (the "within one second" bound). */
const REFRESH_INTERVAL_MS = 1000;

/**
 * The settings as this node sees them (feature toggles, blacklist, administrators, publishing quotas; docs/operations.md
 * "Administrator settings"): a snapshot in memory,
 * so the publish and stream paths check toggles and the blacklist without a Redis call. A change on any
 * node is announced on `settingsChannel` and re-read at once by every node; a re-read every second
 * bounds staleness when a notice is lost (reconnects). Listeners run after each re-read that changed
 * something (streams end blocked consumers there).
 */
export class Settings {
  private snapshot: SettingsSnapshot = { features: new Map(), blacklist: new Set(), admins: undefined, quotas: new Map() };
  private readonly listeners = new Set<() => void>();
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;
  private again = false;

  /** @param initialAdmins stored for all three admin lists when Redis holds none (config `auth.initialAdmins`) */
  constructor(
    private readonly store: SettingsStore,
    private readonly keys: Keys,
    private readonly initialAdmins: AdminAuthorization,
    private readonly logger: Logger,
  ) {}

  /** Initializes the administrators if needed, loads the snapshot and follows changes. @throws Error when Redis fails */
  async start(subscriber: RedisClient): Promise<void> {
    await this.store.initializeAdmins(this.initialAdmins);
    subscriber.on('message', (channel: string) => {
      if (channel === this.keys.settingsChannel) this.refresh();
    });
    onResubscribed(subscriber, () => this.refresh());
    // Subscribed before the first read: a change between the two is in the snapshot or announced.
    await subscriber.subscribe(this.keys.settingsChannel);
    this.snapshot = await this.store.read();
    this.timer = setInterval(() => this.refresh(), REFRESH_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.listeners.clear();
  }

  /** Runs `listener` after every change of the settings seen by this node. @returns a function removing it */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  enabled(feature: Feature): boolean {
    return this.snapshot.features.get(feature) === true;
  }

  /** `GET /settings/features`: every known feature with its state. */
  features(): { feature: Feature; enabled: boolean }[] {
    return FEATURES.map((feature) => ({ feature, enabled: this.enabled(feature) }));
  }

  /** @throws BrokerError 400 for an unknown feature name */
  async setFeature(feature: string, enabled: boolean): Promise<void> {
    if (!isFeature(feature)) throw brokerError('UNKNOWN_FEATURE', { feature, known: FEATURES.join(', ') });
    await this.store.setFeature(feature, enabled);
    await this.reload();
  }

  isBlocked(type: BlacklistType, name: string): boolean {
    return this.snapshot.blacklist.has(`${type}:${name}`);
  }

  blacklist(): BlacklistView {
    const of = (type: BlacklistType) =>
      [...this.snapshot.blacklist]
        .filter((entry) => entry.startsWith(`${type}:`))
        .map((entry) => entry.slice(type.length + 1))
        .sort();
    return {
      producers: { event_types: of('PRODUCER_ET'), apps: of('PRODUCER_APP') },
      consumers: { event_types: of('CONSUMER_ET'), apps: of('CONSUMER_APP') },
    };
  }

  /** Blocks or unblocks `name`; every node applies it on the change notice. */
  async setBlocked(type: BlacklistType, name: string, blocked: boolean): Promise<void> {
    await this.store.setBlocked(`${type}:${name}`, blocked);
    await this.reload();
  }

  /** The publishing quota set for `kind` and `name`, if any (docs/publishing.md "Quotas"). */
  quota(kind: QuotaKind, name: string): PublishQuota | undefined {
    return this.snapshot.quotas.get(quotaEntry(kind, name));
  }

  /** `GET /settings/quotas`: every quota, by kind and name. */
  quotas(): PublishQuotaEntry[] {
    return [...this.snapshot.quotas]
      .map(([entry, quota]): PublishQuotaEntry => {
        const at = entry.indexOf(':');
        return { kind: entry.slice(0, at) as QuotaKind, name: entry.slice(at + 1), ...quota };
      })
      .sort((a, b) => (a.kind === b.kind ? a.name.localeCompare(b.name) : a.kind.localeCompare(b.kind)));
  }

  /** Sets (`quota`) or removes (undefined) a publishing quota; every node applies it on the change notice. */
  async setQuota(kind: QuotaKind, name: string, quota: PublishQuota | undefined): Promise<void> {
    await this.store.setQuota(quotaEntry(kind, name), quota);
    await this.reload();
  }

  admins(): AdminAuthorization {
    return this.snapshot.admins ?? this.initialAdmins;
  }

  async setAdmins(admins: AdminAuthorization): Promise<void> {
    await this.store.setAdmins(admins);
    await this.reload();
  }

  /** Re-reads now (after a change made on this node, so its own next request sees it). */
  private async reload(): Promise<void> {
    this.refresh();
    while (this.reading) await this.reading;
  }

  /** Starts a re-read, or queues one behind the running read. */
  private refresh(): void {
    if (this.reading) {
      this.again = true;
      return;
    }
    this.reading = this.store
      .read()
      .then((next) => {
        const changed = !sameSnapshot(this.snapshot, next);
        this.snapshot = next;
        if (changed) for (const listener of this.listeners) listener();
      })
      .catch((err: unknown) => this.logger.warn({ err }, 'could not re-read the settings; keeping the last ones'))
      .finally(() => {
        this.reading = undefined;
        if (this.again) {
          this.again = false;
          this.refresh();
        }
      });
  }
}

export function isFeature(name: string): name is Feature {
  return (FEATURES as readonly string[]).includes(name);
}

export function isBlacklistType(name: string): name is BlacklistType {
  return (BLACKLIST_TYPES as readonly string[]).includes(name);
}

function sameSnapshot(a: SettingsSnapshot, b: SettingsSnapshot): boolean {
  if (a.features.size !== b.features.size || a.blacklist.size !== b.blacklist.size) return false;
  for (const [name, enabled] of a.features) if (b.features.get(name) !== enabled) return false;
  for (const entry of a.blacklist) if (!b.blacklist.has(entry)) return false;
  if (a.quotas.size !== b.quotas.size) return false;
  for (const [entry, quota] of a.quotas) if (JSON.stringify(b.quotas.get(entry)) !== JSON.stringify(quota)) return false;
  return JSON.stringify(a.admins) === JSON.stringify(b.admins);
}
