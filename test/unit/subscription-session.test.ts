import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { UNAUTHENTICATED } from '../../src/auth/subject.js';
import { MAX_EVENT_SEND_COUNT_ANNOTATION, UNPROCESSABLE_EVENT_POLICY_ANNOTATION, type PartitionDeadLetterState } from '../../src/domain/subscription/dead-letter.js';
import type { PartitionAssignment } from '../../src/domain/subscription/rebalance.js';
import { parseStreamParameters, type StreamParameters } from '../../src/domain/stream/stream-parameters.js';
import type { Subscription } from '../../src/domain/subscription/subscription.js';
import { timelineMapOf, type TimelineMap } from '../../src/domain/storages/timeline.js';
import { NO_CONSUMPTION_METER } from '../../src/observability/meters.js';
import { offsetField, type CommitOutcome, type SubscriptionState } from '../../src/storage/subscription-state-store.js';
import type { StreamEnd, StreamPolicy } from '../../src/services/consumption/stream/event-stream.js';
import type { StreamClose } from '../../src/domain/stream/stream-close-reason.js';
import type { StreamTally } from '../../src/services/consumption/stream/batch-writer.js';
import { StreamPartition } from '../../src/services/consumption/stream/stream-partition.js';
import { SessionRunner } from '../../src/services/consumption/session/session-runner.js';
import { IllegalSessionTransition, SESSION_STATES, SESSION_TRANSITIONS, transition } from '../../src/services/consumption/session/session-states.js';
import { CLOSED_SESSION_LEASE_MARGIN_MS, END_REASONS, type ResolvedSubscription, type SessionChange, type SessionLoop, type SessionOwner, type SessionStore } from '../../src/services/consumption/session/session-types.js';
import { FakeClock, settle } from '../support/fake-clock.js';

// The session of one subscription stream (src/services/consumption/session/session-runner.ts) as a state machine
// on a fake clock: the transition table, heartbeats and the local lease, the commit timeout and the
// commit window. Redis, the batch loop and the node are fakes; the runner and its parts are real.

const SUBSCRIPTION_ID = 'sub-1';
const STREAM_ID = 'stream-1';
const EVENT_TYPE = 'orders';
const FIELD = offsetField(EVENT_TYPE, '0');
const LEASE_MS = 3_000;
const HEARTBEAT_MS = LEASE_MS / 3;
const COMMIT_TIMEOUT_S = 10;
const COMMIT_TIMEOUT_MS = COMMIT_TIMEOUT_S * 1000;
const TIMELINES: TimelineMap = timelineMapOf(undefined, new Date(0).toISOString());

/** The subscription's state in "Redis": one partition assigned to the stream, offsets, calls. */
class FakeStore implements SessionStore {
  offsetsNow = new Map<string, number>([[FIELD, -1]]);
  alive = true;
  heartbeatAnswer: number | 'SESSION_GONE' | Error = 0;
  heartbeats = 0;
  readonly failedSends: string[][] = [];

  async read(): Promise<SubscriptionState> {
    const assignment: PartitionAssignment = { eventType: EVENT_TYPE, partition: '0', state: 'assigned', session: STREAM_ID, nextSession: '', assignmentType: 'auto' };
    const sessions = this.alive ? [{ id: STREAM_ID, expiresAt: Number.MAX_SAFE_INTEGER, info: { requested: [], state: 'streaming' as const, node: 'node-1' } }] : [];
    return Promise.resolve({ nowMs: 0, version: 1, assignments: [assignment], sessions, resetRunning: false });
  }

  async offsets(): Promise<Map<string, number>> {
    return Promise.resolve(new Map(this.offsetsNow));
  }

  async heartbeat(): Promise<number | 'SESSION_GONE'> {
    this.heartbeats++;
    const answer = this.heartbeatAnswer;
    return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
  }

  /** Commits the broker made for the stream (offsets passed over without delivery), in order. */
  readonly commits: { field: string; offset: number }[][] = [];

  async commit(_id: string, _streamId: string, cursors: readonly { field: string; offset: number }[]): Promise<CommitOutcome> {
    this.commits.push([...cursors]);
    return Promise.resolve({ kind: 'ok', committed: cursors.map(() => true) });
  }

