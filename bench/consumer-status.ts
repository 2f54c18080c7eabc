/**
 * Scenario `consumer-status`: no false verdict under steady load. One event type with 8 partitions
 * (random partitioning), a producer publishing 100-event batches at a steady 1,000 events/s, and one
 * subscription stream (`batch_limit` 100, `max_uncommitted_events` 1,000) whose consumer commits every
 * batch as it arrives (stream-client.ts `Committer`). The node runs with the default consumer status
 * settings (`consumerStatus.windowMs` 60 s, sampled every 5 s); every second the stats are read and
 * every partition whose `consumer_status` is not `ok` counted. Target: none over the run (10 minutes;
 * `BENCH_QUICK=1`: 30 s with a 5 s window). A warm-up of one window comes first: the verdicts exist
 * once the subscription was streamed.
 */
import { SMALL_BUSINESS_SCHEMA, businessEventType, prng, smallBusinessEvent } from './events.js';
import { createEventType, sleep, startStack, type Recorder, type Scenario } from './harness.js';
import { Committer, createSubscription, openStream, quickMode, request } from './stream-client.js';

const QUICK = quickMode();
const EVENT_TYPE = 'bench.consumer-status';
const PARTITIONS = 8;
/** Events per published batch, and batches per second. */
const BATCH = 100;
const BATCHES_PER_SECOND = 10;
/** The status window and sampling interval of the node (quick: shorter, so the run is short). */
const WINDOW_MS = QUICK ? 5000 : 60_000;
const INTERVAL_MS = QUICK ? 500 : 5000;
export const DURATION_SECONDS = QUICK ? 30 : 600;

/** One partition of the stats, as far as this scenario reads it. */
interface PartitionStats {
  readonly partition: string;
  readonly consumer_status?: string;
  readonly drain_seconds?: number;
  readonly unconsumed_events?: number;
}

async function stats(brokerUrl: string, id: string): Promise<PartitionStats[]> {
  const { status, text } = await request('GET', `${brokerUrl}/subscriptions/${id}/stats`);
  if (status !== 200) throw new Error(`GET /subscriptions/${id}/stats answered ${status}: ${text.slice(0, 300)}`);
  return (JSON.parse(text) as { items: { partitions: PartitionStats[] }[] }).items.flatMap((i) => i.partitions);
}

async function run(recorder: Recorder): Promise<void> {
  const stack = await startStack({ BROKER_CONSUMER_STATUS_WINDOW_MS: String(WINDOW_MS), BROKER_CONSUMER_STATUS_INTERVAL_MS: String(INTERVAL_MS) });
  let producing = true;
  let published = 0;
  let publishFailures = 0;
  let consumed = 0;
  let committer: Committer | undefined;
  let stream: Awaited<ReturnType<typeof openStream>> | undefined;
  try {
    await createEventType(stack.broker.url, businessEventType(EVENT_TYPE, SMALL_BUSINESS_SCHEMA, PARTITIONS));
    const id = await createSubscription(stack.broker.url, 'bench-consumer-status', EVENT_TYPE, 'end');
    const commitUrl = `${stack.broker.url}/subscriptions/${id}/cursors`;
    stream = await openStream(
      `${stack.broker.url}/subscriptions/${id}/events?batch_limit=${BATCH}&max_uncommitted_events=${10 * BATCH}&batch_flush_timeout=1`,
      { onOpen: (streamId) => (committer = streamId === undefined ? undefined : new Committer(commitUrl, streamId, false)) },
      (line) => {
        const count = line.events?.length ?? 0;
        if (count === 0) return;
        consumed += count;
        committer?.add(line.cursor);
      },
    );
    const random = prng(48);
    const path = `${stack.broker.url}/event-types/${EVENT_TYPE}/events`;
    const producer = (async () => {
      const every = 1000 / BATCHES_PER_SECOND;
      let next = performance.now();
      while (producing) {
        const answer = await request('POST', path, JSON.stringify(Array.from({ length: BATCH }, () => smallBusinessEvent(random))));
        if (answer.status === 200) published += BATCH;
        else publishFailures++;
        next += every;
        await sleep(Math.max(0, next - performance.now()));
      }
    })();

    // Warm-up: a window of samples before the first verdict can be other than ok.
    await sleep(WINDOW_MS + 2 * INTERVAL_MS);
    const notOk = new Map<string, number>();
    let observations = 0;
    let unjudged = 0;
    let maxDrain = 0;
    const started = performance.now();
    while (performance.now() - started < DURATION_SECONDS * 1000) {
      for (const p of await stats(stack.broker.url, id)) {
        observations++;
        if (p.consumer_status === undefined) unjudged++;
        else if (p.consumer_status !== 'ok') {
          notOk.set(p.consumer_status, (notOk.get(p.consumer_status) ?? 0) + 1);
          recorder.log(`partition ${p.partition}: ${p.consumer_status} at ${Math.round((performance.now() - started) / 1000)} s (unconsumed ${String(p.unconsumed_events)}, drain ${String(p.drain_seconds)} s)`);
        }
        maxDrain = Math.max(maxDrain, p.drain_seconds ?? 0);
      }
      await sleep(1000);
    }
    const seconds = (performance.now() - started) / 1000;
    producing = false;
    await producer;
    const falseVerdicts = [...notOk.values()].reduce((s, n) => s + n, 0);
    recorder.log(`${observations} partition observations over ${Math.round(seconds)} s; not ok: ${falseVerdicts} (${[...notOk].map(([s, n]) => `${s} ${n}`).join(', ') || 'none'}); published ${published}, consumed ${consumed}`);
    if (publishFailures > 0) recorder.alarm(`${publishFailures} publishes failed`);
    recorder.add('steady load: events/s published', Math.round(published / (seconds + WINDOW_MS / 1000)), 'events/s');
    recorder.add('steady load: partition observations (stats read every second)', observations, 'observations');
    recorder.add('steady load: observations with a status other than ok', falseVerdicts, 'observations', { op: '<=', value: 0 });
    recorder.add('steady load: observations without a status', unjudged, 'observations', { op: '<=', value: 0 });
    recorder.add('steady load: longest drain time seen', maxDrain, 's');
  } finally {
    producing = false;
    if (committer !== undefined) {
      committer.auto = false;
      await committer.flush();
    }
    stream?.close();
    await stack.stop(recorder);
  }
}

export const consumerStatus: Scenario = {
  name: 'consumer-status',
  title: `consumer status under steady load: ${BATCH * BATCHES_PER_SECOND} events/s over ${PARTITIONS} partitions, a committing consumer, no status other than ok for ${DURATION_SECONDS} s`,
  run,
};
