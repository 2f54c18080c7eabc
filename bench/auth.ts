/**
 * Scenario `auth`: what authentication costs a producer. Single-event batches from 10
 * concurrent producers, as in `single-event`, against three broker nodes on one Redis, all running: auth
 * mode `off` (the baseline), `jwt` (RS256 bearer token checked against a local JWKS; verified tokens
 * are cached) and `tokeninfo` (a local token-info service; answers cached). Each node has an event type
 * with an authorization section, so the write check runs too. Each node is warmed up, then measured in
 * {@link ROUNDS} rounds, every round measuring each mode once (the order rotated by one per round), so
 * a drift of the shared machine moves the baseline as much as the modes; a mode's ratio is the median
 * of its same-round ratios to mode off (measured once per mode, one node after the other, the ratios
 * moved 0.82–1.14× between runs of the same code).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { startBroker, startRedis, type BrokerProcess } from '../scripts/local-processes.js';
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { createEventType, loadRequest, median, reportFailures, round, runLoad, type LoadResult, type Recorder, type Scenario } from './harness.js';
import { CONNECTIONS, WARMUP_SECONDS } from './single-event.js';

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

/** Measured rounds; each measures every mode once, in an order rotated by one per round. */
const ROUNDS = 5;
/** Seconds each mode is measured per round (5 × 3 s = 15 s per mode). */
const ROUND_SECONDS = 3;

/** One mode's node: its auth mode, its environment, the node once started and its result in each round (index = round). */
interface ModeNode {
  readonly mode: 'off' | 'jwt' | 'tokeninfo';
  readonly env: Record<string, string>;
  broker?: BrokerProcess;
  readonly rounds: LoadResult[];
}

async function run(recorder: Recorder): Promise<void> {
  const random = prng(3);
  const requests = Array.from({ length: BODIES }, () => loadRequest(PATH, [orderEvent(random)]));
  const redis = await startRedis();
  const provider = await startIdentityProvider();
  const common = { BROKER_REDIS_URL: redis.url, BROKER_LOG_LEVEL: 'warn', BROKER_AUTH_INITIAL_ADMINS: JSON.stringify([{ data_type: 'user', value: SUBJECT }]) };
  const nodes: ModeNode[] = [
    { mode: 'off', env: { BROKER_REDIS_KEY_PREFIX: 'off:', BROKER_AUTH_INITIAL_ADMINS: '[]' }, rounds: [] },
    { mode: 'jwt', env: { BROKER_REDIS_KEY_PREFIX: 'jwt:', BROKER_AUTH_MODE: 'jwt', BROKER_AUTH_JWT_JWKS_URL: `${provider.url}/jwks` }, rounds: [] },
    { mode: 'tokeninfo', env: { BROKER_REDIS_KEY_PREFIX: 'tokeninfo:', BROKER_AUTH_MODE: 'tokeninfo', BROKER_AUTH_TOKENINFO_URL: `${provider.url}/tokeninfo` }, rounds: [] },
  ];
  const headers = { authorization: `Bearer ${provider.token}` };
  try {
    for (const node of nodes) {
      const broker = await startBroker({ ...common, ...node.env });
      node.broker = broker;
      // In mode off the subject is `unauthenticated`: the writers list must name it.
      const authorization = node.mode === 'off' ? { ...AUTHORIZATION, writers: [{ data_type: 'user', value: 'unauthenticated' }] } : AUTHORIZATION;
      await createEventType(broker.url, { ...businessEventType(EVENT_TYPE, ORDER_SCHEMA, 4), authorization }, node.mode === 'off' ? {} : headers);
      await runLoad({ url: broker.url, requests, connections: CONNECTIONS, durationSeconds: WARMUP_SECONDS, headers });
    }
    for (let turn = 0; turn < ROUNDS; turn++) {
      for (let i = 0; i < nodes.length; i++) {
        const node = nodes[(i + turn) % nodes.length] as ModeNode;
        const result = await runLoad({ url: (node.broker as BrokerProcess).url, requests, connections: CONNECTIONS, durationSeconds: ROUND_SECONDS, headers });
        reportFailures(recorder, `auth ${node.mode}`, result);
        recorder.log(`round ${turn + 1}, mode ${node.mode}: ${Math.round(result.requestsPerSecond)} requests/s, p50 ${result.latencyMs.p50.toFixed(3)} ms, p99 ${result.latencyMs.p99.toFixed(3)} ms`);
        node.rounds.push(result);
      }
    }
    const off = nodes[0] as ModeNode;
    for (const node of nodes) {
      const label = node.mode === 'off' ? 'mode off (baseline)' : `mode ${node.mode}`;
      recorder.add(`${label}: requests/s (median of ${ROUNDS} rounds)`, Math.round(median(node.rounds.map((r) => r.requestsPerSecond))), 'requests/s');
      recorder.add(`${label}: latency p50 (median of ${ROUNDS} rounds)`, round(median(node.rounds.map((r) => r.latencyMs.p50)), 3), 'ms');
      recorder.add(`${label}: latency p99 (median of ${ROUNDS} rounds)`, round(median(node.rounds.map((r) => r.latencyMs.p99)), 3), 'ms');
      recorder.add(`${label}: non-2xx answers`, node.rounds.reduce((sum, r) => sum + r.non2xx + r.errors, 0), 'answers', { op: '<=', value: 0 });
      if (node === off) continue;
      const ratios = node.rounds.map((r, turn) => r.requestsPerSecond / (off.rounds[turn]?.requestsPerSecond ?? Number.NaN));
      recorder.log(`mode ${node.mode} ÷ off per round: ${ratios.map((r) => r.toFixed(2)).join(' / ')}`);
      // Target: authenticating a cached token costs at most 15% of the request rate.
      recorder.add(`mode ${node.mode}: requests/s relative to mode off (median of ${ROUNDS} same-round ratios)`, round(median(ratios), 2), '×', { op: '>=', value: 0.85 });
    }
  } finally {
    for (const node of nodes) await node.broker?.stop('SIGTERM');
    await provider.close();
    await redis.stop();
  }
}

export const auth: Scenario = {
  name: 'auth',
  title: `single-event publish with auth off / jwt / tokeninfo, ${CONNECTIONS} producers`,
  run,
};
