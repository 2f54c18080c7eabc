import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type Answer, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient } from '../support/stream-client.js';
import { TokenIssuer } from '../support/token-issuer.js';

/**
 * Administrator settings (docs/operations.md "Administrator settings"; docs/security.md "Blacklist and
 * feature toggles"): feature toggles,
 * the blacklist and their effect on two nodes, in auth mode `jwt` with the administrator `user`/`admin`
 * and the ordinary subjects `app-a` and `app-b`.
 */

let issuer: TokenIssuer;
let node: TestBroker;
let other: TestBroker;
const tokens: Record<'admin' | 'a' | 'b', Record<string, string>> = { admin: {}, a: {}, b: {} };

beforeAll(async () => {
  issuer = await TokenIssuer.start();
  const env = issuer.brokerEnv();
  node = await startTestBroker(env);
  other = await startTestBroker({ ...env, BROKER_REDIS_KEY_PREFIX: node.prefix });
  for (const [who, sub] of [['admin', 'admin'], ['a', 'app-a'], ['b', 'app-b']] as const) {
    tokens[who] = { Authorization: `Bearer ${await issuer.sign({ sub, audience: 'broker', expiresInSeconds: 3600 })}` };
  }
});
afterAll(async () => {
  await Promise.all([node?.stop(), other?.stop()]);
  await issuer?.close();
});

const as = (who: keyof typeof tokens, base: string, method: string, path: string, body?: unknown): Promise<Answer> => call(base, method, path, body, tokens[who]);

async function setFeature(feature: string, enabled: boolean): Promise<void> {
  expect((await as('admin', node.url, 'POST', '/settings/features', { feature, enabled })).status).toBe(204);
}

/** Polls `check` on the other node until it holds; fails after 1 s (the propagation bound). */
async function withinOneSecond(check: () => Promise<boolean>): Promise<number> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > 1000) throw new Error('not applied within 1 s');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return Date.now() - started;
}

function expectProblem(answer: Answer, status: number, detail: RegExp): void {
  expect(answer.status).toBe(status);
  expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect((answer.json as { detail: string }).detail).toMatch(detail);
}

async function createEventType(name: string): Promise<void> {
  expect((await as('a', node.url, 'POST', '/event-types', businessEventType(name))).status).toBe(201);
}

async function createSubscription(eventType: string, owner = 'app-a'): Promise<string> {
  const answer = await as('a', node.url, 'POST', '/subscriptions', { owning_application: owner, event_types: [eventType], read_from: 'begin' });
  expect([200, 201]).toContain(answer.status);
  return (answer.json as { id: string }).id;
}

