import { onResubscribed, type RedisClient } from '../../storage/redis/redis-connection.js';
import type { Keys } from '../../storage/keys.js';
import type { Logger } from '../../observability/logger.js';
import type { SubscriptionNoticeKind } from '../../storage/subscription-state-store.js';

/**
 * What a listener hears: a notice of the subscription (`SubscriptionNoticeKind`), or `resubscribed`
 * when the connection came back (or, on a cluster, a node left) and notices may have been missed, so
 * the listener reads the state again.
 */
export type SubscriptionNotice = SubscriptionNoticeKind | 'resubscribed';

/** Called with each notice of the subscription listened to. */
export type SubscriptionNoticeListener = (notice: SubscriptionNotice) => void;

const KINDS: ReadonlySet<string> = new Set<SubscriptionNoticeKind>(['topology', 'commit', 'reset', 'authz', 'queue']);

/** Whether a message on a notice channel is one of the {@link SubscriptionNoticeKind}s. */
const isNotice = (message: string): message is SubscriptionNoticeKind => KINDS.has(message) || message.startsWith('ack ');

interface Channel {
  readonly listeners: Set<SubscriptionNoticeListener>;
  /** Settles once the SSUBSCRIBE was answered (or failed: then it was logged). */
  readonly subscribed: Promise<void>;
  /** True once the SSUBSCRIBE was answered; false while it is pending or after it failed. */
  confirmed: boolean;
}

/**
 * Change notices of subscriptions (docs/architecture.md#43-subscription-sessions): each subscription has its own sharded channel
 * (`keys.subscriptionNotices`, in the slot of its state, so the commit and assignment scripts SPUBLISH
 * on it), and a node subscribes only to the channels of the subscriptions it streams: the first
 * listener of a subscription SSUBSCRIBEs, the last one to leave SUNSUBSCRIBEs. A notice goes straight
 * to the listeners of its subscription, so what a node does per notice does not grow with the number
 * of subscriptions or streams it serves.
 *
 * Owns its connection, made like the partition wake-ups' (`duplicateForShardedSubscribe`): on a Redis
 * Cluster, ioredis keeps one sharded subscriber per master and moves a slot's channels when the slot
 * moves; ioredis also subscribes the channels again after a reconnect, and listeners are told
 * (`resubscribed`) to read the state again, since notices may have been lost meanwhile.
 */
export class SubscriptionNotices {
  private readonly channels = new Map<string, Channel>();
  /** False from a close of the subscriber connection until it is ready (and subscribed) again. */
  private connected = true;

  /** @param subscribeWaitMs how long `listen` waits for the SSUBSCRIBE answer before it goes on without it */
  constructor(
    private readonly subscriber: RedisClient,
    private readonly keys: Keys,
    private readonly logger: Logger,
    private readonly subscribeWaitMs: number,
  ) {
    subscriber.on('smessage', (channel: string, message: string) => {
      const entry = this.channels.get(channel);
      if (!entry || !isNotice(message)) return;
      for (const listener of entry.listeners) listener(message);
    });
    subscriber.on('close', () => {
      this.connected = false;
    });
    onResubscribed(subscriber, () => {
      this.connected = true;
      for (const entry of this.channels.values()) for (const listener of entry.listeners) listener('resubscribed');
    });
  }

  /**
   * Whether the notices of subscription `id` reach this node now: its channel's SSUBSCRIBE was answered
   * and the connection has not closed since. While not, its streams read their state at every heartbeat.
   */
  live(id: string): boolean {
    return this.connected && this.channels.get(this.keys.subscriptionNotices(id))?.confirmed === true;
  }

  /** Subscriptions this node listens to now (one channel each). */
  get size(): number {
    return this.channels.size;
  }

  /**
   * Registers `listener` for the notices of subscription `id`; the first listener of a subscription
   * subscribes its channel. Resolves once the subscription is in place, so every change made after it
   * resolved is heard — or after `subscribeWaitMs` when the subscriber connection does not answer (then
   * it subscribes when it can; streams fall back on their heartbeat's state reads meanwhile).
   * @returns a function that unregisters `listener` (the last one of a subscription unsubscribes)
   */
  async listen(id: string, listener: SubscriptionNoticeListener): Promise<() => void> {
    const channel = this.keys.subscriptionNotices(id);
    let entry = this.channels.get(channel);
    if (!entry) {
      const created: Channel = {
        listeners: new Set(),
        confirmed: false,
        subscribed: this.subscriber.ssubscribe(channel).then(
          () => {
            created.confirmed = true;
          },
          (err: unknown) => this.logger.warn({ err: (err as Error).message, subscription: id }, 'cannot subscribe to the notices of a subscription; its streams follow it by heartbeat'),
        ),
      };
      entry = created;
      this.channels.set(channel, entry);
    }
    const current = entry;
    current.listeners.add(listener);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([current.subscribed, new Promise<void>((resolve) => (timer = setTimeout(resolve, this.subscribeWaitMs)))]);
    clearTimeout(timer);
    return () => {
      if (!current.listeners.delete(listener) || current.listeners.size > 0 || this.channels.get(channel) !== current) return;
      this.channels.delete(channel);
      this.subscriber.sunsubscribe(channel).catch(() => undefined);
    };
  }

  /** Closes the connection. */
  close(): void {
    this.channels.clear();
    this.subscriber.disconnect();
  }
}
