/**
 * `npm run cluster`: the docker-compose.yml topology with plain processes on this machine, for trying
 * scale-out locally without Docker. Starts Redis — standalone on a free port with AOF on, its data in
 * `./data/cluster/redis` (kept between runs), or with `--redis-cluster` a 3-master Redis Cluster
 * (nothing persisted) — then three broker nodes on ports 8081–8083 and a round-robin TCP load balancer
 * on 8080 (scripts/tcp-balancer.ts, a development stand-in for HAProxy). Prints the URLs and the
 * nodes' log lines; SIGINT (Ctrl+C) or SIGTERM stops everything gracefully: the balancer stops
 * accepting, the nodes drain (SIGTERM), then Redis flushes its AOF and exits. A second signal kills
 * what is left — unless it comes within a second of the first: one Ctrl+C on `npm run cluster` arrives
 * twice (the terminal sends SIGINT to the whole foreground process group, npm included, and npm forwards
 * its copy to this process), and the nodes and Redis run in process groups of their own, so only this
 * process sees the terminal's signal and stops them in order.
 *
 * Options: `--redis-cluster`, `--nodes <n>` (default 3), `--port <lb port>` (default 8080; the nodes
 * take the next ports), `--data-dir <dir>` (where the standalone Redis keeps its data; default
 * `data/cluster/redis` in the checkout). Other `BROKER_*` variables in the environment reach every
 * node (e.g. `BROKER_LOG_LEVEL=debug npm run cluster`).
 */
import net from 'node:net';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { embeddedMaxmemoryBytes } from '../src/storage/redis/embedded-redis.js';
import { repoRoot, startBroker, startRedis, startRedisCluster, type BrokerProcess } from './local-processes.js';
import { TcpBalancer } from './tcp-balancer.js';

interface Storage {
  /** What the nodes are told: `BROKER_REDIS_URL` or `BROKER_REDIS_CLUSTER_NODES`. */
  readonly env: Record<string, string>;
  readonly describe: string;
  stop(): Promise<void>;
}

/** True when nothing listens on `port` of the loopback address and it can be bound. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Signals this soon after the first are the same Ctrl+C (the terminal's and npm's copy), not a second one. */
const SAME_SIGNAL_MS = 1000;

async function startStorage(cluster: boolean, dataDir: string): Promise<Storage> {
  if (cluster) {
    const redis = await startRedisCluster({ masters: 3, detached: true });
    return {
      env: { BROKER_REDIS_CLUSTER_NODES: JSON.stringify(redis.nodes) },
      describe: `Redis Cluster, 3 masters: ${redis.nodes.join(', ')} (nothing persisted)`,
      stop: () => redis.stop(),
    };
  }
  // A maxmemory as the embedded Redis's (half the machine's memory): never unlimited (docs/operations.md "Memory and retention").
  const maxmemory = embeddedMaxmemoryBytes({ maxmemoryBytes: 0, maxmemoryPercent: 50 });
  const redis = await startRedis({ appendonly: true, dataDir, detached: true, extraArgs: ['--appendfsync', 'everysec', '--maxmemory', String(maxmemory)] });
  return { env: { BROKER_REDIS_URL: redis.url }, describe: `${redis.url} (AOF on, maxmemory ${maxmemory} bytes, data in ${path.relative(process.cwd(), dataDir) || '.'})`, stop: () => redis.stop() };
}