describe('feature toggles', () => {
  it('lists every feature, refuses unknown ones (400) and non-admins (403)', async () => {
    const listed = await as('b', node.url, 'GET', '/settings/features');
    expect(listed.status).toBe(200);
    const names = (listed.json as { items: { feature: string; enabled: boolean }[] }).items.map((f) => f.feature);
    expect(names).toEqual(
      expect.arrayContaining([
        'disable_event_type_creation',
        'disable_event_type_deletion',
        'delete_event_type_with_subscriptions',
        'disable_subscription_creation',
        'force_event_type_authz',
        'force_subscription_authz',
        'disable_db_write_operations',
        'repartitioning',
        'token_subscription_iteration',
        'remote_tokeninfo',
        'kpi_collection',
        'audit_log_collection',
      ]),
    );
    expectProblem(await as('admin', node.url, 'POST', '/settings/features', { feature: 'make_it_fast', enabled: true }), 400, /unknown/);
    expectProblem(await as('admin', node.url, 'POST', '/settings/features', { feature: 'repartitioning', enabled: 'yes' }), 400, /enabled/);
    expectProblem(await as('a', node.url, 'POST', '/settings/features', { feature: 'repartitioning', enabled: true }), 403, /Access on WRITE settings denied/);
    expect((await call(node.url, 'GET', '/settings/features')).status).toBe(401);
  });

  it('takes effect on another node within one second: disable_event_type_creation', async () => {
    await setFeature('DISABLE_EVENT_TYPE_CREATION', true);
    try {
      const ms = await withinOneSecond(async () => (await as('a', other.url, 'POST', '/event-types', businessEventType('settings.blocked'))).status === 403);
      expect(ms).toBeLessThan(1000);
      expectProblem(await as('a', other.url, 'POST', '/event-types', businessEventType('settings.blocked')), 403, /creation is disabled/);
    } finally {
      await setFeature('disable_event_type_creation', false);
    }
    await withinOneSecond(async () => (await as('a', other.url, 'POST', '/event-types', businessEventType('settings.blocked'))).status === 201);
  });

  it('disable_event_type_deletion blocks deletion for everyone but administrators', async () => {
    await createEventType('settings.kept');
    await setFeature('disable_event_type_deletion', true);
    try {
      expectProblem(await as('a', node.url, 'DELETE', '/event-types/settings.kept'), 403, /deletion is disabled/);
      expect((await as('admin', node.url, 'DELETE', '/event-types/settings.kept')).status).toBe(200);
    } finally {
      await setFeature('disable_event_type_deletion', false);
    }
  });

  it('refuses to delete an event type with subscriptions (409) unless delete_event_type_with_subscriptions is on', async () => {
    await createEventType('settings.subscribed');
    const id = await createSubscription('settings.subscribed');
    expectProblem(await as('a', node.url, 'DELETE', '/event-types/settings.subscribed'), 409, new RegExp(`subscription.*${id}`));
    expect((await as('a', node.url, 'GET', '/event-types/settings.subscribed')).status).toBe(200);
    await setFeature('delete_event_type_with_subscriptions', true);
    try {
      expect((await as('a', node.url, 'DELETE', '/event-types/settings.subscribed')).status).toBe(200);
      expect((await as('a', node.url, 'GET', `/subscriptions/${id}`)).status).toBe(404);
    } finally {
      await setFeature('delete_event_type_with_subscriptions', false);
    }
  });

  it('disable_subscription_creation refuses new subscriptions but still returns existing ones', async () => {
    await createEventType('settings.subs');
    const existing = await createSubscription('settings.subs');
    await setFeature('disable_subscription_creation', true);
    try {
      const again = await as('a', node.url, 'POST', '/subscriptions', { owning_application: 'app-a', event_types: ['settings.subs'], read_from: 'begin' });
      expect(again.status).toBe(200);
      expect((again.json as { id: string }).id).toBe(existing);
      expectProblem(await as('a', node.url, 'POST', '/subscriptions', { owning_application: 'app-new', event_types: ['settings.subs'] }), 403, /creation is disabled/);
    } finally {
      await setFeature('disable_subscription_creation', false);
    }
  });

  it('force_event_type_authz and force_subscription_authz require an authorization section on new resources', async () => {
    await createEventType('settings.forced');
    await setFeature('force_event_type_authz', true);
    await setFeature('force_subscription_authz', true);
    try {
      expectProblem(await as('a', node.url, 'POST', '/event-types', businessEventType('settings.forced2')), 422, /authorization.*required/);
      const authorization = { admins: [{ data_type: 'user', value: 'app-a' }], readers: [{ data_type: 'user', value: 'app-a' }], writers: [{ data_type: 'user', value: 'app-a' }] };
      expect((await as('a', node.url, 'POST', '/event-types', businessEventType('settings.forced2', { authorization }))).status).toBe(201);
      // Existing event types without a section can still be updated.
      expect((await as('a', node.url, 'PUT', '/event-types/settings.forced', businessEventType('settings.forced'))).status).toBe(200);
      expectProblem(await as('a', node.url, 'POST', '/subscriptions', { owning_application: 'app-f', event_types: ['settings.forced'] }), 422, /authorization.*required/);
      const withSection = { owning_application: 'app-f', event_types: ['settings.forced'], authorization: { admins: authorization.admins, readers: authorization.readers } };
      expect((await as('a', node.url, 'POST', '/subscriptions', withSection)).status).toBe(201);
    } finally {
      await setFeature('force_event_type_authz', false);
      await setFeature('force_subscription_authz', false);
    }
  });

  it('disable_db_write_operations: metadata writes answer 503, publishing and reading go on', async () => {
    await createEventType('settings.readonly');
    const id = await createSubscription('settings.readonly');
    await setFeature('disable_db_write_operations', true);
    try {
      await withinOneSecond(async () => (await as('a', other.url, 'POST', '/event-types', businessEventType('settings.readonly2'))).status === 503);
      expectProblem(await as('a', other.url, 'PUT', '/event-types/settings.readonly', businessEventType('settings.readonly')), 503, /read-only/);
      expectProblem(await as('a', other.url, 'DELETE', '/event-types/settings.readonly'), 503, /read-only/);
      expectProblem(await as('a', other.url, 'POST', '/subscriptions', { owning_application: 'app-r', event_types: ['settings.readonly'] }), 503, /read-only/);
      expectProblem(await as('a', other.url, 'DELETE', `/subscriptions/${id}`), 503, /read-only/);
      expectProblem(await as('admin', other.url, 'PUT', '/settings/blacklist/PRODUCER_APP/x'), 503, /read-only/);
      expect((await as('a', other.url, 'POST', '/event-types/settings.readonly/events', [orderEvent('R1')])).status).toBe(200);
      expect((await as('a', other.url, 'GET', '/event-types/settings.readonly')).status).toBe(200);
    } finally {
      await setFeature('disable_db_write_operations', false);
    }
    expect((await as('a', node.url, 'DELETE', `/subscriptions/${id}`)).status).toBe(204);
  });
});

