import type { Keys } from './keys.js';
import { storageError, type RedisClient } from './redis/redis-connection.js';
import type { Scripts } from './scripts.js';
import { failureOf } from './script-failures.js';

/** The keys of a queue-mode subscription's batches (docs/architecture.md#45-queue-mode-state), deleted with the subscription and by a cursor reset. */
export function queueKeys(keys: Keys, id: string): [string, string, string, string] {
  return [keys.subscriptionQueue(id), keys.subscriptionQueueOpen(id), keys.subscriptionQueueWaiting(id), keys.subscriptionQueueDeadlines(id)];
}

/** A batch handed to a stream: offsets `from`..`to` of one partition (inclusive, internal offsets). */
export interface QueueBatch {
  /** `<event type>:<partition>` (the offsets field). */
  readonly field: string;
  readonly from: number;
  readonly to: number;
  /** Times its events were handed out, this time included (a dead-letter batch: the deliveries that made it one). */
  readonly deliveries: number;
  /** Its one event reached the delivery limit: the broker applies the dead-letter policy instead of sending it. */
  readonly dead: boolean;
}

/** What a claim asks for (see `claimQueueBatches-7.lua`). */
export interface QueueClaim {
  readonly streamId: string;
  /** A batch's deadline after it is handed out, ms (`commit_timeout`). */
  readonly commitTimeoutMs: number;
  /** Events the stream may hold at most. */
  readonly maxHeld: number;
  /** Events per batch at most (`batch_limit`). */
  readonly batchLimit: number;
  /** Batches to hand out at most. */
  readonly maxBatches: number;
  /** Deliveries after which an event is dead-lettered (0: never). */
  readonly deliveryLimit: number;
  /** Redeliver one event at a time (a dead-letter policy counts deliveries per event). */
  readonly isolate: boolean;
  /** Index of the partition to look at first for new offsets. */
  readonly rotate: number;
  /** Newest offset known per offsets field. */
  readonly newest: ReadonlyMap<string, number>;
}

/** Answer of a claim: the batches handed out, how many events the stream holds now, whether one of its batches passed its deadline, and when the next deadline falls. */
export type QueueClaimOutcome =
  | {
      readonly kind: 'ok';
      readonly batches: readonly QueueBatch[];
      readonly held: number;
      readonly timedOut: boolean;
      /** Ms until the earliest deadline of a batch any stream holds (undefined: none is held). */
      readonly msUntilDeadline: number | undefined;
    }
  | { readonly kind: 'session_gone' };

/** Answer of an acknowledgement or hand-back: per cursor settled (true) or acknowledged already (false), or the first cursor (0-based) that names no batch the stream holds. */
export type QueueSettleOutcome = { readonly kind: 'ok'; readonly settled: readonly boolean[] } | { readonly kind: 'not_held'; readonly index: number };

/** Per partition of a queue-mode subscription: events handed out and not acknowledged, of them waiting to be handed out again, and the last offset handed out. */
export interface QueuePartitionState {
  inFlight: number;
  waiting: number;
  dispatched: number | undefined;
}

/**
 * The batches of queue-mode subscriptions in Redis, under the subscription's hash tag beside its offsets and
 * sessions (docs/consuming.md "Queue mode"; docs/architecture.md#45-queue-mode-state). Every change is a Lua
 * script: claims are fenced by the stream's session, acknowledgements and hand-backs by the batch record
 * (only its holder settles it). Redis failures surface as `STORAGE_UNAVAILABLE` (503).
 */
