import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load-config.js';
import { MAX_ANNOTATIONS } from '../../src/domain/event-type/annotation-rules.js';
import { MAX_FIELD_LIST_ITEMS, parseEventTypeInput } from '../../src/domain/event-type/event-type-input.js';
import type { EventTypeLimits } from '../../src/domain/event-type/event-type-rules.js';
import { cursorCountProblem, MAX_CURSORS_PER_REQUEST } from '../../src/domain/cursor/offsets.js';
import { MAX_AUTHORIZATION_ATTRIBUTES } from '../../src/domain/event-type/rule-problems.js';
import { parseSubscriptionInput, parseSubscriptionUpdate } from '../../src/domain/subscription/subscription-input.js';
import type { Subscription } from '../../src/domain/subscription/subscription.js';
import { BrokerError } from '../../src/errors/catalog.js';
import { bodyMediaTypeProblem } from '../../src/http/body-media-type.js';
import { ConcurrencyLimiter } from '../../src/http/concurrency-limiter.js';

/**
 * The control plane's limits as pure rules, so that no single request can exhaust a node and no other
 * site can make a browser change anything: count limits on every list of a control-plane body (one
 * 422 line naming the limit, however long the list), the per-node limiter of size-proportional work,
 * and the media type every state-changing body must declare.
 */

const limits: EventTypeLimits = { defaultPartitionCount: 1, maxPartitionCount: 8, defaultRetentionTimeMs: 172800000, minRetentionTimeMs: 10800000, maxRetentionTimeMs: 345600000 };
const attribute = (i: number) => ({ data_type: 'user', value: `u${i}` });
const many = <T>(n: number, item: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => item(i));
const map = (n: number, value: (i: number) => string) => Object.fromEntries(many(n, (i) => [`k${i}`, value(i)]));

function eventType(extra: Record<string, unknown>): Record<string, unknown> {
  return {
    name: 'order.created',
    owning_application: 'shop',
    category: 'business',
    enrichment_strategies: ['metadata_enrichment'],
    schema: { type: 'json_schema', schema: '{"type":"object"}' },
    ...extra,
  };
}

