import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { call, harnessRedis, startTestBroker, startTestBrokerProcess, type TestBroker } from '../support/broker.js';
import { DeliveryChecker } from '../support/delivery-checker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { StreamClient, type StreamBatch } from '../support/stream-client.js';
import { eventually } from '../support/eventually.js';

// Three nodes on one Redis and one key prefix; short leases so failures are noticed within seconds.
const LEASE_MS = 2000;
let a: TestBroker;
let b: TestBroker;
let c: TestBroker;

beforeAll(async () => {
  const env = { BROKER_SUBSCRIPTIONS_LEASE_TTL_MS: String(LEASE_MS), BROKER_CONSUMPTION_POLL_INTERVAL_MS: '200' };
  a = await startTestBroker(env);
  [b, c] = await Promise.all([startTestBroker({ ...env, BROKER_REDIS_KEY_PREFIX: a.prefix }), startTestBroker({ ...env, BROKER_REDIS_KEY_PREFIX: a.prefix })]);
});
afterAll(async () => {
  await Promise.all([a.stop(), b.stop(), c.stop()]);
});

const partitionsOf = (n: number) => ({ default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: n, write_parallelism: n } });

async function eventType(name: string, partitions: number): Promise<void> {
  const created = await call(a.url, 'POST', '/event-types', businessEventType(name, { ...partitionsOf(partitions), partition_strategy: 'user_defined' }));
  expect(created.status).toBe(201);
}

/** Publishes `count` events per partition; @returns their eids */
async function publish(node: TestBroker, name: string, partitions: number, count: number, tag = 'o'): Promise<string[]> {
  const events = [];
  for (let i = 0; i < count; i++) for (let p = 0; p < partitions; p++) events.push(orderEvent(`${tag}-${p}-${i}`, { metadata: { eid: crypto.randomUUID(), occurred_at: new Date().toISOString(), partition: String(p) } }));
  const answer = await call(node.url, 'POST', `/event-types/${name}/events`, events);
  expect(answer.status).toBe(200);
  return events.map((e) => (e.metadata as { eid: string }).eid);
}

async function subscription(name: string | string[], readFrom = 'begin'): Promise<string> {
  const answer = await call(a.url, 'POST', '/subscriptions', { owning_application: `app-${crypto.randomUUID()}`, event_types: Array.isArray(name) ? name : [name], read_from: readFrom });
  expect(answer.status).toBe(201);
  return (answer.json as { id: string }).id;
}

function open(node: TestBroker, id: string, query = 'batch_flush_timeout=1', init: RequestInit = {}): Promise<StreamClient> {
  return StreamClient.open(`${node.url}/subscriptions/${id}/events?${query}`, init);
}

async function commit(node: TestBroker, id: string, streamId: string, batches: readonly StreamBatch[]): Promise<{ status: number; json: unknown }> {
  return call(node.url, 'POST', `/subscriptions/${id}/cursors`, { items: batches.map((x) => x.cursor) }, { 'X-Broker-StreamId': streamId });
}

interface Stats {
  items: { event_type: string; partitions: { partition: string; state: string; stream_id: string; unconsumed_events?: number; assignment_type: string; consumer_lag_seconds?: number }[] }[];
}

async function stats(id: string, query = ''): Promise<Stats['items'][number]['partitions']> {
  const answer = await call(c.url, 'GET', `/subscriptions/${id}/stats${query}`);
  expect(answer.status).toBe(200);
  return (answer.json as Stats).items.flatMap((i) => i.partitions);
}


/** Reads batches until `count` events came, feeding the checker. */
async function collect(stream: StreamClient, checker: DeliveryChecker, count: number, timeoutMs = 10_000): Promise<StreamBatch[]> {
  const batches = await stream.events(count, timeoutMs);
  const sid = stream.headers.get('x-broker-streamid') ?? '';
  for (const batch of batches) checker.batch(sid, batch);
  return batches;
}

