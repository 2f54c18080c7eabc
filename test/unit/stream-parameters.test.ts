import { describe, expect, it } from 'vitest';
import { parseStreamParameters, SubscriptionStreamQuerySchema, type StreamParameters, type StreamParametersResult } from '../../src/domain/stream/stream-parameters.js';
import { checkInput, inputDetail } from '../../src/domain/json/input-check.js';
import { LowLevelStreamQuery } from '../../src/http/routes/low-level-streams.js';

const half = (): number => 0.5;
/** The query checked against its route's schema as the request pipeline does (400/422 before the handler), then the parameters. */
const parse = (query: string, body: unknown = undefined, kind: 'subscription' | 'low-level' = 'subscription', random: () => number = half): StreamParametersResult => {
  const checked = checkInput(kind === 'subscription' ? SubscriptionStreamQuerySchema : LowLevelStreamQuery, Object.fromEntries(new URLSearchParams(query)), 'query');
  if (!checked.ok) return { ok: false, status: checked.status, detail: inputDetail(checked.problems) };
  return parseStreamParameters(checked.value, body, kind, random);
};

const DEFAULTS: StreamParameters = {
  batchLimit: 1,
  streamLimit: 0,
  batchFlushTimeoutSeconds: 30,
  batchTimespanSeconds: 0,
  streamTimeoutSeconds: 3600,
  streamKeepAliveLimit: 0,
  maxUncommittedEvents: 10,
  commitTimeoutSeconds: 60,
  partitions: [],
};

describe('parseStreamParameters: accepted values', () => {
  it.each<{ name: string; query: string; body?: unknown; kind?: 'subscription' | 'low-level'; expected: Partial<StreamParameters> }>([
    { name: 'defaults (subscription)', query: '', expected: {} },
    { name: 'defaults (low-level)', query: '', kind: 'low-level', expected: {} },
    { name: 'null body counts as no body', query: '', body: null, expected: {} },
    { name: 'query values', query: 'batch_limit=5&stream_limit=100&batch_flush_timeout=10&stream_timeout=60&stream_keep_alive_limit=3&max_uncommitted_events=50&commit_timeout=20', expected: { batchLimit: 5, streamLimit: 100, batchFlushTimeoutSeconds: 10, streamTimeoutSeconds: 60, streamKeepAliveLimit: 3, maxUncommittedEvents: 50, commitTimeoutSeconds: 20 } },
    { name: 'body values', query: '', body: { batch_limit: 5, stream_limit: 5, batch_flush_timeout: 1, batch_timespan: 7, stream_timeout: 1, max_uncommitted_events: 1, commit_timeout: 1 }, expected: { batchLimit: 5, streamLimit: 5, batchFlushTimeoutSeconds: 1, batchTimespanSeconds: 7, streamTimeoutSeconds: 1, maxUncommittedEvents: 1, commitTimeoutSeconds: 1 } },
    { name: 'body overrides query', query: 'batch_limit=5&commit_timeout=10', body: { batch_limit: 7 }, expected: { batchLimit: 7, commitTimeoutSeconds: 10 } },
    { name: 'stream_limit equal to batch_limit', query: 'batch_limit=5&stream_limit=5', expected: { batchLimit: 5, streamLimit: 5 } },
    { name: 'batch_flush_timeout 0 means 30', query: 'batch_flush_timeout=0', expected: { batchFlushTimeoutSeconds: 30 } },
    { name: 'commit_timeout 0 means 60', query: 'commit_timeout=0', expected: { commitTimeoutSeconds: 60 } },
    { name: 'commit_timeout 60 is the maximum', query: 'commit_timeout=60', expected: { commitTimeoutSeconds: 60 } },
    { name: 'stream_timeout 4200 is kept', query: 'stream_timeout=4200', expected: { streamTimeoutSeconds: 4200 } },
    { name: 'stream_timeout equal to batch_flush_timeout', query: 'stream_timeout=30', expected: { streamTimeoutSeconds: 30 } },
    { name: 'empty query value counts as absent', query: 'batch_limit=', expected: {} },
    { name: 'batch_timespan in the query is ignored', query: 'batch_timespan=5', expected: {} },
    { name: 'stream_keep_alive_limit in the body is ignored', query: '', body: { stream_keep_alive_limit: 5 }, expected: {} },
    { name: 'partitions', query: '', body: { partitions: [{ event_type: 'a', partition: '0' }, { event_type: 'b', partition: '1' }] }, expected: { partitions: [{ eventType: 'a', partition: '0' }, { eventType: 'b', partition: '1' }] } },
    { name: 'empty partitions: automatic', query: '', body: { partitions: [] }, expected: { partitions: [] } },
    { name: 'unknown body fields are ignored', query: '', body: { foo: 'bar' }, expected: {} },
    { name: 'low-level ignores subscription-only fields', query: 'max_uncommitted_events=0&commit_timeout=999', body: { partitions: 'junk' }, kind: 'low-level', expected: {} },
    { name: 'low-level reads the common ones', query: 'batch_limit=3&stream_keep_alive_limit=2', kind: 'low-level', expected: { batchLimit: 3, streamKeepAliveLimit: 2 } },
  ])('$name', ({ query, body, kind, expected }) => {
    expect(parse(query, body, kind)).toEqual({ ok: true, value: { ...DEFAULTS, ...expected } });
  });
});

