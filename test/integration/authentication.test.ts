import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type Answer, type TestBroker } from '../support/broker.js';
import { TEST_ISSUER, TokenIssuer } from '../support/token-issuer.js';

/**
 * Authentication over HTTP (docs/security.md "Authentication: who is asking"): a broker node in auth mode `jwt`
 * (keys from the test issuer's JWKS) and one in mode `tokeninfo` (the test issuer's token-info
 * service), each with the administrator `user`/`admin`.
 */

let issuer: TokenIssuer;
let jwtBroker: TestBroker;
let tokeninfoBroker: TestBroker;

const ADMINS = '[{"data_type":"user","value":"admin"}]';

beforeAll(async () => {
  issuer = await TokenIssuer.start();
  [jwtBroker, tokeninfoBroker] = await Promise.all([
    startTestBroker({
      BROKER_AUTH_MODE: 'jwt',
      BROKER_AUTH_JWT_JWKS_URL: issuer.jwksUrl,
      BROKER_AUTH_JWT_ISSUER: TEST_ISSUER,
      BROKER_AUTH_JWT_AUDIENCE: 'broker',
      BROKER_AUTH_INITIAL_ADMINS: ADMINS,
    }),
    startTestBroker({
      BROKER_AUTH_MODE: 'tokeninfo',
      BROKER_AUTH_TOKENINFO_URL: issuer.tokeninfoUrl,
      BROKER_AUTH_TOKENINFO_REMOTE_URL: issuer.remoteTokeninfoUrl,
      BROKER_AUTH_TOKENINFO_CACHE_TTL_MS: '60000',
      BROKER_AUTH_INITIAL_ADMINS: ADMINS,
    }),
  ]);
});
afterAll(async () => {
  await Promise.all([jwtBroker?.stop(), tokeninfoBroker?.stop()]);
  await issuer?.close();
});

const auth = (token: string): Record<string, string> => ({ Authorization: `Bearer ${token}` });

/** A signed token the jwt node accepts. */
const jwtFor = (sub: string): Promise<string> => issuer.sign({ sub, audience: 'broker' });

