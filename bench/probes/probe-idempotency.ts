// Probe (for the idempotent publishing decision, docs/decisions/0024-idempotency-in-the-append-script.md): the
// Redis CPU one event costs in the append script with and without idempotency. On a fresh redis-server of
// its own, it calls each script CALLS times with EVENTS events of ~500 bytes and fresh eids, in
// alternating rounds, and reads Redis's own CPU (INFO cpu, user + system) before and after each round.
// Extra script files (e.g. an earlier version taken with `git show <commit>:src/storage/lua/<file>`) can
// be measured beside the current ones: named `<name>-<keys>.lua`, taking publishBatch's four KEYS and then
// one or two eid index keys, and publishIdempotent's ARGV (the eids as one argument of 16-byte keys).
//
//   npm run build && node dist/bench/probes/probe-idempotency.js [rounds, default 3] [extra-script.lua ...]
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Redis } from 'ioredis';
import { repoRoot, startRedis } from '../../scripts/local-processes.js';
import { resolveIncludes } from '../../src/storage/scripts.js';
import { EID_KEY_BYTES, writeEidKey } from '../../src/domain/batch/idempotency.js';

const EVENTS = 250;
const CALLS = 400;
const LUA = path.join(repoRoot, 'src', 'storage', 'lua');

/** A stored event text of about 500 bytes, as the broker writes them. */
const TEXT = JSON.stringify({
  metadata: { eid: randomUUID(), occurred_at: '2026-01-01T00:00:00Z', received_at: '2026-01-01T00:00:00.000Z', event_type: 'probe', partition: '0', version: '1.0.0', flow_id: 'probe' },
  order_number: 'ORD-0000000000',
  customer_id: 'cust-1',
  status: 'paid',
  amount: 12.5,
  currency: 'EUR',
  items: 3,
  note: 'lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore et dolore magna aliqua',
});

/** One script to measure: its text and whether it takes the idempotency arguments. */
interface Candidate {
  readonly label: string;
  readonly lua: string;
  /** KEYS it takes (from its file name `<name>-<keys>.lua`): 4, or 4 + its eid index keys. */
  readonly keys: number;
}

/** A script's text with its includes resolved from the `includes` folder beside it (the project's for its own scripts). */
function load(file: string): string {
  const beside = path.join(path.dirname(file), 'includes');
  return resolveIncludes(readFileSync(file, 'utf8'), existsSync(beside) ? beside : path.join(LUA, 'includes'), path.basename(file));
}

/** Redis's CPU seconds so far (user + system), from INFO cpu. */
async function redisCpu(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const read = (field: string): number => Number(new RegExp(`${field}:([0-9.]+)`).exec(info)?.[1] ?? 0);
  return read('used_cpu_user') + read('used_cpu_sys');
}

/** Redis's memory in use (INFO memory `used_memory`), bytes. */
async function redisMemory(redis: Redis): Promise<number> {
  return Number(/used_memory:([0-9]+)/.exec(await redis.info('memory'))?.[1] ?? 0);
}

/** One round of one script: µs of Redis CPU and bytes of Redis memory per event. */
interface Figures {
  readonly cpuUs: number;
  readonly bytes: number;
}

/** Calls `candidate` CALLS times on fresh keys. */
async function measure(redis: Redis, candidate: Candidate, round: number): Promise<Figures> {
  const tag = `{probe:${candidate.label}:${round}}`;
  const keys = [`${tag}:meta`, `${tag}:log`, `${tag}:time`, `${tag}:notices`];
  await redis.hset(keys[0] as string, 'next', 0, 'oldest', 0);
  const data = Array.from({ length: EVENTS }, () => TEXT).join('\n');
  const sha = (await redis.script('LOAD', candidate.lua)) as string;
  const before = await redisCpu(redis);
  const memoryBefore = await redisMemory(redis);
  for (let c = 0; c < CALLS; c++) {
    if (candidate.keys > 4) {
      const eidKeys = Buffer.alloc(EVENTS * EID_KEY_BYTES);
      for (let e = 0; e < EVENTS; e++) writeEidKey(randomUUID(), eidKeys, e * EID_KEY_BYTES);
      const indexKeys = [`${tag}:eid-keys-a`, `${tag}:eid-keys-b`].slice(0, candidate.keys - 4);
      await redis.evalsha(sha, candidate.keys, ...keys, ...indexKeys, EVENTS, data, '', 3600, 1_000_000, eidKeys);
    } else {
      await redis.evalsha(sha, 4, ...keys, EVENTS, data, '');
    }
  }
  const cpuUs = (((await redisCpu(redis)) - before) * 1e6) / (CALLS * EVENTS);
  const bytes = ((await redisMemory(redis)) - memoryBefore) / (CALLS * EVENTS);
  await redis.flushall();
  return { cpuUs, bytes };
}

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 3);
  const candidates: Candidate[] = [
    { label: 'publishBatch-4.lua', lua: load(path.join(LUA, 'publishBatch-4.lua')), keys: 4 },
    { label: 'publishIdempotent-6.lua', lua: load(path.join(LUA, 'publishIdempotent-6.lua')), keys: 6 },
    ...process.argv.slice(3).map((file) => ({ label: path.basename(file), lua: load(file), keys: Number(/-([0-9]+)\.lua$/.exec(file)?.[1] ?? 6) })),
  ];
  const server = await startRedis();
  const redis = new Redis(server.url);
  try {
    const results = new Map<string, Figures[]>(candidates.map((c) => [c.label, []]));
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? candidates : [...candidates].reverse();
      for (const candidate of order) results.get(candidate.label)?.push(await measure(redis, candidate, round));
    }
    process.stdout.write(`${EVENTS} events per call, ${CALLS} calls per round, ${rounds} rounds (alternating order): µs of Redis CPU per event; bytes of Redis memory per event\n`);
    for (const [label, values] of results) {
      process.stdout.write(`  ${label.padEnd(40)} ${values.map((v) => v.cpuUs.toFixed(2)).join(' / ')} µs; ${values.map((v) => Math.round(v.bytes)).join(' / ')} bytes\n`);
    }
  } finally {
    redis.disconnect();
    await server.stop();
  }
}

await main();