  async deadLetters(): Promise<Map<string, PartitionDeadLetterState>> {
    return Promise.resolve(new Map<string, PartitionDeadLetterState>());
  }

  async setDeadLetter(): Promise<void> {
    return Promise.resolve();
  }

  async addFailedSends(_id: string, fields: readonly string[]): Promise<void> {
    this.failedSends.push([...fields]);
    return Promise.resolve();
  }
}

/** A batch loop that sends only when told to and checks the policy's end reason whenever poked. */
class FakeLoop implements SessionLoop {
  private readonly partitions = new Map<string, StreamPartition>();
  private wake: (() => void) | undefined;
  /** The end reason the loop returned with. */
  ended: StreamClose | undefined;

  constructor(private readonly policy: StreamPolicy) {}

  get current(): Iterable<StreamPartition> {
    return this.partitions.values();
  }

  get streamed(): ReadonlyMap<string, Readonly<StreamTally>> {
    return new Map();
  }

  get(eventType: string, partition: string): StreamPartition | undefined {
    return this.partitions.get(offsetField(eventType, partition));
  }

  add(eventType: string, partition: string, timelines: TimelineMap, start: number): StreamPartition {
    const p = new StreamPartition({ eventType, partition, timelines, start, now: 0 });
    this.partitions.set(p.key, p);
    return p;
  }

  remove(eventType: string, partition: string): void {
    this.partitions.delete(offsetField(eventType, partition));
  }

  deactivate(p: StreamPartition): void {
    p.active = false;
  }

  skipTo(p: StreamPartition, offset: number): void {
    if (offset > p.sent) p.sent = offset;
  }

