import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { BrokerMetrics } from '../../src/observability/metrics.js';
import { parseExposition } from '../support/prometheus-text.js';

/** A scrape whose consumer lag cannot be read (src/observability/metrics.ts `observeLag`; docs/metrics.md). */
describe('BrokerMetrics consumer lag source', () => {
  it('answers the scrape when the lag cannot be read, counting and logging the failure', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'warn' }, new Writable({ write: (chunk: Buffer, _encoding, done) => (lines.push(chunk.toString()), done()) }));
    const metrics = new BrokerMetrics();
    metrics.observeLag(() => Promise.reject(new Error('connection is closed')), logger);
    const { samples } = parseExposition((await metrics.scrape()).toString());
    const errors = samples.filter((s) => s.name === 'broker_subscription_lag_collect_errors_total');
    expect(errors.map((s) => s.value)).toEqual([1]);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] ?? '{}')).toMatchObject({ level: 40, err: 'connection is closed', msg: 'cannot read the consumer lag for /metrics; the lag gauges are left out of this scrape' });
  });
});
