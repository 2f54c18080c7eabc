import { generateKeyPairSync } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { NoAuthentication } from '../../src/auth/authenticator.js';
import { createAuthenticator } from '../../src/auth/create-authenticator.js';
import { bearerToken } from '../../src/auth/authenticator.js';
import { JwtAuthenticator, type JwtAuthenticatorOptions } from '../../src/auth/jwt-authenticator.js';
import { TokenCache } from '../../src/auth/token-cache.js';
import { TokenInfoAuthenticator } from '../../src/auth/tokeninfo-authenticator.js';
import type { AuthConfig } from '../../src/config/config-schema.js';
import { BrokerError } from '../../src/errors/catalog.js';
import { freePort } from '../../src/util/free-port.js';
import { TEST_ISSUER, TokenIssuer } from '../support/token-issuer.js';

/**
 * The `jwt` and `tokeninfo` authenticators (docs/security.md "Authentication: who is asking") against a local
 * identity provider: real keys, a real JWKS document and a real token-info service over HTTP.
 */

let issuer: TokenIssuer;
const opened: { close(): void }[] = [];

beforeAll(async () => {
  issuer = await TokenIssuer.start();
});
afterAll(async () => {
  for (const authenticator of opened) authenticator.close();
  await issuer.close();
});
beforeEach(() => issuer.reset());

interface ConfigOverrides {
  readonly jwt?: Partial<AuthConfig['jwt']>;
  readonly tokeninfo?: Partial<AuthConfig['tokeninfo']>;
}

function authConfig(mode: AuthConfig['mode'], overrides: ConfigOverrides = {}): AuthConfig {
  return {
    mode,
    subjectClaim: 'sub',
    attributeClaims: { user: 'sub', service: 'client_id', team: 'teams' },
    initialAdmins: [{ data_type: 'user', value: 'admin' }],
    jwt: { jwksUrl: issuer.jwksUrl, publicKey: '', issuer: '', audience: '', algorithms: ['RS256', 'ES256', 'EdDSA'], clockToleranceSeconds: 30, ...overrides.jwt },
    tokeninfo: { url: issuer.tokeninfoUrl, remoteUrl: '', cacheTtlMs: 10_000, timeoutMs: 2000, ...overrides.tokeninfo },
  };
}

function jwtAuthenticator(overrides: ConfigOverrides = {}, options: JwtAuthenticatorOptions = {}): JwtAuthenticator {
  const authenticator = new JwtAuthenticator(authConfig('jwt', overrides), options);
  opened.push(authenticator);
  return authenticator;
}

function tokeninfoAuthenticator(overrides: ConfigOverrides = {}, useRemote: () => boolean = () => false, now?: () => number): TokenInfoAuthenticator {
  const authenticator = new TokenInfoAuthenticator(authConfig('tokeninfo', overrides), useRemote, now ? { now } : {});
  opened.push(authenticator);
  return authenticator;
}

/** The BrokerError a promise rejects with (fails the test when it resolves or rejects otherwise). */
async function rejection(promise: Promise<unknown>): Promise<BrokerError> {
  const outcome = await promise.then(
    (value) => ({ value }),
    (err: unknown) => ({ err }),
  );
  if (!('err' in outcome)) throw new Error(`expected a rejection, got ${JSON.stringify(outcome.value)}`);
  expect(outcome.err).toBeInstanceOf(BrokerError);
  return outcome.err as BrokerError;
}

async function expectUnauthorized(promise: Promise<unknown>, detail: RegExp): Promise<void> {
  const err = await rejection(promise);
  expect({ code: err.code, status: err.status, detail: err.detail }).toEqual({ code: 'UNAUTHORIZED', status: 401, detail: expect.stringMatching(detail) as unknown });
  expect(err.headers).toEqual({ 'WWW-Authenticate': 'Bearer' });
  expect(err.detail).not.toMatch(/\n\s+at /);
}

async function expectUnavailable(promise: Promise<unknown>, detail: RegExp): Promise<void> {
  const err = await rejection(promise);
  expect({ code: err.code, status: err.status, detail: err.detail }).toEqual({ code: 'AUTH_UNAVAILABLE', status: 503, detail: expect.stringMatching(detail) as unknown });
}

