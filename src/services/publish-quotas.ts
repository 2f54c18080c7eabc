import { brokerError, withHeaders, BrokerError } from '../errors/catalog.js';
import type { PublishQuota, QuotaKind } from '../domain/batch/publish-quota.js';
import { rateLimitHeaders, type RateLimitState } from '../domain/batch/rate-limit-headers.js';
import type { Logger } from '../observability/logger.js';
import type { QuotaCheckMeter } from '../observability/meters.js';
import type { BucketLeft, BucketRates, QuotaChargeResult, QuotaStore } from '../storage/quota-store.js';
import { NodeQuotaBuckets } from './node-quota-buckets.js';

/** How the quota check waits for Redis and what it does when Redis does not answer (config `publish.quotaTimeoutMs`, `publish.quotaFailOpenMs`). */
export interface QuotaCheckOptions {
  /** Most ms a publish waits for the cluster-wide count; then it is admitted unchecked. */
  readonly timeoutMs: number;
  /** Most ms publishes are admitted unchecked after the count first failed; then this node counts alone until Redis answers again. */
  readonly failOpenMs: number;
}

const KINDS = ['subject', 'owning_application'] as const;
const POLICY_PREFIX: Readonly<Record<QuotaKind, 'subject' | 'application'>> = { subject: 'subject', owning_application: 'application' };

/**
 * The publishing quotas, counted for the whole cluster (docs/publishing.md "Quotas";
 * docs/decisions/0034-cluster-wide-publishing-quotas.md): a token bucket per quota in Redis, holding one
 * second of the quota and refilled on Redis's clock; one script call per publish charges its events and
 * bytes to its subject's and its owning application's quotas together, once the batch is validated and
 * before anything is written. A bucket in debt refuses with 429 `QUOTA_EXCEEDED` (`Retry-After`); this
 * node remembers until when, and refuses the next publishes of that quota before their validation
 * ({@link refuseInDebt}), without asking Redis. Every answer of a publish a quota applies to carries the
 * `RateLimit-Policy` and `RateLimit` headers (src/domain/batch/rate-limit-headers.ts).
 *
 * When Redis does not answer within `publish.quotaTimeoutMs` (or fails), the publish goes on unchecked:
 * quotas fail open, for at most `publish.quotaFailOpenMs` from the first failure; after that, this node
 * counts alone (NodeQuotaBuckets) until Redis answers again. While the count fails, one publish at a time
 * asks Redis again and the others do not wait for it. Each change of state is logged, and every publish
 * not counted in Redis is counted by `broker_publish_quota_checks_total`.
 */
export class PublishQuotas {
  /** Quota (`<kind>:<name>`) → this node's clock (ms) until which its bucket is in debt, and the metric in debt. */
  private readonly debts = new Map<string, { readonly until: number; readonly unit: 'events' | 'bytes' }>();
  private readonly node: NodeQuotaBuckets;
  /** When the count in Redis first failed (this node's clock, ms); undefined while it answers. */
  private failingSince: number | undefined;
  /** A publish is asking Redis while the count fails. */
  private probing = false;

  /**
   * @param quota the quota set for a kind and name (`Settings.quota`), read at each charge so changes apply at once
   * @param store the buckets in Redis
   * @param clock monotonic milliseconds (default `performance.now`; tests pass their own)
   */
  constructor(
    private readonly quota: (kind: QuotaKind, name: string) => PublishQuota | undefined,
    private readonly store: Pick<QuotaStore, 'charge'>,
    private readonly options: QuotaCheckOptions,
    private readonly logger: Logger,
    private readonly meter?: QuotaCheckMeter,
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.node = new NodeQuotaBuckets(quota, clock);
  }