describe('parseStreamParameters: unspecified stream_timeout is about one hour', () => {
  it.each([
    ['stream_timeout=0', 0, 3000],
    ['', 0.5, 3600],
    ['', 0.999_999, 4200],
    ['stream_timeout=4201', 0, 3000],
    ['stream_timeout=100000', 0.5, 3600],
  ])('%s with random %d → %i', (query, r, expected) => {
    const result = parse(query, undefined, 'subscription', () => r);
    expect(result.ok && result.value.streamTimeoutSeconds).toBe(expected);
  });

  it('stays within 3600 ± 600 for any random value', () => {
    for (let i = 0; i <= 100; i += 1) {
      const result = parse('', undefined, 'low-level', () => i / 101);
      const timeout = result.ok ? result.value.streamTimeoutSeconds : -1;
      expect(timeout).toBeGreaterThanOrEqual(3000);
      expect(timeout).toBeLessThanOrEqual(4200);
    }
  });
});

describe('parseStreamParameters: rejected values', () => {
  it.each<{ name: string; query: string; body?: unknown; kind?: 'subscription' | 'low-level'; status: 400 | 422; mentions: string }>([
    { name: 'query not a number', query: 'batch_limit=abc', status: 400, mentions: 'batch_limit' },
    { name: 'query negative', query: 'stream_limit=-1', status: 400, mentions: 'stream_limit' },
    { name: 'query fraction', query: 'batch_flush_timeout=1.5', status: 400, mentions: 'batch_flush_timeout' },
    { name: 'query beyond int32', query: 'stream_keep_alive_limit=2147483648', status: 400, mentions: 'stream_keep_alive_limit' },
    { name: 'body string', query: '', body: { batch_limit: '5' }, status: 400, mentions: 'batch_limit' },
    { name: 'body fraction', query: '', body: { commit_timeout: 0.5 }, status: 400, mentions: 'commit_timeout' },
    { name: 'body negative', query: '', body: { batch_timespan: -1 }, status: 400, mentions: 'batch_timespan' },
    { name: 'body not an object', query: '', body: [1, 2], status: 400, mentions: 'object' },
    { name: 'low-level query not a number', query: 'stream_timeout=soon', kind: 'low-level', status: 400, mentions: 'stream_timeout' },
    { name: 'batch_limit 0', query: 'batch_limit=0', status: 422, mentions: 'batch_limit' },
    { name: 'stream_limit below batch_limit', query: 'batch_limit=10&stream_limit=5', status: 422, mentions: 'stream_limit' },
    { name: 'stream_limit below batch_limit (low-level)', query: 'batch_limit=10&stream_limit=5', kind: 'low-level', status: 422, mentions: 'stream_limit' },
    { name: 'stream_timeout below batch_flush_timeout', query: 'stream_timeout=10&batch_flush_timeout=20', status: 422, mentions: 'stream_timeout' },
    { name: 'stream_timeout below default batch_flush_timeout', query: 'stream_timeout=29', kind: 'low-level', status: 422, mentions: 'batch_flush_timeout' },
    { name: 'unspecified stream_timeout below batch_flush_timeout', query: 'batch_flush_timeout=5000', status: 422, mentions: 'stream_timeout' },
    { name: 'max_uncommitted_events 0', query: 'max_uncommitted_events=0', status: 422, mentions: 'max_uncommitted_events' },
    { name: 'commit_timeout above 60', query: '', body: { commit_timeout: 61 }, status: 422, mentions: 'commit_timeout' },
    { name: 'partitions not an array', query: '', body: { partitions: { event_type: 'a', partition: '0' } }, status: 422, mentions: 'partitions' },
    { name: 'partition item not an object', query: '', body: { partitions: ['0'] }, status: 422, mentions: 'partitions' },
    { name: 'partition number', query: '', body: { partitions: [{ event_type: 'a', partition: 0 }] }, status: 422, mentions: 'partitions' },
    { name: 'partition without event_type', query: '', body: { partitions: [{ partition: '0' }] }, status: 422, mentions: 'partitions' },
  ])('$name → $status', ({ query, body, kind, status, mentions }) => {
    const result = parse(query, body, kind);
    expect(result).toMatchObject({ ok: false, status });
    expect(result.ok ? '' : result.detail).toContain(mentions);
  });
});