/** A settable clock starting at the real time. */
function fakeClock(): { now: () => number; advance: (ms: number) => void } {
  let t = Date.now();
  return { now: () => t, advance: (ms) => (t += ms) };
}

const bearer = (token: string): string => `Bearer ${token}`;
const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');

describe('bearerToken', () => {
  it('takes the token of a Bearer header, the scheme in any case', () => {
    expect(bearerToken('Bearer abc.DEF-_~+/=')).toBe('abc.DEF-_~+/=');
    expect(bearerToken('bearer   xyz ')).toBe('xyz');
  });

  it.each([
    ['no header', undefined, /No bearer token/],
    ['an empty header', '  ', /No bearer token/],
    ['another scheme', 'Basic YWxpY2U6c2VjcmV0', /scheme must be Bearer/],
    ['no token', 'Bearer', /no token/],
    ['a token with a space', 'Bearer abc def', /malformed/],
    ['a token with other characters', 'Bearer ab"c', /malformed/],
    ['a very long token', `Bearer ${'a'.repeat(20_000)}`, /longer than 16384/],
  ])('refuses %s with 401', async (_, header, detail) => {
    await expectUnauthorized(Promise.resolve().then(() => bearerToken(header)), detail);
  });
});

describe('TokenCache', () => {
  it('forgets entries after their time and evicts the oldest when full', () => {
    const clock = fakeClock();
    const cache = new TokenCache<number>(2, clock.now);
    cache.set('a', 1, 1000);
    cache.set('b', 2, 5000);
    clock.advance(1000);
    expect(cache.get('a')).toBeUndefined();
    cache.set('c', 3, 5000);
    cache.set('d', 4, 5000);
    expect([cache.get('b'), cache.get('c'), cache.get('d')]).toEqual([undefined, 3, 4]);
    expect(cache.size).toBe(2);
    cache.set('e', 5, 0);
    expect(cache.get('e')).toBeUndefined();
  });
});

