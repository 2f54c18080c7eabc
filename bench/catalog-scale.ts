/**
 * Scenario `catalog-scale`: what listing the event types and scraping `/metrics` cost
 * as the catalog grows to 10,000 event types (one partition each) and 10,000 subscriptions (one per
 * event type, `read_from: begin`), and how long building that catalog through the API takes.
 *
 * Per point N = 100, 1,000, 10,000 (cumulative): the event types and subscriptions up to N are created
 * through the API (bounded parallelism; a 503 of the control-plane limiter is retried), one event is
 * published to each new event type and each new subscription's cursors are initialized
 * (`PATCH .../cursors` with no items), so every subscription has committed offsets and one unconsumed
 * event: every lag gauge is read. Then `GET /event-types` (whole list) and `GET /subscriptions?limit=1000`
 * are timed, and `/metrics` is scraped once right after (the lag reader looks up the oldest unconsumed
 * entry of every partition) and then again (steady: those are remembered). For each scrape the Redis
 * commands the node sent are counted from `INFO stats` `total_commands_processed` (minus the counting's
 * own) and broken down by `INFO commandstats`; nothing else talks to Redis meanwhile: no streams are open,
 * and the node runs with retention rounds {@link RETENTION_CHECK_INTERVAL_MS} apart. At the default minute,
 * a round over 10,000 event types (a lock, the time index and a trim per event type) lasted long enough on a
 * slow machine to overlap most steady scrapes (one such run counted 30,038 commands per scrape, 12,132 of
 * them `HGET`, against 20,042 in a run without the overlap); its cost is not what this scenario measures. The CPU of the node (main thread, other threads),
 * Redis and the rest of the machine over the steady scrapes is recorded (the machine is shared). Last, one
 * event is published to every event type and `/metrics` is scraped once more: the scrape after every
 * per-event-type series changed (a node that kept the text of unchanged families between scrapes would
 * be fast only without traffic: a branch that did was measured and not merged,
 * docs/decisions/0017-metrics-exposition-written-by-the-node.md).
 *
 * Targets: a steady `/metrics` scrape < 1 s at 10,000 partitions; Redis commands per scrape per partition
 * at the last point within 1.2× of the first (the lag read is O(partitions): one HMGET per partition, one
 * HGETALL per subscription and a few per scrape, sent together per step); `GET /event-types` time per
 * event type at the last point within 1.5× of the point before (linear).
 */
import { Redis } from 'ioredis';
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { median, recordCpu, round, runBounded, stackMeter, startStack, type Recorder, type Scenario } from './harness.js';
import { overloadRetries, quickMode, request, requestRetrying } from './stream-client.js';

const QUICK = quickMode();
/** Event types and subscriptions at each point (cumulative). */
export const POINTS: readonly number[] = QUICK ? [20, 100] : [100, 1_000, 10_000];
/** Requests in flight while building the catalog (the node runs `http.controlConcurrency` = 4 at once, queues 64). */
const IN_FLIGHT = 16;
/** Timed repetitions of each listing and of the steady scrape (the median is recorded). */
const REPEATS = QUICK ? 2 : 5;
const METRICS_TARGET_SECONDS = 1;
const COMMANDS_RATIO_TARGET = 1.2;
const LIST_RATIO_TARGET = 1.5;

/** Retention rounds of the node under test: an hour apart, so none runs during the scenario (see above). */
const RETENTION_CHECK_INTERVAL_MS = 3_600_000;

/** Redis's `INFO commandstats` as command → calls. */
async function commandCalls(client: Redis): Promise<Map<string, number>> {
  const calls = new Map<string, number>();
  for (const line of (await client.info('commandstats')).split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (match) calls.set(match[1] as string, Number(match[2]));
  }
  return calls;
}

/** `total_commands_processed` of `INFO stats`. */
async function commandsProcessed(client: Redis): Promise<number> {
  const match = /total_commands_processed:(\d+)/.exec(await client.info('stats'));
  if (!match) throw new Error('INFO stats has no total_commands_processed');
  return Number(match[1]);
}

