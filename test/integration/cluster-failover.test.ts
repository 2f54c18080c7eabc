import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisCluster, type RedisClusterProcesses } from '../../scripts/local-processes.js';
import { parseClusterNode } from '../../src/storage/redis/redis-connection.js';
import { call, clusterRun, startTestBrokerProcess, type TestBrokerProcess } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient } from '../support/stream-client.js';

/**
 * Redis Cluster failover under publish load (docs/operations.md "Redis Cluster"), project `cluster` only. A
 * cluster of its own: 3 masters with one replica each, `cluster-node-timeout` 1 s, one broker node.
 * Producers publish continuously (every batch writes all 8 partitions, so every master); one master
 * is SIGKILLed. Publishes touching its partitions fail (207 naming those partitions, or 503) only until
 * its replica has taken over and the broker's slot map follows (MOVED/ASK handled by ioredis), then
 * succeed again without any restart. Every event acknowledged meanwhile (200, or `submitted` in a 207)
 * is read back from BEGIN afterwards, and a reader waiting on a moved partition is woken by a notice
 * from the new master.
 */

const PARTITIONS = 8;
const PRODUCERS = 2;
const NAME = 'cl.failover';
/** The failover must be over within this (cluster-node-timeout 1 s; measured ~2–4 s on this machine). */
const MAX_WINDOW_MS = 15_000;
/** Consecutive fully successful batches that mark the end of the failover window. */
const HEALTHY_RUN = 30;

let cluster: RedisClusterProcesses;
let broker: TestBrokerProcess;
let admin: Cluster;

beforeAll(async () => {
  if (!clusterRun()) throw new Error('cluster-*.test.ts runs in the vitest project `cluster` only');
  cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: 1000 });
  broker = await startTestBrokerProcess({ BROKER_REDIS_CLUSTER_NODES: JSON.stringify(cluster.nodes), BROKER_CONSUMPTION_POLL_INTERVAL_MS: '60000' });
  admin = new Cluster(cluster.nodes.map(parseClusterNode), { redisOptions: { maxRetriesPerRequest: 1 } });
  await admin.ping();
}, 90_000);
afterAll(async () => {
  admin.disconnect();
  await broker.stop();
  await cluster.stop();
});

/** One publish request and what came of it. */
interface Outcome {
  readonly sentAt: number;
  readonly answeredAt: number;
  readonly status: number;
  /** Publish sequence numbers the broker acknowledged (200: all; 207: the `submitted` items). */
  readonly acked: readonly number[];
  /** Partitions of the failed items (207). */
  readonly failedPartitions: readonly string[];
}

function eventIn(partition: number, seq: number): Record<string, unknown> {
  const event = orderEvent(`O${seq}`, { seq });
  (event.metadata as Record<string, unknown>).partition = String(partition);
  return event;
}

/** The master (`host:port`) serving a key's slot, from CLUSTER SLOTS. */
async function masterServing(key: string): Promise<string> {
  const slot = Number(await admin.cluster('KEYSLOT', key));
  const range = (await admin.cluster('SLOTS')).find(([from, to]) => from <= slot && slot <= to);
  const master = range?.[2];
  if (!master) throw new Error(`no master serves slot ${slot}`);
  return `${master[0]}:${master[1]}`;
}

