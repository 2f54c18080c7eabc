import { describe, expect, it } from 'vitest';
import { timelineMapOf } from '../../src/domain/storages/timeline.js';
import type { PartitionRange } from '../../src/domain/cursor/offsets.js';
import { parseSubscriptionInput, parseSubscriptionUpdate } from '../../src/domain/subscription/subscription-input.js';
import {
  initialCursorProblems,
  isSubscriptionId,
  subscriptionKey,
  type EventTypePartitions,
  type Subscription,
  type SubscriptionInput,
} from '../../src/domain/subscription/subscription.js';

type Body = Record<string, unknown>;

function base(extra: Body = {}): Body {
  return { owning_application: 'shop', event_types: ['order.created', 'order.paid'], ...extra };
}

function accepted(body: unknown): SubscriptionInput {
  const result = parseSubscriptionInput(body);
  if (!result.ok) throw new Error(`expected acceptance, got ${result.status}: ${result.details.join('; ')}`);
  return result.value;
}

function refused(body: unknown): { status: number; details: string[] } {
  const result = parseSubscriptionInput(body);
  if (result.ok) throw new Error('expected a refusal');
  return result;
}

describe('parseSubscriptionInput', () => {
  it('applies the defaults (consumer_group "default", read_from "end", no initial cursors) and ignores unknown fields', () => {
    expect(accepted(base({ id: 'mine', created_at: 'yesterday', colour: 'blue' }))).toEqual({
      owning_application: 'shop',
      event_types: ['order.created', 'order.paid'],
      consumer_group: 'default',
      read_from: 'end',
      initial_cursors: [],
    });
  });

  it('accepts read_from in any case, keeps authorization, annotations and labels', () => {
    const authorization = { admins: [{ data_type: 'user', value: 'alice' }], readers: [{ data_type: 'service', value: 'stups_x', extra: 1 }] };
    const input = accepted(base({ read_from: 'BEGIN', consumer_group: 'g1', authorization, annotations: { 'team.io/owner': 'a' }, labels: { tier: 'gold' } }));
    expect(input.read_from).toBe('begin');
    expect(input.consumer_group).toBe('g1');
    expect(input.authorization).toEqual({ admins: [{ data_type: 'user', value: 'alice' }], readers: [{ data_type: 'service', value: 'stups_x' }] });
    expect(input.annotations).toEqual({ 'team.io/owner': 'a' });
    expect(input.labels).toEqual({ tier: 'gold' });
  });

  it('normalizes initial cursor offsets and keeps them only for read_from cursors', () => {
    const cursors = [
      { event_type: 'order.created', partition: '0', offset: '5' },
      { event_type: 'order.paid', partition: '0', offset: 'Begin' },
    ];
    expect(accepted(base({ read_from: 'cursors', initial_cursors: cursors })).initial_cursors).toEqual([
      { event_type: 'order.created', partition: '0', offset: '001-0001-000000000000000005' },
      { event_type: 'order.paid', partition: '0', offset: 'begin' },
    ]);
    expect(accepted(base({ read_from: 'end', initial_cursors: cursors })).initial_cursors).toEqual([]);
  });

  it.each<[string, unknown]>([
    ['a body that is not an object', ['x']],
    ['a null body', null],
    ['owning_application of the wrong type', base({ owning_application: 7 })],
    ['event_types that is not an array', base({ event_types: 'order.created' })],
    ['an event type that is not a string', base({ event_types: ['order.created', 3] })],
    ['an unknown read_from', base({ read_from: 'middle' })],
    ['consumer_group of the wrong type', base({ consumer_group: ['g'] })],
    ['initial_cursors that is not an array', base({ read_from: 'cursors', initial_cursors: {} })],
    ['an initial cursor that is not an object', base({ read_from: 'cursors', initial_cursors: ['0'] })],
    ['an initial cursor partition that is a number', base({ read_from: 'cursors', initial_cursors: [{ event_type: 'order.created', partition: 0, offset: 'begin' }] })],
    ['authorization that is not an object', base({ authorization: 'everyone' })],
    ['authorization admins that is not an array', base({ authorization: { admins: 'x', readers: [{ data_type: 'user', value: 'a' }] } })],
    ['an authorization attribute value of the wrong type', base({ authorization: { admins: [{ data_type: 'user', value: 1 }], readers: [{ data_type: 'user', value: 'a' }] } })],
    ['annotations that are not an object', base({ annotations: ['a'] })],
    ['a label value that is not a string', base({ labels: { tier: 1 } })],
  ])('answers 400 for %s', (_what, body) => {
    expect(refused(body).status).toBe(400);
  });

  it.each<[string, Body, RegExp]>([
    ['a missing owning_application', base({ owning_application: undefined }), /Field "owning_application" must not be null/],
    ['an empty owning_application', base({ owning_application: '' }), /Field "owning_application" must not be empty/],
    ['missing event_types', base({ event_types: null }), /Field "event_types" must not be null/],
    ['empty event_types', base({ event_types: [] }), /at least one event type/],
    ['a repeated event type', base({ event_types: ['a', 'b', 'a'] }), /must not contain "a" more than once/],
    ['an event type name that cannot exist', base({ event_types: ['{registry}'] }), /not a valid event type name/],
    ['an empty consumer_group', base({ consumer_group: '' }), /Field "consumer_group" must not be empty/],
    ['a malformed initial cursor offset', base({ read_from: 'cursors', initial_cursors: [{ event_type: 'order.created', partition: '0', offset: 'abc' }] }), /is not a valid offset/],
    ['an initial cursor without partition', base({ read_from: 'cursors', initial_cursors: [{ event_type: 'order.created', offset: 'begin' }] }), /partition" must not be null/],
    ['authorization without readers', base({ authorization: { admins: [{ data_type: 'user', value: 'a' }] } }), /authorization.readers" must not be null/],
    ['an empty admins list', base({ authorization: { admins: [], readers: [{ data_type: 'user', value: 'a' }] } }), /at least one attribute/],
    ['a repeated reader attribute', base({ authorization: { admins: [{ data_type: 'user', value: 'a' }], readers: [{ data_type: 'user', value: 'a' }, { data_type: 'user', value: 'a' }] } }), /more than once/],
    ['a reserved annotation prefix', base({ annotations: { 'broker.io/x': 'y' } }), /reserved/],
    ['a bad label key', base({ labels: { '-x': 'y' } }), /must have a name/],
  ])('answers 422 for %s', (_what, body, detail) => {
    const result = refused(body);
    expect(result.status).toBe(422);
    expect(result.details.join('\n')).toMatch(detail);
  });

  it('collects every problem, and 400 wins over 422', () => {
    const result = refused({ owning_application: '', event_types: [], read_from: 42 });
    expect(result.status).toBe(400);
    expect(result.details).toHaveLength(3);
  });
});

describe('subscriptionKey', () => {
  it('ignores the order of event types and distinguishes every key part', () => {
    const key = subscriptionKey({ owning_application: 'a', event_types: ['x', 'y'], consumer_group: 'g' });
    expect(subscriptionKey({ owning_application: 'a', event_types: ['y', 'x'], consumer_group: 'g' })).toBe(key);
    expect(subscriptionKey({ owning_application: 'b', event_types: ['x', 'y'], consumer_group: 'g' })).not.toBe(key);
    expect(subscriptionKey({ owning_application: 'a', event_types: ['x'], consumer_group: 'g' })).not.toBe(key);
    expect(subscriptionKey({ owning_application: 'a', event_types: ['x', 'y'], consumer_group: 'h' })).not.toBe(key);
    // No separator trick can make two different keys equal.
    expect(subscriptionKey({ owning_application: 'a","b', event_types: ['x'], consumer_group: 'g' })).not.toBe(
      subscriptionKey({ owning_application: 'a', event_types: ['b', 'x'], consumer_group: 'g' }),
    );
  });
});

describe('initialCursorProblems', () => {
  // order.created: partitions 0 (events 0..9, 0..2 expired) and 1 (empty); order.paid: partition 0 (events 0..4).
  const range = (oldest: number, newest: number): PartitionRange => ({ oldest, newest });
  const first = timelineMapOf(undefined, new Date(0).toISOString());
  const partitions = new Map<string, EventTypePartitions>([
    ['order.created', { timelines: first, ranges: new Map([['0', range(3, 9)], ['1', range(0, -1)]]) }],
    ['order.paid', { timelines: first, ranges: new Map([['0', range(0, 4)]]) }],
  ]);
  type Cursor = { event_type: string; partition: string; offset: string };
  const cursor = (event_type: string, partition: string, offset: string): Cursor => ({ event_type, partition, offset });
  const valid = [cursor('order.created', '0', '2'), cursor('order.created', '1', 'begin'), cursor('order.paid', '0', '4')];
  const input = (cursors: unknown[]) => accepted(base({ read_from: 'cursors', initial_cursors: cursors }));

  it('accepts one valid cursor per partition (the oldest-1 and the newest are valid)', () => {
    expect(initialCursorProblems(input(valid), partitions)).toEqual([]);
    expect(initialCursorProblems(input([cursor('order.created', '0', '001-0001-000000000000000009'), ...valid.slice(1)]), partitions)).toEqual([]);
  });

  it('ignores cursors unless read_from is cursors', () => {
    expect(initialCursorProblems(accepted(base()), partitions)).toEqual([]);
  });

  it('needs cursors for read_from cursors', () => {
    expect(initialCursorProblems(input([]), partitions)).toEqual(['Field "initial_cursors" must not be empty when read_from is "cursors"']);
  });

  it('names each partition without a cursor', () => {
    expect(initialCursorProblems(input(valid.slice(0, 2)), partitions)).toEqual(['Field "initial_cursors" has no cursor for partition "0" of event type "order.paid"']);
  });

  const [created0, created1, paid0] = valid as [Cursor, Cursor, Cursor];
  it.each<[string, Cursor[], RegExp]>([
    ['an event type not in event_types', [...valid, cursor('order.shipped', '0', 'begin')], /Field "initial_cursors\[3\]" names event type "order.shipped", which is not one of event_types/],
    ['an unknown partition', [...valid, cursor('order.paid', '7', 'begin')], /names partition "7", which event type "order.paid" does not have/],
    ['a second cursor for a partition', [...valid, cursor('order.paid', '0', '1')], /repeats the cursor for partition "0" of event type "order.paid"/],
    ['an expired offset', [cursor('order.created', '0', '1'), created1, paid0], /partition "0" of event type "order.created" is invalid: offset has expired/],
    ['an offset beyond the newest', [created0, created1, cursor('order.paid', '0', '5')], /is invalid: offset is beyond the newest available offset/],
    ['an offset of another timeline', [created0, created1, cursor('order.paid', '0', '001-0002-000000000000000001')], /timeline 2 does not exist/],
  ])('refuses %s', (_what, cursors, detail) => {
    const problems = initialCursorProblems(input(cursors), partitions);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(detail);
  });
});

describe('parseSubscriptionUpdate', () => {
  const stored: Subscription = {
    id: '6f1c2f0e-3c2b-4b43-9f4e-2a7d1f0c9e11',
    owning_application: 'shop',
    event_types: ['order.created', 'order.paid'],
    consumer_group: 'default',
    read_from: 'cursors',
    initial_cursors: [
      { event_type: 'order.created', partition: '0', offset: 'begin' },
      { event_type: 'order.paid', partition: '0', offset: '001-0001-000000000000000004' },
    ],
    authorization: { admins: [{ data_type: 'user', value: 'alice' }], readers: [{ data_type: 'user', value: 'bob' }] },
    annotations: { 'team.io/owner': 'a' },
    created_at: '2024-01-01T00:00:00.000Z',
    updated_at: '2024-01-01T00:00:00.000Z',
  };
  const newAuthorization = { admins: [{ data_type: 'user', value: 'carol' }], readers: [{ data_type: '*', value: '*' }] };

  it('accepts a body with only a new authorization; absent fields keep their stored value', () => {
    const result = parseSubscriptionUpdate(stored, { authorization: newAuthorization });
    expect(result).toEqual({
      ok: true,
      value: {
        owning_application: 'shop',
        event_types: ['order.created', 'order.paid'],
        consumer_group: 'default',
        read_from: 'cursors',
        initial_cursors: stored.initial_cursors,
        authorization: newAuthorization,
        annotations: { 'team.io/owner': 'a' },
      },
    });
  });

  it('accepts the full record sent back with changed annotations, labels and reordered event types, offsets in another form', () => {
    const body = {
      ...stored,
      event_types: ['order.paid', 'order.created'],
      read_from: 'CURSORS',
      initial_cursors: [
        { event_type: 'order.paid', partition: '0', offset: '4' },
        { event_type: 'order.created', partition: '0', offset: 'BEGIN' },
      ],
      annotations: {},
      labels: { tier: 'gold' },
      updated_at: 'whatever',
    };
    const result = parseSubscriptionUpdate(stored, body);
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.value).toMatchObject({ annotations: {}, labels: { tier: 'gold' } });
  });

  it.each<[string, Body, string]>([
    ['owning_application', { owning_application: 'other' }, 'Field "owning_application" cannot be changed'],
    ['event_types', { event_types: ['order.created'] }, 'Field "event_types" cannot be changed'],
    ['consumer_group', { consumer_group: 'g2' }, 'Field "consumer_group" cannot be changed'],
    ['read_from', { read_from: 'end' }, 'Field "read_from" cannot be changed'],
    ['initial_cursors', { initial_cursors: [{ event_type: 'order.created', partition: '0', offset: 'begin' }] }, 'Field "initial_cursors" cannot be changed'],
    ['id', { id: '00000000-0000-4000-8000-000000000000' }, 'Field "id" cannot be changed'],
  ])('answers 422 for a change of %s', (_field, body, detail) => {
    expect(parseSubscriptionUpdate(stored, body)).toEqual({ ok: false, status: 422, details: [detail] });
  });

  it('answers 400 for a body that is not an object or has a bad shape', () => {
    expect(parseSubscriptionUpdate(stored, 'x')).toMatchObject({ ok: false, status: 400 });
    expect(parseSubscriptionUpdate(stored, { authorization: [] })).toMatchObject({ ok: false, status: 400 });
  });

  it('answers 422 for a bad annotation', () => {
    expect(parseSubscriptionUpdate(stored, { annotations: { 'broker.io/x': 'y' } })).toMatchObject({ ok: false, status: 422 });
  });
});

describe('isSubscriptionId', () => {
  it.each([
    ['6f1c2f0e-3c2b-4b43-9f4e-2a7d1f0c9e11', true],
    ['6F1C2F0E-3C2B-4B43-9F4E-2A7D1F0C9E11', false],
    ['not-a-uuid', false],
    ['', false],
    ['6f1c2f0e-3c2b-4b43-9f4e-2a7d1f0c9e11}', false],
  ])('%j → %s', (id, expected) => {
    expect(isSubscriptionId(id)).toBe(expected);
  });
});

describe('a subscription\'s filter (docs/consuming.md "Filters")', () => {
  const filter = { properties: { metadata: { properties: { event_type: { enum: ['order.paid'] } } } } };
  const stored: Subscription = {
    id: '6f1c2f0e-3c2b-4b43-9f4e-2a7d1f0c9e11',
    owning_application: 'shop',
    event_types: ['order.created', 'order.paid'],
    consumer_group: 'default',
    read_from: 'end',
    initial_cursors: [],
    filter,
    created_at: '2024-01-01T00:00:00.000Z',
    updated_at: '2024-01-01T00:00:00.000Z',
  };

  it('is kept as given, and must be a JSON object (400)', () => {
    expect(accepted(base({ filter })).filter).toEqual(filter);
    expect(accepted(base()).filter).toBeUndefined();
    const notObject = refused(base({ filter: '{"type":"object"}' }));
    expect(notObject.status).toBe(400);
    expect(notObject.details.join('\n')).toContain('filter');
  });

  it('cannot be changed, added or removed by an update; the same filter in another key order is no change', () => {
    expect(parseSubscriptionUpdate(stored, { labels: { a: 'b' } }).ok).toBe(true);
    expect(parseSubscriptionUpdate(stored, { filter: JSON.parse(JSON.stringify(filter)) as Body }).ok).toBe(true);
    const changed = parseSubscriptionUpdate(stored, { filter: { properties: { metadata: { properties: { event_type: { enum: ['order.created'] } } } } } });
    expect(changed.ok ? [] : changed.details).toEqual(['Field "filter" cannot be changed']);
    const { filter: _none, ...unfiltered } = stored;
    void _none;
    const added = parseSubscriptionUpdate(unfiltered, { filter });
    expect(added.ok ? [] : added.details).toEqual(['Field "filter" cannot be changed']);
  });
});
