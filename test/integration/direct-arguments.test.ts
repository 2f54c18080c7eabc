import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startRedis, type RedisProcess } from '../../scripts/local-processes.js';
import { loadConfig } from '../../src/config/load-config.js';
import { createLogger } from '../../src/observability/logger.js';
import { DIRECT_ARGUMENT_MIN_BYTES, DirectArgumentsCommand } from '../../src/storage/direct-arguments.js';
import { createKeys } from '../../src/storage/keys.js';
import { PartitionStore, type PartitionAppend } from '../../src/storage/partition-store.js';
import { connectRedis } from '../../src/storage/redis/redis-connection.js';
import { Scripts } from '../../src/storage/scripts.js';
import { clusterRun, uniquePrefix } from '../support/broker.js';

/**
 * Appends whose payloads go to the socket as they are (`DirectArgumentsCommand`; docs/decisions/0014-direct-script-arguments.md), on the
 * node's own kind of standalone connection (`connectRedis`: no auto-pipelining, writes corked per
 * event-loop turn), against a Redis of its own: a fresh Redis holds no script, so the first calls also
 * take the `NOSCRIPT` → `EVAL` path. Standalone only (a cluster client auto-pipelines and keeps
 * ioredis's own serialization), so it runs in the `integration` project.
 */
/** The timeline the appends go to (order 0 names the keys; the id is recorded when its partitions are opened). */
const TIMELINE = { order: 0, id: 'direct-arguments' };

describe.skipIf(clusterRun())('script calls with large arguments on a standalone connection', () => {
  let redisProcess: RedisProcess;
  let redis: Redis;
  let store: PartitionStore;
  const keys = createKeys(uniquePrefix());

  beforeAll(async () => {
    redisProcess = await startRedis();
    redis = await connectRedis(redisProcess.url, loadConfig({}).redis, createLogger({ logLevel: 'silent' }), 'test');
    store = new PartitionStore(redis, new Scripts(redis), keys);
  });
  afterAll(async () => {
    redis.disconnect();
    await redisProcess.stop();
  });

  /** `count` distinct events with multi-byte text, joined by `\n`. */
  function payload(partition: number, round: number, count: number): Buffer {
    return Buffer.from(Array.from({ length: count }, (_, i) => JSON.stringify({ partition, round, i, text: 'ünïcode ✓ \r\n in a string' })).join('\n'));
  }

  it('writes each partition exactly as sent, concurrently and in order', async () => {
    const written = vi.spyOn(DirectArgumentsCommand.prototype, 'toWritable');
    const sizes = [400, 1, 1000, 60]; // 1 event: below DIRECT_ARGUMENT_MIN_BYTES, ioredis's own serialization
    const rounds = 3;
    const sent: Buffer[][] = sizes.map(() => []);
    await Promise.all(sizes.map((_, partition) => store.open('orders', TIMELINE, String(partition), 0)));
    for (let round = 0; round < rounds; round++) {
      const appends: PartitionAppend[] = sizes.map((count, partition) => {
        const data = payload(partition, round, count);
        (sent[partition] as Buffer[]).push(data);
        return { partition: String(partition), count, data };
      });
      // Two batches in the same event-loop turn: their commands share the corked socket.
      const [first, second] = await Promise.all([store.append('orders', TIMELINE, appends), store.append('orders', TIMELINE, appends.slice(0, 2))]);
      expect([...(first ?? []), ...(second ?? [])].every((w) => w.ok)).toBe(true);
      (sent[0] as Buffer[]).push(appends[0]?.data as Buffer);
      (sent[1] as Buffer[]).push(appends[1]?.data as Buffer);
    }
    // The payloads went out in pieces: what follows the last one (its line end, then the timeline id) is what the command returned.
    const rest = `\r\n$${TIMELINE.id.length}\r\n${TIMELINE.id}\r\n`;
    expect(written.mock.results.filter((r) => r.value === rest).length).toBeGreaterThanOrEqual(rounds * 2);
    expect(sizes.some((count, p) => payload(p, 0, count).length < DIRECT_ARGUMENT_MIN_BYTES)).toBe(true);
    written.mockRestore();

    for (const [partition, datas] of sent.entries()) {
      const slice = await store.read('orders', 0, String(partition), -1, 100);
      const stored = Buffer.concat(slice.segments.flatMap((s, i) => (i === 0 ? [s.data] : [Buffer.from('\n'), s.data])));
      expect(stored.equals(Buffer.concat(datas.flatMap((d, i) => (i === 0 ? [d] : [Buffer.from('\n'), d]))))).toBe(true);
    }
  });

  it('sends the script text when Redis does not hold the script (NOSCRIPT: a restarted or flushed Redis)', async () => {
    await redis.script('FLUSH');
    await store.open('flushed', TIMELINE, '0', 0);
    const data = payload(0, 9, 500);
    const [write] = await store.append('flushed', TIMELINE, [{ partition: '0', count: 500, data }]);
    expect(write).toEqual({ ok: true, firstOffset: 0 });
    const stats = await redis.info('commandstats');
    // The EVALSHA failed, the EVAL of the same call wrote the events.
    expect(Number(/cmdstat_evalsha:.*failed_calls=(\d+)/.exec(stats)?.[1])).toBeGreaterThanOrEqual(1);
    expect(stats).toMatch(/cmdstat_eval:calls=[1-9]/);
    const slice = await store.read('flushed', 0, '0', -1, 10);
    expect(slice.segments.map((s) => s.data.toString())).toEqual([data.toString()]);
  });
});
