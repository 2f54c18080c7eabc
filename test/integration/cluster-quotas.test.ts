import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, clusterRun, startTestBroker, type Answer, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { TokenIssuer } from '../support/token-issuer.js';

/**
 * Publishing quotas hold for the cluster, not per node (docs/publishing.md "Quotas";
 * docs/decisions/0034-cluster-wide-publishing-quotas.md), project `cluster` only: three nodes on the
 * harness's Redis Cluster, one key prefix, auth mode `jwt`. Producers spread their batches over the
 * three nodes in turn, several requests at once, and come back soon after a 429 (after
 * {@link REFUSED_PAUSE_MS}, far sooner than `Retry-After`), so they always ask for more than their quota.
 * What counts is the rate of accepted events over {@link MEASURE_MS} from the first refusal (the bucket's
 * one second of burst spent): within ±10 % of the quota, where per-node counting would accept three times it.
 */

const QUOTA = 2000;
const BATCH = 50;
const WARM_UP_MS = 1500;
const MEASURE_MS = 4000;
/** A producer not refused by then did not ask for more than its quota (the test fails). */
const GIVE_UP_MS = 15_000;
const REFUSED_PAUSE_MS = 50;
/** Request loops of a flooding producer: far more than its quota asks for (each sends again at once after a 200). */
const LOOPS = 8;
/** `steady` sends a batch this often: a quarter of its quota. */
const STEADY_INTERVAL_MS = 100;

let issuer: TokenIssuer;
const nodes: TestBroker[] = [];
const tokens: Record<string, Record<string, string>> = {};
const NAME = 'cluster.quotas';

beforeAll(async () => {
  if (!clusterRun()) throw new Error('cluster-*.test.ts runs in the vitest project `cluster` only');
  issuer = await TokenIssuer.start();
  const env = issuer.brokerEnv();
  const first = await startTestBroker(env);
  nodes.push(first, await startTestBroker({ ...env, BROKER_REDIS_KEY_PREFIX: first.prefix }), await startTestBroker({ ...env, BROKER_REDIS_KEY_PREFIX: first.prefix }));
  for (const sub of ['admin', 'spread', 'flood', 'steady']) tokens[sub] = { Authorization: `Bearer ${await issuer.sign({ sub, audience: 'broker', expiresInSeconds: 3600 })}` };
  const created = await call(first.url, 'POST', '/event-types', businessEventType(NAME), tokens.admin);
  expect(created.status, created.text).toBe(201);
});
afterAll(async () => {
  await Promise.all(nodes.map((node) => node.stop()));
  await issuer?.close();
});