describe('subscription streams across nodes', () => {
  it('publishes on one node, streams from another, commits on a third; headers, debug info, cursors', async () => {
    await eventType('sub.basic', 2);
    const id = await subscription('sub.basic');
    const checker = new DeliveryChecker();
    checker.submitted(await publish(a, 'sub.basic', 2, 3));

    const started = Date.now();
    const stream = await open(b, id, 'batch_limit=3&batch_flush_timeout=1');
    expect(Date.now() - started).toBeLessThan(2000);
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toBe('application/x-json-stream');
    const streamId = stream.headers.get('x-broker-streamid') ?? '';
    expect(streamId).toMatch(/^[0-9a-f-]{36}$/);

    const batches = await collect(stream, checker, 6);
    expect(batches[0]?.info?.debug).toBe('Stream started');
    for (const batch of batches) {
      expect(batch.cursor.event_type).toBe('sub.basic');
      expect(typeof batch.cursor.cursor_token).toBe('string');
      expect(batch.events?.length).toBe(3);
    }
    expect(checker.report()).toEqual([]);

    // Commit on a third node: 204; the same cursors again: 200 with outdated.
    const committed = await fetch(`${c.url}/subscriptions/${id}/cursors`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'X-Broker-StreamId': streamId },
      body: JSON.stringify({ items: batches.map((x) => x.cursor) }),
    });
    expect(committed.status).toBe(204);
    // A 204 carries no length (hyper-express once sent 2^63 and dropped the connection).
    expect(committed.headers.get('content-length')).toBeNull();
    const again = await commit(c, id, streamId, batches);
    expect(again.status).toBe(200);
    expect(again.json).toEqual({ items: batches.map((x) => ({ cursor: x.cursor, result: 'outdated' })) });

    const cursors = await call(a.url, 'GET', `/subscriptions/${id}/cursors`);
    const items = (cursors.json as { items: { partition: string; offset: string }[] }).items;
    expect(items.map((i) => [i.partition, i.offset]).sort()).toEqual([
      ['0', '001-0001-000000000000000002'],
      ['1', '001-0001-000000000000000002'],
    ]);
    const partitions = await stats(id);
    expect(partitions.map((p) => [p.state, p.stream_id, p.unconsumed_events])).toEqual([
      ['assigned', streamId, 0],
      ['assigned', streamId, 0],
    ]);
    const listed = await call(b.url, 'GET', '/subscriptions?event_type=sub.basic&show_status=true');
    expect((listed.json as { items: { status: unknown }[] }).items[0]?.status).toEqual([
      {
        event_type: 'sub.basic',
        partitions: [
          { partition: '0', state: 'assigned', stream_id: streamId, assignment_type: 'auto' },
          { partition: '1', state: 'assigned', stream_id: streamId, assignment_type: 'auto' },
        ],
      },
    ]);
    expect((await call(b.url, 'GET', '/subscriptions?show_status=maybe')).status).toBe(400);
    stream.close();
  });

  it('refuses commits: missing stream id 400, unknown stream 422, partition of another stream 422, foreign partition 422', async () => {
    await eventType('sub.commits', 2);
    const id = await subscription('sub.commits');
    const one = await open(a, id, 'batch_flush_timeout=1');
    const oneId = one.headers.get('x-broker-streamid') ?? '';
    await eventually(async () => (await stats(id)).every((p) => p.stream_id === oneId), 3000, 'first stream owns everything');
    const two = await open(b, id, 'batch_flush_timeout=1');
    const twoId = two.headers.get('x-broker-streamid') ?? '';
    await eventually(async () => (await stats(id)).some((p) => p.stream_id === twoId && p.state === 'assigned'), 5000, 'second stream gets a partition');
    const owned = (await stats(id)).find((p) => p.stream_id === twoId);
    const cursor = { event_type: 'sub.commits', partition: owned?.partition ?? '0', offset: 'BEGIN', cursor_token: 'x' };
    const body = { items: [{ ...cursor, offset: '001-0001--1' }] };

    expect((await call(c.url, 'POST', `/subscriptions/${id}/cursors`, body)).status).toBe(400);
    expect((await call(c.url, 'POST', `/subscriptions/${id}/cursors`, body, { 'X-Broker-StreamId': crypto.randomUUID() })).status).toBe(422);
    const foreign = await call(c.url, 'POST', `/subscriptions/${id}/cursors`, body, { 'X-Broker-StreamId': oneId });
    expect(foreign.status).toBe(422);
    expect((foreign.json as { detail: string }).detail).toContain('not assigned to stream');
    const unknownPartition = await call(c.url, 'POST', `/subscriptions/${id}/cursors`, { items: [{ ...cursor, partition: '7' }] }, { 'X-Broker-StreamId': twoId });
    expect(unknownPartition.status).toBe(422);
    one.close();
    two.close();
  });

  it('rebalances when a second consumer joins and when it leaves; moved partitions wait for the commit of what was sent', async () => {
    await eventType('sub.rebalance', 4);
    const id = await subscription('sub.rebalance');
    const checker = new DeliveryChecker();
    checker.submitted(await publish(a, 'sub.rebalance', 4, 2));
    const first = await open(a, id, 'batch_limit=2&batch_flush_timeout=1&max_uncommitted_events=100');
    const firstId = first.headers.get('x-broker-streamid') ?? '';
    const sent = await collect(first, checker, 8);

    const second = await open(b, id, 'batch_limit=2&batch_flush_timeout=1&max_uncommitted_events=100');
    const secondId = second.headers.get('x-broker-streamid') ?? '';
    // Two partitions move, but stay reassigning: the first stream has not committed them.
    await eventually(async () => (await stats(id)).filter((p) => p.state === 'reassigning').length === 2, 5000, 'two partitions reassigning');
    const moving = (await stats(id)).filter((p) => p.state === 'reassigning').map((p) => p.partition);
    // Commit everything the first stream was sent: the moves complete, the second stream starts there.
    expect((await commit(c, id, firstId, sent)).status).toBe(204);
    await eventually(
      async () => {
        const s = await stats(id);
        return s.filter((p) => p.stream_id === secondId && p.state === 'assigned').length === 2 && s.filter((p) => p.stream_id === firstId).length === 2;
      },
      5000,
      '2/2 split',
    );
    const secondPartitions = (await stats(id)).filter((p) => p.stream_id === secondId).map((p) => p.partition);
    expect(secondPartitions.sort()).toEqual(moving.sort());

    // New events go to their owners only.
    checker.submitted(await publish(c, 'sub.rebalance', 4, 1, 'late'));
    const firstNew = await collect(first, checker, 2);
    const secondNew = await collect(second, checker, 2);
    expect(new Set(secondNew.map((x) => x.cursor.partition))).toEqual(new Set(secondPartitions));
    expect(firstNew.every((x) => !secondPartitions.includes(x.cursor.partition))).toBe(true);

    // The second leaves (everything committed): the first gets all four back at once.
    expect((await commit(c, id, secondId, secondNew)).status).toBe(204);
    second.close();
    await eventually(async () => (await stats(id)).every((p) => p.stream_id === firstId && p.state === 'assigned'), 5000, 'all back to the first');
    expect(checker.report()).toEqual([]);
    first.close();
  });

  it('no free slot: 409 when consumers equal partitions; direct requests: 422 foreign or duplicated, 409 taken', async () => {
    await eventType('sub.slots', 1);
    const id = await subscription('sub.slots');
    const one = await open(a, id);
    expect(one.status).toBe(200);
    const two = await open(b, id);
    expect(two.status).toBe(409);
    expect(two.problem).toMatchObject({ status: 409, detail: 'No free slots for streaming available' });
    one.close();

    await eventType('sub.direct', 2);
    const direct = await subscription('sub.direct');
    const post = (node: TestBroker, partitions: unknown) =>
      StreamClient.open(`${node.url}/subscriptions/${direct}/events`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ partitions, batch_flush_timeout: 1 }) });
    expect((await post(a, [{ event_type: 'sub.direct', partition: '5' }])).status).toBe(422);
    expect((await post(a, [{ event_type: 'sub.direct', partition: '0' }, { event_type: 'sub.direct', partition: '0' }])).status).toBe(422);
    const holder = await post(a, [{ event_type: 'sub.direct', partition: '1' }]);
    expect(holder.status).toBe(200);
    expect((await post(b, [{ event_type: 'sub.direct', partition: '1' }])).status).toBe(409);
    await eventually(async () => (await stats(direct)).some((p) => p.partition === '1' && p.assignment_type === 'direct' && p.state === 'assigned'), 3000, 'direct assignment');
    holder.close();
  });

  it('flow control: at max_uncommitted_events sending pauses until a commit; commit_timeout closes the stream', async () => {
    await eventType('sub.flow', 1);
    const id = await subscription('sub.flow');
    await publish(a, 'sub.flow', 1, 10);
    const stream = await open(b, id, 'batch_limit=1&batch_flush_timeout=1&max_uncommitted_events=3&commit_timeout=2');
    const streamId = stream.headers.get('x-broker-streamid') ?? '';
    const first = await stream.events(3);
    // Nothing more arrives while three are uncommitted (keep-alives only).
    const pause = await stream.next(1500);
    expect(pause?.events).toBeUndefined();
    expect((await commit(c, id, streamId, [first[0] as StreamBatch])).status).toBe(204);
    const resumed = await stream.events(1);
    expect(resumed[0]?.cursor.offset).toBe('001-0001-000000000000000003');
    // No further commits: the stream ends within commit_timeout with its reason.
    const rest = await stream.untilEnd(6000);
    expect(rest.at(-1)?.info?.debug).toBe('Commit timeout reached');
  });

  it('accepts commits after the HTTP stream ended, until its commit timeout; the partitions wait for them', async () => {
    await eventType('sub.window', 1);
    const id = await subscription('sub.window');
    await publish(a, 'sub.window', 1, 2);
    const stream = await open(a, id, 'batch_limit=2&batch_flush_timeout=1&commit_timeout=5');
    const streamId = stream.headers.get('x-broker-streamid') ?? '';
    const batches = await stream.events(2);
    stream.close();
    // The closed stream still holds the partition (reassigning to nobody) while it may commit.
    await eventually(async () => (await stats(id))[0]?.state === 'reassigning', 3000, 'closed stream holds the partition');
    const next = await open(b, id, 'batch_flush_timeout=1');
    expect((await commit(c, id, streamId, batches)).status).toBe(204);
    // Committed: the partition moves on, nothing is redelivered.
    const nextId = next.headers.get('x-broker-streamid') ?? '';
    await eventually(async () => (await stats(id))[0]?.stream_id === nextId, 3000, 'partition moved after the commit');
    await publish(a, 'sub.window', 1, 1, 'new');
    const fresh = await next.events(1);
    expect(fresh[0]?.events?.map((e) => e.order_number)).toEqual(['new-0-0']);
    next.close();
  });

  it('stream_limit counts committed events; stream_timeout ends with its reason', async () => {
    const sessions = harnessRedis();
    onTestFinished(() => sessions.disconnect());
    await sessions.ping();
    await eventType('sub.limits', 1);
    const id = await subscription('sub.limits');
    await publish(a, 'sub.limits', 1, 5);
    const stream = await open(a, id, 'batch_limit=2&stream_limit=2&batch_flush_timeout=1');
    const streamId = stream.headers.get('x-broker-streamid') ?? '';
    const batches = await stream.events(2);
    expect(batches.flatMap((x) => x.events ?? []).length).toBe(2);
    expect((await commit(c, id, streamId, batches)).status).toBe(204);
    const rest = await stream.untilEnd(5000);
    expect(rest.at(-1)?.info?.debug).toBe('Stream limit in events reached: 2');
    expect(rest.flatMap((x) => x.events ?? [])).toEqual([]);
    // Everything was committed, so the session left Redis before the stream's answer ended: the
    // partition is free for the consumer's next stream, on any node, at once.
    expect(await sessions.zcard(a.keys.subscriptionSessions(id))).toBe(0);

    const timed = await open(b, id, 'batch_flush_timeout=1&stream_timeout=2');
    expect(timed.status, JSON.stringify(timed.problem)).toBe(200);
    const all = await timed.untilEnd(6000);
    expect(all.at(-1)?.info?.debug).toBe('Stream timeout reached');
  });

  it('cursor reset closes streams with its reason, refuses new streams meanwhile, then streams from the new cursors', async () => {
    await eventType('sub.reset', 1);
    const id = await subscription('sub.reset', 'end');
    const before = await call(a.url, 'GET', `/subscriptions/${id}/cursors`);
    expect(before.json).toEqual({ items: [] });
    await publish(a, 'sub.reset', 1, 4);
    const stream = await open(b, id);
    const reset = call(c.url, 'PATCH', `/subscriptions/${id}/cursors`, { items: [{ event_type: 'sub.reset', partition: '0', offset: '001-0001-000000000000000001' }] });
    const ended = await stream.untilEnd(5000);
    expect(ended.at(-1)?.info?.debug).toBe('Resetting subscription cursors');
    expect((await reset).status).toBe(204);
    const after = await open(a, id, 'batch_limit=10&batch_flush_timeout=1');
    const batches = await after.events(2);
    expect(batches[0]?.events?.map((e) => e.order_number)).toEqual(['o-0-2', 'o-0-3']);
    after.close();
  });

  it('stats: unconsumed events and consumer lag in seconds', async () => {
    await eventType('sub.stats', 1);
    const id = await subscription('sub.stats', 'begin');
    const untouched = await stats(id);
    expect(untouched[0]).toEqual({ partition: '0', state: 'unassigned', stream_id: '', assignment_type: 'auto' });
    await publish(a, 'sub.stats', 1, 3);
    const stream = await open(a, id, 'batch_limit=3&batch_flush_timeout=1');
    await stream.events(3);
    stream.close();
    const withLag = await stats(id, '?show_time_lag=true');
    expect(withLag[0]?.unconsumed_events).toBe(3);
    expect(withLag[0]?.consumer_lag_seconds).toBeGreaterThanOrEqual(0);
  });
});

