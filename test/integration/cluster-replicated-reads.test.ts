import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisCluster, type RedisClusterProcesses } from '../../scripts/local-processes.js';
import { call, clusterRun, startTestBroker, uniquePrefix, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';

/**
 * Reads that a failover cannot take back (docs/operations.md "Durability"; docs/architecture.md "Reads stop
 * at the high watermark"), project `cluster` only. A cluster of its own: 3 masters with one replica each,
 * `cluster-node-timeout` 1 s; nodes in this process with `publish.minReplicas` 1 and
 * `publish.replicaTimeoutMs` 300: `guarded` (readers wait for replicas, the default) and, for the control,
 * `eager` (`consumption.waitForReplicas` false: the old behaviour), on one key prefix.
 *
 * 1. Step by step: an event its replica never got (the replica stopped, its link closed) is read at once
 *    by `eager`, never by `guarded`; its master is stopped and the replica takes over without it (`CLUSTER
 *    FAILOVER TAKEOVER`), and the next acknowledged event gets its offset: `eager` has given one offset
 *    with two different events, `guarded` each offset once, with the event the cluster kept.
 * 2. As an operator would try it: producers publish with retries (every batch to every master), a
 *    subscription stream reads and commits; a master is stopped (SIGSTOP) past the node timeout, its
 *    replica takes over, the master is continued and joins back as a replica; {@link ROUNDS} times. No
 *    offset is ever delivered with two different events, every acknowledged event is delivered, and each
 *    time the stream delivers new events of the stopped master's partitions within {@link RECOVERY_MS}.
 *    A soak run by hand: `BROKER_TEST_REPLICATED_READS_ROUNDS=30 npx vitest run --project cluster test/integration/cluster-replicated-reads.test.ts`.
 */

const NODE_TIMEOUT_MS = 1000;
const REPLICA_TIMEOUT_MS = 300;
const PARTITIONS = 8;
const ROUNDS = Number(process.env.BROKER_TEST_REPLICATED_READS_ROUNDS ?? 5);
/**
 * From the moment a master stops until the stream delivers events published since to its partitions
 * again (docs/operations.md "Durability"): the failover (cluster-node-timeout 1 s and the election), the
 * broker's slot map following (≤ 5 s), the stopped master continued and joined back as a replica of the
 * new one (before that, no write there is acknowledged, so no event is confirmed), then one publish.
 */
const RECOVERY_MS = 20_000;

let cluster: RedisClusterProcesses;
let guarded: TestBroker;
let eager: TestBroker;
/** A plain connection to every node (`host:port`); a stopped node's commands time out. */
const nodes = new Map<string, Redis>();

function client(node: string): Redis {
  const known = nodes.get(node);
  if (known) return known;
  const [host = '', port = ''] = node.split(':');
  const redis = new Redis(Number(port), host, { maxRetriesPerRequest: 0, commandTimeout: 1000 });
  redis.on('error', () => undefined);
  nodes.set(node, redis);
  return redis;
}

async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await Promise.resolve().then(check).catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The cluster as `node` sees it (CLUSTER NODES): each master's replicas, and the master of a slot. */
async function topology(node: string): Promise<{ replicasOf: Map<string, string[]>; masterOf: (slot: number) => string | undefined }> {
  const text = (await client(node).cluster('NODES')) as string;
  const rows = text
    .trim()
    .split('\n')
    .map((line) => line.split(' '));
  const addressOf = new Map(rows.map(([id = '', address = '']) => [id, address.split('@')[0] ?? '']));
  const replicasOf = new Map<string, string[]>();
  const ranges: { from: number; to: number; master: string }[] = [];
  for (const [, address = '', flags = '', master = '', , , , , ...slots] of rows) {
    const self = address.split('@')[0] ?? '';
    if (flags.includes('slave')) {
      const of = addressOf.get(master) ?? '';
      replicasOf.set(of, [...(replicasOf.get(of) ?? []), self]);
    } else if (flags.includes('master') && !flags.includes('fail')) {
      for (const range of slots) {
        if (range.startsWith('[')) continue;
        const [from = '', to = from] = range.split('-');
        ranges.push({ from: Number(from), to: Number(to), master: self });
      }
    }
  }
  return { replicasOf, masterOf: (slot) => ranges.find((r) => r.from <= slot && slot <= r.to)?.master };
}

async function role(node: string): Promise<string> {
  return /role:(\w+)/.exec(await client(node).info('replication'))?.[1] ?? '';
}

/** Whether `replica` replicates `master` with its link up and everything `master` wrote. */
async function inSync(replica: string, master: string): Promise<boolean> {
  const [own, theirs] = await Promise.all([client(replica).info('replication'), client(master).info('replication')]);
  const target = Number(/master_repl_offset:(\d+)/.exec(theirs)?.[1]);
  const [host, port] = master.split(':');
  return own.includes('role:slave') && own.includes(`master_host:${host}`) && own.includes(`master_port:${port}`) && own.includes('master_link_status:up') && Number(/slave_repl_offset:(\d+)/.exec(own)?.[1]) >= target;
}

/** The slot of a partition's keys (timeline 1). */
async function slotOf(name: string, partition: number): Promise<number> {
  return Number(await client(cluster.masters[0] as string).cluster('KEYSLOT', guarded.keys.partitionMeta(name, 1, String(partition))));
}

const offsetOf = (wire: string): number => Number(wire.slice(wire.lastIndexOf('-') + 1));

/** Per event of a batch: its offset and `seq` (dense offsets: the batch's cursor is its last). */
function delivered(batch: StreamBatch): { partition: string; offset: number; seq: number }[] {
  const events = batch.events ?? [];
  const last = offsetOf(batch.cursor.offset);
  return events.map((e, i) => ({ partition: batch.cursor.partition, offset: last - events.length + 1 + i, seq: e.seq as number }));
}

function eventIn(partition: number, seq: number): Record<string, unknown> {
  return orderEvent(`O${seq}`, { seq, metadata: { eid: randomUUID(), occurred_at: new Date().toISOString(), partition: String(partition) } });
}

beforeAll(async () => {
  if (!clusterRun()) throw new Error('cluster-*.test.ts runs in the vitest project `cluster` only');
  cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1, nodeTimeoutMs: NODE_TIMEOUT_MS });
  const env = {
    BROKER_REDIS_CLUSTER_NODES: JSON.stringify(cluster.nodes),
    BROKER_REDIS_KEY_PREFIX: uniquePrefix(),
    BROKER_PUBLISH_MIN_REPLICAS: '1',
    BROKER_PUBLISH_REPLICA_TIMEOUT_MS: String(REPLICA_TIMEOUT_MS),
    // A publish or read stuck on a stopped master is answered (207 timed out, a read retried) after 1 s.
    BROKER_REDIS_COMMAND_TIMEOUT_MS: '1000',
  };
  guarded = await startTestBroker(env);
  eager = await startTestBroker({ ...env, BROKER_CONSUMPTION_WAIT_FOR_REPLICAS: 'false' });
}, 90_000);
afterAll(async () => {
  for (const node of cluster?.nodes ?? []) cluster.signal(node, 'SIGCONT');
  await Promise.all([guarded?.stop(), eager?.stop()]);
  for (const redis of nodes.values()) redis.disconnect();
  await cluster?.stop();
});

