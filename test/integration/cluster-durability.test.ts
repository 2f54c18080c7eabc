import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisCluster, type RedisClusterProcesses } from '../../scripts/local-processes.js';
import { createKeys } from '../../src/storage/keys.js';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';

/**
 * `publish.minReplicas` on a Redis Cluster (docs/operations.md "Durability", "Redis Cluster"), project `cluster` only. A
 * cluster of its own: 3 masters with one replica each, and one broker node with `minReplicas` 1 and
 * `replicaTimeoutMs` 300. Every master a batch writes to must have its replica confirm (`WAIT` on the
 * connection that took that master's writes): pausing one replica (SIGSTOP) fails exactly the items of
 * its master's partitions (207), the others are submitted. A slot moved to another master while the
 * node's slot map still names the old one (MOVED), or being migrated (ASK, then TRYAGAIN until the
 * migration ends), is followed: the write lands once, on the new owner, confirmed by its replica.
 */

const NAME = 'cl.durable';
const PARTITIONS = 8;
const TIMEOUT_MS = 300;
const SHORTFALL = `acknowledged by 0 of 1 replicas within ${TIMEOUT_MS} ms`;

let cluster: RedisClusterProcesses;
let broker: TestBroker;
/** A plain connection to every node, by `host:port`. */
const nodes = new Map<string, Redis>();
/** Publish sequence numbers, unique over the file. */
let seq = 0;

function client(node: string): Redis {
  const known = nodes.get(node);
  if (known) return known;
  const [host = '', port = ''] = node.split(':');
  const redis = new Redis(Number(port), host, { maxRetriesPerRequest: 1 });
  nodes.set(node, redis);
  return redis;
}

const admin = (): Redis => client(cluster.masters[0] as string);

/** The master (`host:port`) serving a slot, from CLUSTER SLOTS. */
async function masterOfSlot(slot: number): Promise<string> {
  const range = (await admin().cluster('SLOTS')).find(([from, to]) => from <= slot && slot <= to);
  const master = range?.[2];
  if (!master) throw new Error(`no master serves slot ${slot}`);
  return `${master[0]}:${master[1]}`;
}

const metaKey = (partition: number): string => broker.keys.partitionMeta(NAME, 1, String(partition));
const slotOf = async (partition: number): Promise<number> => Number(await admin().cluster('KEYSLOT', metaKey(partition)));

/** Partition → the master holding it now. */
async function placement(): Promise<Map<number, string>> {
  const where = new Map<number, string>();
  for (let p = 0; p < PARTITIONS; p++) where.set(p, await masterOfSlot(await slotOf(p)));
  return where;
}

/** The replica of `master` (from the harness; no failover happens in this file). */
function replicaOf(master: string): string {
  const replica = [...cluster.replicaOf].find(([, m]) => m === master)?.[0];
  if (!replica) throw new Error(`no replica of ${master}`);
  return replica;
}

/** The `next` offset of a partition's counters on `node` (a replica is read with READONLY). */
async function nextOffset(node: string, partition: number): Promise<number> {
  const redis = client(node);
  await redis.readonly();
  return Number((await redis.hget(metaKey(partition), 'next')) ?? 0);
}