/** Forwards a node's log lines to the terminal, each prefixed with its name. */
function echoLogs(name: string, broker: BrokerProcess): void {
  for (const line of broker.output().split('\n')) if (line) process.stdout.write(`[${name}] ${line}\n`);
  for (const stream of [broker.process.stdout, broker.process.stderr]) {
    let rest = '';
    stream?.on('data', (chunk: Buffer) => {
      const lines = (rest + chunk.toString()).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) if (line) process.stdout.write(`[${name}] ${line}\n`);
    });
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'redis-cluster': { type: 'boolean', default: false },
      nodes: { type: 'string', default: '3' },
      port: { type: 'string', default: '8080' },
      'data-dir': { type: 'string', default: path.join(repoRoot, 'data', 'cluster', 'redis') },
    },
  });
  const nodeCount = Number(values.nodes);
  const lbPort = Number(values.port);
  if (!Number.isInteger(nodeCount) || nodeCount < 1 || !Number.isInteger(lbPort) || lbPort < 1 || lbPort + nodeCount > 65535) {
    throw new Error('--nodes must be a positive integer and --port a port with room for the nodes after it');
  }
  const ports = [lbPort, ...Array.from({ length: nodeCount }, (_, i) => lbPort + 1 + i)];
  const taken: number[] = [];
  for (const port of ports) if (!(await portFree(port))) taken.push(port);
  if (taken.length > 0) throw new Error(`port ${taken.join(', ')} is in use (another npm start or npm run cluster?); choose others with --port`);

  const brokers: BrokerProcess[] = [];
  let storage: Storage | undefined;
  let balancer: TcpBalancer | undefined;
  let stopping = false;
  let startup: Promise<unknown> = Promise.resolve();

  const stop = async (signal: string): Promise<boolean> => {
    process.stdout.write(`\n${signal}: stopping the cluster (Ctrl+C again, a second later, to kill)\n`);
    await startup.catch(() => undefined); // a signal during startup stops what it started
    await balancer?.stopAccepting();
    const codes = await Promise.all(brokers.map((b) => b.stop('SIGTERM')));
    balancer?.destroyConnections();
    await storage?.stop();
    process.stdout.write(`nodes exited with ${codes.map((c) => String(c)).join(', ')}; Redis stopped\n`);
    return codes.every((c) => c === 0);
  };
  const kill = () => {
    for (const b of brokers) b.process.kill('SIGKILL');
    void storage?.stop();
    process.exit(1);
  };
  let firstSignalAt = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      if (Date.now() - firstSignalAt < SAME_SIGNAL_MS) return; // npm's forwarded copy of the same Ctrl+C
      process.stdout.write(`\n${signal} again: killing the cluster\n`);
      return kill();
    }
    stopping = true;
    firstSignalAt = Date.now();
    stop(signal).then(
      (clean) => process.exit(clean ? 0 : 1),
      (err: unknown) => {
        process.stderr.write(`cluster: stopping failed: ${err instanceof Error ? err.message : String(err)}\n`);
        kill();
      },
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    startup = (async () => {
      storage = await startStorage(values['redis-cluster'], path.resolve(values['data-dir']));
      const env = storage.env;
      const nodePorts = ports.slice(1);
      // One after the other, so a node that fails to start leaves the started ones known for cleanup.
      for (const [i, port] of nodePorts.entries()) {
        const broker = await startBroker(env, { port, detached: true });
        brokers.push(broker);
        echoLogs(`broker-${i + 1}`, broker);
      }
      balancer = new TcpBalancer({ backends: nodePorts.map((port) => ({ host: '127.0.0.1', port })) });
      await balancer.listen(lbPort);
    })();
    await startup;
  } catch (err) {
    await Promise.all(brokers.map((b) => b.stop('SIGKILL')));
    await balancer?.close();
    await storage?.stop();
    throw err;
  }
  if (stopping) return;
  for (const [i, b] of brokers.entries()) {
    b.process.once('exit', (code, signal) => {
      if (!stopping) process.stderr.write(`[broker-${i + 1}] exited unexpectedly (${signal ?? `code ${String(code)}`}); the balancer skips it\n`);
    });
  }
  const lines = [
    '',
    'Local cluster up:',
    `  load balancer  http://127.0.0.1:${lbPort}   (round robin over the nodes, per connection)`,
    ...brokers.map((b, i) => `  broker-${i + 1}       ${b.url}`),
    `  redis          ${storage?.describe ?? ''}`,
    '',
    `Try: curl -i http://127.0.0.1:${lbPort}/health`,
    'Ctrl+C stops everything.',
    '',
  ];
  process.stdout.write(lines.join('\n') + '\n');
}

main().catch((err: unknown) => {
  process.stderr.write(`cluster: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
