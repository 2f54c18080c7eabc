/**
 * Scenario `publish-idempotent`: what idempotent publishing (docs/publishing.md "Idempotent publishing")
 * costs. 1000-event batches of ~500-byte business events (4 partitions, random partitioning, 4
 * connections) on two event types of one node and one Redis, alike but for the annotation
 * `broker.io/idempotency-window-seconds`; every request carries fresh eids (both event types, so the
 * load generator does the same work), so the idempotent one stores every event and pays the eid check
 * and index insert of each. The two are measured in alternating rounds and the ratio is the median of
 * the rounds' ratios, so drift of the shared 2-core machine within the run cancels out.
 */
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { requestRetrying } from './stream-client.js';
import { createEventType, loadRequest, median, recordCpu, reportFailures, round, runLoad, stackMeter, startStack, type LoadRequest, type Recorder, type Scenario } from './harness.js';

const PARTITIONS = 4;
const BATCH = 1000;
const CONNECTIONS = 4;
const BODIES = 4;
const ROUNDS = 3;
const ROUND_SECONDS = 5;
const WARMUP_SECONDS = 2;
/** Target: events/s with idempotency on ÷ off, same run. */
const TARGET_RATIO = 0.85;
const WINDOW_ANNOTATION = 'broker.io/idempotency-window-seconds';

/**
 * A rewrite that gives every request fresh eids: each `"eid":"<uuid>"` of the template keeps its first
 * 24 characters and gets a 12-hex-digit counter as its last group.
 */
function freshEids(): (body: Buffer) => Buffer {
  const positions = new Map<Buffer, number[]>();
  let counter = 0;
  return (template) => {
    let at = positions.get(template);
    if (at === undefined) {
      at = [];
      const marker = Buffer.from('"eid":"');
      for (let i = template.indexOf(marker); i >= 0; i = template.indexOf(marker, i + 1)) at.push(i + marker.length + 24);
      positions.set(template, at);
    }
    const body = Buffer.from(template);
    for (const position of at) body.write((counter++).toString(16).padStart(12, '0'), position, 'latin1');
    return body;
  };
}

async function run(recorder: Recorder): Promise<void> {
  const random = prng(7);
  const templates: LoadRequest[] = Array.from({ length: BODIES }, () => loadRequest('/', Array.from({ length: BATCH }, () => orderEvent(random))));
  const stack = await startStack();
  try {
    const meter = stackMeter(stack);
    const modes = [
      { label: 'off', name: 'bench.idempotent.off', annotations: undefined },
      { label: 'on', name: 'bench.idempotent.on', annotations: { [WINDOW_ANNOTATION]: '3600' } },
    ] as const;
    for (const mode of modes) {
      const definition = businessEventType(mode.name, ORDER_SCHEMA, PARTITIONS) as Record<string, unknown>;
      await createEventType(stack.broker.url, mode.annotations === undefined ? definition : { ...definition, annotations: mode.annotations });
    }
    const rewrite = freshEids();
    const perMode = new Map<string, number[]>(modes.map((m) => [m.label, []]));
    const ratios: number[] = [];
    for (let roundIndex = 0; roundIndex < ROUNDS; roundIndex++) {
      const order = roundIndex % 2 === 0 ? modes : [...modes].reverse();
      const figures = new Map<string, number>();
      for (const mode of order) {
        const requests = templates.map((t) => ({ ...t, path: `/event-types/${mode.name}/events` }));
        await runLoad({ url: stack.broker.url, requests, connections: CONNECTIONS, durationSeconds: WARMUP_SECONDS, rewrite });
        meter.start();
        const result = await runLoad({ url: stack.broker.url, requests, connections: CONNECTIONS, durationSeconds: ROUND_SECONDS, rewrite });
        const cpu = meter.stop();
        const label = `idempotency ${mode.label}, round ${roundIndex + 1}`;
        reportFailures(recorder, label, result);
        recorder.log(`${label}: ${Math.round(result.eventsPerSecond)} events/s, p50 ${result.latencyMs.p50.toFixed(1)} ms, p99 ${result.latencyMs.p99.toFixed(1)} ms, non-2xx ${result.non2xx}`);
        if (roundIndex === ROUNDS - 1) recordCpu(recorder, `idempotency ${mode.label} (last round): `, cpu);
        figures.set(mode.label, result.eventsPerSecond);
        perMode.get(mode.label)?.push(result.eventsPerSecond);
        if (result.non2xx + result.errors > 0) recorder.add(`idempotency ${mode.label}: non-2xx answers`, result.non2xx + result.errors, 'answers', { op: '<=', value: 0 });
      }
      const on = figures.get('on') ?? 0;
      const off = figures.get('off') ?? 0;
      if (off > 0) ratios.push(on / off);
    }
    for (const [label, values] of perMode) recorder.add(`batch ${BATCH}, idempotency ${label}: events/s (median of ${ROUNDS} rounds)`, Math.round(median(values)), 'events/s');
    recorder.add(`batch ${BATCH}: idempotency on / off (events/s, median of same-round ratios)`, round(median(ratios), 2), '×', { op: '>=', value: TARGET_RATIO });
    for (const mode of modes) await requestRetrying('DELETE', `${stack.broker.url}/event-types/${mode.name}`, undefined, [200, 204]);
  } finally {
    await stack.stop(recorder);
  }
}

export const publishIdempotent: Scenario = {
  name: 'publish-idempotent',
  title: 'idempotent publishing: 1000-event batches with broker.io/idempotency-window-seconds on vs off, alternating rounds, fresh eids',
  run,
};
