import { brokerError } from '../errors/catalog.js';
import type { PublishQuota, QuotaKind } from '../domain/batch/publish-quota.js';

/** What one publish costs a quota: its body's bytes (as received, inflated), or its events once validated. */
export type QuotaMetric = 'bytes' | 'events';

/** A token bucket: `tokens` refill at `rate` per second up to `rate` (one second of burst); a charge may take it below 0 (debt). */
interface Bucket {
  readonly kind: QuotaKind;
  readonly name: string;
  readonly metric: QuotaMetric;
  rate: number;
  tokens: number;
  at: number;
}

const FIELD: Readonly<Record<QuotaMetric, keyof PublishQuota>> = { bytes: 'bytes_per_second', events: 'events_per_second' };

/**
 * The publishing quotas counted by this node alone, one token bucket per quota and metric refilled at
 * the quota's rate with one second of burst: what a node falls back to when the cluster-wide count in
 * Redis has not answered for longer than `publish.quotaFailOpenMs` (`PublishQuotas`,
 * docs/publishing.md "Quotas"). A bucket in debt refuses with 429 `QUOTA_EXCEEDED` and a `Retry-After`
 * of the seconds it needs to be out of debt; a bucket not in debt takes any charge. Counted per node,
 * behind a balancer over n nodes a producer gets up to n times its quota while this fallback lasts.
 */
export class NodeQuotaBuckets {
  private readonly buckets = new Map<string, Bucket>();

  /**
   * @param quota the quota set for a kind and name (`Settings.quota`), read at each charge so changes apply at once
   * @param clock monotonic milliseconds (default `performance.now`; tests pass their own)
   */
  constructor(
    private readonly quota: (kind: QuotaKind, name: string) => PublishQuota | undefined,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /**
   * Charges one publish's `amount` of `metric` to the quotas of its subject and owning application.
   * @throws BrokerError QUOTA_EXCEEDED (429, `Retry-After`) when either is in debt; nothing is charged then
   */
  charge(subject: string, owningApplication: string, metric: QuotaMetric, amount: number): void {
    const now = this.clock();
    const due: Bucket[] = [];
    for (const [kind, name] of [['subject', subject], ['owning_application', owningApplication]] as const) {
      const key = `${kind}:${name}:${metric}`;
      const rate = this.quota(kind, name)?.[FIELD[metric]];
      if (rate === undefined) {
        this.buckets.delete(key);
        continue;
      }
      const bucket = this.refilled(key, { kind, name, metric }, rate, now);
      if (bucket.tokens <= 0) {
        const retryAfter = Math.max(1, Math.ceil(-bucket.tokens / rate));
        throw brokerError('QUOTA_EXCEEDED', { kind, name, limit: rate, unit: metric, retryAfter });
      }
      due.push(bucket);
    }
    for (const bucket of due) bucket.tokens -= amount;
  }

  /**
   * Drops the buckets of quotas no longer set, so a removed quota leaves nothing behind (call on every
   * settings change).
   */
  prune(): void {
    for (const [key, bucket] of this.buckets) if (this.quota(bucket.kind, bucket.name)?.[FIELD[bucket.metric]] === undefined) this.buckets.delete(key);
  }

  /** How many buckets this node keeps (one per quota and metric charged since it was set). */
  get size(): number {
    return this.buckets.size;
  }

  /** The bucket of `key` refilled up to `now`, made (full) or resized when the quota is new or changed. */
  private refilled(key: string, of: Pick<Bucket, 'kind' | 'name' | 'metric'>, rate: number, now: number): Bucket {
    let bucket = this.buckets.get(key);
    if (bucket === undefined) {
      bucket = { ...of, rate, tokens: rate, at: now };
      this.buckets.set(key, bucket);
      return bucket;
    }
    if (bucket.rate !== rate) bucket.rate = rate;
    bucket.tokens = Math.min(rate, bucket.tokens + ((now - bucket.at) / 1000) * rate);
    bucket.at = now;
    return bucket;
  }
}
