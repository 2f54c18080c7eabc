/**
 * Scenario `auth` (issue 4): what authentication costs a producer. Single-event batches from 10
 * concurrent producers, as in scenario 3, against three broker nodes on one Redis, one after the other
 * in the same run: auth mode `off` (the baseline), `jwt` (RS256 bearer token checked against a local
 * JWKS; verified tokens are cached) and `tokeninfo` (a local token-info service; answers cached). Each
 * node has an event type with an authorization section, so the write check runs too.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { startBroker, startRedis, type BrokerProcess } from '../scripts/local-processes.js';
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { createEventType, loadRequest, reportFailures, round, runLoad, type Recorder, type Scenario } from './harness.js';
import { CONNECTIONS, DURATION_SECONDS, WARMUP_SECONDS } from './single-event.js';

const EVENT_TYPE = 'bench.order';
const PATH = `/event-types/${EVENT_TYPE}/events`;
const BODIES = 64;
const SUBJECT = 'bench-producer';
const AUTHORIZATION = {
  admins: [{ data_type: 'user', value: SUBJECT }],
  readers: [{ data_type: 'user', value: SUBJECT }],
  writers: [{ data_type: 'team', value: 'bench' }, { data_type: 'user', value: SUBJECT }],
};

/** A JWKS document and a token-info answer for one signed token, on a free local port. */
async function startIdentityProvider(): Promise<{ url: string; token: string; close: () => Promise<void> }> {
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'bench', alg: 'RS256', use: 'sig' }] });
  const token = await new SignJWT({ teams: ['bench'] })
    .setProtectedHeader({ alg: 'RS256', kid: 'bench' })
    .setSubject(SUBJECT)
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(privateKey);
  const claims = JSON.stringify({ sub: SUBJECT, teams: ['bench'], active: true });
  const server = http.createServer((req, res) => {
    if (req.url === '/jwks') return res.writeHead(200, { 'content-type': 'application/json' }).end(jwks);
    if (req.url === '/tokeninfo' && req.headers.authorization === `Bearer ${token}`) return res.writeHead(200, { 'content-type': 'application/json' }).end(claims);
    res.writeHead(401).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, token, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

async function run(recorder: Recorder): Promise<void> {
  const random = prng(3);
  const requests = Array.from({ length: BODIES }, () => loadRequest(PATH, [orderEvent(random)]));
  const redis = await startRedis();
  const provider = await startIdentityProvider();
  const common = { BROKER_REDIS_URL: redis.url, BROKER_LOG_LEVEL: 'warn', BROKER_AUTH_INITIAL_ADMINS: JSON.stringify([{ data_type: 'user', value: SUBJECT }]) };
  const modes: { mode: string; env: Record<string, string> }[] = [
    { mode: 'off', env: { BROKER_REDIS_KEY_PREFIX: 'off:', BROKER_AUTH_INITIAL_ADMINS: '[]' } },
    { mode: 'jwt', env: { BROKER_REDIS_KEY_PREFIX: 'jwt:', BROKER_AUTH_MODE: 'jwt', BROKER_AUTH_JWT_JWKS_URL: `${provider.url}/jwks` } },
    { mode: 'tokeninfo', env: { BROKER_REDIS_KEY_PREFIX: 'tokeninfo:', BROKER_AUTH_MODE: 'tokeninfo', BROKER_AUTH_TOKENINFO_URL: `${provider.url}/tokeninfo` } },
  ];
  const headers = { authorization: `Bearer ${provider.token}` };
  let baseline: number | undefined;
  try {
    for (const { mode, env } of modes) {
      const broker: BrokerProcess = await startBroker({ ...common, ...env });
      try {
        // In mode off the subject is `unauthenticated`: the writers list must name it.
        const authorization = mode === 'off' ? { ...AUTHORIZATION, writers: [{ data_type: 'user', value: 'unauthenticated' }] } : AUTHORIZATION;
        await createEventType(broker.url, { ...businessEventType(EVENT_TYPE, ORDER_SCHEMA, 4), authorization }, mode === 'off' ? {} : headers);
        await runLoad({ url: broker.url, requests, connections: CONNECTIONS, durationSeconds: WARMUP_SECONDS, headers });
        const result = await runLoad({ url: broker.url, requests, connections: CONNECTIONS, durationSeconds: DURATION_SECONDS, headers });
        reportFailures(recorder, `auth ${mode}`, result);
        recorder.log(`mode ${mode}: ${Math.round(result.requestsPerSecond)} requests/s, p50 ${result.latencyMs.p50.toFixed(3)} ms, p99 ${result.latencyMs.p99.toFixed(3)} ms`);
        const label = mode === 'off' ? 'mode off (baseline)' : `mode ${mode}`;
        recorder.add(`${label}: requests/s`, Math.round(result.requestsPerSecond), 'requests/s');
        recorder.add(`${label}: latency p50`, round(result.latencyMs.p50, 3), 'ms');
        recorder.add(`${label}: latency p99`, round(result.latencyMs.p99, 3), 'ms');
        recorder.add(`${label}: non-2xx answers`, result.non2xx + result.errors, 'answers', { op: '<=', value: 0 });
        if (mode === 'off') baseline = result.requestsPerSecond;
        // Target: authenticating a cached token costs at most 15% of the request rate.
        else if (baseline !== undefined) recorder.add(`mode ${mode}: requests/s relative to mode off`, round(result.requestsPerSecond / baseline, 2), '×', { op: '>=', value: 0.85 });
      } finally {
        await broker.stop('SIGTERM');
      }
    }
  } finally {
    await provider.close();
    await redis.stop();
  }
}

export const auth: Scenario = {
  name: 'auth',
  title: `single-event publish with auth off / jwt / tokeninfo, ${CONNECTIONS} producers`,
  run,
};
