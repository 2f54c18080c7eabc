import type { QuotaKind } from '../domain/batch/publish-quota.js';
import type { Keys } from './keys.js';
import type { Scripts } from './scripts.js';

/** The rates of one quota's bucket a charge counts against; 0 = that metric has no quota. */
export interface BucketRates {
  readonly kind: QuotaKind;
  readonly name: string;
  /** Events per second (0 = none). */
  readonly eventsPerSecond: number;
  /** Bytes per second (0 = none). */
  readonly bytesPerSecond: number;
}

/** What is left in one bucket after a charge (or a refusal): events and bytes, fractional, negative in debt. */
export interface BucketLeft {
  readonly events: number;
  readonly bytes: number;
}

/** The answer of {@link QuotaStore.charge}. */
export interface QuotaChargeResult {
  /** True when the publish was charged; false when a bucket was at or below zero (nothing charged). */
  readonly charged: boolean;
  /** What is left in the subject's and the owning application's buckets, in the order given. */
  readonly left: readonly [BucketLeft, BucketLeft];
}

/**
 * The token buckets of the publishing quotas in Redis, counted for the whole cluster (docs/publishing.md
 * "Quotas"; docs/decisions/0034-cluster-wide-publishing-quotas.md): one `chargeQuotas-2.lua` call per
 * publish charges its events and bytes to its subject's and its owning application's quotas at once
 * (both buckets under the `{quotas}` hash tag), on Redis's clock.
 */
export class QuotaStore {
  constructor(
    private readonly scripts: Scripts,
    private readonly keys: Keys,
  ) {}

  /**
   * Charges `events` and `bytes` to both buckets, unless one is in debt.
   * @param buckets the subject's quota, then the owning application's (rates 0 for a quota not set)
   * @throws Error from Redis (the caller fails open)
   */
  async charge(buckets: readonly [BucketRates, BucketRates], events: number, bytes: number): Promise<QuotaChargeResult> {
    const [subject, owner] = buckets;
    const reply = (await this.scripts.run('chargeQuotas', [this.keys.quotaBucket(subject.kind, subject.name), this.keys.quotaBucket(owner.kind, owner.name)], [
      subject.eventsPerSecond,
      subject.bytesPerSecond,
      owner.eventsPerSecond,
      owner.bytesPerSecond,
      events,
      bytes,
    ])) as readonly number[];
    const milli = (i: number): number => Number(reply[i] ?? 0) / 1000;
    return { charged: reply[0] === 1, left: [{ events: milli(1), bytes: milli(2) }, { events: milli(3), bytes: milli(4) }] };
  }
}
