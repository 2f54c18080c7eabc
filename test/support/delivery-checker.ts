import type { StreamBatch } from './stream-client.js';

/**
 * Records what producers got acknowledged and what consumers were sent, and reports every breach of
 * at-least-once delivery in order (issue 3 §3.2):
 * - an acknowledged (`submitted`) event that no stream ever delivered;
 * - an offset delivered twice within one stream;
 * - offsets going backwards within a partition of one stream.
 * Redelivery to another stream after a rebalance is allowed (at-least-once).
 */
export class DeliveryChecker {
  private readonly acknowledged = new Set<string>();
  private readonly delivered = new Set<string>();
  private readonly lastOffset = new Map<string, string>();
  private readonly problems: string[] = [];
  /** Per partition, the streams that delivered it in order of receipt, runs collapsed. */
  private readonly holders = new Map<string, string[]>();

  /** Records events a publish answered 200 for (their `metadata.eid`). */
  submitted(eids: readonly string[]): void {
    for (const eid of eids) this.acknowledged.add(eid);
  }

  /** Records one batch received on stream `streamId`. */
  batch(streamId: string, batch: StreamBatch): void {
    const events = batch.events ?? [];
    if (events.length === 0) return;
    const partitionKey = `${streamId}|${batch.cursor.event_type ?? ''}|${batch.cursor.partition}`;
    const last = this.lastOffset.get(partitionKey);
    const lastOfBatch = batch.cursor.offset;
    const firstNumber = offsetNumber(lastOfBatch) - events.length + 1;
    if (last !== undefined && offsetNumber(last) >= firstNumber) {
      this.problems.push(`stream ${streamId} partition ${batch.cursor.partition}: offset ${firstNumber} delivered after ${offsetNumber(last)} (duplicate or backwards)`);
    }
    this.lastOffset.set(partitionKey, lastOfBatch);
    const partition = `${batch.cursor.event_type ?? ''}|${batch.cursor.partition}`;
    const runs = this.holders.get(partition) ?? [];
    if (runs.at(-1) !== streamId) runs.push(streamId);
    this.holders.set(partition, runs);
    for (const event of events) {
      const eid = (event.metadata as { eid?: string } | undefined)?.eid;
      if (eid) this.delivered.add(eid);
    }
  }

  /** Every breach found, acknowledged-but-undelivered events included. */
  report(): string[] {
    const missing = [...this.acknowledged].filter((eid) => !this.delivered.has(eid));
    return [...this.problems, ...(missing.length > 0 ? [`${missing.length} acknowledged events never delivered, e.g. ${missing.slice(0, 3).join(', ')}`] : [])];
  }

  /**
   * For scenarios where a partition moves at most once per stream: a stream that delivered a partition,
   * lost it to another and delivered it again means two streams held it at the same time.
   */
  exclusiveHolders(): string[] {
    const out: string[] = [];
    for (const [partition, runs] of this.holders) {
      if (new Set(runs).size !== runs.length) out.push(`partition ${partition} went back and forth between streams: ${runs.join(' → ')}`);
    }
    return out;
  }

  /** Number of distinct acknowledged events delivered. */
  get deliveredCount(): number {
    return [...this.acknowledged].filter((eid) => this.delivered.has(eid)).length;
  }
}

function offsetNumber(offset: string): number {
  return Number(offset.slice(offset.lastIndexOf('-') + 1));
}