export class QueueStateStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly scripts: Scripts,
    private readonly keys: Keys,
  ) {}

  /** Hands batches to a stream (`claimQueueBatches-7.lua`). @throws BrokerError 503 */
  async claim(id: string, c: QueueClaim): Promise<QueueClaimOutcome> {
    const k = this.keys;
    const args: (string | number)[] = [c.streamId, c.commitTimeoutMs, c.maxHeld, c.batchLimit, c.maxBatches, c.deliveryLimit, c.isolate ? '1' : '0', c.rotate];
    for (const [field, newest] of c.newest) args.push(field, newest);
    const reply = (await this.scripts
      .run('claimQueueBatches', [...queueKeys(k, id), k.subscriptionOffsets(id), k.subscriptionSessions(id), k.subscriptionNotices(id)], args)
      .catch(storageError)) as (string | number)[];
    if (failureOf(reply, ['SESSION_GONE'])) return { kind: 'session_gone' };
    const batches: QueueBatch[] = [];
    for (let i = 3; i + 4 < reply.length; i += 5) {
      batches.push({ field: String(reply[i]), from: Number(reply[i + 1]), to: Number(reply[i + 2]), deliveries: Number(reply[i + 3]), dead: Number(reply[i + 4]) === 1 });
    }
    const untilDeadline = Number(reply[2]);
    return { kind: 'ok', batches, held: Number(reply[1]), timedOut: Number(reply[0]) === 1, msUntilDeadline: untilDeadline < 0 ? undefined : untilDeadline };
  }

  /**
   * Acknowledges (`ack`) or hands back (`release`) batches of one stream (`settleQueueBatches-6.lua`).
   * @param cursors each batch by its partition's offsets field and last offset
   * @throws BrokerError 503
   */
  async settle(id: string, streamId: string, how: 'ack' | 'release', cursors: readonly { readonly field: string; readonly offset: number }[]): Promise<QueueSettleOutcome> {
    const k = this.keys;
    const [queue, open, waiting, deadlines] = queueKeys(k, id);
    const args: (string | number)[] = [streamId, how];
    for (const c of cursors) args.push(c.field, c.offset);
    const reply = (await this.scripts.run('settleQueueBatches', [queue, open, waiting, deadlines, k.subscriptionOffsets(id), k.subscriptionNotices(id)], args).catch(storageError)) as number[];
    if (failureOf(reply, ['BATCH_NOT_HELD'])) return { kind: 'not_held', index: Number(reply[1]) - 1 };
    return { kind: 'ok', settled: reply.map((r) => Number(r) === 1) };
  }

  /** Joins a queue-mode stream: its session with a lease of `leaseMs` from Redis's now (renewed by `heartbeat-1.lua`), and its info (JSON). @throws BrokerError 503 */
  async join(id: string, streamId: string, info: string, leaseMs: number): Promise<void> {
    const k = this.keys;
    const now = await this.nowMs();
    const joined = await this.redis.multi().zadd(k.subscriptionSessions(id), now + leaseMs, streamId).hset(k.subscriptionSessionInfo(id), streamId, info).exec().catch(storageError);
    for (const [err] of joined ?? []) if (err) storageError(err);
  }

  /**
   * Removes a queue-mode stream's session (`streamId`; undefined: none) and every session whose lease
   * expired; the batches they hold stay theirs until their deadlines. @throws BrokerError 503
   */
  async leave(id: string, streamId: string | undefined): Promise<void> {
    const k = this.keys;
    const expired = await this.redis.zrangebyscore(k.subscriptionSessions(id), '-inf', await this.nowMs()).catch(storageError);
    const gone = [...new Set([...expired, ...(streamId === undefined ? [] : [streamId])])];
    if (gone.length === 0) return;
    const results = await this.redis.multi().zrem(k.subscriptionSessions(id), ...gone).hdel(k.subscriptionSessionInfo(id), ...gone).exec().catch(storageError);
    for (const [err] of results ?? []) if (err) storageError(err);
  }

  /** Redis's clock, ms (leases are on it). */
  private async nowMs(): Promise<number> {
    const [seconds, micros] = await this.redis.time().catch(storageError);
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  /** Forgets every batch (a cursor reset: offsets are handed out again from the new committed ones). @throws BrokerError 503 */
  async clear(id: string): Promise<void> {
    await this.redis.del(...queueKeys(this.keys, id)).catch(storageError);
  }

  /** Per offsets field, events in flight and waiting, and the last offset handed out (partitions never handed out are absent). @throws BrokerError 503 */
  async partitions(id: string): Promise<Map<string, QueuePartitionState>> {
    const [queue, open, waiting] = queueKeys(this.keys, id);
    const results = await this.redis.multi().hgetall(queue).zrange(open, 0, -1).zrange(waiting, 0, -1).exec().catch(storageError);
    const values = (results ?? []).map(([err, value]) => {
      if (err) storageError(err);
      return value;
    });
    const [hash, openMembers, waitingMembers] = values as [Record<string, string>, string[], string[]];
    const out = new Map<string, QueuePartitionState>();
    const entry = (field: string): QueuePartitionState => {
      let e = out.get(field);
      if (!e) out.set(field, (e = { inFlight: 0, waiting: 0, dispatched: undefined }));
      return e;
    };
    for (const [name, value] of Object.entries(hash)) if (name.startsWith('d:')) entry(name.slice(2)).dispatched = Number(value);
    const sizeOf = (member: string): { field: string; size: number } => {
      const [field = '', from = '0', to = '0'] = member.split('|');
      return { field, size: Number(to) - Number(from) + 1 };
    };
    for (const m of openMembers) {
      const { field, size } = sizeOf(m);
      entry(field).inFlight += size;
    }
    for (const m of waitingMembers) {
      const { field, size } = sizeOf(m);
      const e = entry(field);
      e.waiting += size;
      e.inFlight -= size;
    }
    return out;
  }
}