  /**
   * Refuses a publish at once when this node knows one of its quotas to be in debt (from an earlier
   * charge), before its body is validated. Costs no I/O.
   * @throws BrokerError QUOTA_EXCEEDED (429, `Retry-After`, RateLimit headers)
   */
  refuseInDebt(subject: string, owningApplication: string): void {
    if (this.debts.size === 0) return;
    const now = this.clock();
    for (const [kind, name] of [['subject', subject], ['owning_application', owningApplication]] as const) {
      const entry = `${kind}:${name}`;
      const debt = this.debts.get(entry);
      if (debt === undefined) continue;
      const { until, unit } = debt;
      if (until <= now) {
        this.debts.delete(entry);
        continue;
      }
      const quota = this.quota(kind, name);
      if (quota === undefined) {
        this.debts.delete(entry);
        continue;
      }
      const retryAfter = Math.max(1, Math.ceil((until - now) / 1000));
      const limit = (unit === 'events' ? quota.events_per_second : quota.bytes_per_second) ?? 0;
      this.meter?.quotaCheck('refused_locally');
      throw withHeaders(brokerError('QUOTA_EXCEEDED', { kind, name, limit, unit, retryAfter }), this.policyOnly(subject, owningApplication));
    }
  }

  /**
   * Charges a validated publish's `events` and `bytes` to its quotas, in one call to Redis.
   * @returns the RateLimit headers for its answer (none when no quota applies)
   * @throws BrokerError QUOTA_EXCEEDED (429, `Retry-After`, RateLimit headers) when a quota is in debt; nothing is charged then
   */
  async charge(subject: string, owningApplication: string, events: number, bytes: number): Promise<Readonly<Record<string, string>>> {
    const rates = [this.rates('subject', subject), this.rates('owning_application', owningApplication)] as const;
    if (rates.every((r) => r.eventsPerSecond === 0 && r.bytesPerSecond === 0)) return {};
    if (this.failingSince !== undefined && this.probing) return this.uncounted(subject, owningApplication, events, bytes);
    if (this.failingSince !== undefined) this.probing = true;
    let result: QuotaChargeResult | undefined;
    try {
      result = await this.withinTimeout(this.store.charge(rates, events, bytes));
    } catch (err) {
      this.failed(err);
    } finally {
      this.probing = false;
    }
    if (result === undefined) return this.uncounted(subject, owningApplication, events, bytes);
    if (this.failingSince !== undefined) {
      this.logger.info({ failedForMs: Math.round(this.clock() - this.failingSince) }, 'the publishing quotas are counted in Redis again');
      this.failingSince = undefined;
    }
    const states = this.remember(rates, result.left);
    const headers = rateLimitHeaders(states);
    if (result.charged) {
      this.meter?.quotaCheck('counted');
      return headers;
    }
    this.meter?.quotaCheck('refused');
    throw withHeaders(this.refusal(rates, result.left), headers);
  }

  /** Forgets the debts of quotas no longer set and the per-node buckets (call on every settings change). */
  prune(): void {
    for (const entry of this.debts.keys()) {
      const [kind, ...rest] = entry.split(':');
      if (this.quota(kind as QuotaKind, rest.join(':')) === undefined) this.debts.delete(entry);
    }
    this.node.prune();
  }

  /** Whether the count in Redis fails now (quotas open, or counted by this node alone). */
  get failing(): boolean {
    return this.failingSince !== undefined;
  }

  /** The rates of a quota, 0 for a metric it does not limit. */
  private rates(kind: QuotaKind, name: string): BucketRates {
    const quota = this.quota(kind, name);
    return { kind, name, eventsPerSecond: quota?.events_per_second ?? 0, bytesPerSecond: quota?.bytes_per_second ?? 0 };
  }

  /** Notes what Redis answered: the debts to refuse locally, and the states for the headers. */
  private remember(rates: readonly BucketRates[], left: readonly BucketLeft[]): RateLimitState[] {
    const now = this.clock();
    const states: RateLimitState[] = [];
    rates.forEach((rate, i) => {
      const bucket = left[i] ?? { events: 0, bytes: 0 };
      let debtMs = 0;
      let unit: 'events' | 'bytes' = 'events';
      if (rate.eventsPerSecond > 0) {
        states.push({ policy: `${POLICY_PREFIX[rate.kind]}-events`, quota: rate.eventsPerSecond, left: bucket.events });
        if (bucket.events <= 0) debtMs = (-bucket.events / rate.eventsPerSecond) * 1000 + 1;
      }
      if (rate.bytesPerSecond > 0) {
        states.push({ policy: `${POLICY_PREFIX[rate.kind]}-bytes`, quota: rate.bytesPerSecond, left: bucket.bytes });
        const bytesDebtMs = bucket.bytes <= 0 ? (-bucket.bytes / rate.bytesPerSecond) * 1000 + 1 : 0;
        if (bytesDebtMs > debtMs) [debtMs, unit] = [bytesDebtMs, 'bytes'];
      }
      const entry = `${rate.kind}:${rate.name}`;
      if (debtMs > 0) this.debts.set(entry, { until: now + debtMs, unit });
      else this.debts.delete(entry);
    });
    return states;
  }