describe('token paging of GET /subscriptions (token_subscription_iteration)', () => {
  it('is refused without the feature, then pages by tokens that stay stable while subscriptions are created', async () => {
    await createEventType('settings.paged');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await createSubscription('settings.paged', `app-page-${i}`));
    const newestFirst = [...ids].reverse();
    expectProblem(await as('a', node.url, 'GET', '/subscriptions?event_type=settings.paged&token=new&limit=2'), 400, /token_subscription_iteration/);
    await setFeature('token_subscription_iteration', true);
    try {
      type Page = { items: { id: string }[]; _links: { next?: { href: string }; prev?: { href: string } } };
      const first = (await as('a', node.url, 'GET', '/subscriptions?event_type=settings.paged&token=new&limit=2')).json as Page;
      expect(first.items.map((s) => s.id)).toEqual(newestFirst.slice(0, 2));
      expect(first._links.prev).toBeUndefined();
      expect(first._links.next?.href).toMatch(/^\/subscriptions\?event_type=settings\.paged&token=[A-Za-z0-9_-]+&limit=2$/);
      // A subscription created meanwhile does not shift the next page.
      await createSubscription('settings.paged', 'app-page-late');
      const second = (await as('a', node.url, 'GET', first._links.next?.href ?? '')).json as Page;
      expect(second.items.map((s) => s.id)).toEqual(newestFirst.slice(2, 4));
      const third = (await as('a', node.url, 'GET', second._links.next?.href ?? '')).json as Page;
      expect(third.items.map((s) => s.id)).toEqual(newestFirst.slice(4));
      expect(third._links.next).toBeUndefined();
      const back = (await as('a', node.url, 'GET', third._links.prev?.href ?? '')).json as Page;
      expect(back.items.map((s) => s.id)).toEqual(newestFirst.slice(2, 4));
      expectProblem(await as('a', node.url, 'GET', '/subscriptions?token=not-a-token'), 400, /paging token/);
    } finally {
      await setFeature('token_subscription_iteration', false);
    }
  });
});