describe('reads with replica acknowledgements across a failover', () => {
  it('an event the promoted replica never got: read at once without the guard (its offset then carries another event), never with it', async () => {
    const name = 'cl.takeover';
    expect((await call(guarded.url, 'POST', '/event-types', businessEventType(name))).status).toBe(201);
    const slot = await slotOf(name, 0);
    const master = (await topology(cluster.masters[0] as string)).masterOf(slot) as string;
    const replica = (await topology(master)).replicasOf.get(master)?.[0] as string;
    expect((await call(guarded.url, 'POST', `/event-types/${name}/events`, [eventIn(0, 1)])).status).toBe(200);
    const cursors = { headers: { 'X-Broker-Cursors': JSON.stringify([{ partition: '0', offset: 'BEGIN' }]) } };
    const query = 'batch_flush_timeout=1&batch_limit=1';
    const [reader, control] = await Promise.all([guarded, eager].map((node) => StreamClient.open(`${node.url}/event-types/${name}/events?${query}`, cursors)));
    try {
      const seen = async (stream: StreamClient, count: number): Promise<{ offset: number; seq: number }[]> => (await stream.events(count, 15_000)).flatMap(delivered);
      expect((await seen(reader as StreamClient, 1)).map((d) => [d.offset, d.seq])).toEqual([[0, 1]]);
      expect((await seen(control as StreamClient, 1)).map((d) => [d.offset, d.seq])).toEqual([[0, 1]]);

      // The replica misses event 2: stopped, and its link closed by the master (else the kernel would take
      // the replication stream for it meanwhile). Not acknowledged (207), but on the master, where `eager` reads it.
      cluster.signal(replica, 'SIGSTOP');
      await client(master).client('KILL', 'TYPE', 'replica');
      expect((await call(guarded.url, 'POST', `/event-types/${name}/events`, [eventIn(0, 2)])).status).toBe(207);
      expect((await seen(control as StreamClient, 1)).map((d) => [d.offset, d.seq])).toEqual([[1, 2]]);

      // The master stops; the replica (continued) takes over without event 2; the master joins back as its replica.
      cluster.signal(master, 'SIGSTOP');
      cluster.signal(replica, 'SIGCONT');
      await client(replica).cluster('FAILOVER', 'TAKEOVER');
      await waitFor(async () => (await role(replica)) === 'master', 10_000, `${replica} took over`);
      cluster.signal(master, 'SIGCONT');
      await waitFor(() => inSync(master, replica), 20_000, `${master} replicates ${replica}`);

      // The next acknowledged event gets offset 1 (retried while the nodes' slot maps follow the takeover).
      await waitFor(async () => (await call(guarded.url, 'POST', `/event-types/${name}/events`, [eventIn(0, 3)])).status === 200, 20_000, 'event 3 acknowledged');
      // Without the guard, a reader was given event 2 at offset 1; a reader starting now is given event 3 there.
      const fresh = await StreamClient.open(`${eager.url}/event-types/${name}/events?${query}`, cursors);
      try {
        expect((await seen(fresh, 2)).map((d) => [d.offset, d.seq]), 'without the guard, offset 1 was given with two different events').toEqual([
          [0, 1],
          [1, 3],
        ]);
      } finally {
        fresh.close();
      }
      // With it, offset 1 is given once, with the event the cluster kept.
      expect((await seen(reader as StreamClient, 1)).map((d) => [d.offset, d.seq])).toEqual([[1, 3]]);
    } finally {
      reader?.close();
      control?.close();
    }
  }, 90_000);

  it(`a master stopped past the node timeout ${ROUNDS} times under load: no offset delivered with two events, nothing acknowledged lost, the stream back within ${RECOVERY_MS / 1000} s each time`, async () => {
    const name = 'cl.reads';
    const created = await call(
      guarded.url,
      'POST',
      '/event-types',
      businessEventType(name, { partition_strategy: 'user_defined', default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: PARTITIONS, write_parallelism: PARTITIONS } }),
    );
    expect(created.status, created.text).toBe(201);
    const subscribed = await call(guarded.url, 'POST', '/subscriptions', { owning_application: 'cl-reads', event_types: [name], read_from: 'begin' });
    expect(subscribed.status).toBe(201);
    const id = (subscribed.json as { id: string }).id;
    const slots = await Promise.all(Array.from({ length: PARTITIONS }, (_, p) => slotOf(name, p)));

    // What producers got acknowledged, and what the consumer was given: offset → seq per partition.
    const acked = new Set<number>();
    /** When each seq was first sent (`performance.now()`). */
    const sentAt = new Map<number, number>();
    const given = new Map<string, number>();
    const conflicts: string[] = [];
    const received = new Set<number>();
    /** Per partition, arrivals: when, and the send time of the event. */
    const arrivals: { partition: number; at: number; sentAt: number }[] = [];
    let producing = true;
    let consuming = true;
    let seq = 0;

    const producer = async (): Promise<void> => {
      while (producing) {
        const batch = Array.from({ length: PARTITIONS }, (_, p) => {
          const s = seq++;
          sentAt.set(s, performance.now());
          return { seq: s, event: eventIn(p, s) };
        });
        let pending = batch;
        // Retried until acknowledged (same events, same eids), as a producer does.
        while (pending.length > 0 && producing) {
          let status = 0;
          let items: { publishing_status: string }[] = [];
          try {
            const answer = await call(guarded.url, 'POST', `/event-types/${name}/events`, pending.map((e) => e.event));
            status = answer.status;
            if (status === 207) items = answer.json as { publishing_status: string }[];
          } catch {
            status = -1;
          }
          if (status === 200) items = pending.map(() => ({ publishing_status: 'submitted' }));
          pending.forEach((e, i) => {
            if (items[i]?.publishing_status === 'submitted') acked.add(e.seq);
          });
          pending = pending.filter((_, i) => items[i]?.publishing_status !== 'submitted');
          if (pending.length > 0) await new Promise((resolve) => setTimeout(resolve, 100));
        }
      }
    };

    const consumer = async (): Promise<void> => {
      while (consuming) {
        const stream = await StreamClient.open(`${guarded.url}/subscriptions/${id}/events?batch_flush_timeout=1&batch_limit=50&max_uncommitted_events=1000`).catch(() => undefined);
        if (stream?.status !== 200) {
          await new Promise((resolve) => setTimeout(resolve, 200));
          continue;
        }
        const streamId = stream.headers.get('x-broker-streamid') ?? '';
        try {
          while (consuming) {
            const batch = await stream.next(1_000).catch(() => null);
            if (batch === undefined) break;
            if (batch === null || !batch.events?.length) continue;
            const at = stream.arrivedAt(batch);
            for (const d of delivered(batch)) {
              const key = `${d.partition}:${d.offset}`;
              const before = given.get(key);
              if (before !== undefined && before !== d.seq) conflicts.push(`partition ${d.partition} offset ${d.offset}: seq ${before}, then seq ${d.seq}`);
              given.set(key, d.seq);
              received.add(d.seq);
              arrivals.push({ partition: Number(d.partition), at, sentAt: sentAt.get(d.seq) ?? Number.NaN });
            }
            // Committed as it comes (a refused commit is delivered again: at-least-once).
            void call(guarded.url, 'POST', `/subscriptions/${id}/cursors`, { items: [batch.cursor] }, { 'X-Broker-StreamId': streamId }).catch(() => undefined);
          }
        } finally {
          stream.close();
        }
      }
    };

    const producing$ = Promise.all([producer(), producer()]);
    const consuming$ = consumer();
    const recoveries: number[] = [];
    try {
      await waitFor(() => received.size > 100, 30_000, 'the stream delivers before the first stop');
      for (let round = 1; round <= ROUNDS; round++) {
        // A master holding partitions (they rotate: each round's victim comes back as a replica).
        const view = await topology(cluster.nodes[0] as string);
        const held = slots.map((slot) => view.masterOf(slot));
        const victim = held[round % PARTITIONS] as string;
        const victimPartitions = held.flatMap((m, p) => (m === victim ? [p] : []));
        const replica = view.replicasOf.get(victim)?.[0];
        expect(replica, `the replica of ${victim}`).toBeDefined();
        const stoppedAt = performance.now();
        cluster.signal(victim, 'SIGSTOP');
        try {
          await waitFor(async () => (await role(replica as string)) === 'master', 20_000, `${replica} took over from ${victim}`);
        } finally {
          cluster.signal(victim, 'SIGCONT');
        }
        await waitFor(() => inSync(victim, replica as string), 30_000, `${victim} replicates ${replica}`);
        // Back: events sent after the stop reach the stream on the stopped master's partitions.
        await waitFor(() => arrivals.some((a) => victimPartitions.includes(a.partition) && a.sentAt > stoppedAt), RECOVERY_MS, `round ${round}: the stream delivers new events of partitions ${victimPartitions.join(',')}`);
        const back = Math.min(...arrivals.filter((a) => victimPartitions.includes(a.partition) && a.sentAt > stoppedAt).map((a) => a.at));
        recoveries.push(back - stoppedAt);
      }
      // Producers stop (an attempt in flight is answered first; what was never acknowledged is left out);
      // then everything acknowledged must arrive.
      producing = false;
      await producing$;
      await waitFor(() => [...acked].every((s) => received.has(s)), 30_000, 'every acknowledged event delivered');
    } finally {
      producing = false;
      consuming = false;
      await Promise.all([producing$, consuming$]);
    }
    const lastSeq = seq;

    console.log(
      `replicated reads: ${ROUNDS} masters stopped; ${acked.size} of ${lastSeq} events acknowledged, ${received.size} delivered, ` +
        `${conflicts.length} offsets with two events; stream back ${recoveries.map((ms) => `${(ms / 1000).toFixed(1)} s`).join(', ')} after each stop`,
    );
    expect(conflicts).toEqual([]);
    expect([...acked].filter((s) => !received.has(s))).toEqual([]);
    for (const ms of recoveries) expect(ms).toBeLessThan(RECOVERY_MS);
  }, 60_000 + ROUNDS * 45_000);
});
