import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type Answer, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent, schemaText } from '../support/fixtures.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';
import { TEST_ISSUER, TokenIssuer } from '../support/token-issuer.js';

/**
 * Authorization over HTTP (docs/security.md "Authorization: what a subject may do"; docs/publishing.md
 * "Publish a batch" for the order of checks; docs/operations.md "Administrator settings"): one broker node in auth mode `jwt` with real signed
 * tokens from the test issuer and the default authorization plugin (data types `user` ← `sub`,
 * `service` ← `client_id`, `team` ← `teams`; wildcard `*`/`*`). The system administrator is `user`/`admin`.
 *
 * Cast: alice administers event types and subscriptions (she is no system administrator), bob reads,
 * carol writes, dave has no rights at all; erin is a second reader; pat belongs to team payments, sam to
 * team search.
 */

let issuer: TokenIssuer;
let broker: TestBroker;

const INITIAL_ADMINS = [{ data_type: 'user', value: 'admin' }];

beforeAll(async () => {
  issuer = await TokenIssuer.start();
  broker = await startTestBroker({
    BROKER_AUTH_MODE: 'jwt',
    BROKER_AUTH_JWT_JWKS_URL: issuer.jwksUrl,
    BROKER_AUTH_JWT_ISSUER: TEST_ISSUER,
    BROKER_AUTH_JWT_AUDIENCE: 'broker',
    BROKER_AUTH_INITIAL_ADMINS: JSON.stringify(INITIAL_ADMINS),
    BROKER_SUBSCRIPTIONS_LEASE_TTL_MS: '3000',
    BROKER_CONSUMPTION_POLL_INTERVAL_MS: '100',
  });
});
afterAll(async () => {
  await broker?.stop();
  await issuer?.close();
});

// ---- who asks ----

/** A token holder: `sub` (also the `user` attribute) and optional `teams` / `client_id` claims. */
interface Who {
  readonly sub: string;
  readonly teams?: readonly string[];
  readonly client_id?: string;
}

const ADMIN: Who = { sub: 'admin' };
const ALICE: Who = { sub: 'alice' };
const BOB: Who = { sub: 'bob' };
const CAROL: Who = { sub: 'carol' };
const DAVE: Who = { sub: 'dave' };
const ERIN: Who = { sub: 'erin' };
const PAT: Who = { sub: 'pat', teams: ['payments'] };
const SAM: Who = { sub: 'sam', teams: ['search'] };

const tokens = new Map<string, Promise<string>>();

/** The Authorization header of `who` (tokens are signed once and reused). */
async function authOf(who: Who): Promise<Record<string, string>> {
  const key = JSON.stringify(who);
  let token = tokens.get(key);
  if (token === undefined) {
    const claims: Record<string, unknown> = {};
    if (who.teams !== undefined) claims.teams = who.teams;
    if (who.client_id !== undefined) claims.client_id = who.client_id;
    token = issuer.sign({ sub: who.sub, audience: 'broker', claims });
    tokens.set(key, token);
  }
  return { Authorization: `Bearer ${await token}` };
}

/** A request as `who`. */
async function api(who: Who, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  return call(broker.url, method, path, body, { ...(await authOf(who)), ...headers });
}

// ---- attributes ----

interface Attribute {
  data_type: string;
  value: string;
}
const user = (value: string): Attribute => ({ data_type: 'user', value });
const team = (value: string): Attribute => ({ data_type: 'team', value });
const service = (value: string): Attribute => ({ data_type: 'service', value });
const WILDCARD: Attribute = { data_type: '*', value: '*' };

interface EventTypeAuthorization {
  admins: Attribute[];
  readers: Attribute[];
  writers: Attribute[];
}

// ---- assertions ----

/** Every 403 is a problem+json with title `Forbidden` (and, when given, a matching detail). */
function expectForbidden(answer: Answer, detail?: string | RegExp): void {
  expect(answer.status, answer.text).toBe(403);
  expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(answer.json).toMatchObject({ title: 'Forbidden', status: 403 });
  if (detail !== undefined) {
    const text = (answer.json as { detail?: unknown }).detail;
    if (typeof detail === 'string') expect(text).toBe(detail);
    else expect(text).toMatch(detail);
  }
}

/** A refused stream opening is the same problem+json 403. */
function expectForbiddenStream(stream: StreamClient, detail?: string | RegExp): void {
  expectForbidden({ status: stream.status, headers: stream.headers, text: JSON.stringify(stream.problem), json: stream.problem }, detail);
}

function expectStatus(answer: Answer, status: number): void {
  expect(answer.status, answer.text).toBe(status);
}

// ---- event types, publishing, reading ----

/** Creates a business event type (fixtures schema) as `who`; @returns the body it was created with */
async function createEventType(name: string, overrides: Record<string, unknown> = {}, who: Who = ALICE): Promise<Record<string, unknown>> {
  const body = businessEventType(name, overrides);
  expectStatus(await api(who, 'POST', '/event-types', body), 201);
  return body;
}

function publish(who: Who, name: string, events: readonly Record<string, unknown>[]): Promise<Answer> {
  return api(who, 'POST', `/event-types/${name}/events`, events);
}

/**
 * Reads partition 0 of a one-partition event type from the beginning on the low-level stream.
 * @param query stream parameters ending the stream (`stream_limit`, `stream_timeout`)
 * @returns the answer and the events in it
 */
async function readLowLevel(who: Who, name: string, query = 'stream_limit=1'): Promise<{ answer: Answer; events: Record<string, unknown>[] }> {
  const answer = await api(who, 'GET', `/event-types/${name}/events?batch_flush_timeout=1&${query}`, undefined, {
    'X-Broker-Cursors': '[{"partition":"0","offset":"BEGIN"}]',
  });
  const events =
    answer.status === 200
      ? answer.text
          .split('\n')
          .filter((line) => line.trim() !== '')
          .flatMap((line) => (JSON.parse(line) as StreamBatch).events ?? [])
      : [];
  return { answer, events };
}

// ---- subscriptions ----

async function createSubscription(eventTypes: string[], authorization?: { admins: Attribute[]; readers: Attribute[] }, who: Who = ALICE): Promise<string> {
  const body = { owning_application: `app-${randomUUID()}`, event_types: eventTypes, read_from: 'begin', ...(authorization ? { authorization } : {}) };
  const answer = await api(who, 'POST', '/subscriptions', body);
  expectStatus(answer, 201);
  return (answer.json as { id: string }).id;
}

async function openStream(who: Who, id: string, query = 'batch_flush_timeout=1&batch_limit=10'): Promise<StreamClient> {
  return StreamClient.open(`${broker.url}/subscriptions/${id}/events?${query}`, { headers: await authOf(who) });
}

function commit(who: Who, id: string, streamId: string, cursors: readonly StreamBatch['cursor'][]): Promise<Answer> {
  return api(who, 'POST', `/subscriptions/${id}/cursors`, { items: cursors }, { 'X-Broker-StreamId': streamId });
}

