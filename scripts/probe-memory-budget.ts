// Probe: what a producer publishing at full speed does to a Redis with a small maxmemory
// (docs/decisions/0030-redis-memory-budget.md). Starts its own redis-server (AOF on, `--maxmemory`,
// noeviction) on a free port and a broker node process on it, creates an event type of 4 partitions,
// and runs autocannon with the load-testing guide's body (1,000 events of ~520 bytes) while sampling
// Redis's `used_memory` every 100 ms. Prints the answers by status, one refused answer as the producer
// sees it, the highest `used_memory` against `maxmemory`, and the Redis bytes per event stored.
//
//   npm run build && node dist/scripts/probe-memory-budget.js [--maxmemory-mb 256] [--seconds 20] [--connections 8] [--root <checkout>]
//
// `--root` runs the node built in another checkout (its `dist/src/main.js`), e.g. an export of an
// earlier commit, for a before/after comparison on the same machine in the same session. The node gets this
// process's environment: the guide's body compresses almost away when stored (docs/decisions/0032-events-stored-compressed.md),
// so set BROKER_PUBLISH_STORED_COMPRESSION=false to see Redis fill within the run.
import { spawn } from 'node:child_process';
import path from 'node:path';
import autocannon from 'autocannon';
import { Redis } from 'ioredis';
import { freePort, repoRoot, startRedis } from './local-processes.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function option(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback;
}

const maxmemoryMb = Number(option('maxmemory-mb', '256'));
const seconds = Number(option('seconds', '20'));
const connections = Number(option('connections', '8'));
const root = path.resolve(option('root', repoRoot));
const MIB = 1024 * 1024;

async function main(): Promise<void> {
  const redis = await startRedis({ appendonly: true, extraArgs: ['--maxmemory', `${maxmemoryMb}mb`] });
  const client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  const port = await freePort();
  let output = '';
  const node = spawn(process.execPath, [path.join(root, 'dist', 'src', 'main.js')], {
    cwd: root,
    env: { ...process.env, BROKER_REDIS_URL: redis.url, BROKER_PORT: String(port), BROKER_HOST: '127.0.0.1', BROKER_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  node.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  node.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const base = `http://127.0.0.1:${port}`;
  const call = async (method: string, route: string, body?: unknown): Promise<{ status: number; headers: Headers; text: string }> => {
    const res = await fetch(base + route, { method, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }) });
    return { status: res.status, headers: res.headers, text: await res.text() };
  };
  const used = async (): Promise<number> => Number(/used_memory:(\d+)/.exec(await client.info('memory'))?.[1]);
  try {
    for (let i = 0; ; i++) {
      if ((await call('GET', '/health').catch(() => ({ status: 0 }))).status === 200) break;
      if (i > 400) throw new Error(`the node did not start:\n${output}`);
      await sleep(50);
    }
    const schema = JSON.stringify({ type: 'object', properties: { order_number: { type: 'string' } } });
    const created = await call('POST', '/event-types', {
      name: 'load.orders', owning_application: 'load-test', category: 'business', enrichment_strategies: ['metadata_enrichment'], partition_strategy: 'random',
      default_statistic: { messages_per_minute: 1000, message_size: 500, read_parallelism: 4, write_parallelism: 4 },
      schema: { type: 'json_schema', schema },
    });
    if (created.status !== 201) throw new Error(`event type not created: ${created.status} ${created.text}`);
    const pad = 'x'.repeat(380);
    const body = JSON.stringify(Array.from({ length: 1000 }, (_, i) => ({ metadata: { eid: crypto.randomUUID(), occurred_at: new Date().toISOString() }, order_number: `order-${i}`, note: pad })));
    const maxmemory = maxmemoryMb * MIB;
    const before = await used();
    let peak = before;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, await used());
        await sleep(100);
      }
    })();
    const result = await autocannon({ url: `${base}/event-types/load.orders/events`, method: 'POST', headers: { 'content-type': 'application/json' }, body, connections, duration: seconds });
    sampling = false;
    await sampler;
    const after = await used();
    const partitions = JSON.parse((await call('GET', '/event-types/load.orders/partitions')).text) as { newest_available_offset: string }[];
    const stored = partitions.reduce((sum, p) => sum + Number(p.newest_available_offset.split('-').pop()) + 1, 0);
    // What a producer sees now (past a 503 of the admission bounds, which the run may leave behind for a moment).
    let sample = await call('POST', '/event-types/load.orders/events', body);
    for (let i = 0; i < 40 && sample.status === 503; i++) {
      await sleep(250);
      sample = await call('POST', '/event-types/load.orders/events', body);
    }
    const statuses = Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([status, stats]) => [status, stats.count ?? 0]));
    console.log(`node: ${root}`);
    console.log(`redis maxmemory ${maxmemoryMb} MiB (${maxmemory} bytes), noeviction, AOF everysec; autocannon -c ${connections} -d ${seconds}, 1,000-event batches of ${body.length} bytes`);
    console.log(`answers by status: ${JSON.stringify(statuses)} (${result.requests.total} requests, ${result.non2xx} non-2xx)`);
    console.log(`events stored: ${stored} (${(stored / seconds).toFixed(0)} events/s over the run)`);
    console.log(`used_memory: ${before} before, peak ${peak} (${((peak / maxmemory) * 100).toFixed(1)} % of maxmemory), ${after} after`);
    console.log(`Redis bytes per stored event: ${stored > 0 ? ((after - before) / stored).toFixed(0) : 'n/a'} (events sent as ${(body.length / 1000).toFixed(0)} bytes each)`);
    const retryAfter = sample.headers.get('retry-after');
    console.log(`one more publish after the run: ${sample.status}${retryAfter === null ? '' : ` Retry-After: ${retryAfter}`}`);
    console.log(sample.status === 207 ? `  first item: ${JSON.stringify((JSON.parse(sample.text) as unknown[])[0])}` : `  ${sample.text.slice(0, 600)}`);
    const health = await call('GET', '/health');
    const readiness = await call('GET', '/health/storage');
    console.log(`/health ${health.status}; /health/storage ${readiness.status} ${readiness.text.trim()}`);
  } finally {
    node.kill('SIGTERM');
    await new Promise((resolve) => node.once('exit', resolve));
    client.disconnect();
    await redis.stop();
  }
}

await main();