/** Waits until the replica of `master` has processed everything the master has written so far. */
async function replicaCaughtUp(master: string): Promise<void> {
  const target = Number(/master_repl_offset:(\d+)/.exec(await client(master).info('replication'))?.[1]);
  const replica = client(replicaOf(master));
  const deadline = Date.now() + 10_000;
  for (;;) {
    const info = await replica.info('replication');
    if (info.includes('master_link_status:up') && Number(/slave_repl_offset:(\d+)/.exec(info)?.[1]) >= target) return;
    if (Date.now() > deadline) throw new Error(`the replica of ${master} did not catch up`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** How many errors of a kind (`MOVED`, `ASK`) a node has replied (INFO errorstats). */
async function errorCount(node: string, kind: string): Promise<number> {
  return Number(new RegExp(`errorstat_${kind}:count=(\\d+)`).exec(await client(node).info('errorstats'))?.[1] ?? 0);
}

function eventIn(partition: number): Record<string, unknown> {
  const event = orderEvent(`O${seq}`, { seq: seq++ });
  (event.metadata as Record<string, unknown>).partition = String(partition);
  return event;
}

/** One event per partition. */
const everyPartition = (): Record<string, unknown>[] => Array.from({ length: PARTITIONS }, (_, p) => eventIn(p));

interface Item {
  eid: string;
  publishing_status: string;
  step: string;
  detail: string;
}

/**
 * Starts moving `slot` to `target`, like `redis-cli --cluster reshard`: IMPORTING on the target,
 * MIGRATING on the owner, every key of the slot migrated. The owner then answers ASK for the slot.
 * @returns the step that ends the migration (CLUSTER SETSLOT … NODE on every master)
 */
async function startMigration(slot: number, target: string): Promise<() => Promise<void>> {
  const source = await masterOfSlot(slot);
  const targetId = await client(target).cluster('MYID');
  const sourceId = await client(source).cluster('MYID');
  await client(target).cluster('SETSLOT', slot, 'IMPORTING', sourceId);
  await client(source).cluster('SETSLOT', slot, 'MIGRATING', targetId);
  const [host = '', port = ''] = target.split(':');
  for (;;) {
    const keys = await client(source).cluster('GETKEYSINSLOT', slot, 100);
    if (keys.length === 0) break;
    await client(source).migrate(host, port, '', 0, 5000, 'KEYS', ...keys);
  }
  return async () => {
    await client(target).cluster('SETSLOT', slot, 'NODE', targetId);
    await client(source).cluster('SETSLOT', slot, 'NODE', targetId);
    for (const master of cluster.masters) if (master !== target && master !== source) await client(master).cluster('SETSLOT', slot, 'NODE', targetId);
  };
}

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 });
  broker = await startTestBroker({ BROKER_REDIS_CLUSTER_NODES: JSON.stringify(cluster.nodes), BROKER_PUBLISH_MIN_REPLICAS: '1', BROKER_PUBLISH_REPLICA_TIMEOUT_MS: String(TIMEOUT_MS) });
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
}, 90_000);
afterAll(async () => {
  for (const replica of cluster?.replicaOf.keys() ?? []) cluster.signal(replica, 'SIGCONT');
  for (const redis of nodes.values()) redis.disconnect();
  await broker?.stop();
  await cluster?.stop();
});

