import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, harnessRedis, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType } from '../support/fixtures.js';
import { StreamClient } from '../support/stream-client.js';
import { SubscriptionStateStore } from '../../src/storage/subscription-state-store.js';
import { Scripts } from '../../src/storage/scripts.js';
import type { RedisClient } from '../../src/storage/redis/redis-connection.js';
import type { PartitionAssignment } from '../../src/domain/subscription/rebalance.js';

// A partition can be moved away from a stream before that stream ever read it: the assignment gave it
// to stream A, and a rebalance made it `reassigning` from A to B before A's refresh took it. A has sent
// nothing of it, so the hand-over must complete at once. (Seen in the rolling-restart test: a partition
// stayed `reassigning` to a stream that never had it until the stream ended, and nobody read it.)
// The test writes that assignment itself through the state store, with B a session it keeps alive.

const EVENT_TYPE = 'handover.unread';
let broker: TestBroker;
let redis: RedisClient;

beforeAll(async () => {
  // At debug a node logs the partitions a stream reads whenever they change: step 2 waits for that.
  broker = await startTestBroker({ BROKER_SUBSCRIPTIONS_LEASE_TTL_MS: '3000', BROKER_LOG_LEVEL: 'debug' });
  redis = harnessRedis();
});
afterAll(async () => {
  redis.disconnect();
  await broker.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface PartitionStats {
  partition: string;
  state: string;
  stream_id: string;
}

/** The partitions stream `streamId` reads, as its node last logged them (`stream partitions changed`); undefined before the first line. */
function partitionsOf(streamId: string): string[] | undefined {
  let last: string[] | undefined;
  for (const line of broker.output().split('\n')) {
    if (!line.includes('stream partitions changed')) continue;
    const entry = JSON.parse(line) as { stream?: string; partitions?: string[] };
    if (entry.stream === streamId) last = entry.partitions;
  }
  return last;
}

async function stats(id: string): Promise<PartitionStats[]> {
  const answer = await call(broker.url, 'GET', `/subscriptions/${id}/stats`);
  expect(answer.status).toBe(200);
  return (answer.json as { items: { partitions: PartitionStats[] }[] }).items.flatMap((i) => i.partitions);
}

describe('partition hand-over', () => {
  it('completes at once for a partition the releasing stream never read', async () => {
    expect((await call(broker.url, 'POST', '/event-types', businessEventType(EVENT_TYPE, { default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: 2, write_parallelism: 2 } }))).status).toBe(201);
    const created = await call(broker.url, 'POST', '/subscriptions', { owning_application: 'handover', event_types: [EVENT_TYPE], read_from: 'begin' });
    expect(created.status).toBe(201);
    const id = (created.json as { id: string }).id;

    const stream = await StreamClient.open(`${broker.url}/subscriptions/${id}/events?batch_flush_timeout=1&stream_timeout=30`);
    expect(stream.status).toBe(200);
    const a = stream.headers.get('x-broker-streamid') ?? '';
    const store = new SubscriptionStateStore(redis, new Scripts(redis), broker.keys);
    const b = 'fake-session-b';
    const info = { requested: [], state: 'streaming' as const, node: 'test' };
    const write = async (assignments: (version: number) => PartitionAssignment[]): Promise<void> => {
      for (;;) {
        const state = await store.read(id);
        const outcome = await store.apply(id, { expectedVersion: state.version, assignments: assignments(state.version), upsertSession: { id: b, info, leaseMs: 60_000 }, refuseDuringReset: false });
        if (outcome === 'ok') return;
      }
    };
    const assignment = (partition: string, state: PartitionAssignment['state'], session: string, nextSession = ''): PartitionAssignment => ({ eventType: EVENT_TYPE, partition, state, session, nextSession, assignmentType: 'auto' });

    // Step 1: partition 1 goes to B; A drops it from its stream.
    await write(() => [assignment('0', 'assigned', a), assignment('1', 'assigned', b)]);
    for (let i = 0; i < 50 && (await stats(id)).find((p) => p.partition === '1')?.stream_id !== b; i++) await sleep(100);
    // A must have applied step 1 (dropped partition 1) before step 2: its node logs what A reads now.
    await expect.poll(() => partitionsOf(a), { timeout: 10_000, interval: 50 }).toEqual([`${EVENT_TYPE}:0`]);
    // Step 2: partition 1 is `reassigning` from A (which does not read it) to B.
    await write(() => [assignment('0', 'assigned', a), assignment('1', 'reassigning', a, b)]);

    // A completes the hand-over on its next refresh (a heartbeat at the latest, lease/3 = 1 s).
    let partition1: PartitionStats | undefined;
    for (let i = 0; i < 40; i++) {
      partition1 = (await stats(id)).find((p) => p.partition === '1');
      if (partition1?.state === 'assigned') break;
      await sleep(100);
    }
    expect(partition1).toMatchObject({ state: 'assigned', stream_id: b });
    stream.close();
  });
});