describe('blacklist', () => {
  it('lists entries by type, validates the type, and needs admin rights to change', async () => {
    expect((await as('admin', node.url, 'PUT', '/settings/blacklist/PRODUCER_APP/app-listed')).status).toBe(204);
    expect((await as('admin', node.url, 'PUT', '/settings/blacklist/consumer_et/settings.listed')).status).toBe(204);
    // The other node applies it on the change notice (a few ms; through the cluster bus up to ~30 ms).
    await withinOneSecond(async () => ((await as('b', other.url, 'GET', '/settings/blacklist')).json as { consumers: { event_types: string[] } }).consumers.event_types.length > 0);
    const listed = await as('b', other.url, 'GET', '/settings/blacklist');
    expect(listed.json).toMatchObject({ producers: { apps: ['app-listed'], event_types: [] }, consumers: { event_types: ['settings.listed'], apps: [] } });
    expectProblem(await as('admin', node.url, 'PUT', '/settings/blacklist/EVERYONE/x'), 400, /blacklist type/);
    expectProblem(await as('b', node.url, 'PUT', '/settings/blacklist/PRODUCER_APP/app-a'), 403, /Access on WRITE settings denied/);
    expect((await as('admin', node.url, 'DELETE', '/settings/blacklist/PRODUCER_APP/app-listed')).status).toBe(204);
    expect((await as('admin', node.url, 'DELETE', '/settings/blacklist/CONSUMER_ET/settings.listed')).status).toBe(204);
    expect((await as('b', node.url, 'GET', '/settings/blacklist')).json).toMatchObject({ producers: { apps: [] }, consumers: { event_types: [] } });
  });

  it('blocks a producer application and a producer event type on every node within a second (403), and a refused batch writes nothing', async () => {
    await createEventType('settings.produce');
    const newest = async () => ((await as('a', node.url, 'GET', '/event-types/settings.produce/partitions/0')).json as { newest_available_offset: string }).newest_available_offset;
    const listed = async (kind: 'producers', field: 'apps' | 'event_types', name: string) =>
      ((await as('b', other.url, 'GET', '/settings/blacklist')).json as Record<string, Record<string, string[]>>)[kind]?.[field]?.includes(name) ?? false;
    expect((await as('admin', node.url, 'PUT', '/settings/blacklist/PRODUCER_APP/app-b')).status).toBe(204);
    try {
      await withinOneSecond(() => listed('producers', 'apps', 'app-b'));
      const before = await newest();
      expectProblem(await as('b', other.url, 'POST', '/event-types/settings.produce/events', [orderEvent('X')]), 403, /^Application or event type is blocked$/);
      expect(await newest()).toBe(before);
      expect((await as('a', other.url, 'POST', '/event-types/settings.produce/events', [orderEvent('A1')])).status).toBe(200);
    } finally {
      expect((await as('admin', node.url, 'DELETE', '/settings/blacklist/PRODUCER_APP/app-b')).status).toBe(204);
    }
    expect((await as('admin', node.url, 'PUT', '/settings/blacklist/PRODUCER_ET/settings.produce')).status).toBe(204);
    try {
      await withinOneSecond(() => listed('producers', 'event_types', 'settings.produce'));
      const before = await newest();
      expectProblem(await as('a', other.url, 'POST', '/event-types/settings.produce/events', [orderEvent('Y')]), 403, /blocked/);
      expect(await newest()).toBe(before);
    } finally {
      expect((await as('admin', node.url, 'DELETE', '/settings/blacklist/PRODUCER_ET/settings.produce')).status).toBe(204);
    }
  });

  it('blocking a consumer ends its live streams with "Consumption is blocked" and refuses new ones (403)', async () => {
    await createEventType('settings.consume');
    const id = await createSubscription('settings.consume');
    const subscriptionStream = await StreamClient.open(`${other.url}/subscriptions/${id}/events?batch_flush_timeout=1`, { headers: tokens.b });
    const lowLevel = await StreamClient.open(`${other.url}/event-types/settings.consume/events?batch_flush_timeout=1`, { headers: tokens.b });
    const bystander = await StreamClient.open(`${other.url}/event-types/settings.consume/events?batch_flush_timeout=1&stream_timeout=3`, { headers: tokens.a });
    expect([subscriptionStream.status, lowLevel.status, bystander.status]).toEqual([200, 200, 200]);
    expect((await subscriptionStream.next())?.info?.debug).toBe('Stream started');
    expect((await as('admin', node.url, 'PUT', '/settings/blacklist/CONSUMER_APP/app-b')).status).toBe(204);
    try {
      const closing = (await subscriptionStream.untilEnd(3000)).at(-1);
      expect(closing?.info?.debug).toBe('Consumption is blocked');
      await lowLevel.untilEnd(3000);
      expect(lowLevel.done).toBe(true);
      // Another consumer of the same event type streams on.
      expect(bystander.done).toBe(false);
      const refused = await StreamClient.open(`${other.url}/subscriptions/${id}/events`, { headers: tokens.b });
      expect(refused.status).toBe(403);
      expect(refused.problem).toMatchObject({ detail: 'Consumption is blocked' });
      expect((await StreamClient.open(`${node.url}/event-types/settings.consume/events`, { headers: tokens.b })).status).toBe(403);
    } finally {
      expect((await as('admin', node.url, 'DELETE', '/settings/blacklist/CONSUMER_APP/app-b')).status).toBe(204);
      bystander.close();
    }
    expect((await as('admin', node.url, 'PUT', '/settings/blacklist/CONSUMER_ET/settings.consume')).status).toBe(204);
    try {
      await withinOneSecond(async () => {
        const stream = await StreamClient.open(`${other.url}/event-types/settings.consume/events`, { headers: tokens.a });
        stream.close();
        return stream.status === 403;
      });
    } finally {
      expect((await as('admin', node.url, 'DELETE', '/settings/blacklist/CONSUMER_ET/settings.consume')).status).toBe(204);
    }
  });
});