describe('failures: a killed node and a paused node', () => {
  it('SIGTERM releases the node sessions at once: the partitions move without waiting for the lease', async () => {
    const leaving = await startTestBroker({ BROKER_REDIS_KEY_PREFIX: a.prefix, BROKER_SUBSCRIPTIONS_LEASE_TTL_MS: '30000' });
    await eventType('sub.term', 2);
    const id = await subscription('sub.term');
    await publish(a, 'sub.term', 2, 1);
    const stream = await open(leaving, id, 'batch_limit=1&batch_flush_timeout=1');
    await stream.events(2); // sent and not committed
    const other = await open(a, id, 'batch_flush_timeout=1');
    const otherId = other.headers.get('x-broker-streamid') ?? '';
    expect(await leaving.stop('SIGTERM')).toBe(0);
    const ended = await stream.untilEnd(3000);
    expect(ended.at(-1)?.info?.debug).toBe('Node is shutting down');
    const took = await eventually(async () => (await stats(id)).every((p) => p.stream_id === otherId && p.state === 'assigned'), 3000, 'partitions moved');
    expect(took).toBeLessThan(3000);
    // Uncommitted events of the released stream are redelivered.
    expect((await other.events(2)).length).toBe(2);
    other.close();
  });

  it('SIGKILL of a node holding streams: its partitions are streamed elsewhere within lease TTL + 2 s, uncommitted events redelivered', async () => {
    const victim = await startTestBrokerProcess({ BROKER_REDIS_KEY_PREFIX: a.prefix, BROKER_SUBSCRIPTIONS_LEASE_TTL_MS: String(LEASE_MS) });
    await eventType('sub.kill', 4);
    const id = await subscription('sub.kill');
    const checker = new DeliveryChecker();
    const survivor = await open(a, id, 'batch_limit=1&batch_flush_timeout=1&max_uncommitted_events=100');
    const survivorId = survivor.headers.get('x-broker-streamid') ?? '';
    await eventually(async () => (await stats(id)).every((p) => p.stream_id === survivorId), 3000, 'survivor owns everything');
    const doomed = await open(victim, id, 'batch_limit=1&batch_flush_timeout=1&max_uncommitted_events=100');
    const doomedId = doomed.headers.get('x-broker-streamid') ?? '';
    // Unassigned moves complete at once: nothing was sent yet.
    await eventually(async () => (await stats(id)).filter((p) => p.stream_id === doomedId && p.state === 'assigned').length === 2, 5000, 'victim owns two');
    const doomedPartitions = (await stats(id)).filter((p) => p.stream_id === doomedId).map((p) => p.partition);

    checker.submitted(await publish(a, 'sub.kill', 4, 2));
    const survivorBatches = await collect(survivor, checker, 4);
    await collect(doomed, checker, 4); // delivered, never committed
    expect((await commit(c, id, survivorId, survivorBatches)).status).toBe(204);

    const killedAt = Date.now();
    await victim.stop('SIGKILL');
    doomed.close();
    // Redelivery: the survivor gets the victim's uncommitted events from the last commit.
    const redelivered = await collect(survivor, checker, 4, LEASE_MS + 4000);
    const took = Date.now() - killedAt;
    expect(took).toBeLessThan(LEASE_MS + 2000);
    expect(new Set(redelivered.map((x) => x.cursor.partition))).toEqual(new Set(doomedPartitions));
    expect(redelivered.map((x) => x.cursor.offset).sort()).toEqual(Array<string>(2).fill('001-0001-000000000000000000').concat(Array<string>(2).fill('001-0001-000000000000000001')).sort());
    // More events: only the survivor delivers them, the victim's partitions never go back.
    checker.submitted(await publish(c, 'sub.kill', 4, 1, 'after'));
    await collect(survivor, checker, 4);
    expect(checker.report()).toEqual([]);
    expect(checker.exclusiveHolders()).toEqual([]);
    survivor.close();
  });

  it('SIGSTOP past the lease: the paused node neither commits nor streams the moved partitions', async () => {
    const paused = await startTestBrokerProcess({ BROKER_REDIS_KEY_PREFIX: a.prefix, BROKER_SUBSCRIPTIONS_LEASE_TTL_MS: String(LEASE_MS) });
    await eventType('sub.stop', 2);
    const id = await subscription('sub.stop');
    const checker = new DeliveryChecker();
    const sleeper = await open(paused, id, 'batch_limit=1&batch_flush_timeout=1&max_uncommitted_events=100');
    const sleeperId = sleeper.headers.get('x-broker-streamid') ?? '';
    await eventually(async () => (await stats(id)).every((p) => p.stream_id === sleeperId), 3000, 'sleeper owns everything');
    checker.submitted(await publish(a, 'sub.stop', 2, 1));
    const sleeperBatches = await collect(sleeper, checker, 2);

    paused.process.kill('SIGSTOP');
    try {
      const other = await open(a, id, 'batch_limit=1&batch_flush_timeout=1&max_uncommitted_events=100');
      const otherId = other.headers.get('x-broker-streamid') ?? '';
      // The sleeper's lease expires; the other stream takes both partitions and gets the uncommitted events again.
      const redelivered = await collect(other, checker, 2, LEASE_MS + 4000);
      expect(redelivered.map((x) => x.cursor.offset)).toEqual(['001-0001-000000000000000000', '001-0001-000000000000000000']);
      checker.submitted(await publish(a, 'sub.stop', 2, 1, 'after'));
      const later = await collect(other, checker, 2);
      expect((await commit(c, id, otherId, later)).status).toBe(204);

      paused.process.kill('SIGCONT');
      // Woken up, the sleeper must not commit nor send anything more (its session is gone).
      const stale = await call(paused.url, 'POST', `/subscriptions/${id}/cursors`, { items: sleeperBatches.map((x) => x.cursor) }, { 'X-Broker-StreamId': sleeperId });
      expect(stale.status).toBe(422);
      const tail = await sleeper.untilEnd(LEASE_MS + 3000);
      expect(tail.flatMap((x) => x.events ?? [])).toEqual([]);
      for (const batch of tail) checker.batch(sleeperId, batch);
      expect(checker.report()).toEqual([]);
      expect(checker.exclusiveHolders()).toEqual([]);
      other.close();
    } finally {
      paused.process.kill('SIGCONT');
      await paused.stop();
    }
  });
});