describe('Redis Cluster failover', () => {
  it('SIGKILL of a master: publishes fail only for the failover window, then succeed; no acknowledged event is lost', async () => {
    const created = await call(
      broker.url,
      'POST',
      '/event-types',
      businessEventType(NAME, {
        partition_strategy: 'user_defined',
        default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: PARTITIONS, write_parallelism: PARTITIONS },
      }),
    );
    expect(created.status, created.text).toBe(201);
    const victim = await masterServing(broker.keys.partitionLog(NAME, 1, '0'));
    const victimPartitions = new Set<string>();
    for (let p = 0; p < PARTITIONS; p++) if ((await masterServing(broker.keys.partitionLog(NAME, 1, String(p)))) === victim) victimPartitions.add(String(p));

    // An idle reader of a partition on the victim, woken only by notices (poll: 60 s): its notice
    // subscription must follow the slot to the new master.
    let idle = '';
    for (let i = 0; !idle; i++) {
      if (i > 200) throw new Error(`no event type name with a partition on ${victim}`);
      if ((await masterServing(broker.keys.partitionLog(`cl.idle${i}`, 1, '0'))) === victim) idle = `cl.idle${i}`;
    }
    expect((await call(broker.url, 'POST', '/event-types', businessEventType(idle))).status).toBe(201);
    const reader = await StreamClient.open(`${broker.url}/event-types/${idle}/events?batch_flush_timeout=1`, { headers: { 'X-Broker-Cursors': JSON.stringify([{ partition: '0', offset: 'BEGIN' }]) } });
    expect(reader.status).toBe(200);

    const outcomes: Outcome[] = [];
    let seq = 0;
    let killedAt = Number.POSITIVE_INFINITY;
    let stop = false;
    const healthyAfterKill = (): boolean => {
      const after = outcomes.filter((o) => o.sentAt > killedAt);
      return after.length >= HEALTHY_RUN && after.slice(-HEALTHY_RUN).every((o) => o.status === 200);
    };
    const producer = async (): Promise<void> => {
      while (!stop) {
        const seqs = Array.from({ length: PARTITIONS }, () => seq++);
        const sentAt = performance.now();
        let status = 0;
        let acked: number[] = [];
        let failedPartitions: string[] = [];
        try {
          const answer = await call(broker.url, 'POST', `/event-types/${NAME}/events`, seqs.map((s, p) => eventIn(p, s)));
          status = answer.status;
          if (status === 200) acked = seqs;
          if (status === 207) {
            const items = answer.json as { publishing_status: string }[];
            acked = seqs.filter((_, i) => items[i]?.publishing_status === 'submitted');
            failedPartitions = seqs.flatMap((_, p) => (items[p]?.publishing_status === 'submitted' ? [] : [String(p)]));
          }
        } catch {
          status = -1; // the connection failed: nothing acknowledged
        }
        outcomes.push({ sentAt, answeredAt: performance.now(), status, acked, failedPartitions });
        if (healthyAfterKill() || performance.now() - killedAt > MAX_WINDOW_MS + 10_000) stop = true;
      }
    };

    const producing = Promise.all(Array.from({ length: PRODUCERS }, producer));
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // load before the kill (every batch then must succeed)
    killedAt = performance.now();
    await cluster.kill(victim);
    await producing;

    const beforeKill = outcomes.filter((o) => o.answeredAt < killedAt);
    const afterKill = outcomes.filter((o) => o.answeredAt >= killedAt);
    const failures = afterKill.filter((o) => o.status !== 200);
    const lastFailure = failures.at(-1);
    const recovered = afterKill.find((o) => o.sentAt > (lastFailure?.answeredAt ?? killedAt) && o.status === 200);
    const windowMs = (recovered?.answeredAt ?? Number.NaN) - killedAt;
    const slowest = Math.max(...afterKill.map((o) => o.answeredAt - o.sentAt));
    const statuses = new Map<number, number>();
    for (const o of failures) statuses.set(o.status, (statuses.get(o.status) ?? 0) + 1);
    console.log(
      `cluster failover: SIGKILL of master ${victim} (partitions ${[...victimPartitions].join(',')}); ${beforeKill.length} batches before, ${afterKill.length} after; ` +
        `${failures.length} not fully acknowledged (${[...statuses].map(([s, n]) => `${n}× ${s}`).join(', ') || 'none'}), ` +
        `publishes fully succeed again ${windowMs.toFixed(0)} ms after the kill; slowest request ${slowest.toFixed(0)} ms`,
    );

    expect(beforeKill.every((o) => o.status === 200)).toBe(true);
    expect(recovered, 'publishes succeed again after the failover').toBeDefined();
    expect(windowMs).toBeLessThan(MAX_WINDOW_MS);
    // Failures are 207 (per partition) or 503 (storage unavailable), never 500; a 207 fails only partitions of the dead master.
    for (const o of failures) {
      expect([207, 503]).toContain(o.status);
      for (const p of o.failedPartitions) expect(victimPartitions).toContain(p);
    }
    expect(broker.process.exitCode).toBeNull();

    // The idle reader is woken by a notice from the new master.
    const woken = performance.now();
    const published = await call(broker.url, 'POST', `/event-types/${idle}/events`, [orderEvent('idle', { seq: -1 })]);
    expect(published.status, published.text).toBe(200);
    const [delivered] = await reader.events(1, 5_000);
    const wakeMs = performance.now() - woken;
    reader.close();
    expect(delivered?.events?.[0]?.seq).toBe(-1);
    console.log(`cluster failover: a reader idle on the failed master's slot was woken ${wakeMs.toFixed(0)} ms after a publish (poll interval 60 s)`);

    // Every acknowledged event is stored: read every partition from BEGIN.
    const ranges = (await call(broker.url, 'GET', `/event-types/${NAME}/partitions`)).json as { partition: string; oldest_available_offset: string; newest_available_offset: string }[];
    const newest = (offset: string): number => (offset.endsWith('--1') ? -1 : Number(offset.slice(offset.lastIndexOf('-') + 1)));
    const stored = ranges.reduce((n, r) => n + newest(r.newest_available_offset) + 1, 0);
    const cursors = JSON.stringify(ranges.map((r) => ({ partition: r.partition, offset: 'BEGIN' })));
    // stream_limit may not be below batch_limit: a loaded machine may have stored fewer than 1000 events.
    const stream = await StreamClient.open(`${broker.url}/event-types/${NAME}/events?batch_limit=${Math.min(1000, stored)}&stream_limit=${stored}&batch_flush_timeout=1`, {
      headers: { 'X-Broker-Cursors': cursors },
    });
    const read = new Set<number>();
    let readCount = 0;
    for (const batch of await stream.untilEnd(30_000)) {
      for (const event of batch.events ?? []) {
        read.add(event.seq as number);
        readCount++;
      }
    }
    const acked = outcomes.flatMap((o) => o.acked);
    const lost = acked.filter((s) => !read.has(s));
    console.log(`cluster failover: ${acked.length} events acknowledged, ${readCount} stored (${readCount - read.size} duplicates from retried writes), ${lost.length} acknowledged events missing`);
    expect(readCount).toBe(stored);
    expect(lost).toEqual([]);
  }, 120_000);
});