describe('publish.minReplicas on a Redis Cluster', () => {
  it('acknowledges a batch spanning every master (200) once each master’s replica confirmed it, and each replica holds its partitions', async () => {
    const where = await placement();
    expect(new Set(where.values()).size, 'the partitions spread over all three masters').toBe(3);
    const answer = await call(broker.url, 'POST', `/event-types/${NAME}/events`, everyPartition());
    expect(answer.status, answer.text).toBe(200);
    // Acknowledged means replicated: each replica already holds its master's partitions.
    for (const [p, master] of where) expect(await nextOffset(replicaOf(master), p), `partition ${p} on the replica of ${master}`).toBe(1);
  });

  it('a paused replica fails exactly its master’s partitions (207); the other partitions are submitted; all succeed once it is back', async () => {
    const where = await placement();
    const victim = where.get(0) as string;
    const victimPartitions = [...where].filter(([, m]) => m === victim).map(([p]) => p);
    expect(victimPartitions.length).toBeLessThan(PARTITIONS);
    const before = await Promise.all([...where].map(([p, m]) => nextOffset(m, p)));
    cluster.signal(replicaOf(victim), 'SIGSTOP');
    let answer;
    try {
      answer = await call(broker.url, 'POST', `/event-types/${NAME}/events`, everyPartition());
    } finally {
      cluster.signal(replicaOf(victim), 'SIGCONT');
    }
    expect(answer.status, answer.text).toBe(207);
    const items = answer.json as Item[];
    expect(items).toHaveLength(PARTITIONS);
    items.forEach((item, p) => {
      if (victimPartitions.includes(p)) expect(item, `partition ${p} (master ${victim})`).toMatchObject({ publishing_status: 'failed', step: 'publishing', detail: SHORTFALL });
      else expect(item, `partition ${p}`).toMatchObject({ publishing_status: 'submitted', step: 'none', detail: '' });
    });
    // A failed item's events are on its master (not confirmed, not undone): a client retry may duplicate them (at-least-once).
    const after = await Promise.all([...where].map(([p, m]) => nextOffset(m, p)));
    expect(after).toEqual(before.map((n) => n + 1));

    await replicaCaughtUp(victim);
    const again = await call(broker.url, 'POST', `/event-types/${NAME}/events`, everyPartition());
    expect(again.status, again.text).toBe(200);
  });

  it('follows a slot moved to another master (MOVED): refreshes the slot map and writes the partition once on its new owner (200: its replica confirmed)', async () => {
    const slot = await slotOf(1);
    // The node's slot map may refresh by itself (every 5 s) between the move and the publish; then
    // there is no MOVED to follow. Move the slot again until the publish ran into one.
    for (let attempt = 1; ; attempt++) {
      const source = await masterOfSlot(slot);
      const target = cluster.masters.find((m) => m !== source) as string;
      const count = await nextOffset(source, 1);
      const moved = await errorCount(source, 'MOVED');
      await (await startMigration(slot, target))();
      const answer = await call(broker.url, 'POST', `/event-types/${NAME}/events`, [eventIn(1)]);
      expect(answer.status, answer.text).toBe(200);
      expect(await nextOffset(target, 1), 'written once, on the new owner').toBe(count + 1);
      if ((await errorCount(source, 'MOVED')) > moved) break;
      if (attempt === 5) throw new Error('the node never ran into MOVED: its slot map followed every move first');
    }
  });

  it('holds a write to a slot under migration (ASK, then TRYAGAIN on the importing master) until the migration ends, then writes it once on the new owner', async () => {
    const slot = await slotOf(2);
    const source = await masterOfSlot(slot);
    const target = cluster.masters.find((m) => m !== source) as string;
    const count = await nextOffset(source, 2);
    const asked = await errorCount(source, 'ASK');
    const refused = await errorCount(target, 'TRYAGAIN');
    const finish = await startMigration(slot, target);
    const publishing = call(broker.url, 'POST', `/event-types/${NAME}/events`, [eventIn(2)]);
    try {
      // The publish has reached the migrating slot once the old owner answered ASK, and is held once the
      // importing master refused it (TRYAGAIN): the migration ends only then, whatever the machine's load
      // does to the order of the node's resend and the test's next step.
      const deadline = Date.now() + 5_000;
      while ((await errorCount(source, 'ASK')) === asked || (await errorCount(target, 'TRYAGAIN')) === refused) {
        if (Date.now() > deadline) throw new Error('the publish never reached the migrating slot, or the importing master never refused it');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    } finally {
      await finish();
    }
    const answer = await publishing;
    expect(answer.status, answer.text).toBe(200);
    expect(await nextOffset(target, 2), 'written once, on the new owner').toBe(count + 1);
    // With ASKING, the importing master refuses the script (its notice channel is never a key, so not
    // every key is there yet): TRYAGAIN, retried until the slot is the target's.
    expect(await errorCount(target, 'TRYAGAIN')).toBeGreaterThan(refused);
  });

  it('waits for the replicas of a cluster storage a timeline moved to (not refused with 422)', async () => {
    const moved = 'cl.moved';
    expect((await call(broker.url, 'POST', '/event-types', businessEventType(moved))).status).toBe(201);
    const storage = await call(broker.url, 'POST', '/storages', { id: 'cl-other', storage_type: 'redis', redis_configuration: { cluster_nodes: [...cluster.nodes], key_prefix: 'cl-other:' } });
    expect(storage.status, storage.text).toBe(201);
    const timeline = await call(broker.url, 'POST', `/event-types/${moved}/timelines`, { storage_id: 'cl-other' });
    expect(timeline.status, timeline.text).toBe(201);
    const master = await masterOfSlot(Number(await admin().cluster('KEYSLOT', createKeys('cl-other:').partitionMeta(moved, 2, '0'))));
    cluster.signal(replicaOf(master), 'SIGSTOP');
    let answer;
    try {
      answer = await call(broker.url, 'POST', `/event-types/${moved}/events`, [orderEvent('M1')]);
    } finally {
      cluster.signal(replicaOf(master), 'SIGCONT');
    }
    expect(answer.status, answer.text).toBe(207);
    expect((answer.json as Item[])[0]).toMatchObject({ publishing_status: 'failed', detail: SHORTFALL });
    await replicaCaughtUp(master);
    const again = await call(broker.url, 'POST', `/event-types/${moved}/events`, [orderEvent('M2')]);
    expect(again.status, again.text).toBe(200);
  });
});
