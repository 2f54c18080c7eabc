import { describe, expect, it } from 'vitest';
import { BrokerError } from '../../src/errors/catalog.js';
import type { PublishQuota, QuotaKind } from '../../src/domain/batch/publish-quota.js';
import { rateLimitHeaders } from '../../src/domain/batch/rate-limit-headers.js';
import { pacingDelayMs, readRateLimit, readRateLimitPolicy } from '../../src/client/rate-limit-pacing.js';
import { createLogger } from '../../src/observability/logger.js';
import type { QuotaCheckOutcome } from '../../src/observability/meters.js';
import { PublishQuotas } from '../../src/services/publish-quotas.js';
import type { QuotaChargeResult } from '../../src/storage/quota-store.js';

/**
 * The publishing quotas' check around the count in Redis (src/services/publish-quotas.ts;
 * docs/publishing.md "Quotas"): what happens when Redis does not answer in time is the node's own
 * behaviour, so the store is a stand-in here; what the count does in Redis is tested on a real one
 * (test/integration/publish-quotas.test.ts, cluster-quotas.test.ts). And the RateLimit headers.
 */
describe('PublishQuotas when Redis does not answer', () => {
  const quotas: Record<string, PublishQuota> = { 'subject:a': { events_per_second: 100 } };
  function setUp(answer: () => Promise<QuotaChargeResult>): { quotas: PublishQuotas; advance: (ms: number) => void; outcomes: QuotaCheckOutcome[]; calls: () => number } {
    let now = 0;
    let calls = 0;
    const outcomes: QuotaCheckOutcome[] = [];
    const store = {
      charge: () => {
        calls++;
        return answer();
      },
    };
    const service = new PublishQuotas((kind: QuotaKind, name: string) => quotas[`${kind}:${name}`], store, { timeoutMs: 20, failOpenMs: 1000 }, createLogger({ logLevel: 'silent' }), { quotaCheck: (o) => outcomes.push(o) }, () => now);
    return { quotas: service, advance: (ms) => (now += ms), outcomes, calls: () => calls };
  }
  const never = (): Promise<QuotaChargeResult> => new Promise(() => undefined);

  it('costs nothing for a publish without a quota', async () => {
    const { quotas: service, calls } = setUp(never);
    expect(await service.charge('nobody', 'app', 10, 1000)).toEqual({});
    expect(calls()).toBe(0);
  });

  it('waits at most publish.quotaTimeoutMs, then fails open for at most publish.quotaFailOpenMs, then counts on the node alone', async () => {
    const { quotas: service, advance, outcomes, calls } = setUp(never);
    // The first publish waits for the timeout (a real 20 ms), then goes on unchecked.
    expect(await service.charge('a', 'app', 10, 1000)).toEqual({ 'RateLimit-Policy': '"subject-events";q=100;qu="events";w=1' });
    expect(service.failing).toBe(true);
    expect(outcomes).toEqual(['fail_open']);
    // Within the fail-open time, publishes go on unchecked; one at a time asks Redis again, the others do not wait.
    const probe = service.charge('a', 'app', 1000, 1000);
    expect(await service.charge('a', 'app', 1000, 1000)).toEqual({ 'RateLimit-Policy': '"subject-events";q=100;qu="events";w=1' });
    await probe;
    expect(calls()).toBe(2);
    // Past it, this node counts alone: 100 events per second, so the second batch of 100 is refused.
    advance(1000);
    await service.charge('a', 'app', 100, 1000);
    const refused = await service.charge('a', 'app', 100, 1000).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(BrokerError);
    expect((refused as BrokerError).code).toBe('QUOTA_EXCEEDED');
    expect(outcomes.slice(-2)).toEqual(['node', 'node']);
  });

  it('counts in Redis again once it answers', async () => {
    let answer: () => Promise<QuotaChargeResult> = () => Promise.reject(new Error('connection lost'));
    const { quotas: service, outcomes } = setUp(() => answer());
    await service.charge('a', 'app', 1, 10);
    expect(service.failing).toBe(true);
    answer = () => Promise.resolve({ charged: true, left: [{ events: 98, bytes: 0 }, { events: 0, bytes: 0 }] });
    expect(await service.charge('a', 'app', 1, 10)).toEqual({ 'RateLimit-Policy': '"subject-events";q=100;qu="events";w=1', RateLimit: '"subject-events";r=98;t=1' });
    expect(service.failing).toBe(false);
    expect(outcomes).toEqual(['fail_open', 'counted']);
  });

  it('refuses before validation, without asking Redis, while a quota is known to be in debt', async () => {
    const { quotas: service, advance, outcomes, calls } = setUp(() => Promise.resolve({ charged: true, left: [{ events: -150, bytes: 0 }, { events: 0, bytes: 0 }] }));
    await service.charge('a', 'app', 250, 10);
    const refused = (() => {
      try {
        service.refuseInDebt('a', 'app');
      } catch (err) {
        return err as BrokerError;
      }
      return undefined;
    })();
    expect(refused?.code).toBe('QUOTA_EXCEEDED');
    expect(refused?.headers['Retry-After']).toBe('2');
    advance(1600);
    expect(() => service.refuseInDebt('a', 'app')).not.toThrow();
    expect(calls()).toBe(1);
    expect(outcomes).toEqual(['counted', 'refused_locally']);
  });
});