  poke(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  async run(): Promise<StreamEnd> {
    for (;;) {
      const reason = this.policy.endReason();
      if (reason !== undefined) {
        this.ended = reason;
        return { kind: 'reason', ...reason };
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  /** Sends up to `n` events of the stream's partition, as far as the policy allows; returns how many. */
  send(n: number): number {
    const p = this.partitions.get(FIELD);
    if (p === undefined) throw new Error('the stream holds no partition');
    const count = Math.min(n, this.policy.allowance());
    p.sent += count;
    if (count > 0) this.policy.sent(p, count);
    return count;
  }

  /** The reader found the next `removed` offsets gone (retention or compaction) and moved the cursor over them. */
  passOver(removed: number, expired: number): void {
    const p = this.partitions.get(FIELD);
    if (p === undefined) throw new Error('the stream holds no partition');
    p.sent += removed;
    p.read = p.sent;
    this.policy.passedOver?.(p, expired);
  }
}

interface Harness {
  readonly clock: FakeClock;
  readonly store: FakeStore;
  readonly runner: SessionRunner;
  readonly changes: SessionChange[];
  readonly node: { stopping: boolean };
  /** What the runner reported as expired events passed by the broker's commits: (subscription, field, count). */
  readonly expired: [string, string, number][];
  loop(): FakeLoop;
  /** The stream starts (`run`); resolves once it holds its partition. */
  start(): Promise<void>;
  /** Moves the clock and wakes the loop, as its own flush and poll timers would. */
  tick(ms: number): Promise<void>;
}

function harness(options: { annotations?: Record<string, string>; streamLimit?: number } = {}): Harness {
  const clock = new FakeClock();
  const store = new FakeStore();
  const changes: SessionChange[] = [];
  const node = { stopping: false };
  const expired: [string, string, number][] = [];
  let loop: FakeLoop | undefined;
  const owner: SessionOwner = {
    deps: {
      state: store,
      logs: { read: () => Promise.reject(new Error('no events to skip in this test')) },
      openLoop: (_params, _sink, policy) => (loop = new FakeLoop(policy)),
      config: { subscriptions: { leaseTtlMs: LEASE_MS } },
      logger: pino({ level: 'silent' }),
      consumption: NO_CONSUMPTION_METER,
      deadLetters: undefined,
      clock,
    },
    nodeId: 'node-1',
    get stopping() {
      return node.stopping;
    },
    streamedListener: undefined,
    expiredPassed: (subscriptionId, partition, count) => expired.push([subscriptionId, partition.key, count]),
    noticesLive: () => true,
    subscriptionExists: () => Promise.resolve(true),
    applyChange: (_subscription, change) => {
      changes.push(change);
      return Promise.resolve('ok');
    },
  };
  const record: Subscription = {
    id: SUBSCRIPTION_ID,
    owning_application: 'app',
    event_types: [EVENT_TYPE],
    consumer_group: 'default',
    read_from: 'end',
    initial_cursors: [],
    annotations: options.annotations,
    created_at: new Date(0).toISOString(),
    updated_at: new Date(0).toISOString(),
  };
  const subscription: ResolvedSubscription = { record, partitions: [{ eventType: EVENT_TYPE, partition: '0', timelines: TIMELINES }], eventTypes: [] };
  const runner = new SessionRunner({ owner, subscription, streamId: STREAM_ID, params: params(options.streamLimit), subject: UNAUTHENTICATED, filters: new Map() });
  const sink: Parameters<SessionRunner['run']>[0] = { write: () => true, drained: () => Promise.resolve(), bufferedBytes: 0, closed: false, signal: new AbortController().signal };
  const h: Harness = {
    clock,
    store,
    runner,
    changes,
    node,
    expired,
    loop: () => {
      if (loop === undefined) throw new Error('the stream did not start');
      return loop;
    },
    start: async () => {
      void runner.run(sink);
      await settle();
    },
    tick: async (ms) => {
      await clock.advance(ms);
      h.loop().poke();
      await settle();
    },
  };
  return h;
}

function params(streamLimit?: number): StreamParameters {
  const query = { commit_timeout: COMMIT_TIMEOUT_S, max_uncommitted_events: 5, batch_limit: 1, ...(streamLimit === undefined ? {} : { stream_limit: streamLimit }) };
  const parsed = parseStreamParameters(query, undefined, 'subscription');
  if (!parsed.ok) throw new Error(parsed.detail);
  return parsed.value;
}

/** The session changes of kind `remove` (leaving Redis) and `upsert` (joining, or closed for the window). */
const removals = (changes: readonly SessionChange[]): SessionChange[] => changes.filter((c) => c.remove !== undefined);
const upserts = (changes: readonly SessionChange[]): SessionChange[] => changes.filter((c) => c.upsert !== undefined);

describe('session state table', () => {
  it('allows exactly starting → streaming → leaving → (closing →) released', () => {
    expect(SESSION_TRANSITIONS).toEqual({ starting: ['streaming'], streaming: ['leaving'], leaving: ['closing', 'released'], closing: ['released'], released: [] });
  });

  it('refuses every move the table does not list, with a programming error naming both states', () => {
    for (const from of SESSION_STATES) {
      for (const to of SESSION_STATES) {
        if (SESSION_TRANSITIONS[from].includes(to)) expect(transition(from, to)).toBe(to);
        else expect(() => transition(from, to), `${from} → ${to}`).toThrow(IllegalSessionTransition);
      }
    }
    expect(() => transition('released', 'streaming')).toThrow('illegal subscription session transition released → streaming');
  });
});

describe('subscription session on a fake clock', () => {
  it('starts streaming its assigned partition from the committed offset', async () => {
    const h = harness();
    expect(h.runner.state).toBe('starting');
    await h.start();
    expect(h.runner.state).toBe('streaming');
    expect([...h.loop().current].map((p) => [p.key, p.sent])).toEqual([[FIELD, -1]]);
  });

  it('heartbeats every third of the lease and sends only while the lease is known valid on the local clock', async () => {
    const h = harness();
    await h.start();
    await h.tick(HEARTBEAT_MS - 1);
    expect(h.store.heartbeats).toBe(0);
    await h.tick(1);
    expect(h.store.heartbeats).toBe(1);
    // Redis unreachable: the lease renewed by the heartbeat sent at 1 s holds until 4 s, not a moment longer.
    h.store.heartbeatAnswer = new Error('Redis down');
    await h.tick(3 * HEARTBEAT_MS);
    expect(h.clock.now()).toBe(1_000 + LEASE_MS);
    expect(h.runner.allowance()).toBeGreaterThan(0);
    await h.tick(1);
    expect(h.runner.allowance()).toBe(0);
    expect(h.loop().send(1)).toBe(0);
    // The next heartbeat that succeeds renews it from the time it was sent.
    h.store.heartbeatAnswer = 0;
    await h.tick(HEARTBEAT_MS);
    expect(h.runner.allowance()).toBeGreaterThan(0);
    expect(h.runner.state).toBe('streaming');
  });

  it('ends the stream when a heartbeat finds the session gone, and leaves at once without a commit window', async () => {
    const h = harness();
    await h.start();
    expect(h.loop().send(2)).toBe(2);
    h.store.heartbeatAnswer = 'SESSION_GONE';
    await h.tick(HEARTBEAT_MS);
    expect(h.loop().ended).toBe(END_REASONS.sessionLost);
    expect(h.runner.allowance()).toBe(0);
    await h.runner.released;
    expect(h.runner.state).toBe('released');
    expect(upserts(h.changes)).toEqual([]);
    expect(removals(h.changes)).toEqual([{ remove: [STREAM_ID] }]);
    expect(h.clock.pending).toBe(0);
  });

  it('ends the stream at commit_timeout without commit progress, and a commit restarts the timeout', async () => {
    const h = harness();
    await h.start();
    expect(h.loop().send(2)).toBe(2);
    await h.tick(6_000);
    // One of the two events is committed at 6 s: the timeout counts from there.
    h.store.offsetsNow.set(FIELD, 0);
    h.runner.notice('commit');
    await settle();
    await h.tick(COMMIT_TIMEOUT_MS - 1);
    expect(h.runner.endReason()).toBeUndefined();
    expect(h.runner.state).toBe('streaming');
    await h.tick(1);
    expect(h.loop().ended).toBe(END_REASONS.commitTimeout);
  });

  it('keeps a session with uncommitted events closed for its commit window, leased 2 s past it, then leaves', async () => {
    const h = harness();
    await h.start();
    h.loop().send(2);
    await h.tick(COMMIT_TIMEOUT_MS);
    expect(h.loop().ended).toBe(END_REASONS.commitTimeout);
    expect(h.runner.state).toBe('closing');
    expect(upserts(h.changes)).toEqual([{ upsert: { id: STREAM_ID, info: { requested: [], state: 'closed', node: 'node-1' }, leaseMs: COMMIT_TIMEOUT_MS + CLOSED_SESSION_LEASE_MARGIN_MS } }]);
    expect(CLOSED_SESSION_LEASE_MARGIN_MS).toBe(2_000);
    // No heartbeats once the stream ended: only the window's timer is left.
    const beats = h.store.heartbeats;
    await h.clock.advance(COMMIT_TIMEOUT_MS - 1);
    expect(h.store.heartbeats).toBe(beats);
    expect(h.runner.state).toBe('closing');
    expect(removals(h.changes)).toEqual([]);
    await h.clock.advance(1);
    expect(h.runner.state).toBe('released');
    expect(removals(h.changes)).toEqual([{ remove: [STREAM_ID] }]);
    expect(h.clock.pending).toBe(0);
  });

  it('leaves the commit window as soon as everything sent is committed', async () => {
    const h = harness();
    await h.start();
    h.loop().send(2);
    await h.tick(COMMIT_TIMEOUT_MS);
    expect(h.runner.state).toBe('closing');
    h.store.offsetsNow.set(FIELD, 1);
    h.runner.notice('commit');
    await h.runner.released;
    expect(h.runner.state).toBe('released');
    expect(h.clock.now()).toBe(COMMIT_TIMEOUT_MS);
    expect(removals(h.changes)).toEqual([{ remove: [STREAM_ID] }]);
  });

  it('with a dead-letter policy, counts a failed send for each partition left uncommitted when the window ends', async () => {
    const h = harness({ annotations: { [MAX_EVENT_SEND_COUNT_ANNOTATION]: '3', [UNPROCESSABLE_EVENT_POLICY_ANNOTATION]: 'SKIP_EVENT' } });
    await h.start();
    h.loop().send(1);
    await h.tick(COMMIT_TIMEOUT_MS);
    expect(h.runner.state).toBe('closing');
    await h.clock.advance(COMMIT_TIMEOUT_MS);
    expect(h.store.failedSends).toEqual([[FIELD]]);
    expect(h.runner.state).toBe('released');
  });

  it('a stopping node releases a closing session at once, without counting failed sends', async () => {
    const h = harness({ annotations: { [MAX_EVENT_SEND_COUNT_ANNOTATION]: '3', [UNPROCESSABLE_EVENT_POLICY_ANNOTATION]: 'SKIP_EVENT' } });
    await h.start();
    h.loop().send(1);
    await h.tick(COMMIT_TIMEOUT_MS);
    expect(h.runner.state).toBe('closing');
    h.node.stopping = true;
    await h.runner.stop();
    await h.runner.released;
    expect(h.runner.state).toBe('released');
    expect(h.store.failedSends).toEqual([]);
    expect(h.clock.now()).toBe(COMMIT_TIMEOUT_MS);
  });

  it('never counts offsets passed over without delivery as in flight: max_uncommitted_events, the commit window and the hand-over see sent events only', async () => {
    const h = harness();
    await h.start();
    // 195 offsets removed by retention before the stream read them (more than max_uncommitted_events = 5).
    h.loop().passOver(195, 195);
    await settle();
    expect(h.runner.allowance()).toBe(5);
    expect(h.runner.msUntilEnd()).toBeUndefined();
    // Nothing was in flight: the broker commits the cursor past them at once and reports them once.
    expect(h.store.commits).toEqual([[{ field: FIELD, offset: 194 }]]);
    expect(h.expired).toEqual([[SUBSCRIPTION_ID, FIELD, 195]]);
    // Events after the jump flow as usual; a commit of their cursor frees the window.
    expect(h.loop().send(3)).toBe(3);
    expect(h.runner.allowance()).toBe(2);
    h.store.offsetsNow.set(FIELD, 197);
    h.runner.notice('commit');
    await settle();
    expect(h.runner.allowance()).toBe(5);
    expect(h.runner.msUntilEnd()).toBeUndefined();
  });

  it('commits a jump only once the events sent before it are committed, and counts compaction gaps as nothing expired', async () => {
    const h = harness();
    await h.start();
    expect(h.loop().send(2)).toBe(2);
    // Compaction removed 40 offsets after them; then 3 more events arrive.
    h.loop().passOver(40, 0);
    expect(h.loop().send(3)).toBe(3);
    await settle();
    // 5 events in flight, not 45 offsets.
    expect(h.runner.allowance()).toBe(0);
    expect(h.store.commits).toEqual([]);
    // The client commits the batch before the gap (offset 1): the broker's commit of the gap follows.
    h.store.offsetsNow.set(FIELD, 1);
    h.runner.notice('commit');
    await settle();
    expect(h.runner.allowance()).toBe(2);
    expect(h.store.commits).toEqual([[{ field: FIELD, offset: 41 }]]);
    expect(h.expired).toEqual([]);
    // A commit of the cursor after the gap covers the 3 events sent after it.
    h.store.offsetsNow.set(FIELD, 44);
    h.runner.notice('commit');
    await settle();
    expect(h.runner.allowance()).toBe(5);
  });

  it('stream_limit counts committed events, not the offsets a commit passes', async () => {
    const h = harness({ streamLimit: 3 });
    await h.start();
    h.loop().passOver(100, 100);
    expect(h.loop().send(2)).toBe(2);
    h.store.offsetsNow.set(FIELD, 101);
    h.runner.notice('commit');
    await settle();
    expect(h.runner.allowance()).toBe(1);
    expect(h.runner.endReason()).toBeUndefined();
    expect(h.loop().send(1)).toBe(1);
    h.store.offsetsNow.set(FIELD, 102);
    h.runner.notice('commit');
    await settle();
    expect(h.runner.endReason()).toEqual(END_REASONS.streamLimit(3));
  });

  it('leaves at once when nothing is uncommitted, or when the stream must release now (cursor reset)', async () => {
    const idle = harness();
    await idle.start();
    idle.runner.end(END_REASONS.streamLimit(1));
    await idle.runner.released;
    expect(upserts(idle.changes)).toEqual([]);
    expect(removals(idle.changes)).toEqual([{ remove: [STREAM_ID] }]);

    const reset = harness();
    await reset.start();
    reset.loop().send(2);
    reset.runner.notice('reset');
    await reset.runner.released;
    expect(reset.loop().ended).toBe(END_REASONS.reset);
    expect(upserts(reset.changes)).toEqual([]);
    expect(removals(reset.changes)).toEqual([{ remove: [STREAM_ID] }]);
  });
});