/** Runs `task` and returns its duration in ms with the Redis commands processed meanwhile (the counting's own removed). */
async function counted<T>(client: Redis, countingOverhead: number, task: () => Promise<T>): Promise<{ ms: number; commands: number; byCommand: Map<string, number>; value: T }> {
  const callsBefore = await commandCalls(client);
  const before = await commandsProcessed(client);
  const started = performance.now();
  const value = await task();
  const ms = performance.now() - started;
  const after = await commandsProcessed(client);
  const callsAfter = await commandCalls(client);
  const byCommand = new Map<string, number>();
  for (const [name, calls] of callsAfter) {
    const delta = calls - (callsBefore.get(name) ?? 0);
    if (delta > 0 && name !== 'info') byCommand.set(name, delta);
  }
  return { ms, commands: after - before - countingOverhead, byCommand, value };
}

async function timedGet(url: string): Promise<{ ms: number; bytes: number; text: string }> {
  const started = performance.now();
  const answer = await request('GET', url);
  const ms = performance.now() - started;
  if (answer.status !== 200) throw new Error(`GET ${url} answered ${answer.status}: ${answer.text.slice(0, 300)}`);
  return { ms, bytes: Buffer.byteLength(answer.text), text: answer.text };
}

async function run(recorder: Recorder): Promise<void> {
  const stack = await startStack({ BROKER_RETENTION_CHECK_INTERVAL_MS: String(RETENTION_CHECK_INTERVAL_MS) });
  const client = new Redis(stack.redis.url, { maxRetriesPerRequest: 1 });
  try {
    const url = stack.broker.url;
    // What two INFO calls around nothing count (the INFO commands themselves).
    const before = await commandsProcessed(client);
    const countingOverhead = (await commandsProcessed(client)) - before;
    const random = prng(4173);
    const event = JSON.stringify([orderEvent(random)]);
    const name = (i: number): string => `bench.catalog.${String(i).padStart(5, '0')}`;
    const subscriptionIds: string[] = [];
    let built = 0;
    const perPartition = new Map<number, number>();
    const listPerType = new Map<number, number>();
    for (const count of POINTS) {
      const from = built;
      const added = count - from;
      let started = performance.now();
      await runBounded(added, IN_FLIGHT, async (k) => {
        await requestRetrying('POST', `${url}/event-types`, JSON.stringify(businessEventType(name(from + k), ORDER_SCHEMA, 1)), [201]);
      });
      const typesSeconds = (performance.now() - started) / 1000;
      started = performance.now();
      await runBounded(added, IN_FLIGHT, async (k) => {
        const answer = await requestRetrying('POST', `${url}/subscriptions`, JSON.stringify({ owning_application: `bench-catalog-${from + k}`, event_types: [name(from + k)], read_from: 'begin' }), [200, 201]);
        const id = (JSON.parse(answer.text) as { id?: unknown }).id;
        if (typeof id !== 'string') throw new Error(`POST /subscriptions answered without an id: ${answer.text.slice(0, 300)}`);
        subscriptionIds[from + k] = id;
      });
      const subscriptionsSeconds = (performance.now() - started) / 1000;
      started = performance.now();
      await runBounded(added, IN_FLIGHT, async (k) => {
        await requestRetrying('POST', `${url}/event-types/${name(from + k)}/events`, event, [200]);
        await requestRetrying('PATCH', `${url}/subscriptions/${subscriptionIds[from + k] as string}/cursors`, JSON.stringify({ items: [] }), [204]);
      });
      const fillSeconds = (performance.now() - started) / 1000;
      built = count;
      const label = `${count} event types and subscriptions`;
      recorder.log(
        `${label}: ${added} event types created in ${typesSeconds.toFixed(1)} s (${((typesSeconds * 1000) / added).toFixed(1)} ms each, ${IN_FLIGHT} in flight), ` +
          `${added} subscriptions in ${subscriptionsSeconds.toFixed(1)} s, one event and a cursor initialization each in ${fillSeconds.toFixed(1)} s; 503s retried so far ${overloadRetries.count}`,
      );
      recorder.add(`${label}: creating ${added} event types (${IN_FLIGHT} in flight)`, round(typesSeconds, 1), 's');
      recorder.add(`${label}: creating ${added} subscriptions (${IN_FLIGHT} in flight)`, round(subscriptionsSeconds, 1), 's');
      recorder.add(`${label}: publishing one event and initializing the cursors of each new one`, round(fillSeconds, 1), 's');

      const lists = [];
      for (let r = 0; r < REPEATS; r++) lists.push(await timedGet(`${url}/event-types`));
      const listMs = median(lists.map((l) => l.ms));
      listPerType.set(count, listMs / count);
      const pages = [];
      for (let r = 0; r < REPEATS; r++) pages.push(await timedGet(`${url}/subscriptions?limit=1000`));
      const pageMs = median(pages.map((l) => l.ms));
      recorder.log(`${label}: GET /event-types ${listMs.toFixed(0)} ms (${((lists[0]?.bytes ?? 0) / 1e6).toFixed(1)} MB), GET /subscriptions?limit=1000 ${pageMs.toFixed(0)} ms`);
      recorder.add(`${label}: GET /event-types (median of ${REPEATS})`, round(listMs, 1), 'ms');
      recorder.add(`${label}: GET /event-types answer`, lists[0]?.bytes ?? 0, 'bytes');
      recorder.add(`${label}: GET /subscriptions?limit=1000 (median of ${REPEATS})`, round(pageMs, 1), 'ms');

      const first = await counted(client, countingOverhead, () => timedGet(`${url}/metrics`));
      const steady = [];
      const meter = stackMeter(stack);
      meter.start();
      for (let r = 0; r < REPEATS; r++) steady.push(await counted(client, countingOverhead, () => timedGet(`${url}/metrics`)));
      const cpu = meter.stop();
      const steadyMs = median(steady.map((s) => s.ms));
      // The node's own measure of the lag read within the scrape (`broker_subscription_lag_collect_seconds`).
      const lagReadMs = (text: string): number => 1000 * Number(/^broker_subscription_lag_collect_seconds ([\d.e+-]+)/m.exec(text)?.[1] ?? Number.NaN);
      const steadyLagMs = median(steady.map((s) => lagReadMs(s.value.text)));
      const steadyCommands = median(steady.map((s) => s.commands));
      const breakdown = (m: Map<string, number>): string => [...m].sort((a, b) => b[1] - a[1]).map(([c, n]) => `${c} ${n}`).join(', ');
      perPartition.set(count, steadyCommands / count);
      recorder.log(`${label}: /metrics first scrape ${first.ms.toFixed(0)} ms, ${first.commands} Redis commands (${breakdown(first.byCommand)}); steady ${steadyMs.toFixed(0)} ms (lag read ${steadyLagMs.toFixed(0)} ms), ${steadyCommands} commands (${breakdown(steady[0]?.byCommand ?? new Map<string, number>())}); ${((first.value.bytes) / 1e6).toFixed(1)} MB`);
      recorder.add(`${label}: /metrics first scrape (lag entries looked up)`, round(first.ms, 1), 'ms');
      recorder.add(`${label}: /metrics first scrape: Redis commands`, first.commands, 'commands');
      recorder.add(`${label}: /metrics steady scrape (median of ${REPEATS})`, round(steadyMs, 1), 'ms', count >= 10_000 ? { op: '<', value: METRICS_TARGET_SECONDS * 1000 } : undefined);
      recorder.add(`${label}: /metrics first scrape: lag read (broker_subscription_lag_collect_seconds)`, round(lagReadMs(first.value.text), 1), 'ms');
      recorder.add(`${label}: /metrics steady scrape: lag read`, round(steadyLagMs, 1), 'ms');
      recorder.add(`${label}: /metrics steady scrape: Redis commands`, steadyCommands, 'commands');
      recorder.add(`${label}: /metrics steady scrape: Redis commands per partition`, round(steadyCommands / count, 3), 'commands');
      recorder.add(`${label}: /metrics answer`, first.value.bytes, 'bytes');
      recordCpu(recorder, `${label}: /metrics steady scrapes: `, cpu);
      // CPU seconds the node spent per steady scrape: less moved by a busy neighbour than the scrape's time.
      const nodeCpuMs = (percent: number | undefined): number => round(((percent ?? 0) / 100) * cpu.seconds * 1000 / REPEATS, 0);
      recorder.add(`${label}: /metrics steady scrape: broker main thread CPU per scrape`, nodeCpuMs(cpu.byLabel['broker main thread']), 'ms');
      recorder.add(`${label}: /metrics steady scrape: broker other threads CPU per scrape`, nodeCpuMs(cpu.byLabel['broker other threads']), 'ms');
      recorder.log(`${label}: CPU over the steady scrapes (% of a core): ${Object.entries(cpu.byLabel).map(([who, percent]) => `${who} ${percent.toFixed(0)}`).join(', ')}`);
      // What the answer is made of: samples per metric family (histogram buckets count in their family).
      const families = new Map<string, number>();
      for (const line of first.value.text.split('\n')) {
        if (line === '' || line.startsWith('#')) continue;
        const family = (/^[a-z_:][a-z0-9_:]*/i.exec(line)?.[0] ?? '').replace(/_(bucket|sum|count)$/, '');
        families.set(family, (families.get(family) ?? 0) + 1);
      }
      const samples = [...families.values()].reduce((a, b) => a + b, 0);
      recorder.add(`${label}: /metrics samples`, samples, 'samples');
      recorder.log(`${label}: /metrics ${samples} samples; largest families: ${[...families].sort((a, b) => b[1] - a[1]).slice(0, 6).map(([f, n]) => `${f} ${n}`).join(', ')}`);
      for (const [command, calls] of steady[0]?.byCommand ?? new Map<string, number>()) recorder.add(`${label}: /metrics steady scrape: ${command} calls`, calls, 'commands');

      // Every per-event-type series changed since the last scrape: nothing of the publish families is reused.
      await runBounded(count, IN_FLIGHT, async (k) => {
        await requestRetrying('POST', `${url}/event-types/${name(k)}/events`, event, [200]);
      });
      const busy = await timedGet(`${url}/metrics`);
      recorder.log(`${label}: /metrics after one event published to each of the ${count} event types ${busy.ms.toFixed(0)} ms (lag read ${lagReadMs(busy.text).toFixed(0)} ms)`);
      recorder.add(`${label}: /metrics scrape after one event published to every event type`, round(busy.ms, 1), 'ms');
    }
    const firstPoint = POINTS[0] as number;
    const last = POINTS[POINTS.length - 1] as number;
    const previous = POINTS[POINTS.length - 2] as number;
    recorder.add(`/metrics Redis commands per partition, ${last} ÷ ${firstPoint}`, round((perPartition.get(last) ?? Number.NaN) / (perPartition.get(firstPoint) ?? Number.NaN), 2), '×', { op: '<=', value: COMMANDS_RATIO_TARGET });
    recorder.add(`GET /event-types time per event type, ${last} ÷ ${previous}`, round((listPerType.get(last) ?? Number.NaN) / (listPerType.get(previous) ?? Number.NaN), 2), '×', { op: '<=', value: LIST_RATIO_TARGET });
    recorder.add('control-plane 503s retried while building', overloadRetries.count, 'requests');
  } finally {
    client.disconnect();
    await stack.stop(recorder);
  }
}

export const catalogScale: Scenario = {
  name: 'catalog-scale',
  title: `GET /event-types, GET /subscriptions and /metrics (time, Redis commands) with ${POINTS.join('/')} event types and subscriptions`,
  run,
};
