import type { StreamBatch } from './stream-client.js';

/**
 * Records what producers got acknowledged and what consumers were sent, and reports every breach of
 * at-least-once delivery in order (docs/concepts.md "Commits and rebalancing"):
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
  /** Per partition (`<event type>|<partition>`), every batch with events: stream, offsets and arrival time. */
  private readonly arrivals = new Map<string, Arrival[]>();
  /** Per partition, every acknowledged commit: offset, committing stream and when the acknowledgement came. */
  private readonly commits = new Map<string, CommitAck[]>();

  /** Records events a publish answered 200 for (their `metadata.eid`). */
  submitted(eids: readonly string[]): void {
    for (const eid of eids) this.acknowledged.add(eid);
  }

  /**
   * Records one batch received on stream `streamId`.
   * @param arrivedAt when the batch came off the socket (`performance.now()` ms; `StreamClient.arrivedAt`),
   *   for {@link staleDeliveries}; absent = now
   */
  batch(streamId: string, batch: StreamBatch, arrivedAt: number = performance.now()): void {
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
    const arrivals = this.arrivals.get(partition) ?? [];
    arrivals.push({ streamId, from: firstNumber, to: offsetNumber(lastOfBatch), at: arrivedAt });
    this.arrivals.set(partition, arrivals);
    const runs = this.holders.get(partition) ?? [];
    if (runs.at(-1) !== streamId) runs.push(streamId);
    this.holders.set(partition, runs);
    for (const event of events) {
      const eid = (event.metadata as { eid?: string } | undefined)?.eid;
      if (eid) this.delivered.add(eid);
    }
  }

  /**
   * Records a commit the broker acknowledged (204, or 200 with each cursor `committed` or `outdated`: the
   * partition's committed offset is then at least the cursor's).
   * @param at when the acknowledgement arrived (`performance.now()` ms)
   */
  committed(streamId: string, cursors: readonly StreamBatch['cursor'][], at: number = performance.now()): void {
    for (const cursor of cursors) {
      const partition = `${cursor.event_type ?? ''}|${cursor.partition}`;
      const acks = this.commits.get(partition) ?? [];
      acks.push({ streamId, offset: offsetNumber(cursor.offset), at });
      this.commits.set(partition, acks);
    }
  }

  /**
   * Batches that reached a client after their partition had moved on: a batch whose first
   * offset is at or below an offset that another stream had already received and committed before the
   * batch arrived. Exact: once offset X of a partition is committed, a stream that takes the partition
   * starts after X, so only a stream that lost the partition and still sent what it held (a stopping node
   * writing its last batch after releasing its session) can deliver X or earlier afterwards. Redelivery
   * of uncommitted events to the next holder is not reported. Needs commits ({@link committed}) and arrival
   * times measured at the socket.
   * @returns one line per such batch: the partition, both streams, offsets and the times (ms) involved
   */
  staleDeliveries(): string[] {
    const out: string[] = [];
    for (const [partition, arrivals] of this.arrivals) {
      const acks = [...(this.commits.get(partition) ?? [])].sort((x, y) => x.at - y.at);
      for (const batch of arrivals) {
        const overtaken = acks.filter((ack) => ack.at < batch.at && ack.streamId !== batch.streamId && ack.offset >= batch.from).at(0);
        if (overtaken === undefined) continue;
        const first = arrivals.filter((a) => a.streamId === overtaken.streamId).reduce((min, a) => Math.min(min, a.at), Number.POSITIVE_INFINITY);
        const received = arrivals.filter((a) => a.streamId === overtaken.streamId && a.at < batch.at).reduce((max, a) => Math.max(max, a.to), -1);
        out.push(
          `partition ${partition}: stream ${batch.streamId} delivered ${batch.from}–${batch.to} at ${batch.at.toFixed(1)} ms, ` +
            `${(batch.at - overtaken.at).toFixed(1)} ms after stream ${overtaken.streamId} (its first batch of the partition at ${first.toFixed(1)} ms) ` +
            `had received up to ${received} and its commit of ${overtaken.offset} was acknowledged`,
        );
      }
    }
    return out;
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

/** A batch of one partition as it reached a client. */
interface Arrival {
  readonly streamId: string;
  readonly from: number;
  readonly to: number;
  /** `performance.now()` ms */
  readonly at: number;
}

/** A commit the broker acknowledged. */
interface CommitAck {
  readonly streamId: string;
  readonly offset: number;
  /** `performance.now()` ms */
  readonly at: number;
}

function offsetNumber(offset: string): number {
  return Number(offset.slice(offset.lastIndexOf('-') + 1));
}
