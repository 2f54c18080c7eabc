import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, eventsInPartition, startTestBroker, type Answer, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';
import { parseExposition, valueOf } from '../support/prometheus-text.js';

/**
 * Publish admission's queue-delay bound (docs/publishing.md "Refusals and deadlines"): while the oldest
 * batch waiting for a validation worker thread has waited longer than `http.publishMaxQueueDelayMs`, a
 * publish is refused at once with 503 `PUBLISH_QUEUE_DELAYED`, `Retry-After: 1`, a problem naming the
 * bound, and nothing of it written; a body small enough to be validated on the main thread is not held
 * to it. The node under test has one worker thread, a bound of 1 ms applied from one publish in flight
 * (`http.publishQueueDelayMinInFlight` 1), and is handed a few large
 * batches at once: one runs, the others wait, and the node's own `broker_worker_pool_queue_delay_seconds`
 * shows when they have waited, so the refusal does not depend on timing.
 */

const NAME = 'queue-delay.orders';
const MAX_QUEUE_DELAY_MS = 1;
/** Events per large batch: about 4 MB of JSON, tens of ms of validation on one thread. */
const LARGE_BATCH_EVENTS = 8_000;

let node: TestBroker;

beforeAll(async () => {
  // The bytes bound out of the way (256 MiB): only the queue delay refuses here.
  node = await startTestBroker({ BROKER_PUBLISH_WORKER_THREADS: '1', BROKER_HTTP_PUBLISH_MAX_QUEUE_DELAY_MS: String(MAX_QUEUE_DELAY_MS), BROKER_HTTP_PUBLISH_QUEUE_DELAY_MIN_IN_FLIGHT: '1', BROKER_HTTP_PUBLISH_MAX_IN_FLIGHT_BYTES: String(256 * 1024 * 1024) });
  expect((await call(node.url, 'POST', `/event-types`, businessEventType(NAME))).status).toBe(201);
});
afterAll(async () => {
  const code = await node?.stop();
  expect(code, node?.output()).toBe(0);
});

/** A batch of `count` order events of ~500 bytes each, with its eids. */
function batchOf(tag: string, count: number): { body: Buffer; eids: string[] } {
  const events = Array.from({ length: count }, (_, i) => orderEvent(`${tag}-${i}`, { note: 'x'.repeat(400) }));
  return { body: Buffer.from(JSON.stringify(events)), eids: events.map((e) => (e.metadata as { eid: string }).eid) };
}

/** The node's metrics, parsed. */
async function metrics(): Promise<ReturnType<typeof parseExposition>> {
  const answer = await call(node.url, 'GET', '/metrics');
  expect(answer.status).toBe(200);
  return parseExposition(answer.text);
}

/** Events stored in the event type's one partition (its newest offset + 1). */
async function stored(): Promise<number> {
  return eventsInPartition(await call(node.url, 'GET', `/event-types/${NAME}/partitions/0`));
}

function publish(body: Buffer): Promise<Answer> {
  return call(node.url, 'POST', `/event-types/${NAME}/events`, body);
}

describe('publish admission by queue delay', () => {
  it('while batches wait for a worker thread beyond the bound, a large publish is refused at once with 503, Retry-After and the bound named, nothing of it written; a small one and the admitted ones go through', async () => {
    const before = await stored();
    const refusedBefore = valueOf(await metrics(), 'broker_publish_refused_total', { reason: 'queue_delay' }) ?? 0;
    const large = Array.from({ length: 4 }, (_, i) => batchOf(`large-${i}`, LARGE_BATCH_EVENTS));
    // Sent together: the first to arrive runs on the one thread and at least the next is admitted to
    // wait behind it; later ones may already be refused by the bound.
    const inFlight = large.map((batch) => publish(batch.body));
    let delay = 0;
    const deadline = Date.now() + 20_000;
    while (delay <= 0.005 && Date.now() < deadline) delay = valueOf(await metrics(), 'broker_worker_pool_queue_delay_seconds') ?? 0;
    expect(delay, 'queue delay seen on the node').toBeGreaterThan(0.005);

    const refused = batchOf('refused', 2_000);
    const small = batchOf('small', 1);
    const [refusal, smallAnswer] = await Promise.all([publish(refused.body), publish(small.body)]);
    expect(refusal.status, refusal.text).toBe(503);
    expect(refusal.headers.get('retry-after')).toBe('1');
    expect(refusal.headers.get('content-type')).toBe('application/problem+json');
    const problem = refusal.json as { type: string; detail: string };
    expect(problem.type).toBe('/problems/publish-queue-delayed');
    expect(problem.detail).toMatch(/^Batches on this node have waited \d+ ms for a worker thread \(http\.publishMaxQueueDelayMs 1\); nothing of this publish was read or written/);
    // A body of at most publish.inlineMaxBytes is not held to the bound.
    expect(smallAnswer.status, smallAnswer.text).toBe(200);

    const answers = await Promise.all(inFlight);
    const admitted = answers.filter((a) => a.status === 200).length;
    for (const answer of answers) {
      if (answer.status !== 200) expect((answer.json as { type: string }).type, answer.text).toBe('/problems/publish-queue-delayed');
    }
    expect(admitted).toBeGreaterThanOrEqual(2);
    // Only the admitted batches and the small one were written, none of the refused ones.
    expect(await stored()).toBe(before + admitted * LARGE_BATCH_EVENTS + 1);
    const refusals = answers.length - admitted + 1;
    expect(valueOf(await metrics(), 'broker_publish_refused_total', { reason: 'queue_delay' })).toBe(refusedBefore + refusals);

    // Once the queue is empty the same batch goes through.
    const again = await publish(refused.body);
    expect(again.status, again.text).toBe(200);
    expect(await stored()).toBe(before + admitted * LARGE_BATCH_EVENTS + 1 + refused.eids.length);
  });
});
