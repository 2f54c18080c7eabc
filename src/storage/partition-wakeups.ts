import type { Logger } from '../observability/logger.js';
import { onResubscribed, type RedisClient } from './redis/redis-connection.js';

/**
 * While a channel's notices reach the node, its readers' safety-net poll runs this many times less
 * often than `consumption.pollIntervalMs` (every 10 s by default instead of every second).
 */
export const IDLE_POLL_FACTOR = 10;

/** Called with the partition's new `next` offset (the offset after its newest event; `Infinity`: read now). */
export type WakeupListener = (next: number) => void;

/**
 * The change feed of partitions as readers see it (docs/architecture.md "Wake-ups on sharded channels"): notices that a partition has new
 * events, per notice channel (`keys.partitionNotices(...)`), and whether they currently arrive. The
 * consumption services depend on this interface; {@link PartitionWakeups} implements it over Redis
 * sharded pub/sub.
 */
export interface PartitionChangeFeed {
  /** Whether notices of `channel` reach this node now; while not, readers poll at the full rate. */
  live(channel: string): boolean;
  /**
   * Registers a listener for a notice channel. @returns a function that unregisters it
   */
  listen(channel: string, listener: WakeupListener): () => void;
}

/**
 * Wake-up on publish, so readers wake without polling (docs/architecture.md "Wake-ups on sharded
 * channels"): the `publishBatch` script SPUBLISHes the partition's new `next`
 * offset on the partition's notice channel; this hub holds one sharded subscription per partition that
 * has at least one open reader on this node and calls the readers at once. When a channel's SSUBSCRIBE
 * is answered, and after the connection reconnected, its readers are called with `Infinity` (read now:
 * notices may have been missed). Readers
 * still poll as a safety net: every `consumption.pollIntervalMs` while their channel is not `live`
 * (subscribing pending or failed, connection closed), `IDLE_POLL_FACTOR` times slower while it is.
 *
 * The hub owns its connection (a subscribed connection cannot run commands): on a Redis Cluster, a
 * cluster client with sharded subscribers (`duplicateForShardedSubscribe`), which subscribes each channel
 * on the master owning its slot and moves the subscriptions when a failover moves the slot.
 */
export class PartitionWakeups implements PartitionChangeFeed {
  private readonly listeners = new Map<string, Set<WakeupListener>>();
  /** Channels whose SSUBSCRIBE was answered (and not unsubscribed since). */
  private readonly confirmed = new Set<string>();
  /** False from a close of the connection until it is ready (and subscribed) again. */
  private connected = true;

  constructor(
    private readonly subscriber: RedisClient,
    private readonly logger: Logger,
  ) {
    subscriber.on('smessage', (channel: string, message: string) => {
      const next = Number(message);
      for (const listener of this.listeners.get(channel) ?? []) listener(next);
    });
    subscriber.on('close', () => {
      this.connected = false;
    });
    onResubscribed(subscriber, () => {
      this.connected = true;
      for (const set of this.listeners.values()) for (const listener of set) listener(Number.POSITIVE_INFINITY);
    });
  }

  /** Whether notices of `channel` reach this node now (its SSUBSCRIBE was answered, the connection is up). */
  live(channel: string): boolean {
    return this.connected && this.confirmed.has(channel);
  }

  /**
   * Registers a listener for a notice channel (`keys.partitionNotices(...)`); the first listener of a
   * channel subscribes it. @returns a function that unregisters (the last one unsubscribes)
   */
  listen(channel: string, listener: WakeupListener): () => void {
    let set = this.listeners.get(channel);
    if (!set) {
      set = new Set();
      this.listeners.set(channel, set);
      this.subscriber.ssubscribe(channel).then(
        () => {
          const current = this.listeners.get(channel);
          if (!current) return;
          this.confirmed.add(channel);
          // A publish between the readers' first read and this answer sent its notice to nobody, and from
          // now on they poll slowly: read once more now.
          for (const listener of current) listener(Number.POSITIVE_INFINITY);
        },
        (err: unknown) => this.logger.warn({ err: (err as Error).message, channel }, 'cannot subscribe to partition notices; readers poll'),
      );
    }
    set.add(listener);
    return () => {
      const current = this.listeners.get(channel);
      if (!current?.delete(listener) || current.size > 0) return;
      this.listeners.delete(channel);
      this.confirmed.delete(channel);
      this.subscriber.sunsubscribe(channel).catch(() => undefined);
    };
  }

  /** Closes the connection. */
  close(): void {
    this.listeners.clear();
    this.confirmed.clear();
    this.subscriber.disconnect();
  }
}