  /** The 429 of the first bucket in debt. */
  private refusal(rates: readonly BucketRates[], left: readonly BucketLeft[]): BrokerError {
    for (const [i, rate] of rates.entries()) {
      const bucket = left[i] ?? { events: 0, bytes: 0 };
      for (const [unit, limit, tokens] of [['events', rate.eventsPerSecond, bucket.events], ['bytes', rate.bytesPerSecond, bucket.bytes]] as const) {
        if (limit > 0 && tokens <= 0) return brokerError('QUOTA_EXCEEDED', { kind: rate.kind, name: rate.name, limit, unit, retryAfter: Math.max(1, Math.ceil(-tokens / limit)) });
      }
    }
    const first = rates[0] ?? { kind: 'subject', name: '', eventsPerSecond: 1 };
    return brokerError('QUOTA_EXCEEDED', { kind: first.kind, name: first.name, limit: first.eventsPerSecond, unit: 'events', retryAfter: 1 });
  }

  /** A publish the count in Redis did not decide: admitted unchecked while failing open, then charged to this node's buckets. */
  private uncounted(subject: string, owningApplication: string, events: number, bytes: number): Readonly<Record<string, string>> {
    const since = this.failingSince ?? this.clock();
    if (this.clock() - since < this.options.failOpenMs) {
      this.meter?.quotaCheck('fail_open');
      return this.policyOnly(subject, owningApplication);
    }
    this.meter?.quotaCheck('node');
    try {
      this.node.charge(subject, owningApplication, 'bytes', bytes);
      this.node.charge(subject, owningApplication, 'events', events);
    } catch (err) {
      throw err instanceof BrokerError ? withHeaders(err, this.policyOnly(subject, owningApplication)) : err;
    }
    return this.policyOnly(subject, owningApplication);
  }

  /** Notes a failed count: the first failure starts the fail-open time and is logged. */
  private failed(err: unknown): void {
    if (this.failingSince !== undefined) return;
    this.failingSince = this.clock();
    this.logger.warn(
      { err, timeoutMs: this.options.timeoutMs, failOpenMs: this.options.failOpenMs },
      'the publishing quotas could not be counted in Redis: publishes go on unchecked for at most publish.quotaFailOpenMs, then this node counts them alone until Redis answers',
    );
  }

  /** `promise`, or a rejection after `publish.quotaTimeoutMs` (the call itself goes on; its answer is dropped). */
  private withinTimeout<T>(promise: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the quota count took longer than publish.quotaTimeoutMs (${this.options.timeoutMs} ms)`)), this.options.timeoutMs);
      promise.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err instanceof Error ? err : new Error(String(err)));
        },
      );
    });
  }

  /** `RateLimit-Policy` alone (what is left is not known): the quotas that apply. */
  private policyOnly(subject: string, owningApplication: string): Readonly<Record<string, string>> {
    const states = KINDS.flatMap((kind) => {
      const quota = this.quota(kind, kind === 'subject' ? subject : owningApplication);
      return [
        ...(quota?.events_per_second === undefined ? [] : [{ policy: `${POLICY_PREFIX[kind]}-events` as const, quota: quota.events_per_second, left: quota.events_per_second }]),
        ...(quota?.bytes_per_second === undefined ? [] : [{ policy: `${POLICY_PREFIX[kind]}-bytes` as const, quota: quota.bytes_per_second, left: quota.bytes_per_second }]),
      ];
    });
    const headers = rateLimitHeaders(states);
    return headers['RateLimit-Policy'] === undefined ? {} : { 'RateLimit-Policy': headers['RateLimit-Policy'] };
  }
}
