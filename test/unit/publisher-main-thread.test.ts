/**
 * Which small batches the main thread validates itself (issue 17 §2.1): a cheap schema's validator is
 * instantiated there from standalone code a worker makes. A worker that did not make it in time (busy
 * threads) is asked again after `STANDALONE_RETRY_AFTER_MS`; a schema whose code cannot be made is never
 * asked for again. The pool, the event type cache and Redis are stand-ins: what is under test is the
 * publisher's bookkeeping, with real validator code.
 */
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { buildPublishSpec, type EventTypeCache } from '../../src/services/event-type-cache.js';
import { Publisher, STANDALONE_RETRY_AFTER_MS } from '../../src/services/publisher.js';
import type { WorkerPool } from '../../src/services/worker-pool.js';
import type { PartitionLogs } from '../../src/storage/partition-logs.js';
import type { RedisClient } from '../../src/storage/redis-connection.js';
import { standaloneValidatorCode } from '../../src/domain/schema-compiler.js';
import type { JsonObject } from '../../src/domain/json-schema-walk.js';
import type { PublishResult, StandaloneResult } from '../../workers/publish-protocol.js';
import type { BrokerConfig } from '../../src/config/config-schema.js';
import { eventTypeRecord } from '../support/fixtures.js';

const record = eventTypeRecord();
const cached = { record, topology: { partitionCount: 1, timeline: 1 }, publishSpec: buildPublishSpec({ record, topology: { partitionCount: 1, timeline: 1 } }) };
const code = standaloneValidatorCode(JSON.parse(cached.publishSpec.effectiveSchema) as JsonObject);

/** A publisher whose worker pool answers the standalone-code requests with `answers`, in turn. */
function publisherWith(answers: StandaloneResult[]) {
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
  };
  const cache = { get: () => Promise.resolve(cached), read: () => Promise.resolve(cached) };
  const config = { inlineMaxBytes: 4096, maxEventBytes: 1_000_000, workerTaskTimeoutMs: 1000, minReplicas: 0, replicaTimeoutMs: 0 } as BrokerConfig['publish'];
  const publisher = new Publisher({
    cache: cache as unknown as EventTypeCache,
    pool: pool as unknown as WorkerPool,
    logs: {} as PartitionLogs,
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
