/**
 * Which small batches the main thread validates itself: a cheap schema's validator is
 * instantiated there from standalone code a worker makes. A worker that did not make it in time (busy
 * threads) is asked again after `STANDALONE_RETRY_AFTER_MS`; a schema whose code cannot be made is never
 * asked for again. The pool, the event type cache and Redis are stand-ins: what is under test is the
 * publisher's bookkeeping, with real validator code.
 */
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { buildPublishSpec, type EventTypeCache } from '../../src/services/event-types/event-type-cache.js';
import { Publisher } from '../../src/services/publishing/publisher.js';
import { STANDALONE_RETRY_AFTER_MS } from '../../src/services/validator-preparation.js';
import type { WorkerPool } from '../../src/services/worker-pool.js';
import type { PartitionLogs } from '../../src/storage/partition-logs.js';
import type { RedisClient } from '../../src/storage/redis/redis-connection.js';
import { standaloneValidatorCode } from '../../src/domain/schema/schema-compiler.js';
import type { JsonObject } from '../../src/domain/schema/json-schema-walk.js';
import type { PublishResult, StandaloneResult } from '../../workers/publish-protocol.js';
import type { BrokerConfig } from '../../src/config/config-schema.js';
import { eventTypeRecord } from '../support/fixtures.js';

const record = eventTypeRecord();
const cached = { record, topology: { partitionCount: 1, timeline: 1 }, publishSpec: buildPublishSpec({ record, topology: { partitionCount: 1, timeline: 1 } }) };
const code = standaloneValidatorCode(JSON.parse(cached.publishSpec.effectiveSchema) as JsonObject);

/** A stand-in for the event type cache's two reads the publisher uses: `get` keeps what it read, `read` does not. */
interface CacheReads {
  get(): Promise<typeof cached>;
  read(): Promise<typeof cached>;
}

/**
 * A publisher whose worker pool answers the standalone-code requests with `answers`, in turn.
 * @param cache the event type cache stand-in (default: both reads answer the one event type)
 */
function publisherWith(answers: StandaloneResult[], cache: CacheReads = { get: () => Promise.resolve(cached), read: () => Promise.resolve(cached) }) {
  // Not 0: lru-cache takes an entry stamped at time 0 for one without an expiry.
  let clockMs = 1000;
  const asked: string[] = [];
  // The batch goes to the "worker", which finds it invalid and reports the schema as cheap: the publisher
  // then tries to get the validator onto the main thread (nothing is written for a 422).
  const rejected: PublishResult = { kind: 'rejected', items: [], schemaCost: { applicationsPerValue: 3, compileMs: 1 } };
  const pool = {
    publish: () => Promise.resolve(rejected),
    standaloneCode: (effectiveSchema: string) => {
      asked.push(effectiveSchema);
      return Promise.resolve(answers.shift() ?? { ok: false, reason: 'no answer left' });
    },
    // Compiled in the workers; no cost reported (not cheap): nothing goes to the main thread.
    warm: () => Promise.resolve(undefined),
  };
  const config = { inlineMaxBytes: 4096, maxEventBytes: 1_000_000, workerTaskTimeoutMs: 1000, minReplicas: 0, replicaTimeoutMs: 0 } as BrokerConfig['publish'];
  const publisher = new Publisher({
    cache: cache as unknown as EventTypeCache,
    pool: pool as unknown as WorkerPool,
    // No master of the storage is known to be full; the batches here never reach a write.
    logs: { storageFull: () => undefined } as unknown as PartitionLogs,
    redis: { status: 'ready' } as unknown as RedisClient,
    config,
    redisTimeoutMs: 1000,
    compileTimeoutMs: 1000,
    logger: pino({ level: 'silent' }),
    clock: () => clockMs,
  });
  const publishSmall = () => publisher.publish(record.name, Buffer.from('[{"metadata":{}}]'), { publishedBy: 'u', flowId: 'f' });
  return { publisher, asked, publishSmall, advance: (ms: number) => (clockMs += ms) };
}

describe('main-thread validators for small batches', () => {
  it('asks a busy pool again after the retry delay, not on every batch', async () => {
    const { publisher, asked, publishSmall, advance } = publisherWith([{ ok: false, reason: 'no code within 1000 ms', transient: true }, { ok: true, code, primingInstance: {} }]);
    await publishSmall();
    await vi.waitFor(() => expect(asked).toHaveLength(1));
    await publishSmall();
    advance(STANDALONE_RETRY_AFTER_MS);
    await publishSmall();
    expect(asked).toHaveLength(1);
    expect(publisher.cacheSizes.validators).toBe(0);
    advance(1);
    await publishSmall();
    await vi.waitFor(() => expect(asked).toHaveLength(2));
    await vi.waitFor(() => expect(publisher.cacheSizes.validators).toBe(1));
  });

  it('never asks again for a schema whose code could not be made', async () => {
    const { publisher, asked, publishSmall, advance } = publisherWith([{ ok: false, reason: 'the schema cannot be compiled' }, { ok: true, code, primingInstance: {} }]);
    await publishSmall();
    await vi.waitFor(() => expect(asked).toHaveLength(1));
    advance(10 * STANDALONE_RETRY_AFTER_MS);
    await publishSmall();
    await publishSmall();
    expect(asked).toHaveLength(1);
    expect(publisher.cacheSizes.validators).toBe(0);
  });
});

describe('preparing an event type', () => {
  /** A cache stand-in that records which read each prepare used. */
  function recordingCache(): { cache: CacheReads; reads: string[] } {
    const reads: string[] = [];
    return {
      reads,
      cache: {
        get: () => (reads.push('get'), Promise.resolve(cached)),
        read: () => (reads.push('read'), Promise.resolve(cached)),
      },
    };
  }

  it('reads the event type without caching it on a node that heard of the change', async () => {
    const { cache, reads } = recordingCache();
    const { publisher } = publisherWith([], cache);
    await publisher.prepare(record.name);
    expect(reads.length).toBeGreaterThan(0);
    expect(reads).not.toContain('get');
  });

  it('keeps it in the cache on the node that made the change, also when it joins a prepare already running', async () => {
    const alone = recordingCache();
    await publisherWith([], alone.cache).publisher.prepare(record.name, true);
    expect(alone.reads[0]).toBe('get');

    const joined = recordingCache();
    const { publisher } = publisherWith([], joined.cache);
    // The node's own change notice starts a prepare; the registry's (serving) one joins it.
    const heard = publisher.prepare(record.name);
    await publisher.prepare(record.name, true);
    await heard;
    expect(joined.reads).toContain('get');
  });
});