/** Sets a subject's quota and waits until every node has it (the settings' change notice). */
async function setQuota(subject: string, quota: Record<string, number>): Promise<void> {
  const set = await call(nodes[0]?.url ?? '', 'PUT', `/settings/quotas/subject/${subject}`, quota, tokens.admin);
  expect(set.status, set.text).toBe(200);
  for (const node of nodes) {
    const deadline = Date.now() + 10_000;
    while (!JSON.stringify((await call(node.url, 'GET', '/settings/quotas', undefined, tokens.admin)).json).includes(`"${subject}"`)) {
      if (Date.now() > deadline) throw new Error(`node ${node.url} did not learn the quota of ${subject}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/** What a producer got: events accepted in the measured window, refusals (429) in all, and when each answer came. */
interface Tally {
  accepted: number;
  refused: number;
  other: number;
  /** Date.now of each 200 (a batch of {@link BATCH} events each). */
  readonly acceptedAt: number[];
  /** Date.now of the first 429: from then on the bucket was in debt, its burst spent. */
  firstRefusedAt?: number;
}

/**
 * Runs `loops` request loops of `subject` over the three nodes in turn until {@link MEASURE_MS} after its
 * first refusal (or `endAt`, ms, Date.now, without one); each sends again at once after a 200, and
 * {@link REFUSED_PAUSE_MS} after a 429. `accepted` counts the events answered between `fromAt` and `endAt`.
 */
async function produce(subject: string, loops: number, fromAt: number, endAt: number): Promise<Tally> {
  const tally: Tally = { accepted: 0, refused: 0, other: 0, acceptedAt: [] };
  let next = 0;
  let seq = 0;
  // Until MEASURE_MS after the first refusal, or `endAt` without one (then rateAfterBurst fails).
  const going = (): boolean => Date.now() < (tally.firstRefusedAt === undefined ? endAt : tally.firstRefusedAt + MEASURE_MS);
  await Promise.all(
    Array.from({ length: loops }, async () => {
      while (going()) {
        const node = nodes[next++ % nodes.length] as TestBroker;
        const events = Array.from({ length: BATCH }, () => orderEvent(`${subject}-${seq++}`));
        const answer: Answer = await call(node.url, 'POST', `/event-types/${NAME}/events`, events, tokens[subject]);
        const at = Date.now();
        if (answer.status === 200) {
          tally.acceptedAt.push(at);
          if (at >= fromAt && at < endAt) tally.accepted += BATCH;
        } else if (answer.status === 429) {
          tally.refused += 1;
          tally.firstRefusedAt ??= at;
          await new Promise((resolve) => setTimeout(resolve, REFUSED_PAUSE_MS));
        } else tally.other += 1;
      }
    }),
  );
  return tally;
}

/**
 * Accepted events per second over {@link MEASURE_MS} from the first refusal (the burst spent), so a
 * bucket that saved tokens while the producer was still slow to start does not count as over its quota.
 */
function rateAfterBurst(tally: Tally): number {
  expect(tally.firstRefusedAt, 'the producer was never refused: it did not ask for more than its quota').toBeDefined();
  const from = tally.firstRefusedAt ?? 0;
  const events = tally.acceptedAt.filter((at) => at >= from && at < from + MEASURE_MS).length * BATCH;
  return events / (MEASURE_MS / 1000);
}

/**
 * Sends a batch of `subject` every `intervalMs` to the three nodes in turn, whatever the answers of the
 * batches before (up to 8 in flight), until `endAt`: a producer whose throughput does not depend on the
 * latency of the nodes. Accepted events count as in {@link produce}.
 */
async function paced(subject: string, intervalMs: number, fromAt: number, endAt: number): Promise<Tally> {
  const tally: Tally = { accepted: 0, refused: 0, other: 0, acceptedAt: [] };
  const inFlight = new Set<Promise<void>>();
  let seq = 0;
  for (let due = Date.now(); due < endAt; due += intervalMs) {
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now())));
    while (inFlight.size >= 8) await Promise.race(inFlight);
    const node = nodes[seq % nodes.length] as TestBroker;
    const events = Array.from({ length: BATCH }, () => orderEvent(`${subject}-${seq++}`));
    const sent: Promise<void> = call(node.url, 'POST', `/event-types/${NAME}/events`, events, tokens[subject]).then((answer) => {
      if (answer.status === 200) {
        if (due >= fromAt && due < endAt) tally.accepted += BATCH;
      } else if (answer.status === 429) tally.refused += 1;
      else tally.other += 1;
      inFlight.delete(sent);
    });
    inFlight.add(sent);
  }
  await Promise.all(inFlight);
  return tally;
}

describe('publishing quotas on a cluster', () => {
  it('one producer spread over three nodes gets its quota, within ±10 %, not three times it', async () => {
    await setQuota('spread', { events_per_second: QUOTA });
    const start = Date.now();
    const tally = await produce('spread', LOOPS, start, start + GIVE_UP_MS);
    const rate = rateAfterBurst(tally);
    expect(tally.other).toBe(0);
    expect(tally.refused).toBeGreaterThan(0);
    expect(rate).toBeGreaterThanOrEqual(QUOTA * 0.9);
    expect(rate).toBeLessThanOrEqual(QUOTA * 1.1);
  });

  it('a producer flooding its quota does not take the throughput of another', async () => {
    await setQuota('flood', { events_per_second: QUOTA });
    await setQuota('steady', { events_per_second: QUOTA });
    const start = Date.now();
    const fromAt = start + WARM_UP_MS;
    const endAt = fromAt + MEASURE_MS;
    const [flood, steady] = await Promise.all([produce('flood', LOOPS, start, start + GIVE_UP_MS), paced('steady', STEADY_INTERVAL_MS, fromAt, endAt)]);
    const floodRate = rateAfterBurst(flood);
    expect(flood.refused).toBeGreaterThan(0);
    expect(floodRate).toBeGreaterThanOrEqual(QUOTA * 0.9);
    expect(floodRate).toBeLessThanOrEqual(QUOTA * 1.1);
    // `steady` (a quarter of its quota) is never refused and publishes what it sends: a batch every STEADY_INTERVAL_MS.
    const sent = (MEASURE_MS / STEADY_INTERVAL_MS) * BATCH;
    expect(steady.refused).toBe(0);
    expect(steady.other).toBe(0);
    expect(steady.accepted, `${steady.accepted} of the ${sent} events sent in the window`).toBeGreaterThanOrEqual(sent * 0.9);
  });
});