describe('count limits of control-plane lists', () => {
  const authorization = (n: number) => ({ admins: [attribute(0)], readers: many(n, attribute), writers: [attribute(0)] });

  it.each([
    ['authorization.readers', { authorization: authorization(MAX_AUTHORIZATION_ATTRIBUTES + 1) }, `has ${MAX_AUTHORIZATION_ATTRIBUTES + 1} items; at most ${MAX_AUTHORIZATION_ATTRIBUTES} are allowed`],
    ['annotations', { annotations: map(MAX_ANNOTATIONS + 1, () => 'v') }, `has ${MAX_ANNOTATIONS + 1} entries; at most ${MAX_ANNOTATIONS} are allowed`],
    ['labels', { labels: map(50_000, () => 'v') }, `has 50000 entries; at most ${MAX_ANNOTATIONS} are allowed`],
    ['ordering_key_fields', { ordering_key_fields: many(MAX_FIELD_LIST_ITEMS + 1, (i) => `f${i}`) }, `has ${MAX_FIELD_LIST_ITEMS + 1} items`],
    ['enrichment_strategies', { enrichment_strategies: many(100_000, () => 'nope') }, 'has 100000 items'],
  ])('an event type with too many %s: one 422 line naming the limit', (field, extra, text) => {
    const result = parseEventTypeInput(eventType(extra), limits, false);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.status).toBe(422);
    expect(result.details).toEqual([expect.stringContaining(`Field "${field}" ${text}`)]);
  });

  it('accepts every list at its limit', () => {
    const result = parseEventTypeInput(
      eventType({
        authorization: { admins: many(MAX_AUTHORIZATION_ATTRIBUTES, attribute), readers: many(MAX_AUTHORIZATION_ATTRIBUTES, attribute), writers: many(MAX_AUTHORIZATION_ATTRIBUTES, attribute) },
        annotations: map(MAX_ANNOTATIONS, () => 'v'),
        labels: map(MAX_ANNOTATIONS, () => 'v'),
      }),
      limits,
      false,
    );
    expect(result.ok, JSON.stringify(result)).toBe(true);
  });

  it('refuses a subscription naming more event types than subscriptions.maxPartitions, in one line, reading each name at most twice', () => {
    const names = many(100_000, (i) => `o.${i}`);
    // Without these limits such a body took 7.4 s and 400 MiB: the rules worked per pair of names. What keeps
    // it cheap is a constant number of reads per name (the schema's item check and one rule pass), so
    // that is what is counted, through a proxy over the array (no clock: a loaded machine cannot fail it).
    let itemReads = 0;
    const counted = new Proxy(names, {
      get(target, key, receiver) {
        if (typeof key === 'string' && /^\d+$/.test(key)) itemReads++;
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    const result = parseSubscriptionInput({ owning_application: 'a', event_types: counted }, { maxPartitions: 100 });
    expect(itemReads).toBeLessThanOrEqual(2 * names.length);
    const line = 'Field "event_types" has 100000 items; at most 100 are allowed (subscriptions.maxPartitions: every event type has at least one partition)';
    expect(result).toEqual({ ok: false, status: 422, details: [line], errors: [{ status: 422, pointer: '/event_types', detail: line }] });
    expect(parseSubscriptionInput({ owning_application: 'a', event_types: names.slice(0, 100) }, { maxPartitions: 100 }).ok).toBe(true);
  });

  it('refuses too many initial cursors, attributes, annotations and labels of a subscription', () => {
    const body = {
      owning_application: 'a',
      event_types: ['x'],
      read_from: 'cursors',
      initial_cursors: many(101, (i) => ({ event_type: 'x', partition: String(i), offset: 'BEGIN' })),
      authorization: { admins: [attribute(0)], readers: many(150_000, attribute) },
      annotations: map(101, () => 'v'),
      labels: map(50_000, () => 'v'),
    };
    const result = parseSubscriptionInput(body, { maxPartitions: 100 });
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.details).toEqual([
      'Field "initial_cursors" has 101 items; at most 100 are allowed (subscriptions.maxPartitions: one cursor per partition)',
      'Field "authorization.readers" has 150000 items; at most 100 are allowed (attributes per authorization list)',
      'Field "annotations" has 101 entries; at most 100 are allowed (entries per map)',
      'Field "labels" has 50000 entries; at most 100 are allowed (entries per map)',
    ]);
  });

  it('applies the same limits to a subscription update', () => {
    const existing: Subscription = {
      id: '6f1e9b1e-3a4b-4c5d-8e9f-a0b1c2d3e4f5',
      owning_application: 'a',
      event_types: ['x'],
      consumer_group: 'default',
      read_from: 'end',
      initial_cursors: [],
      created_at: '2026-01-01T00:00:00Z',
      updated_at: '2026-01-01T00:00:00Z',
    };
    const result = parseSubscriptionUpdate(existing, { authorization: { admins: [attribute(0)], readers: many(101, attribute) } }, { maxPartitions: 100 });
    expect(result).toMatchObject({ ok: false, status: 422 });
  });

  it('counts cursors of one request', () => {
    expect(cursorCountProblem(MAX_CURSORS_PER_REQUEST, '"items"')).toBeUndefined();
    expect(cursorCountProblem(MAX_CURSORS_PER_REQUEST + 1, '"items"')).toBe(`"items" has ${MAX_CURSORS_PER_REQUEST + 1} cursors; at most ${MAX_CURSORS_PER_REQUEST} are allowed per request`);
  });
});

describe('ConcurrencyLimiter', () => {
  it('runs at most `concurrency` at once, queues up to `queueLength` in order, and refuses the next with 503 OVERLOADED', async () => {
    const limiter = new ConcurrencyLimiter(2, 2);
    const order: string[] = [];
    const first = await limiter.acquire();
    const second = await limiter.acquire();
    const third = limiter.acquire().then((release) => (order.push('third'), release));
    const fourth = limiter.acquire().then((release) => (order.push('fourth'), release));
    expect([limiter.running, limiter.queued]).toEqual([2, 2]);
    const refused = await limiter.acquire().catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(BrokerError);
    expect(refused).toMatchObject({ code: 'OVERLOADED', status: 503, headers: { 'Retry-After': '1' } });
    expect((refused as BrokerError).detail).toMatch(/http\.controlConcurrency 2, http\.controlQueueLength 2/);

    first();
    first(); // a second release of the same slot does nothing
    const releaseThird = await third;
    expect([limiter.running, limiter.queued]).toEqual([2, 1]);
    second();
    const releaseFourth = await fourth;
    expect(order).toEqual(['third', 'fourth']);
    releaseThird();
    releaseFourth();
    expect([limiter.running, limiter.queued]).toEqual([0, 0]);
  });

  it('lets a waiter whose request is gone leave the line, so its place and the slot are not lost', async () => {
    const limiter = new ConcurrencyLimiter(1, 1);
    const held = await limiter.acquire();
    const left = new AbortController();
    const waiter = limiter.acquire(left.signal).catch((err: unknown) => err);
    expect(limiter.queued).toBe(1);
    left.abort();
    expect(await waiter).toMatchObject({ code: 'BAD_REQUEST' });
    expect(limiter.queued).toBe(0);
    const next = limiter.acquire();
    held();
    (await next)();
    expect([limiter.running, limiter.queued]).toEqual([0, 0]);
    await expect(limiter.acquire(AbortSignal.abort())).rejects.toMatchObject({ code: 'BAD_REQUEST' });
  });

  it('releases the slot when the work fails', async () => {
    const limiter = new ConcurrencyLimiter(1, 0);
    await expect(limiter.run(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await expect(limiter.run(() => Promise.resolve(7))).resolves.toBe(7);
    expect(limiter.running).toBe(0);
  });
});

describe('request bodies must be declared as JSON', () => {
  it.each([
    ['application/json', '10'],
    ['application/json; charset=utf-8', '10'],
    ['Application/JSON;Charset="UTF-8"', '10'],
    ['application/problem+json', '10'],
    ['application/merge-patch+json; charset=utf8', '10'],
    ['application/json', '0'],
  ])('accepts %s (Content-Length %s)', (contentType, length) => {
    expect(bodyMediaTypeProblem({ 'content-type': contentType, 'content-length': length })).toBeUndefined();
  });

  it('accepts requests without a body and without Content-Type (DELETE, body-less POST)', () => {
    expect(bodyMediaTypeProblem({})).toBeUndefined();
    expect(bodyMediaTypeProblem({ 'content-length': '0' })).toBeUndefined();
  });

  it.each([
    ['text/plain', '10'],
    ['text/plain;charset=UTF-8', '10'],
    ['application/x-www-form-urlencoded', '10'],
    ['multipart/form-data; boundary=x', '10'],
    ['text/plain', '0'],
    ['application/x-www-form-urlencoded', '0'],
    ['text/json', '10'],
    ['application/jsonp', '10'],
    ['application/json; charset=latin1', '10'],
    ['', '10'],
  ])('refuses %j (Content-Length %s)', (contentType, length) => {
    expect(bodyMediaTypeProblem({ 'content-type': contentType, 'content-length': length })).toMatch(/is not accepted: request bodies must be JSON/);
  });

  it('refuses a body without Content-Type, with a length or chunked', () => {
    expect(bodyMediaTypeProblem({ 'content-length': '2' })).toBe('the request body must be declared as JSON: send Content-Type: application/json');
    expect(bodyMediaTypeProblem({ 'transfer-encoding': 'chunked' })).toBe('the request body must be declared as JSON: send Content-Type: application/json');
  });
});

describe('config of the control-plane limits', () => {
  it('defaults: 2 MiB control bodies, 4 running, 64 waiting, no CORS origins', () => {
    const config = loadConfig({});
    expect(config.http).toMatchObject({ maxControlBodyBytes: 2097152, controlConcurrency: 4, controlQueueLength: 64, corsAllowedOrigins: [] });
  });

  it('refuses a control body limit below the schema limit, and origins that are not scheme://host[:port]', () => {
    expect(() => loadConfig({ BROKER_HTTP_MAX_CONTROL_BODY_BYTES: '65536' })).toThrow('http.maxControlBodyBytes');
    expect(loadConfig({ BROKER_HTTP_MAX_CONTROL_BODY_BYTES: '65536', BROKER_EVENT_TYPES_MAX_SCHEMA_BYTES: '65536' }).http.maxControlBodyBytes).toBe(65536);
    expect(() => loadConfig({ BROKER_HTTP_CORS_ALLOWED_ORIGINS: '["*"]' })).toThrow('http.corsAllowedOrigins');
    expect(() => loadConfig({ BROKER_HTTP_CORS_ALLOWED_ORIGINS: '["https://ui.example/path"]' })).toThrow('http.corsAllowedOrigins');
    expect(loadConfig({ BROKER_HTTP_CORS_ALLOWED_ORIGINS: '["https://ui.example.com","http://localhost:3000"]' }).http.corsAllowedOrigins).toEqual(['https://ui.example.com', 'http://localhost:3000']);
  });
});
