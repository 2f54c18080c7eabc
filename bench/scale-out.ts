/**
 * Scenario `scale-out`: publish throughput of 1000-event batches (~500-byte order events,
 * 8 partitions) with 1, 2 and 3 broker nodes against one Redis, and with 3 nodes against a 3-master
 * Redis Cluster, all in one run on this machine. The producers (autocannon, 6 connections in all,
 * split evenly over the nodes) hit the nodes directly, as a load balancer would spread them. Every
 * process — producers, broker nodes, their worker threads and Redis — shares the machine's cores, so
 * on a 2-core machine more nodes add contention rather than capacity; the figures show what the
 * topology costs, not what it gains on separate machines.
 */
import { startBroker, startRedis, startRedisCluster, type BrokerProcess } from '../scripts/local-processes.js';
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { createEventType, loadRequest, reportFailures, round, runLoad, type LoadResult, type Recorder, type Scenario } from './harness.js';
import { DURATION_SECONDS, WARMUP_SECONDS } from './publish-batches.js';

const EVENT_TYPE = 'bench.order';
const PATH = `/event-types/${EVENT_TYPE}/events`;
const PARTITIONS = 8;
const BATCH = 1000;
const BODIES = 4;
/** Producer connections in all, divisible by 1, 2 and 3. */
const CONNECTIONS = 6;

interface Topology {
  readonly label: string;
  readonly nodes: number;
  readonly cluster: boolean;
}

const TOPOLOGIES: readonly Topology[] = [
  { label: '1 node, one Redis', nodes: 1, cluster: false },
  { label: '2 nodes, one Redis', nodes: 2, cluster: false },
  { label: '3 nodes, one Redis', nodes: 3, cluster: false },
  { label: '3 nodes, 3-master Redis Cluster', nodes: 3, cluster: true },
];

/** Starts the Redis side and `nodes` broker nodes on it. @returns the node URLs and a stop function */
async function startTopology(topology: Topology): Promise<{ urls: string[]; stop: () => Promise<void> }> {
  let redis: { stop(): Promise<void> };
  let env: Record<string, string>;
  if (topology.cluster) {
    const cluster = await startRedisCluster({ masters: 3 });
    redis = cluster;
    env = { BROKER_REDIS_CLUSTER_NODES: JSON.stringify(cluster.nodes) };
  } else {
    const standalone = await startRedis();
    redis = standalone;
    env = { BROKER_REDIS_URL: standalone.url };
  }
  const brokers: BrokerProcess[] = [];
  try {
    for (let i = 0; i < topology.nodes; i++) brokers.push(await startBroker({ ...env, BROKER_LOG_LEVEL: 'warn' }));
  } catch (err) {
    await Promise.all(brokers.map((b) => b.stop('SIGTERM')));
    await redis.stop();
    throw err;
  }
  return {
    urls: brokers.map((b) => b.url),
    stop: async () => {
      await Promise.all(brokers.map((b) => b.stop('SIGTERM')));
      await redis.stop();
    },
  };
}

/** Sums the load runs of all nodes (they ran at the same time). */
function combine(results: readonly LoadResult[]): { eventsPerSecond: number; p50: number; p99: number; failures: number } {
  return {
    eventsPerSecond: results.reduce((sum, r) => sum + r.eventsPerSecond, 0),
    p50: Math.max(...results.map((r) => r.latencyMs.p50)),
    p99: Math.max(...results.map((r) => r.latencyMs.p99)),
    failures: results.reduce((sum, r) => sum + r.non2xx + r.errors, 0),
  };
}

async function run(recorder: Recorder): Promise<void> {
  const random = prng(5);
  const requests = Array.from({ length: BODIES }, () => loadRequest(PATH, Array.from({ length: BATCH }, () => orderEvent(random))));
  let single: number | undefined;
  for (const topology of TOPOLOGIES) {
    const { urls, stop } = await startTopology(topology);
    try {
      await createEventType(urls[0] as string, businessEventType(EVENT_TYPE, ORDER_SCHEMA, PARTITIONS));
      const perNode = CONNECTIONS / urls.length;
      const load = (seconds: number) => Promise.all(urls.map((url) => runLoad({ url, requests, connections: perNode, durationSeconds: seconds })));
      await load(WARMUP_SECONDS);
      const results = await load(DURATION_SECONDS);
      results.forEach((r, i) => reportFailures(recorder, `${topology.label}, node ${i + 1}`, r));
      const total = combine(results);
      recorder.log(`${topology.label}: ${Math.round(total.eventsPerSecond)} events/s, p50 ${total.p50.toFixed(1)} ms, p99 ${total.p99.toFixed(1)} ms (slowest node)`);
      recorder.add(`${topology.label}: events/s`, Math.round(total.eventsPerSecond), 'events/s');
      recorder.add(`${topology.label}: latency p99 (slowest node)`, round(total.p99, 1), 'ms');
      recorder.add(`${topology.label}: non-2xx answers`, total.failures, 'answers', { op: '<=', value: 0 });
      if (topology.nodes === 1) single = total.eventsPerSecond;
      else if (single !== undefined) recorder.add(`${topology.label}: relative to 1 node`, round(total.eventsPerSecond / single, 2), '×');
    } finally {
      await stop();
    }
  }
}

export const scaleOut: Scenario = {
  name: 'scale-out',
  title: `publish throughput, ${BATCH}-event batches, 1/2/3 nodes on one Redis and 3 nodes on a 3-master cluster`,
  run,
};