async function eventually(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Reads `stream` until the server ends it, at most `timeoutMs` (keep-alives do not extend the wait).
 * @returns the batches read, and whether the stream ended in time
 */
async function untilEnd(stream: StreamClient, timeoutMs: number): Promise<{ ended: boolean; batches: StreamBatch[] }> {
  const deadline = Date.now() + timeoutMs;
  const batches: StreamBatch[] = [];
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) return { ended: false, batches };
    let batch: StreamBatch | undefined;
    try {
      batch = await stream.next(left);
    } catch {
      return { ended: false, batches };
    }
    if (batch === undefined) return { ended: true, batches };
    batches.push(batch);
  }
}

/** The stored offset form of the `n`-th event (0-based) of the first timeline. */
const offsetOf = (n: number): string => `001-0001-${String(n).padStart(18, '0')}`;
/** The offset before the first event of the first timeline. */
const BEFORE_FIRST = '001-0001--1';

// =====================================================================================================

describe('event type authorization', () => {
  const AUTHZ: EventTypeAuthorization = { admins: [user('alice')], readers: [user('bob')], writers: [user('carol')] };

  it('writers publish; everyone else gets 403 "Access on WRITE event-type:<name> denied"', async () => {
    const name = 'authz.et.write';
    await createEventType(name, { authorization: AUTHZ });
    expectStatus(await publish(CAROL, name, [orderEvent('c-1')]), 200);
    for (const who of [BOB, DAVE, ALICE, ADMIN]) expectForbidden(await publish(who, name, [orderEvent('x')]), `Access on WRITE event-type:${name} denied`);
    // The write check comes before the events are looked at (docs/publishing.md "Publish a batch"): invalid events still 403.
    expectForbidden(await publish(BOB, name, [{ no: 'metadata' }]), `Access on WRITE event-type:${name} denied`);
    // ... and after the event type lookup: an unknown event type is 404 for everyone.
    expectStatus(await publish(BOB, 'authz.et.write-missing', [orderEvent('x')]), 404);
  });

  it('readers read the low-level stream, partitions, cursor distances and lag; writers and others get 403', async () => {
    const name = 'authz.et.read';
    await createEventType(name, { authorization: AUTHZ });
    expectStatus(await publish(CAROL, name, [orderEvent('r-1'), orderEvent('r-2')]), 200);

    const read = await readLowLevel(BOB, name, 'stream_limit=2');
    expectStatus(read.answer, 200);
    expect(read.events.map((e) => e.order_number)).toEqual(['r-1', 'r-2']);
    expectStatus(await api(BOB, 'GET', `/event-types/${name}/partitions`), 200);
    expectStatus(await api(BOB, 'GET', `/event-types/${name}/partitions/0`), 200);
    const lag = await api(BOB, 'POST', `/event-types/${name}/cursors-lag`, [{ partition: '0', offset: 'BEGIN' }]);
    expectStatus(lag, 200);
    expect(lag.json).toMatchObject([{ partition: '0', unconsumed_events: 2 }]);
    const distance = [{ initial_cursor: { partition: '0', offset: 'BEGIN' }, final_cursor: { partition: '0', offset: offsetOf(1) } }];
    expectStatus(await api(BOB, 'POST', `/event-types/${name}/cursor-distances`, distance), 200);

    const denied = `Access on READ event-type:${name} denied`;
    for (const who of [CAROL, DAVE, ALICE]) {
      expectForbidden((await readLowLevel(who, name)).answer, denied);
      expectForbidden(await api(who, 'GET', `/event-types/${name}/partitions`), denied);
      expectForbidden(await api(who, 'GET', `/event-types/${name}/partitions/0`), denied);
      expectForbidden(await api(who, 'POST', `/event-types/${name}/cursors-lag`, [{ partition: '0', offset: 'BEGIN' }]), denied);
      expectForbidden(await api(who, 'POST', `/event-types/${name}/cursor-distances`, distance), denied);
    }
  });

  it('changing the readers disconnects live low-level consumers; only those still authorized reconnect', async () => {
    const name = 'authz.et.readers-change';
    const body = await createEventType(name, { authorization: { ...AUTHZ, readers: [user('bob'), user('erin')] } });
    const open = async (who: Who): Promise<StreamClient> =>
      StreamClient.open(`${broker.url}/event-types/${name}/events?batch_flush_timeout=1`, { headers: await authOf(who) });
    const [bob, erin] = [await open(BOB), await open(ERIN)];
    expect([bob.status, erin.status]).toEqual([200, 200]);
    expectStatus(await api(ALICE, 'PUT', `/event-types/${name}`, { ...body, authorization: { ...AUTHZ, readers: [user('bob')] } }), 200);
    expectStatus(await publish(CAROL, name, [orderEvent('after-change')]), 200);
    const [bobRest, erinRest] = await Promise.all([untilEnd(bob, 3000), untilEnd(erin, 3000)]);
    bob.close();
    erin.close();
    expect(erinRest.batches.flatMap((b) => b.events ?? []).map((e) => e.order_number), 'erin lost read access').not.toContain('after-change');
    expect([bobRest.ended, erinRest.ended], 'both streams end').toEqual([true, true]);
    expectForbiddenStream(await open(ERIN), `Access on READ event-type:${name} denied`);
    const again = await open(BOB);
    expect(again.status).toBe(200);
    again.close();
  });

  it('only the event type admins and the system administrators update it', async () => {
    const name = 'authz.et.update';
    const body = await createEventType(name, { authorization: AUTHZ });
    const changed = { ...body, annotations: { 'example.org/changed': 'yes' } };
    for (const who of [BOB, CAROL, DAVE]) expectForbidden(await api(who, 'PUT', `/event-types/${name}`, changed), `Access on ADMIN event-type:${name} denied`);
    expectStatus(await api(ALICE, 'PUT', `/event-types/${name}`, changed), 200);
    expectStatus(await api(ADMIN, 'PUT', `/event-types/${name}`, { ...changed, annotations: { 'example.org/changed': 'by-admin' } }), 200);
    const stored = await api(DAVE, 'GET', `/event-types/${name}`);
    expect(stored.json).toMatchObject({ annotations: { 'example.org/changed': 'by-admin' }, authorization: AUTHZ });

    // The admins can hand the event type over: afterwards bob administers it and alice does not.
    const handedOver = { ...changed, authorization: { ...AUTHZ, admins: [user('bob')] } };
    expectStatus(await api(ALICE, 'PUT', `/event-types/${name}`, handedOver), 200);
    expectStatus(await api(BOB, 'PUT', `/event-types/${name}`, handedOver), 200);
    expectForbidden(await api(ALICE, 'PUT', `/event-types/${name}`, handedOver), `Access on ADMIN event-type:${name} denied`);
  });

  it('only the event type admins and the system administrators delete it', async () => {
    const [mine, admins] = ['authz.et.delete-alice', 'authz.et.delete-admin'];
    await createEventType(mine, { authorization: AUTHZ });
    await createEventType(admins, { authorization: AUTHZ });
    for (const name of [mine, admins]) {
      for (const who of [BOB, CAROL, DAVE]) expectForbidden(await api(who, 'DELETE', `/event-types/${name}`), `Access on ADMIN event-type:${name} denied`);
    }
    expectStatus(await api(ALICE, 'DELETE', `/event-types/${mine}`), 200);
    expectStatus(await api(ADMIN, 'DELETE', `/event-types/${admins}`), 200);
    expectStatus(await api(ALICE, 'GET', `/event-types/${mine}`), 404);
    expectStatus(await api(ALICE, 'GET', `/event-types/${admins}`), 404);
  });

  it('an event type without an authorization section is open to every authenticated subject', async () => {
    const name = 'authz.et.open';
    const body = await createEventType(name);
    expectStatus(await publish(DAVE, name, [orderEvent('o-1')]), 200);
    const read = await readLowLevel(ERIN, name);
    expectStatus(read.answer, 200);
    expect(read.events).toHaveLength(1);
    expectStatus(await api(PAT, 'GET', `/event-types/${name}/partitions`), 200);
    expectStatus(await api(PAT, 'POST', `/event-types/${name}/cursors-lag`, [{ partition: '0', offset: 'BEGIN' }]), 200);
    expectStatus(await api(DAVE, 'PUT', `/event-types/${name}`, body), 200);
    expectStatus(await api(SAM, 'DELETE', `/event-types/${name}`), 200);
    // Still authenticated only: no token is 401, not 403.
    expectStatus(await call(broker.url, 'GET', '/event-types'), 401);
  });

  it('the wildcard attribute lets every authenticated subject in', async () => {
    const name = 'authz.et.wildcard';
    const body = await createEventType(name, { authorization: { admins: [WILDCARD], readers: [WILDCARD], writers: [WILDCARD] } });
    expectStatus(await publish(DAVE, name, [orderEvent('w-1')]), 200);
    const read = await readLowLevel(SAM, name);
    expectStatus(read.answer, 200);
    expect(read.events).toHaveLength(1);
    expectStatus(await api(ERIN, 'PUT', `/event-types/${name}`, body), 200);

    // A wildcard in one list only opens that list.
    const partly = 'authz.et.wildcard-readers';
    await createEventType(partly, { authorization: { admins: [user('alice')], readers: [WILDCARD], writers: [user('carol')] } });
    expectStatus(await publish(CAROL, partly, [orderEvent('w-2')]), 200);
    expectStatus((await readLowLevel(DAVE, partly)).answer, 200);
    expectForbidden(await publish(DAVE, partly, [orderEvent('w-3')]), `Access on WRITE event-type:${partly} denied`);
  });

  it('team and service attributes come from the teams and client_id claims', async () => {
    const name = 'authz.et.teams';
    await createEventType(name, { authorization: { admins: [team('payments')], readers: [team('payments'), team('search')], writers: [team('payments'), service('billing-app')] } });
    const payer: Who = { sub: 'paula', teams: ['other', 'payments'] };
    const billing: Who = { sub: 'robot-1', client_id: 'billing-app' };
    expectStatus(await publish(payer, name, [orderEvent('t-1')]), 200);
    expectStatus(await publish(billing, name, [orderEvent('t-2')]), 200);
    expectForbidden(await publish(SAM, name, [orderEvent('t-3')]), `Access on WRITE event-type:${name} denied`);
    // A claim only counts for its own data type: a `sub` equal to a team name is not that team.
    expectForbidden(await publish({ sub: 'payments' }, name, [orderEvent('t-4')]), `Access on WRITE event-type:${name} denied`);
    expectForbidden(await publish({ sub: 'billing-app' }, name, [orderEvent('t-5')]), `Access on WRITE event-type:${name} denied`);

    expectStatus((await readLowLevel(SAM, name)).answer, 200);
    expectForbidden((await readLowLevel({ sub: 'nobody', teams: ['marketing'] }, name)).answer, `Access on READ event-type:${name} denied`);
    expectStatus(await api(PAT, 'DELETE', `/event-types/${name}`), 200);

    // A `*` value on its own matches any value of its data type: every member of some team.
    const anyTeam = 'authz.et.any-team';
    await createEventType(anyTeam, { authorization: { admins: [user('alice')], readers: [team('*')], writers: [user('carol')] } });
    expectStatus((await readLowLevel(PAT, anyTeam, 'stream_timeout=1')).answer, 200);
    expectForbidden((await readLowLevel(BOB, anyTeam)).answer, `Access on READ event-type:${anyTeam} denied`);
  });

  it('the authorization section cannot be removed by an update (422)', async () => {
    const name = 'authz.et.keep-section';
    const body = await createEventType(name, { authorization: AUTHZ });
    const withoutSection = { ...body };
    delete withoutSection.authorization;
    for (const who of [ALICE, ADMIN]) {
      const answer = await api(who, 'PUT', `/event-types/${name}`, withoutSection);
      expectStatus(answer, 422);
      expect((answer.json as { detail: string }).detail).toMatch(/authorization/);
    }
    expect((await api(ALICE, 'GET', `/event-types/${name}`)).json).toMatchObject({ authorization: AUTHZ });
    // Adding a section to an event type without one is allowed.
    const open = 'authz.et.add-section';
    const openBody = await createEventType(open);
    expectStatus(await api(DAVE, 'PUT', `/event-types/${open}`, { ...openBody, authorization: AUTHZ }), 200);
    expectForbidden(await api(DAVE, 'PUT', `/event-types/${open}`, { ...openBody, authorization: AUTHZ }), `Access on ADMIN event-type:${open} denied`);
  });

  it('refuses unknown data types, a wildcard data type with another value and duplicated attributes (422), on create and on update', async () => {
    const invalid: [string, EventTypeAuthorization, RegExp][] = [
      ['unknown data type', { ...AUTHZ, readers: [{ data_type: 'robot', value: 'r2d2' }] }, /authorization\.readers\[0\].*robot/],
      ['wildcard data type with a value', { ...AUTHZ, writers: [{ data_type: '*', value: 'carol' }] }, /authorization\.writers\[0\]/],
      ['duplicated attribute', { ...AUTHZ, admins: [user('alice'), user('alice')] }, /authorization\.admins.*more than once/],
      ['empty list', { ...AUTHZ, writers: [] }, /authorization\.writers/],
    ];
    const name = 'authz.et.invalid';
    const body = await createEventType(name, { authorization: AUTHZ });
    for (const [what, authorization, detail] of invalid) {
      const created = await api(ALICE, 'POST', '/event-types', businessEventType(`authz.et.invalid-${invalid.findIndex((i) => i[0] === what)}`, { authorization }));
      expect(created.status, `create with ${what}: ${created.text}`).toBe(422);
      expect((created.json as { detail: string }).detail).toMatch(detail);
      const updated = await api(ALICE, 'PUT', `/event-types/${name}`, { ...body, authorization });
      expect(updated.status, `update with ${what}: ${updated.text}`).toBe(422);
      expect((updated.json as { detail: string }).detail).toMatch(detail);
    }
    expect((await api(ALICE, 'GET', `/event-types/${name}`)).json).toMatchObject({ authorization: AUTHZ });
    for (let i = 0; i < invalid.length; i++) expectStatus(await api(ALICE, 'GET', `/event-types/authz.et.invalid-${i}`), 404);
  });

  it('refuses an event owner selector whose name is not a data type of the plugin (422)', async () => {
    const answer = await api(ALICE, 'POST', '/event-types', businessEventType('authz.et.selector-robot', { event_owner_selector: { type: 'static', name: 'robot', value: 'r2d2' } }));
    expectStatus(answer, 422);
    expect((answer.json as { detail: string }).detail).toMatch(/event_owner_selector\.name.*robot/);
    expectStatus(await api(ALICE, 'GET', '/event-types/authz.et.selector-robot'), 404);
  });

  it('refuses the wildcard as event owner selector name (422): it is no data type of the plugin', async () => {
    const wildcard = await api(ALICE, 'POST', '/event-types', businessEventType('authz.et.selector-wildcard', { event_owner_selector: { type: 'static', name: '*', value: 'x' } }));
    expect(wildcard.status, wildcard.text).toBe(422);
  });
});

