import type { RedisClient } from '../../storage/redis-connection.js';
import type { Logger } from '../../observability/logger.js';

/** Called with the partition's new `next` offset (the offset after its newest event). */
export type WakeupListener = (next: number) => void;

/**
 * Wake-up on publish (DESIGN.md §6): the `publishBatch` script SPUBLISHes the partition's new `next`
 * offset on the partition's notice channel; this hub holds one sharded subscription per partition that
 * has at least one open reader on this node and calls the readers at once. Readers still poll slowly
 * (`consumption.pollIntervalMs`) in case a notice is lost while the connection reconnects.
 *
 * The hub owns its connection (a subscribed connection cannot run commands): on a Redis Cluster, a
 * cluster client with sharded subscribers (`duplicateForShardedSubscribe`), which subscribes each channel
 * on the master owning its slot and moves the subscriptions when a failover moves the slot.
 */
export class PartitionWakeups {
  private readonly listeners = new Map<string, Set<WakeupListener>>();

  constructor(
    private readonly subscriber: RedisClient,
    private readonly logger: Logger,
  ) {
    subscriber.on('smessage', (channel: string, message: string) => {
      const next = Number(message);
      for (const listener of this.listeners.get(channel) ?? []) listener(next);
    });
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
      this.subscriber.ssubscribe(channel).catch((err: unknown) => this.logger.warn({ err: (err as Error).message, channel }, 'cannot subscribe to partition notices; readers poll'));
    }
    set.add(listener);
    return () => {
      const current = this.listeners.get(channel);
      if (!current?.delete(listener) || current.size > 0) return;
      this.listeners.delete(channel);
      this.subscriber.sunsubscribe(channel).catch(() => undefined);
    };
  }

  /** Closes the connection. */
  close(): void {
    this.listeners.clear();
    this.subscriber.disconnect();
  }
}