describe('JwtAuthenticator', () => {
  it('verifies an RS256 token against the JWKS and maps its claims to the subject', async () => {
    const token = await issuer.sign({ sub: 'alice', claims: { client_id: 'app-1', teams: ['payments', 'search'] } });
    const subject = await jwtAuthenticator().authenticate(bearer(token));
    expect(subject.id).toBe('alice');
    expect(Object.fromEntries(subject.attributes)).toEqual({ user: ['alice'], service: ['app-1'], team: ['payments', 'search'] });
  });

  it('verifies an ES256 token and checks issuer and audience when configured', async () => {
    const authenticator = jwtAuthenticator({ jwt: { issuer: TEST_ISSUER, audience: 'broker' } });
    const subject = await authenticator.authenticate(bearer(await issuer.sign({ alg: 'ES256', sub: 'svc', audience: 'broker' })));
    expect(subject.id).toBe('svc');
  });

  it('accepts a token expired less than the clock tolerance ago', async () => {
    const subject = await jwtAuthenticator().authenticate(bearer(await issuer.sign({ expiresInSeconds: -10 })));
    expect(subject.id).toBe('alice');
  });

  const unsigned = `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ sub: 'mallory', exp: Math.floor(Date.now() / 1000) + 3600 })}.`;
  const rejected: [string, () => Promise<string | undefined>, RegExp, ConfigOverrides?][] = [
    ['no Authorization header', () => Promise.resolve(undefined), /No bearer token/],
    ['a Basic header', () => Promise.resolve('Basic YWxpY2U6c2VjcmV0'), /scheme must be Bearer/],
    ['a token that is no JWT', () => Promise.resolve(bearer('not-a-jwt')), /not a valid JWT/],
    ['a JWT with a garbled payload', async () => bearer((await issuer.sign()).replace(/\.[^.]+\./, '.e30x.')), /not a valid JWT|signature/],
    ['an unsigned token (alg none)', () => Promise.resolve(bearer(unsigned)), /algorithm is not accepted|not a valid JWT/],
    ['a forged token (another key, same kid)', async () => bearer(await issuer.sign({ forged: true })), /signature does not verify/],
    ['an expired token', async () => bearer(await issuer.sign({ expiresInSeconds: -120 })), /has expired/],
    ['a token not valid yet', async () => bearer(await issuer.sign({ notBeforeSeconds: 600 })), /claims do not verify: "nbf"/],
    ['a wrong issuer', async () => bearer(await issuer.sign({ issuer: 'https://evil.test' })), /claims do not verify: unexpected "iss"/, { jwt: { issuer: TEST_ISSUER } }],
    ['a missing audience', async () => bearer(await issuer.sign()), /claims do not verify: .*"aud"/, { jwt: { audience: 'broker' } }],
    ['a wrong audience', async () => bearer(await issuer.sign({ audience: 'other' })), /claims do not verify: unexpected "aud"/, { jwt: { audience: 'broker' } }],
    ['a token without the subject claim', async () => bearer(await issuer.sign({ sub: null })), /no "sub" claim/],
    ['an unknown kid', async () => bearer(await issuer.sign({ kid: 'nobody' })), /No key of the key set matches/],
    ['an algorithm not configured', async () => bearer(await issuer.sign({ alg: 'ES256' })), /algorithm is not accepted \(accepted: RS256\)/, { jwt: { algorithms: ['RS256'] } }],
  ];
  it.each(rejected)('answers 401 for %s', async (_, header, detail, overrides) => {
    await expectUnauthorized(jwtAuthenticator(overrides).authenticate(await header()), detail);
  });

  it('answers 503 when the JWKS endpoint cannot be reached, fails or hangs, and recovers', async () => {
    const token = bearer(await issuer.sign());
    const closedPort = await freePort();
    await expectUnavailable(jwtAuthenticator({ jwt: { jwksUrl: `http://127.0.0.1:${closedPort}/jwks` } }).authenticate(token), /JWKS endpoint cannot be reached \(ECONNREFUSED\)/);

    issuer.set('jwks', 'fail');
    const authenticator = jwtAuthenticator();
    await expectUnavailable(authenticator.authenticate(token), /JWKS endpoint answered badly/);
    issuer.set('jwks', 'hang');
    await expectUnavailable(jwtAuthenticator({}, { jwksTimeoutMs: 200 }).authenticate(token), /JWKS endpoint did not answer in time/);
    issuer.set('jwks', 'answer');
    expect((await authenticator.authenticate(token)).id).toBe('alice');
  });

  it('verifies with a static PEM key, the algorithms narrowed to the key type', async () => {
    const rsa = jwtAuthenticator({ jwt: { jwksUrl: '', publicKey: await issuer.publicKeyPem('RS256') } });
    expect((await rsa.authenticate(bearer(await issuer.sign({ sub: 'pem-user' })))).id).toBe('pem-user');
    await expectUnauthorized(rsa.authenticate(bearer(await issuer.sign({ alg: 'ES256' }))), /algorithm is not accepted \(accepted: RS256\)/);
    await expectUnauthorized(rsa.authenticate(bearer(await issuer.sign({ forged: true }))), /signature does not verify/);

    const escaped = (await issuer.publicKeyPem('ES256')).replaceAll('\n', '\\n');
    const ec = jwtAuthenticator({ jwt: { jwksUrl: '', publicKey: escaped } });
    expect((await ec.authenticate(bearer(await issuer.sign({ alg: 'ES256' })))).id).toBe('alice');
    expect(issuer.calls('jwks')).toBe(0);
  });

  it('narrows the algorithms of an RSA-PSS PEM key to PS256/384/512 and of an Ed25519 key to EdDSA', async () => {
    const algorithms: AuthConfig['jwt']['algorithms'] = ['RS256', 'PS256', 'PS512', 'ES256', 'EdDSA'];
    const pss = generateKeyPairSync('rsa-pss', { modulusLength: 2048 });
    const pssAuthenticator = jwtAuthenticator({ jwt: { jwksUrl: '', publicKey: pss.publicKey.export({ type: 'spki', format: 'pem' }).toString(), algorithms } });
    const pssToken = await new SignJWT({ sub: 'pss-user' }).setProtectedHeader({ alg: 'PS512' }).setExpirationTime('1h').sign(pss.privateKey);
    expect((await pssAuthenticator.authenticate(bearer(pssToken))).id).toBe('pss-user');
    await expectUnauthorized(pssAuthenticator.authenticate(bearer(await issuer.sign())), /algorithm is not accepted \(accepted: PS256, PS512\)\.$/);

    const ed = generateKeyPairSync('ed25519');
    const edAuthenticator = jwtAuthenticator({ jwt: { jwksUrl: '', publicKey: ed.publicKey.export({ type: 'spki', format: 'pem' }).toString(), algorithms } });
    const edToken = await new SignJWT({ sub: 'ed-user' }).setProtectedHeader({ alg: 'EdDSA' }).setExpirationTime('1h').sign(ed.privateKey);
    expect((await edAuthenticator.authenticate(bearer(edToken))).id).toBe('ed-user');
    await expectUnauthorized(edAuthenticator.authenticate(bearer(await issuer.sign({ alg: 'ES256' }))), /algorithm is not accepted \(accepted: EdDSA\)\.$/);
  });

  it('narrows an RSA-PSS key bound to one hash to that PS algorithm, and refuses an RSA key under 2048 bits at start', async () => {
    const pss = generateKeyPairSync('rsa-pss', { modulusLength: 2048, hashAlgorithm: 'sha256', mgf1HashAlgorithm: 'sha256' });
    const publicKey = pss.publicKey.export({ type: 'spki', format: 'pem' }).toString();
    const authenticator = jwtAuthenticator({ jwt: { jwksUrl: '', publicKey, algorithms: ['PS256', 'PS384'] } });
    const token = `${b64({ alg: 'PS384', typ: 'JWT' })}.${b64({ sub: 'alice', exp: Math.floor(Date.now() / 1000) + 3600 })}.${Buffer.from('signature').toString('base64url')}`;
    await expectUnauthorized(authenticator.authenticate(bearer(token)), /algorithm is not accepted \(accepted: PS256\)\.$/);
    expect(() => jwtAuthenticator({ jwt: { jwksUrl: '', publicKey, algorithms: ['PS384'] } })).toThrow('config key "auth.jwt.publicKey" is a rsa-pss key, which verifies none of auth.jwt.algorithms [PS384]');
    const small = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
    expect(() => jwtAuthenticator({ jwt: { jwksUrl: '', publicKey: small, algorithms: ['RS256'] } })).toThrow('config key "auth.jwt.publicKey" is an RSA key of 1024 bits; RS and PS signatures need at least 2048 (RFC 7518 §3.3)');
  });

  it('answers 503 when the JWKS endpoint answers JSON that is not a key set', async () => {
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ keys: 'none' }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const authenticator = jwtAuthenticator({ jwt: { jwksUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks` } });
      await expectUnavailable(authenticator.authenticate(bearer(await issuer.sign())), /JWKS endpoint answered an invalid key set/);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it('refuses unusable key configuration at construction', async () => {
    const pem = await issuer.publicKeyPem('ES256');
    expect(() => jwtAuthenticator({ jwt: { jwksUrl: '', publicKey: '' } })).toThrow(/jwksUrl" or "auth.jwt.publicKey" must be set/);
    expect(() => jwtAuthenticator({ jwt: { jwksUrl: '', publicKey: 'not a key' } })).toThrow(/not a PEM public key/);
    expect(() => jwtAuthenticator({ jwt: { jwksUrl: '', publicKey: pem, algorithms: ['RS256'] } })).toThrow(/ec key, which verifies none of auth.jwt.algorithms \[RS256\]/);
    expect(() => jwtAuthenticator({ jwt: { jwksUrl: 'file:///etc/jwks.json' } })).toThrow(/must be an http\(s\) URL/);
    expect(() => jwtAuthenticator({ jwt: { jwksUrl: 'jwks.json' } })).toThrow(/"auth.jwt.jwksUrl" is not a URL/);
  });

  it('verifies a token once and serves it from the cache until min(exp, 60 s)', async () => {
    const clock = fakeClock();
    const authenticator = jwtAuthenticator({}, { now: clock.now });
    const long = bearer(await issuer.sign({ sub: 'long', expiresInSeconds: 3600 }));
    const short = bearer(await issuer.sign({ sub: 'short', expiresInSeconds: 10 }));
    for (let i = 0; i < 5; i++) expect((await authenticator.authenticate(long)).id).toBe('long');
    expect(authenticator.verifications).toBe(1);
    await authenticator.authenticate(short);
    expect(authenticator.verifications).toBe(2);
    expect(authenticator.cachedTokens).toBe(2);

    clock.advance(9_000);
    await Promise.all([authenticator.authenticate(long), authenticator.authenticate(short)]);
    expect(authenticator.verifications).toBe(2);
    clock.advance(2_000); // 11 s: past the short token's exp, within its clock tolerance
    expect((await authenticator.authenticate(short)).id).toBe('short');
    expect(authenticator.verifications).toBe(3);
    clock.advance(50_000); // 61 s: past the cache's 60 s
    await authenticator.authenticate(long);
    expect(authenticator.verifications).toBe(4);
    await expectUnauthorized(authenticator.authenticate(short), /has expired/);
  });

  it('keeps at most cacheMaxEntries tokens, evicting the oldest, and never caches refusals', async () => {
    const authenticator = jwtAuthenticator({}, { cacheMaxEntries: 2 });
    const [a, b, c] = await Promise.all(['a', 'b', 'c'].map(async (sub) => bearer(await issuer.sign({ sub }))));
    for (const token of [a, b, c, c, b]) await authenticator.authenticate(token);
    expect(authenticator.verifications).toBe(3);
    await authenticator.authenticate(a);
    expect(authenticator.verifications).toBe(4);
    expect(authenticator.cachedTokens).toBe(2);

    const forged = bearer(await issuer.sign({ forged: true }));
    await expectUnauthorized(authenticator.authenticate(forged), /signature/);
    await expectUnauthorized(authenticator.authenticate(forged), /signature/);
    expect(authenticator.verifications).toBe(6);
  });
});

describe('TokenInfoAuthenticator', () => {
  it('asks the token-info service with the bearer token and maps the claims to the subject', async () => {
    const token = issuer.registerOpaque({ uid: 'svc', sub: 'stups_svc', client_id: 'svc-app', teams: 'orders', scope: ['uid'], expires_in: 3600 });
    const subject = await tokeninfoAuthenticator().authenticate(bearer(token));
    expect(subject.id).toBe('stups_svc');
    expect(Object.fromEntries(subject.attributes)).toEqual({ user: ['stups_svc'], service: ['svc-app'], team: ['orders'] });
    expect(issuer.calls('tokeninfo')).toBe(1);
  });

  it('accepts RFC 7662 introspection answers and refuses inactive or expired tokens', async () => {
    const authenticator = tokeninfoAuthenticator();
    const now = Math.floor(Date.now() / 1000);
    expect((await authenticator.authenticate(bearer(issuer.registerOpaque({ active: true, sub: 'bob', exp: now + 600 })))).id).toBe('bob');
    await expectUnauthorized(authenticator.authenticate(bearer(issuer.registerOpaque({ active: false }))), /not active/);
    await expectUnauthorized(authenticator.authenticate(bearer(issuer.registerOpaque({ active: 'yes', sub: 'bob' }))), /not active/);
    await expectUnauthorized(authenticator.authenticate(bearer(issuer.registerOpaque({ active: true, sub: 'bob', exp: now - 5 }))), /has expired/);
    await expectUnauthorized(authenticator.authenticate(bearer(issuer.registerOpaque({ uid: 'x', sub: 'x', expires_in: 0 }))), /has expired/);
    await expectUnauthorized(authenticator.authenticate(bearer(issuer.registerOpaque({ active: true, client_id: 'app' }))), /no "sub" claim/);
  });

  it.each([
    ['an unknown token (401)', () => 'unknown-token', /refuses the token \(HTTP 401\)/],
    ['400', () => issuer.registerOpaque({ error: 'invalid_request' }, 400), /refuses the token \(HTTP 400\)/],
    ['403', () => issuer.registerOpaque({ error: 'insufficient_scope' }, 403), /refuses the token \(HTTP 403\)/],
  ])('answers 401 for %s', async (_, token, detail) => {
    await expectUnauthorized(tokeninfoAuthenticator().authenticate(bearer(token())), detail);
  });

  it('answers 401 without asking the service when the header is missing or not Bearer', async () => {
    const authenticator = tokeninfoAuthenticator();
    await expectUnauthorized(authenticator.authenticate(undefined), /No bearer token/);
    await expectUnauthorized(authenticator.authenticate('Basic YWxpY2U6c2VjcmV0'), /scheme must be Bearer/);
    expect(issuer.calls('tokeninfo')).toBe(0);
  });

  // A service that answers gets 10 s (a busy machine answers late, not wrongly); one that hangs, 200 ms.
  it.each([
    ['answers 500', () => issuer.set('tokeninfo', 'fail'), () => issuer.registerOpaque({ sub: 'a' }), /answered HTTP 500/, 10_000],
    ['answers 404', () => undefined, () => issuer.registerOpaque({ sub: 'a' }, 404), /answered HTTP 404/, 10_000],
    ['answers 200 with text', () => undefined, () => issuer.registerOpaque('<html>login</html>'), /not JSON/, 10_000],
    ['answers 200 with a JSON array', () => undefined, () => issuer.registerOpaque('["sub"]'), /not an object of claims/, 10_000],
    ['hangs past timeoutMs', () => issuer.set('tokeninfo', 'hang'), () => issuer.registerOpaque({ sub: 'a' }), /did not answer within 200 ms/, 200],
  ])('answers 503 when the service %s', async (_, arrange, token, detail, timeoutMs) => {
    arrange();
    await expectUnavailable(tokeninfoAuthenticator({ tokeninfo: { timeoutMs } }).authenticate(bearer(token())), detail);
  });

  it('answers 503 when the service cannot be reached, and does not remember it', async () => {
    const closedPort = await freePort();
    await expectUnavailable(tokeninfoAuthenticator({ tokeninfo: { url: `http://127.0.0.1:${closedPort}/tokeninfo` } }).authenticate(bearer('abc')), /cannot be reached \(ECONNREFUSED\)/);

    const authenticator = tokeninfoAuthenticator();
    const token = bearer(issuer.registerOpaque({ sub: 'carol' }));
    issuer.set('tokeninfo', 'fail');
    await expectUnavailable(authenticator.authenticate(token), /HTTP 500/);
    issuer.set('tokeninfo', 'answer');
    expect((await authenticator.authenticate(token)).id).toBe('carol');
    expect(issuer.calls('tokeninfo')).toBe(2);
  });

  it('remembers answers for cacheTtlMs, refusals for 1 s, and not at all with cacheTtlMs 0', async () => {
    const clock = fakeClock();
    const authenticator = tokeninfoAuthenticator({}, () => false, clock.now);
    const token = bearer(issuer.registerOpaque({ sub: 'dave' }));
    await authenticator.authenticate(token);
    clock.advance(9_999);
    expect((await authenticator.authenticate(token)).id).toBe('dave');
    expect(issuer.calls('tokeninfo')).toBe(1);
    clock.advance(2);
    await authenticator.authenticate(token);
    expect(issuer.calls('tokeninfo')).toBe(2);

    await expectUnauthorized(authenticator.authenticate(bearer('unknown')), /HTTP 401/);
    await expectUnauthorized(authenticator.authenticate(bearer('unknown')), /HTTP 401/);
    expect(issuer.calls('tokeninfo')).toBe(3);
    clock.advance(1_001);
    await expectUnauthorized(authenticator.authenticate(bearer('unknown')), /HTTP 401/);
    expect(issuer.calls('tokeninfo')).toBe(4);

    const uncached = tokeninfoAuthenticator({ tokeninfo: { cacheTtlMs: 0 } });
    await uncached.authenticate(token);
    await uncached.authenticate(token);
    expect(issuer.calls('tokeninfo')).toBe(6);
    expect(uncached.cachedAnswers).toBe(0);
  });

  it('never remembers an answer past the token expiry', async () => {
    const clock = fakeClock();
    const authenticator = tokeninfoAuthenticator({}, () => false, clock.now);
    const token = bearer(issuer.registerOpaque({ sub: 'erin', exp: Math.floor(clock.now() / 1000) + 3 }));
    await authenticator.authenticate(token);
    clock.advance(3_500);
    await expectUnauthorized(authenticator.authenticate(token), /has expired/);
    expect(issuer.calls('tokeninfo')).toBe(2);
  });

  it('shares one call among concurrent requests with the same token', async () => {
    issuer.tokeninfoDelayMs = 100;
    const authenticator = tokeninfoAuthenticator({ tokeninfo: { cacheTtlMs: 0 } });
    const token = bearer(issuer.registerOpaque({ sub: 'frank' }));
    const other = bearer(issuer.registerOpaque({ sub: 'grace' }));
    const subjects = await Promise.all([...Array.from({ length: 10 }, () => authenticator.authenticate(token)), authenticator.authenticate(other)]);
    expect(subjects.map((s) => s.id)).toEqual([...Array.from({ length: 10 }, () => 'frank'), 'grace']);
    expect(issuer.calls('tokeninfo')).toBe(2);

    issuer.set('tokeninfo', 'fail');
    const failures = await Promise.all(Array.from({ length: 5 }, () => rejection(authenticator.authenticate(token))));
    expect(failures.map((e) => e.code)).toEqual(Array.from({ length: 5 }, () => 'AUTH_UNAVAILABLE'));
    expect(issuer.calls('tokeninfo')).toBe(3);
  });

  it('asks remoteUrl while useRemote() is true and remoteUrl is set', async () => {
    let remote = false;
    const authenticator = tokeninfoAuthenticator({ tokeninfo: { remoteUrl: issuer.remoteTokeninfoUrl } }, () => remote);
    const token = bearer(issuer.registerOpaque({ sub: 'heidi' }));
    await authenticator.authenticate(token);
    expect([issuer.calls('tokeninfo'), issuer.calls('remote')]).toEqual([1, 0]);
    remote = true;
    expect((await authenticator.authenticate(token)).id).toBe('heidi');
    await authenticator.authenticate(token);
    expect([issuer.calls('tokeninfo'), issuer.calls('remote')]).toEqual([1, 1]);
    issuer.set('remote', 'fail');
    await expectUnavailable(authenticator.authenticate(bearer(issuer.registerOpaque({ sub: 'ivan' }))), /HTTP 500/);

    const localOnly = tokeninfoAuthenticator({}, () => true);
    await localOnly.authenticate(token);
    expect([issuer.calls('tokeninfo'), issuer.calls('remote')]).toEqual([2, 2]);
  });

  it('refuses unusable URLs at construction', () => {
    expect(() => tokeninfoAuthenticator({ tokeninfo: { url: '' } })).toThrow(/"auth.tokeninfo.url" must be set/);
    expect(() => tokeninfoAuthenticator({ tokeninfo: { url: 'not a url' } })).toThrow(/is not a URL/);
    expect(() => tokeninfoAuthenticator({ tokeninfo: { remoteUrl: 'ftp://tokens.test/' } })).toThrow(/must be an http\(s\) URL/);
  });
});

describe('createAuthenticator', () => {
  it('chooses the authenticator of auth.mode', async () => {
    const off = createAuthenticator(authConfig('off'), { useRemoteTokeninfo: () => false });
    expect(off).toBeInstanceOf(NoAuthentication);
    expect((await off.authenticate(undefined)).id).toBe('unauthenticated');
    const jwt = createAuthenticator(authConfig('jwt'), { useRemoteTokeninfo: () => false });
    const tokeninfo = createAuthenticator(authConfig('tokeninfo', { tokeninfo: { remoteUrl: issuer.remoteTokeninfoUrl } }), { useRemoteTokeninfo: () => true });
    opened.push(jwt, tokeninfo);
    expect(jwt).toBeInstanceOf(JwtAuthenticator);
    expect(tokeninfo).toBeInstanceOf(TokenInfoAuthenticator);
    await tokeninfo.authenticate(bearer(issuer.registerOpaque({ sub: 'judy' })));
    expect(issuer.calls('remote')).toBe(1);
  });
});