// =====================================================================================================

describe('subscription authorization', () => {
  // Event type A is readable by bob, carol, dave and erin; B by bob, dave and erin (not carol).
  const [A, B] = ['authz.sub.a', 'authz.sub.b'];
  const SUB_AUTHZ = { admins: [user('alice')], readers: [user('bob'), user('carol'), user('erin')] };
  /** Creates a subscription as bob, who may read every event type here (alice, who administers them, may not read them). */
  const subscribe = (eventTypes: string[], authorization?: { admins: Attribute[]; readers: Attribute[] }): Promise<string> => createSubscription(eventTypes, authorization, BOB);

  beforeAll(async () => {
    await createEventType(A, { authorization: { admins: [user('alice')], readers: [user('bob'), user('carol'), user('dave'), user('erin')], writers: [user('carol')] } });
    await createEventType(B, { authorization: { admins: [user('alice')], readers: [user('bob'), user('dave'), user('erin')], writers: [user('carol')] } });
    expectStatus(await publish(CAROL, A, [orderEvent('a-1')]), 200);
    expectStatus(await publish(CAROL, B, [orderEvent('b-1')]), 200);
  });

  it('streaming needs reader rights on the subscription and read rights on each of its event types', async () => {
    const id = await subscribe([A, B], SUB_AUTHZ);
    // carol reads the subscription and A, not B; dave reads A and B, not the subscription; alice administers it only.
    expectForbiddenStream(await openStream(CAROL, id), `Access on READ event-type:${B} denied`);
    expectForbiddenStream(await openStream(DAVE, id), `Access on READ subscription:${id} denied`);
    expectForbiddenStream(await openStream(ALICE, id), `Access on READ subscription:${id} denied`);
    // Also with a body (direct assignment of a partition carol may read on its own).
    const direct = await api(CAROL, 'POST', `/subscriptions/${id}/events?batch_flush_timeout=1`, { partitions: [{ event_type: A, partition: '0' }] });
    expectForbidden(direct, `Access on READ event-type:${B} denied`);

    const stream = await openStream(BOB, id);
    expect(stream.status).toBe(200);
    const batches = await stream.events(2);
    expect(batches.flatMap((b) => b.events ?? []).map((e) => e.order_number).sort()).toEqual(['a-1', 'b-1']);
    stream.close();
  });

  it('committing needs the same rights', async () => {
    const id = await subscribe([A, B], SUB_AUTHZ);
    const stream = await openStream(BOB, id);
    expect(stream.status).toBe(200);
    const streamId = stream.headers.get('x-broker-streamid') ?? '';
    const cursors = (await stream.events(2)).map((b) => b.cursor);

    expectForbidden(await commit(CAROL, id, streamId, cursors), `Access on READ event-type:${B} denied`);
    expectForbidden(await commit(DAVE, id, streamId, cursors), `Access on READ subscription:${id} denied`);
    expectForbidden(await commit(ALICE, id, streamId, cursors), `Access on READ subscription:${id} denied`);
    const before = await api(BOB, 'GET', `/subscriptions/${id}/cursors`);
    expect((before.json as { items: { offset: string }[] }).items.map((c) => c.offset)).toEqual([BEFORE_FIRST, BEFORE_FIRST]);
    expectStatus(await commit(BOB, id, streamId, cursors), 204);
    const committed = await api(DAVE, 'GET', `/subscriptions/${id}/cursors`);
    expect((committed.json as { items: { offset: string }[] }).items.map((c) => c.offset)).toEqual([offsetOf(0), offsetOf(0)]);
    stream.close();
  });

  it('losing read rights on one event type of the subscription stops its consumption', async () => {
    const c = 'authz.sub.c';
    const body = await createEventType(c, { authorization: { admins: [user('alice')], readers: [user('bob'), user('erin')], writers: [user('carol')] } });
    const id = await subscribe([A, c], SUB_AUTHZ);
    const first = await openStream(ERIN, id);
    expect(first.status).toBe(200);
    first.close();
    expectStatus(await api(ALICE, 'PUT', `/event-types/${c}`, { ...body, authorization: { admins: [user('alice')], readers: [user('bob')], writers: [user('carol')] } }), 200);
    expectForbiddenStream(await openStream(ERIN, id), `Access on READ event-type:${c} denied`);
    const bob = await openStream(BOB, id);
    expect(bob.status).toBe(200);
    bob.close();
  });

  it('a live consumer that loses read access to one of the event types is disconnected', async () => {
    const d = 'authz.sub.d';
    const body = await createEventType(d, { authorization: { admins: [user('alice')], readers: [user('bob'), user('erin')], writers: [user('carol')] } });
    const id = await subscribe([A, d], SUB_AUTHZ);
    const erin = await openStream(ERIN, id);
    expect(erin.status).toBe(200);
    await erin.next();
    expectStatus(await api(ALICE, 'PUT', `/event-types/${d}`, { ...body, authorization: { admins: [user('alice')], readers: [user('bob')], writers: [user('carol')] } }), 200);
    // erin may no longer read d: her stream ends, and no event of d reaches her any more.
    expectStatus(await publish(CAROL, d, [orderEvent('d-after')]), 200);
    const rest = await untilEnd(erin, 3000).finally(() => erin.close());
    expect(rest.batches.flatMap((b) => b.events ?? []).map((e) => e.order_number)).not.toContain('d-after');
    expect(rest.ended, 'the stream of a consumer who lost read access ends').toBe(true);
    expect(rest.batches.at(-1)?.events).toBeUndefined();
    expectForbiddenStream(await openStream(ERIN, id), `Access on READ event-type:${d} denied`);
  });

  it('only subscription admins and system administrators update and delete it', async () => {
    const id = await subscribe([A], SUB_AUTHZ);
    const denied = `Access on ADMIN subscription:${id} denied`;
    const next = { authorization: { admins: [user('alice')], readers: [user('bob')] } };
    for (const who of [BOB, CAROL, DAVE]) {
      expectForbidden(await api(who, 'PUT', `/subscriptions/${id}`, next), denied);
      expectForbidden(await api(who, 'DELETE', `/subscriptions/${id}`), denied);
    }
    expect((await api(BOB, 'GET', `/subscriptions/${id}`)).json).toMatchObject({ authorization: SUB_AUTHZ });
    expectStatus(await api(ALICE, 'PUT', `/subscriptions/${id}`, next), 204);
    expectStatus(await api(ADMIN, 'PUT', `/subscriptions/${id}`, { authorization: SUB_AUTHZ }), 204);
    expect((await api(BOB, 'GET', `/subscriptions/${id}`)).json).toMatchObject({ authorization: SUB_AUTHZ });

    // Invalid attributes are refused on update (and on create).
    const robot = { authorization: { admins: [user('alice')], readers: [{ data_type: 'robot', value: 'r2d2' }] } };
    expectStatus(await api(ALICE, 'PUT', `/subscriptions/${id}`, robot), 422);
    expectStatus(await api(ALICE, 'PUT', `/subscriptions/${id}`, { authorization: { admins: [user('alice'), user('alice')], readers: [user('bob')] } }), 422);
    expectStatus(await api(ALICE, 'POST', '/subscriptions', { owning_application: 'authz-robot', event_types: [A], ...robot }), 422);
    expect((await api(BOB, 'GET', `/subscriptions/${id}`)).json).toMatchObject({ authorization: SUB_AUTHZ });

    const other = await subscribe([A], SUB_AUTHZ);
    expectStatus(await api(ALICE, 'DELETE', `/subscriptions/${id}`), 204);
    expectStatus(await api(ADMIN, 'DELETE', `/subscriptions/${other}`), 204);
    expectStatus(await api(ALICE, 'GET', `/subscriptions/${id}`), 404);
    expectStatus(await api(ALICE, 'GET', `/subscriptions/${other}`), 404);
  });

  it('a subscription without an authorization section is open to every authenticated reader of its event types', async () => {
    const id = await subscribe([A]);
    const stream = await openStream(DAVE, id);
    expect(stream.status).toBe(200);
    stream.close();
    expectStatus(await api(DAVE, 'PUT', `/subscriptions/${id}`, { authorization: SUB_AUTHZ }), 204);
    expectForbidden(await api(DAVE, 'DELETE', `/subscriptions/${id}`), `Access on ADMIN subscription:${id} denied`);
  });

  it('changing the readers disconnects every consumer; only those still authorized reconnect', async () => {
    const id = await subscribe([A, B], { admins: [user('alice')], readers: [user('bob'), user('erin')] });
    const bob = await openStream(BOB, id);
    const erin = await openStream(ERIN, id);
    expect([bob.status, erin.status]).toEqual([200, 200]);
    await bob.next();
    await erin.next();

    // Changing only the admins keeps the consumers connected.
    expectStatus(await api(ALICE, 'PUT', `/subscriptions/${id}`, { authorization: { admins: [user('alice'), user('admin')], readers: [user('erin'), user('bob')] } }), 204);
    // A negative check: the window in which a readers change would have disconnected them.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(bob.done || erin.done).toBe(false);

    expectStatus(await api(ALICE, 'PUT', `/subscriptions/${id}`, { authorization: { admins: [user('alice')], readers: [user('bob')] } }), 204);
    for (const stream of [bob, erin]) {
      const rest = await untilEnd(stream, 3000);
      expect(rest.ended).toBe(true);
      const last = rest.batches.at(-1);
      expect(last?.events).toBeUndefined();
      expect(last?.info?.debug).toMatch(/authorization/i);
    }
    expectForbiddenStream(await openStream(ERIN, id), `Access on READ subscription:${id} denied`);
    const again = await openStream(BOB, id);
    expect(again.status).toBe(200);
    again.close();
  });

  it('a cursor reset needs subscription admin rights and read access to every event type of it', async () => {
    // alice and erin administer the subscription; erin also reads A and B, alice reads neither.
    const id = await subscribe([A, B], { admins: [user('alice'), user('erin')], readers: [user('bob')] });
    const reset = { items: [{ event_type: A, partition: '0', offset: 'BEGIN' }] };
    const denied = `Access on ADMIN subscription:${id} denied`;
    for (const who of [BOB, CAROL, DAVE]) expectForbidden(await api(who, 'PATCH', `/subscriptions/${id}/cursors`, reset), denied);
    expectForbidden(await api(ALICE, 'PATCH', `/subscriptions/${id}/cursors`, reset), `Access on READ event-type:${A} denied`);
    // A system administrator gets no exception: it may make itself a reader of the event types first.
    expectForbidden(await api(ADMIN, 'PATCH', `/subscriptions/${id}/cursors`, { items: [] }), `Access on READ event-type:${A} denied`);
    expect((await api(BOB, 'GET', `/subscriptions/${id}/cursors`)).json).toEqual({ items: [] });
    expectStatus(await api(ERIN, 'PATCH', `/subscriptions/${id}/cursors`, reset), 204);
    expectStatus(await api(ERIN, 'PATCH', `/subscriptions/${id}/cursors`, { items: [] }), 204);
    expect((await api(BOB, 'GET', `/subscriptions/${id}/cursors`)).json).toMatchObject({ items: [{ event_type: A, offset: BEFORE_FIRST }, { event_type: B }] });
  });
});