describe('RateLimit headers', () => {
  it('are written in the draft\'s structured-field syntax and read back', () => {
    const headers = rateLimitHeaders([
      { policy: 'subject-events', quota: 2000, left: 1500.7 },
      { policy: 'application-bytes', quota: 1_000_000, left: -20 },
    ]);
    expect(headers).toEqual({
      'RateLimit-Policy': '"subject-events";q=2000;qu="events";w=1, "application-bytes";q=1000000;qu="content-bytes";w=1',
      RateLimit: '"subject-events";r=1500;t=1, "application-bytes";r=0;t=2',
    });
    expect(readRateLimitPolicy(headers['RateLimit-Policy'])).toEqual([
      { policy: 'subject-events', quota: 2000, unit: 'events', windowSeconds: 1 },
      { policy: 'application-bytes', quota: 1_000_000, unit: 'content-bytes', windowSeconds: 1 },
    ]);
    expect(readRateLimit(headers.RateLimit)).toEqual([
      { policy: 'subject-events', remaining: 1500, resetSeconds: 1 },
      { policy: 'application-bytes', remaining: 0, resetSeconds: 2 },
    ]);
    expect(rateLimitHeaders([])).toEqual({});
  });

  it('pace a client: send when what is left covers the request, else wait for the refill, or for t when nothing is left', () => {
    const policy = '"subject-events";q=1000;qu="events";w=1, "subject-bytes";q=100000;qu="content-bytes";w=1';
    expect(pacingDelayMs(policy, '"subject-events";r=500;t=1, "subject-bytes";r=90000;t=1', { events: 400, contentBytes: 50_000 }, 0)).toBe(0);
    // 100 events short at 1,000/s: 100 ms, less the 30 ms since the answer.
    expect(pacingDelayMs(policy, '"subject-events";r=300;t=1, "subject-bytes";r=90000;t=1', { events: 400, contentBytes: 50_000 }, 30)).toBe(70);
    // Nothing left (maybe in debt): the seconds until the bucket is full.
    expect(pacingDelayMs(policy, '"subject-events";r=0;t=3, "subject-bytes";r=90000;t=1', { events: 400, contentBytes: 50_000 }, 0)).toBe(3000);
    // A request larger than the quota waits for a full bucket only.
    expect(pacingDelayMs(policy, '"subject-events";r=1000;t=0, "subject-bytes";r=100000;t=0', { events: 5000, contentBytes: 50_000 }, 0)).toBe(0);
    expect(pacingDelayMs(undefined, undefined, { events: 1, contentBytes: 1 }, 0)).toBe(0);
  });
});
