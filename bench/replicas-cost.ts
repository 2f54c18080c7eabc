/**
 * One-off comparison (not a runner scenario, nothing recorded in results.jsonl): what
 * `publish.minReplicas` 1 costs on a Redis Cluster against 0. A 3-master cluster with one replica per
 * master (nothing persisted), one broker node at a time on it (default configuration otherwise), the
 * `publish-batches` load of 1000-event batches (~520-byte order events, 8 partitions, so every batch
 * writes to every master): autocannon, 4 distinct bodies, 2 s warm-up, then 10 s measured with 4
 * connections (throughput) and 10 s with 1 connection (one batch at a time: the latency WAIT adds),
 * alternating minReplicas 0 and 1 for `ROUNDS` rounds, each with a fresh node and key prefix. Each
 * line ends with the machine's 1-minute load average: on a shared machine, compare lines only when it
 * is near the core count.
 *
 * Then the storage side alone, without HTTP, validation or workers (`PART=storage` runs only this):
 * `BATCHES` appends of the same pre-serialized 1000 events spread over 8 partitions, one after the
 * other from this process, through `PartitionStore.append` (minReplicas 0) and through the
 * `ClusterReplicatedAppender` (minReplicas 1), alternating per round; the per-append times give p50/p99.
 *
 *   npm run build && node dist/bench/replicas-cost.js            # ROUNDS=2 by default; PART=http|storage|both
 */
import { readFileSync } from 'node:fs';
import { startBroker, startRedisCluster, type RedisClusterProcesses } from '../scripts/local-processes.js';
import { loadConfig } from '../src/config/load-config.js';
import { createLogger } from '../src/observability/logger.js';
import { createKeys } from '../src/storage/keys.js';
import { PartitionStore, type PartitionAppend } from '../src/storage/partition-store.js';
import { connectCluster } from '../src/storage/redis/redis-connection.js';
import { ClusterReplicatedAppender } from '../src/storage/redis/cluster-replicated-append.js';
import { Scripts } from '../src/storage/scripts.js';
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { createEventType, loadRequest, runLoad } from './harness.js';

const EVENT_TYPE = 'bench.order';
const PATH = `/event-types/${EVENT_TYPE}/events`;
const PARTITIONS = 8;
const BATCH = 1000;
const CONNECTIONS = 4;
const ROUNDS = Number(process.env.ROUNDS ?? 2);
const PART = process.env.PART ?? 'both';
const BATCHES = Number(process.env.BATCHES ?? 300);

const load = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ')[0] ?? '?';

function percentileMs(times: readonly number[], p: number): number {
  const sorted = [...times].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

/** The storage side alone: sequential appends of 1000 events over 8 partitions, minReplicas 0 vs 1. */
async function storageOnly(cluster: RedisClusterProcesses): Promise<void> {
  const config = loadConfig({ BROKER_REDIS_CLUSTER_NODES: JSON.stringify(cluster.nodes), BROKER_LOG_LEVEL: 'warn' });
  const redis = await connectCluster(cluster.nodes, config.redis, createLogger(config));
  const keys = createKeys('rcs:');
  const store = new PartitionStore(redis, new Scripts(redis), keys);
  const replicated = await ClusterReplicatedAppender.open(redis, keys, 1, config.publish.replicaTimeoutMs);
  const random = prng(11);
  const texts = Array.from({ length: BATCH }, () => JSON.stringify(orderEvent(random)));
  const writes: PartitionAppend[] = Array.from({ length: PARTITIONS }, (_, p) => {
    const mine = texts.filter((_, i) => i % PARTITIONS === p);
    return { partition: String(p), count: mine.length, data: Buffer.from(mine.join('\n')) };
  });
  try {
    // An append to a partition never opened is refused (PARTITION_MISSING), as the registry opens them.
    const timeline = { order: 1, id: 'replicas-cost' };
    await Promise.all(writes.map((w) => store.open('rcs', timeline, w.partition, 0)));
    for (let round = 1; round <= ROUNDS; round++) {
      for (const minReplicas of [0, 1]) {
        const times: number[] = [];
        const started = performance.now();
        for (let i = 0; i < BATCHES; i++) {
          const t = performance.now();
          const results = minReplicas === 0 ? await store.append('rcs', timeline, writes) : await replicated.append('rcs', timeline, writes);
          times.push(performance.now() - t);
          const failed = results.find((r) => !r.ok);
          if (failed) throw new Error(`append failed: ${JSON.stringify(failed)}`);
        }
        const seconds = (performance.now() - started) / 1000;
        process.stdout.write(
          `storage only, round ${round} minReplicas ${minReplicas}: ${BATCHES} appends of ${BATCH} events, ${Math.round((BATCHES * BATCH) / seconds)} events/s, ` +
            `p50 ${percentileMs(times, 50).toFixed(2)} ms, p99 ${percentileMs(times, 99).toFixed(2)} ms, load ${load()}\n`,
        );
      }
    }
  } finally {
    replicated.close();
    redis.disconnect();
  }
}

async function main(): Promise<void> {
  const random = prng(7);
  const requests = Array.from({ length: 4 }, () => loadRequest(PATH, Array.from({ length: BATCH }, () => orderEvent(random))));
  const cluster = await startRedisCluster({ masters: 3, replicasPerMaster: 1 });
  try {
    if (PART !== 'http') await storageOnly(cluster);
    if (PART === 'storage') return;
    for (let round = 1; round <= ROUNDS; round++) {
      for (const minReplicas of [0, 1]) {
        const broker = await startBroker({
          BROKER_REDIS_CLUSTER_NODES: JSON.stringify(cluster.nodes),
          BROKER_REDIS_KEY_PREFIX: `rc${round}m${minReplicas}:`,
          BROKER_PUBLISH_MIN_REPLICAS: String(minReplicas),
          BROKER_LOG_LEVEL: 'warn',
        });
        try {
          await createEventType(broker.url, businessEventType(EVENT_TYPE, ORDER_SCHEMA, PARTITIONS));
          await runLoad({ url: broker.url, requests, connections: CONNECTIONS, durationSeconds: 2 });
          for (const connections of [CONNECTIONS, 1]) {
            const r = await runLoad({ url: broker.url, requests, connections, durationSeconds: 10 });
            process.stdout.write(
              `round ${round} minReplicas ${minReplicas} connections ${connections}: ${Math.round(r.eventsPerSecond)} events/s, ${r.requestsPerSecond.toFixed(1)} batches/s, ` +
                `p50 ${r.latencyMs.p50.toFixed(1)} ms, p99 ${r.latencyMs.p99.toFixed(1)} ms, non-2xx ${r.non2xx}${r.firstFailure ? ` (first: ${r.firstFailure.slice(0, 200)})` : ''}, errors ${r.errors}, load ${load()}\n`,
            );
          }
        } finally {
          await broker.stop('SIGTERM');
        }
      }
    }
  } finally {
    await cluster.stop();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