// =====================================================================================================

describe('read access to the event types of a subscription', () => {
  // carol writes and reads A but may not read B: its GET /event-types/B/partitions answers 403.
  const [A, B] = ['authz.read.a', 'authz.read.b'];

  beforeAll(async () => {
    await createEventType(A, { authorization: { admins: [user('alice')], readers: [user('bob'), user('carol')], writers: [user('carol')] } });
    await createEventType(B, { authorization: { admins: [user('alice')], readers: [user('bob')], writers: [user('carol')] } });
    expectStatus(await publish(CAROL, B, [orderEvent('b-1'), orderEvent('b-2')]), 200);
  });

  it('the subject cannot read B directly', async () => {
    expectForbidden(await api(CAROL, 'GET', `/event-types/${B}/partitions`), `Access on READ event-type:${B} denied`);
    expectStatus(await api(CAROL, 'GET', `/event-types/${A}/partitions`), 200);
  });

  it('creating a subscription on B is 403, nothing is stored; the same key created by a reader is not handed out either', async () => {
    const owner = `app-${randomUUID()}`;
    for (const eventTypes of [[B], [A, B], [B, A]]) {
      expectForbidden(await api(CAROL, 'POST', '/subscriptions', { owning_application: owner, event_types: eventTypes, read_from: 'begin' }), `Access on READ event-type:${B} denied`);
    }
    const listed = await api(BOB, 'GET', `/subscriptions?owning_application=${owner}`);
    expect((listed.json as { items: unknown[] }).items).toEqual([]);
    // bob may read B: he creates it (201); carol asking for the same key gets 403, not the existing record.
    const created = await api(BOB, 'POST', '/subscriptions', { owning_application: owner, event_types: [B], read_from: 'begin' });
    expectStatus(created, 201);
    expectForbidden(await api(CAROL, 'POST', '/subscriptions', { owning_application: owner, event_types: [B], read_from: 'begin' }), `Access on READ event-type:${B} denied`);
    expectStatus(await api(BOB, 'POST', '/subscriptions', { owning_application: owner, event_types: [B], read_from: 'begin' }), 200);
    expectStatus(await api(CAROL, 'POST', '/subscriptions', { owning_application: owner, event_types: [A], read_from: 'begin' }), 201);
  });

  it('resetting the cursors, reading the cursors, the stats and the scaling figures of a subscription on B are 403 for carol, even as its admin and reader', async () => {
    const id = await createSubscription([A, B], { admins: [user('carol'), user('bob')], readers: [user('carol'), user('bob')] }, BOB);
    const denied = `Access on READ event-type:${B} denied`;
    expectForbidden(await api(CAROL, 'PATCH', `/subscriptions/${id}/cursors`, { items: [] }), denied);
    expectForbidden(await api(CAROL, 'PATCH', `/subscriptions/${id}/cursors`, { items: [{ event_type: B, partition: '0', offset: 'BEGIN' }] }), denied);
    expect((await api(BOB, 'GET', `/subscriptions/${id}/cursors`)).json, 'nothing was initialized').toEqual({ items: [] });
    expectStatus(await api(BOB, 'PATCH', `/subscriptions/${id}/cursors`, { items: [{ event_type: B, partition: '0', offset: 'BEGIN' }] }), 204);

    expectForbidden(await api(CAROL, 'GET', `/subscriptions/${id}/cursors`), denied);
    expectForbidden(await api(CAROL, 'GET', `/subscriptions/${id}/stats`), denied);
    expectForbidden(await api(CAROL, 'GET', `/subscriptions/${id}/stats?show_time_lag=true`), denied);
    expectForbidden(await api(CAROL, 'GET', `/subscriptions/${id}/scaling`), denied);
    const stats = await api(BOB, 'GET', `/subscriptions/${id}/stats`);
    expectStatus(stats, 200);
    const unconsumed = (stats.json as { items: { event_type: string; partitions: { unconsumed_events?: number }[] }[] }).items.find((i) => i.event_type === B)?.partitions[0]?.unconsumed_events;
    expect(unconsumed).toBe(2);
    const scaling = await api(BOB, 'GET', `/subscriptions/${id}/scaling`);
    expectStatus(scaling, 200);
    expect(scaling.json).toMatchObject({ subscription_id: id, consumption_mode: 'stream', streams: 0, unconsumed_events: 2 });
    expectStatus(await api(BOB, 'GET', `/subscriptions/${id}/cursors`), 200);
    expectForbiddenStream(await openStream(CAROL, id), denied);
  });

  it('afterwards the node still publishes and streams normally', async () => {
    const id = await createSubscription([A], undefined, CAROL);
    const published = await publish(CAROL, A, [orderEvent('after-1')]);
    expect(published.status, published.text).toBe(200);
    const stream = await openStream(CAROL, id, 'batch_flush_timeout=1&batch_limit=1&stream_limit=1');
    try {
      expect(stream.status).toBe(200);
      const [batch] = await stream.events(1, 5000);
      expect(batch?.events?.map((e) => e.order_number)).toEqual(['after-1']);
    } finally {
      stream.close();
    }
  });
});

