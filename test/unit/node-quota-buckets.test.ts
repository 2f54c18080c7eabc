import { describe, expect, it } from 'vitest';
import { refusalOf } from '../support/broker-error.js';
import type { PublishQuota, QuotaKind } from '../../src/domain/batch/publish-quota.js';
import { NodeQuotaBuckets } from '../../src/services/node-quota-buckets.js';

/** The token buckets of the publishing quotas (src/services/node-quota-buckets.ts; docs/publishing.md "Quotas"), on a clock of their own. */
describe('NodeQuotaBuckets', () => {
  function setUp(quotas: Record<string, PublishQuota>): { quotas: NodeQuotaBuckets; advance: (ms: number) => void; set: (entry: string, quota: PublishQuota | undefined) => void } {
    let now = 0;
    const table = new Map(Object.entries(quotas));
    return {
      quotas: new NodeQuotaBuckets((kind: QuotaKind, name: string) => table.get(`${kind}:${name}`), () => now),
      advance: (ms) => (now += ms),
      set: (entry, quota) => (quota === undefined ? table.delete(entry) : table.set(entry, quota)),
    };
  }

  it('keeps a bucket only while its quota is set: a removed quota leaves nothing behind', () => {
    const { quotas, set } = setUp({ 'subject:a': { bytes_per_second: 1000, events_per_second: 10 }, 'owning_application:app': { events_per_second: 5 } });
    quotas.charge('a', 'app', 'bytes', 10);
    quotas.charge('a', 'app', 'events', 1);
    expect(quotas.size).toBe(3);
    set('subject:a', { events_per_second: 10 });
    quotas.prune();
    expect(quotas.size).toBe(2);
    set('subject:a', undefined);
    set('owning_application:app', undefined);
    quotas.prune();
    expect(quotas.size).toBe(0);
  });

  it('charges without limit when no quota applies', () => {
    const { quotas } = setUp({});
    for (let i = 0; i < 100; i++) quotas.charge('a', 'app', 'bytes', 1e9);
  });

  it('takes any charge while not in debt, then refuses with 429 and the seconds until the debt is paid', () => {
    const { quotas, advance } = setUp({ 'subject:a': { bytes_per_second: 1000 } });
    quotas.charge('a', 'app', 'bytes', 600);
    quotas.charge('a', 'app', 'bytes', 3400);
    const refused = refusalOf(() => quotas.charge('a', 'app', 'bytes', 1));
    expect(refused.status).toBe(429);
    expect(refused.code).toBe('QUOTA_EXCEEDED');
    expect(refused.headers).toEqual({ 'Retry-After': '3' });
    expect(refused.detail).toBe('The subject "a" is over its publishing quota of 1000 bytes per second; nothing was written, retry in 3 s');
    advance(2500);
    expect(refusalOf(() => quotas.charge('a', 'app', 'bytes', 1)).headers).toEqual({ 'Retry-After': '1' });
    advance(600);
    quotas.charge('a', 'app', 'bytes', 1);
    // Other subjects and the events metric are not held back.
    quotas.charge('b', 'app', 'bytes', 1e6);
    quotas.charge('a', 'app', 'events', 1e6);
  });

  it('refills up to one second of the quota, not more', () => {
    const { quotas, advance } = setUp({ 'owning_application:app': { events_per_second: 10 } });
    advance(60_000);
    quotas.charge('a', 'app', 'events', 10);
    expect(refusalOf(() => quotas.charge('b', 'app', 'events', 1)).detail).toMatch(/^The owning_application "app" is over its publishing quota of 10 events per second/);
  });

  it('charges both quotas that apply, and neither when one refuses', () => {
    const { quotas, advance } = setUp({ 'subject:a': { events_per_second: 100 }, 'owning_application:app': { events_per_second: 10 } });
    quotas.charge('a', 'app', 'events', 20);
    // The application is in debt: the subject's bucket is not charged for the refused publish.
    expect(refusalOf(() => quotas.charge('a', 'app', 'events', 50)).detail).toContain('owning_application "app"');
    advance(2000);
    // Refilled: the subject back to 100 (it was not charged the refused 50), the application to 10.
    quotas.charge('a', 'app', 'events', 70);
    quotas.charge('a', 'other', 'events', 40);
    expect(refusalOf(() => quotas.charge('a', 'other', 'events', 1)).detail).toContain('subject "a"');
  });

  it('applies a changed quota at once and forgets a removed one', () => {
    const { quotas, set } = setUp({ 'subject:a': { bytes_per_second: 100 } });
    quotas.charge('a', 'app', 'bytes', 500);
    expect(refusalOf(() => quotas.charge('a', 'app', 'bytes', 1)).headers).toEqual({ 'Retry-After': '4' });
    set('subject:a', { bytes_per_second: 400 });
    expect(refusalOf(() => quotas.charge('a', 'app', 'bytes', 1)).headers).toEqual({ 'Retry-After': '1' });
    set('subject:a', undefined);
    quotas.charge('a', 'app', 'bytes', 1e9);
    set('subject:a', { bytes_per_second: 100 });
    quotas.charge('a', 'app', 'bytes', 50);
  });
});
