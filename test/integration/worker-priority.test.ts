import { readdirSync, readFileSync } from 'node:fs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { call, clusterRun, startTestBrokerProcess, type TestBrokerProcess } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';

/**
 * The validation worker threads run at a lower scheduling priority than the node's main thread
 * (config `publish.workerThreadNice`; docs/decisions/0027-worker-threads-yield-to-the-main-thread.md), read
 * from the kernel: the niceness of each thread of the node's process (`/proc/<pid>/task/<tid>/stat`).
 */

let node: TestBrokerProcess | undefined;

afterEach(async () => {
  const code = await node?.stop();
  expect(code, node?.output()).toBe(0);
  node = undefined;
});

/** Thread id → niceness of every thread of process `pid` (field 19 of `stat`, after the command in parentheses). */
function nicenessByThread(pid: number): Map<number, number> {
  const threads = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended meanwhile
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    threads.set(Number(tid), Number(fields[16]));
  }
  return threads;
}

/**
 * Starts a node with `threads` worker threads at niceness `nice` and has every thread do work: the warm-up
 * round of an event type's validators runs one task on each of them.
 * @returns the node's pid
 */
async function startWith(threads: number, nice: number): Promise<number> {
  node = await startTestBrokerProcess({ BROKER_PUBLISH_WORKER_THREADS: String(threads), BROKER_PUBLISH_WORKER_THREAD_NICE: String(nice) });
  const created = await call(node.url, 'POST', '/event-types', businessEventType('priority.orders'));
  expect(created.status, created.text).toBe(201);
  const pid = node.process.pid;
  if (pid === undefined) throw new Error('the node has no pid');
  return pid;
}

// Threads of the node process, not Redis: once, in the `integration` project.
describe.runIf(process.platform === 'linux' && !clusterRun())('worker thread priority', () => {
  it('every validation worker thread runs at the configured niceness, the main thread and the others at 0', async () => {
    const pid = await startWith(3, 7);
    // Each thread sets its niceness as it starts; the node does not wait for its threads to start.
    const threads = await vi.waitFor(() => {
      const now = nicenessByThread(pid);
      expect([...now.values()].filter((nice) => nice === 7)).toHaveLength(3);
      return now;
    }, { timeout: 10_000, interval: 50 });
    expect(threads.get(pid), 'main thread').toBe(0);
    expect([...threads.values()].filter((nice) => nice === 7)).toHaveLength(3);
    expect([...threads.values()].filter((nice) => nice !== 7 && nice !== 0)).toEqual([]);
  });

  it('with 0 every thread keeps the main thread priority', async () => {
    const pid = await startWith(2, 0);
    const published = await call(node?.url ?? '', 'POST', '/event-types/priority.orders/events', Array.from({ length: 50 }, (_, i) => orderEvent(`o-${i}`, { note: 'x'.repeat(200) })));
    expect(published.status, published.text).toBe(200);
    expect([...nicenessByThread(pid).values()].every((nice) => nice === 0)).toBe(true);
  });
});