// =====================================================================================================

describe('listing by writer and reader', () => {
  const names = ['authz.list.carol', 'authz.list.wildcard', 'authz.list.open', 'authz.list.dave'];
  const subscriptionIds: string[] = [];

  beforeAll(async () => {
    await createEventType(names[0] as string, { authorization: { admins: [user('alice')], readers: [user('bob')], writers: [team('ops'), user('carol')] } });
    await createEventType(names[1] as string, { authorization: { admins: [user('alice')], readers: [WILDCARD], writers: [WILDCARD] } });
    await createEventType(names[2] as string);
    await createEventType(names[3] as string, { authorization: { admins: [user('alice')], readers: [user('dave')], writers: [user('dave')] } });
    subscriptionIds.push(await createSubscription([names[2] as string], { admins: [user('alice')], readers: [team('ops'), user('bob')] }));
    subscriptionIds.push(await createSubscription([names[2] as string], { admins: [user('alice')], readers: [WILDCARD] }));
    subscriptionIds.push(await createSubscription([names[2] as string]));
    subscriptionIds.push(await createSubscription([names[2] as string], { admins: [user('bob')], readers: [user('dave')] }));
  });

  it('GET /event-types?writer= lists only event types whose writers name that attribute explicitly', async () => {
    const listed = async (query: string): Promise<string[]> => {
      const answer = await api(DAVE, 'GET', `/event-types?${query}`);
      expectStatus(answer, 200);
      return (answer.json as { name: string }[]).map((e) => e.name).filter((n) => n.startsWith('authz.list.'));
    };
    expect(await listed('writer=user:carol')).toEqual(['authz.list.carol']);
    expect(await listed('writer=team:ops')).toEqual(['authz.list.carol']);
    expect(await listed('writer=user:dave')).toEqual(['authz.list.dave']);
    expect(await listed('writer=user:nobody')).toEqual([]);
    expect(await listed('writer=user:bob')).toEqual([]);
    expect((await listed('')).sort()).toEqual([...names].sort());
  });

  it('GET /subscriptions?reader= lists only subscriptions whose readers name that attribute explicitly', async () => {
    const listed = async (query: string): Promise<string[]> => {
      const answer = await api(DAVE, 'GET', `/subscriptions?limit=1000&${query}`);
      expectStatus(answer, 200);
      return (answer.json as { items: { id: string }[] }).items.map((s) => s.id).filter((id) => subscriptionIds.includes(id));
    };
    const [bobs, wildcard, open, daves] = subscriptionIds;
    expect(await listed('reader=user:bob')).toEqual([bobs]);
    expect(await listed('reader=team:ops')).toEqual([bobs]);
    expect(await listed(`reader=user:dave&event_type=${names[2] as string}`)).toEqual([daves]);
    expect(await listed('reader=user:carol')).toEqual([]);
    expect((await listed(`event_type=${names[2] as string}`)).sort()).toEqual([bobs, wildcard, open, daves].sort());
    // Every subscription listed for a reader names it.
    const all = await api(DAVE, 'GET', '/subscriptions?limit=1000&reader=user:bob');
    for (const s of (all.json as { items: { authorization?: { readers: Attribute[] } }[] }).items) expect(s.authorization?.readers).toContainEqual(user('bob'));
  });

  it('a malformed writer or reader value is 400', async () => {
    for (const query of ['writer=carol', 'writer=user:', 'writer=:carol', 'writer=']) {
      const answer = await api(DAVE, 'GET', `/event-types?${query}`);
      expect(answer.status, query).toBe(400);
      expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    }
    for (const query of ['reader=bob', 'reader=user:', 'reader=:bob']) expect((await api(DAVE, 'GET', `/subscriptions?${query}`)).status, query).toBe(400);
  });
});