function expectProblem(answer: Answer, status: number, detail: RegExp): void {
  expect(answer.status).toBe(status);
  expect(answer.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(answer.json).toMatchObject({ status, detail: expect.stringMatching(detail) as unknown });
  expect(answer.text).not.toMatch(/\n\s+at /);
}

function expectUnauthorized(answer: Answer, detail: RegExp): void {
  expectProblem(answer, 401, detail);
  expect(answer.json).toMatchObject({ title: 'Unauthorized' });
  expect(answer.headers.get('www-authenticate')).toBe('Bearer');
}

/** Creates an event type as `token`'s subject, publishes one event, and reads it back from partition 0. */
async function publishAndRead(base: string, token: string, name: string): Promise<Record<string, unknown>[]> {
  const created = await call(
    base,
    'POST',
    '/event-types',
    {
      name,
      owning_application: 'app',
      category: 'business',
      enrichment_strategies: ['metadata_enrichment'],
      partition_strategy: 'random',
      schema: { type: 'json_schema', schema: '{"type":"object"}' },
    },
    auth(token),
  );
  expect(created.status, created.text).toBe(201);
  const published = await call(base, 'POST', `/event-types/${name}/events`, [{ metadata: { eid: randomUUID(), occurred_at: '2026-01-01T00:00:00Z' } }], auth(token));
  expect(published.status, published.text).toBe(200);
  const read = await call(base, 'GET', `/event-types/${name}/events?stream_timeout=1&batch_flush_timeout=1&batch_limit=10`, undefined, {
    ...auth(token),
    'X-Broker-Cursors': '[{"partition":"0","offset":"BEGIN"}]',
  });
  expect(read.status, read.text).toBe(200);
  return read.text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .flatMap((line) => (JSON.parse(line) as { events?: Record<string, unknown>[] }).events ?? []);
}

describe('auth mode jwt', () => {
  it('serves GET /health without a token', async () => {
    expect((await call(jwtBroker.url, 'GET', '/health')).status).toBe(200);
  });

  it('serves GET /metrics only with a token (every route but /health is authenticated)', async () => {
    expectUnauthorized(await call(jwtBroker.url, 'GET', '/metrics'), /No bearer token/);
    const scraped = await call(jwtBroker.url, 'GET', '/metrics', undefined, auth(await jwtFor('prometheus')));
    expect(scraped.status).toBe(200);
    expect(scraped.text).toMatch(/^broker_process_cpu_user_seconds_total \d/m);
  });

  it('answers 401 problem+json with WWW-Authenticate: Bearer without a token, with another scheme or a malformed token', async () => {
    expectUnauthorized(await call(jwtBroker.url, 'GET', '/event-types'), /No bearer token/);
    expectUnauthorized(await call(jwtBroker.url, 'GET', '/event-types', undefined, { Authorization: 'Basic YWRtaW46YWRtaW4=' }), /scheme must be Bearer/);
    expectUnauthorized(await call(jwtBroker.url, 'GET', '/event-types', undefined, auth('not-a-jwt')), /not a valid JWT/);
  });

  it('answers 401 for expired, forged, wrong-audience and wrong-issuer tokens', async () => {
    const get = async (token: string): Promise<Answer> => call(jwtBroker.url, 'GET', '/event-types', undefined, auth(token));
    expectUnauthorized(await get(await issuer.sign({ audience: 'broker', expiresInSeconds: -300 })), /expired/);
    expectUnauthorized(await get(await issuer.sign({ audience: 'broker', forged: true })), /signature does not verify/);
    expectUnauthorized(await get(await issuer.sign({ audience: 'other' })), /"aud"/);
    expectUnauthorized(await get(await issuer.sign({ audience: 'broker', issuer: 'https://evil.test' })), /"iss"/);
  });

  it('answers 200 for a valid token, and stamps the token subject as published_by', async () => {
    const token = await jwtFor('admin');
    expect((await call(jwtBroker.url, 'GET', '/event-types', undefined, auth(token))).status).toBe(200);
    const es256 = await issuer.sign({ sub: 'admin', audience: 'broker', alg: 'ES256' });
    expect((await call(jwtBroker.url, 'GET', '/event-types', undefined, auth(es256))).status).toBe(200);

    const events = await publishAndRead(jwtBroker.url, token, 'auth.jwt.orders');
    expect(events).toHaveLength(1);
    expect(events[0]?.metadata).toMatchObject({ event_type: 'auth.jwt.orders', published_by: 'admin' });
  });
});

describe('auth mode tokeninfo', () => {
  it('serves GET /health without a token and answers 401 without one elsewhere', async () => {
    expect((await call(tokeninfoBroker.url, 'GET', '/health')).status).toBe(200);
    expectUnauthorized(await call(tokeninfoBroker.url, 'GET', '/event-types'), /No bearer token/);
  });

  it('answers 401 for tokens the service does not know or calls inactive, 200 for a known one', async () => {
    expectUnauthorized(await call(tokeninfoBroker.url, 'GET', '/event-types', undefined, auth('unknown-token')), /refuses the token \(HTTP 401\)/);
    const inactive = issuer.registerOpaque({ active: false });
    expectUnauthorized(await call(tokeninfoBroker.url, 'GET', '/event-types', undefined, auth(inactive)), /not active/);
    const token = issuer.registerOpaque({ active: true, sub: 'admin', client_id: 'app' });
    expect((await call(tokeninfoBroker.url, 'GET', '/event-types', undefined, auth(token))).status).toBe(200);
  });

  it('stamps the subject from the token-info answer as published_by, asking the service once per token', async () => {
    const token = issuer.registerOpaque({ uid: 'admin', sub: 'admin', scope: ['uid'], expires_in: 3600 });
    const before = issuer.calls('tokeninfo');
    const events = await publishAndRead(tokeninfoBroker.url, token, 'auth.tokeninfo.orders');
    expect(events).toHaveLength(1);
    expect(events[0]?.metadata).toMatchObject({ event_type: 'auth.tokeninfo.orders', published_by: 'admin' });
    expect(issuer.calls('tokeninfo') - before).toBe(1);
  });

  it('answers 503 while the token-info service fails, then recovers', async () => {
    issuer.set('tokeninfo', 'fail');
    try {
      const answer = await call(tokeninfoBroker.url, 'GET', '/event-types', undefined, auth(issuer.registerOpaque({ sub: 'admin' })));
      expectProblem(answer, 503, /token-info service answered HTTP 500/);
    } finally {
      issuer.set('tokeninfo', 'answer');
    }
    expect((await call(tokeninfoBroker.url, 'GET', '/event-types', undefined, auth(issuer.registerOpaque({ sub: 'admin' })))).status).toBe(200);
  });

  it('asks the remote token-info URL while the feature remote_tokeninfo is on', async () => {
    const admin = issuer.registerOpaque({ sub: 'admin' });
    const enabled = await call(tokeninfoBroker.url, 'POST', '/settings/features', { feature: 'remote_tokeninfo', enabled: true }, auth(admin));
    expect(enabled.status, enabled.text).toBe(204);
    try {
      const deadline = Date.now() + 3_000;
      while (issuer.calls('remote') === 0 && Date.now() < deadline) {
        const answer = await call(tokeninfoBroker.url, 'GET', '/event-types', undefined, auth(issuer.registerOpaque({ sub: 'admin' })));
        expect(answer.status).toBe(200);
        if (issuer.calls('remote') === 0) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(issuer.calls('remote')).toBeGreaterThan(0);
    } finally {
      await call(tokeninfoBroker.url, 'POST', '/settings/features', { feature: 'remote_tokeninfo', enabled: false }, auth(admin));
    }
  });
});