// =====================================================================================================

describe('per-event authorization (event owner selector)', () => {
  const PATH = 'authz.owner.path';
  const STATIC = 'authz.owner.static';
  const ownerSchema = { type: 'json_schema', schema: schemaText({ owner: { type: 'string' }, n: { type: 'number' } }) };
  const event = (owner: string | undefined, n: number): Record<string, unknown> => ({
    metadata: { eid: randomUUID(), occurred_at: new Date().toISOString() },
    n,
    ...(owner === undefined ? {} : { owner }),
  });
  // Offsets 0..6: only 1, 3 and 4 belong to payments; the stream starts and ends with search events.
  const OWNERS = ['search', 'payments', 'search', 'payments', 'payments', 'search', 'search'];
  const BOTH: Who = { sub: 'boss', teams: ['search', 'payments'] };

  beforeAll(async () => {
    await createEventType(PATH, { schema: ownerSchema, event_owner_selector: { type: 'path', name: 'team', value: 'owner' } });
    await createEventType(STATIC, { schema: ownerSchema, event_owner_selector: { type: 'static', name: 'team', value: 'payments' } });
  });

  it('refuses events whose owner value resolves to null (422, item failed, nothing written)', async () => {
    const missing = await publish(CAROL, PATH, [event('payments', 100), event(undefined, 101)]);
    expectStatus(missing, 422);
    const items = missing.json as { publishing_status: string; step: string; detail?: string }[];
    expect(items.map((i) => i.publishing_status)).toEqual(['aborted', 'failed']);
    expect(items[1]?.detail).toMatch(/owner/);
    const nested = await publish(CAROL, PATH, [{ ...event(undefined, 102), owner: { team: 'payments' } }]);
    expectStatus(nested, 422);
    expect((nested.json as { publishing_status: string }[])[0]?.publishing_status).toBe('failed');
    const lag = await api(CAROL, 'POST', `/event-types/${PATH}/cursors-lag`, [{ partition: '0', offset: 'BEGIN' }]);
    expect(lag.json).toMatchObject([{ unconsumed_events: 0 }]);

    // The static selector gives every event its owner: no owner field needed.
    expectStatus(await publish(CAROL, STATIC, [event(undefined, 1), event(undefined, 2)]), 200);
  });

  it('the owner selector cannot be removed or changed by an update (422)', async () => {
    const current = (await api(ALICE, 'GET', `/event-types/${STATIC}`)).json as Record<string, unknown>;
    const without = { ...current };
    delete without.event_owner_selector;
    expectStatus(await api(ALICE, 'PUT', `/event-types/${STATIC}`, without), 422);
    expectStatus(await api(ALICE, 'PUT', `/event-types/${STATIC}`, { ...without, event_owner_selector: { type: 'static', name: 'team', value: 'search' } }), 422);
  });

  it('a low-level consumer sees only the events it may read', async () => {
    expectStatus(await publish(CAROL, PATH, OWNERS.map((owner, n) => event(owner, n))), 200);

    const payments = await readLowLevel(PAT, PATH, 'stream_limit=3');
    expectStatus(payments.answer, 200);
    expect(payments.events.map((e) => [e.n, e.owner])).toEqual([
      [1, 'payments'],
      [3, 'payments'],
      [4, 'payments'],
    ]);
    const search = await readLowLevel(SAM, PATH, 'stream_limit=4');
    expect(search.events.map((e) => e.n)).toEqual([0, 2, 5, 6]);
    const both = await readLowLevel(BOTH, PATH, 'stream_limit=7');
    expect(both.events.map((e) => e.n)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    const none = await readLowLevel(DAVE, PATH, 'stream_timeout=1');
    expectStatus(none.answer, 200);
    expect(none.events).toEqual([]);
  });

  it('a path selector reads the enriched event (metadata.published_by as user owner)', async () => {
    const name = 'authz.owner.publisher';
    await createEventType(name, { schema: ownerSchema, event_owner_selector: { type: 'path', name: 'user', value: 'metadata.published_by' } });
    expectStatus(await publish(CAROL, name, [event(undefined, 1)]), 200);
    expectStatus(await publish(DAVE, name, [event(undefined, 2)]), 200);
    expect((await readLowLevel(CAROL, name, 'stream_limit=1')).events.map((e) => e.n)).toEqual([1]);
    expect((await readLowLevel(DAVE, name, 'stream_limit=1')).events.map((e) => e.n)).toEqual([2]);
  });

  it('a static owner: its holders see every event, others none', async () => {
    const payments = await readLowLevel(PAT, STATIC, 'stream_limit=2');
    expect(payments.events.map((e) => e.n)).toEqual([1, 2]);
    const search = await readLowLevel(SAM, STATIC, 'stream_timeout=1');
    expectStatus(search.answer, 200);
    expect(search.events).toEqual([]);
  });

  it('a subscription consumer sees only its events; the skipped ones are committed automatically', async () => {
    const id = await createSubscription([PATH]);
    const stream = await openStream(PAT, id, 'batch_flush_timeout=1&batch_limit=1');
    expect(stream.status).toBe(200);
    const streamId = stream.headers.get('x-broker-streamid') ?? '';
    const batches = await stream.events(3);
    expect(batches.flatMap((b) => b.events ?? []).map((e) => [e.n, e.owner])).toEqual([
      [1, 'payments'],
      [3, 'payments'],
      [4, 'payments'],
    ]);
    // A batch cursor is at or after its event and before the next event sent (skipped events may be folded in).
    const bounds: [number, number][] = [
      [1, 3],
      [3, 4],
      [4, 7],
    ];
    batches.forEach((b, i) => {
      const [event, next] = bounds[i] as [number, number];
      expect(b.cursor.offset >= offsetOf(event) && b.cursor.offset < offsetOf(next), `cursor ${b.cursor.offset} of the event at ${event}`).toBe(true);
    });
    expectStatus(await commit(PAT, id, streamId, batches.map((b) => b.cursor)), 204);

    // Nothing more is sent; the committed cursor moves past the trailing search events (offsets 5, 6).
    const committedOffset = async (): Promise<string | undefined> => ((await api(PAT, 'GET', `/subscriptions/${id}/cursors`)).json as { items: { offset: string }[] }).items[0]?.offset;
    await eventually(async () => (await committedOffset()) === offsetOf(6), 5000, 'the cursor reaches the last (skipped) event');
    const stats = await api(PAT, 'GET', `/subscriptions/${id}/stats`);
    expect(stats.json).toMatchObject({ items: [{ event_type: PATH, partitions: [{ partition: '0', unconsumed_events: 0 }] }] });
    const later = await stream.next(1500);
    expect(later?.events).toBeUndefined();
    stream.close();
  });

  it('a subscription consumer who owns nothing gets no events, and the cursor still reaches the end', async () => {
    const id = await createSubscription([PATH]);
    const stream = await openStream(DAVE, id, 'batch_flush_timeout=1&batch_limit=1');
    expect(stream.status).toBe(200);
    const committedOffset = async (): Promise<string | undefined> => ((await api(DAVE, 'GET', `/subscriptions/${id}/cursors`)).json as { items: { offset: string }[] }).items[0]?.offset;
    await eventually(async () => (await committedOffset()) === offsetOf(6), 5000, 'the cursor reaches the last (skipped) event');
    stream.close();
    expect(stream.received.flatMap((b) => b.events ?? [])).toEqual([]);
  });
});

// =====================================================================================================

describe('administrators', () => {
  const ADMIN_LISTS = { admins: INITIAL_ADMINS, readers: INITIAL_ADMINS, writers: INITIAL_ADMINS };
  const FRANK: Who = { sub: 'frank' };
  const RITA: Who = { sub: 'rita' };
  const WALT: Who = { sub: 'walt' };

  afterAll(async () => {
    await api(ADMIN, 'POST', '/settings/admins', ADMIN_LISTS);
  });

  it('GET /settings/admins: the initial lists for the administrator, 403 for others', async () => {
    const answer = await api(ADMIN, 'GET', '/settings/admins');
    expectStatus(answer, 200);
    expect(answer.json).toEqual(ADMIN_LISTS);
    for (const who of [ALICE, BOB, DAVE]) expectForbidden(await api(who, 'GET', '/settings/admins'));
  });

  it('POST /settings/admins refuses empty lists and attributes the plugin refuses (422), and non-admins (403)', async () => {
    expectStatus(await api(ADMIN, 'POST', '/settings/admins', { ...ADMIN_LISTS, admins: [] }), 422);
    expectStatus(await api(ADMIN, 'POST', '/settings/admins', { ...ADMIN_LISTS, readers: [] }), 422);
    expectStatus(await api(ADMIN, 'POST', '/settings/admins', { admins: INITIAL_ADMINS, readers: INITIAL_ADMINS }), 422);
    const robot = await api(ADMIN, 'POST', '/settings/admins', { ...ADMIN_LISTS, writers: [{ data_type: 'robot', value: 'r2d2' }] });
    expectStatus(robot, 422);
    expect((robot.json as { detail: string }).detail).toMatch(/robot/);
    expectStatus(await api(ADMIN, 'POST', '/settings/admins', { ...ADMIN_LISTS, admins: [user('admin'), user('admin')] }), 422);
    expectForbidden(await api(ALICE, 'POST', '/settings/admins', { ...ADMIN_LISTS, admins: [user('alice')] }));
    expect((await api(ADMIN, 'GET', '/settings/admins')).json).toEqual(ADMIN_LISTS);
  });

  it('admin-only endpoints answer 403 to non-admins, event type and subscription admins included', async () => {
    for (const who of [ALICE, BOB, DAVE]) {
      expectForbidden(await api(who, 'POST', '/settings/features', { feature: 'kpi_collection', enabled: true }));
      expectForbidden(await api(who, 'PUT', '/settings/blacklist/CONSUMER_APP/some-app'));
      expectForbidden(await api(who, 'DELETE', '/settings/blacklist/CONSUMER_APP/some-app'));
    }
    const blacklist = await api(DAVE, 'GET', '/settings/blacklist');
    expect(blacklist.json).toEqual({ producers: { event_types: [], apps: [] }, consumers: { event_types: [], apps: [] } });
    const features = (await api(DAVE, 'GET', '/settings/features')).json as { items: { feature: string; enabled: boolean }[] };
    expect(features.items.find((f) => f.feature === 'kpi_collection')?.enabled).toBe(false);
  });

  it('event type and subscription admins act on their own resources without being system admins', async () => {
    const name = 'authz.admins.own';
    // alice administers and reads the event type (a cursor reset needs read access to it).
    const body = await createEventType(name, { authorization: { admins: [user('alice')], readers: [user('bob'), user('alice')], writers: [user('carol')] } }, CAROL);
    const id = await createSubscription([name], { admins: [user('alice')], readers: [user('bob')] }, BOB);
    expectStatus(await api(ALICE, 'PUT', `/event-types/${name}`, { ...body, annotations: { 'example.org/by': 'alice' } }), 200);
    expectStatus(await api(ALICE, 'PUT', `/subscriptions/${id}`, { authorization: { admins: [user('alice')], readers: [user('erin')] } }), 204);
    expectStatus(await api(ALICE, 'PATCH', `/subscriptions/${id}/cursors`, { items: [] }), 204);
    expectStatus(await api(ALICE, 'DELETE', `/subscriptions/${id}`), 204);
    expectStatus(await api(ALICE, 'DELETE', `/event-types/${name}`), 200);
    // ... while the system settings stay closed to alice.
    expectForbidden(await api(ALICE, 'GET', '/settings/admins'));
    expectForbidden(await api(ALICE, 'POST', '/settings/features', { feature: 'kpi_collection', enabled: false }));
  });

  it('a valid change by the administrator takes effect at once', async () => {
    // Before the change frank, rita and walt are nobody.
    expectForbidden(await api(FRANK, 'POST', '/settings/features', { feature: 'kpi_collection', enabled: false }));
    const other = 'authz.admins.other';
    await createEventType(other, { authorization: { admins: [user('alice')], readers: [user('alice')], writers: [user('alice')] } });
    expectForbidden(await api(WALT, 'DELETE', `/event-types/${other}`));

    const lists = {
      admins: [user('admin'), user('frank')],
      readers: [user('admin'), user('rita')],
      writers: [user('admin'), user('walt')],
    };
    const changed = await api(ADMIN, 'POST', '/settings/admins', lists);
    expectStatus(changed, 200);
    expect(changed.json).toEqual(lists);
    expect((await api(RITA, 'GET', '/settings/admins')).json).toEqual(lists);

    // Readers read the admin settings only.
    expectForbidden(await api(RITA, 'POST', '/settings/features', { feature: 'kpi_collection', enabled: false }));
    expectForbidden(await api(RITA, 'POST', '/settings/admins', lists));
    // Writers write the admin endpoints (and administer every event type), but do not change the administrators.
    expectStatus(await api(WALT, 'POST', '/settings/features', { feature: 'kpi_collection', enabled: false }), 204);
    expectStatus(await api(WALT, 'GET', '/settings/admins'), 200);
    expectStatus(await api(WALT, 'PUT', '/settings/blacklist/CONSUMER_APP/authz-walt'), 204);
    expectStatus(await api(WALT, 'DELETE', '/settings/blacklist/CONSUMER_APP/authz-walt'), 204);
    expectForbidden(await api(WALT, 'POST', '/settings/admins', lists));
    expectStatus(await api(WALT, 'DELETE', `/event-types/${other}`), 200);
    // Admins may do everything, including handing the lists back.
    expectStatus(await api(FRANK, 'POST', '/settings/features', { feature: 'kpi_collection', enabled: false }), 204);
    expectStatus(await api(FRANK, 'GET', '/settings/admins'), 200);
    expectStatus(await api(FRANK, 'POST', '/settings/admins', ADMIN_LISTS), 200);
    // frank is nobody again.
    expectForbidden(await api(FRANK, 'GET', '/settings/admins'));
    expect((await api(ADMIN, 'GET', '/settings/admins')).json).toEqual(ADMIN_LISTS);
  });
});
