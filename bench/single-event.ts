/**
 * Scenario `single-event`: single-event batches (`[event]`, the ~500-byte order event of
 * `publish-batches`) from 10 concurrent producers (autocannon connections, pipelining 1): latency
 * percentiles and requests/s. Latencies are the exact response times autocannon reports per answer
 * (its own histogram rounds to whole milliseconds). For comparison, a 5 s run with one producer.
 */
import { ORDER_SCHEMA, businessEventType, orderEvent, prng } from './events.js';
import { createEventType, loadRequest, recordCpu, reportFailures, round, runLoad, startStack, type Recorder, type Scenario, stackMeter } from './harness.js';

const EVENT_TYPE = 'bench.order';
const PATH = `/event-types/${EVENT_TYPE}/events`;
export const CONNECTIONS = 10;
export const DURATION_SECONDS = 10;
export const WARMUP_SECONDS = 2;
const BODIES = 64;
/** The extra one-producer point (no target): what a request costs when it does not queue. */
const SINGLE_PRODUCER_SECONDS = 5;

async function run(recorder: Recorder): Promise<void> {
  const random = prng(3);
  const requests = Array.from({ length: BODIES }, () => loadRequest(PATH, [orderEvent(random)]));
  const stack = await startStack();
  try {
    await createEventType(stack.broker.url, businessEventType(EVENT_TYPE, ORDER_SCHEMA, 4));
    await runLoad({ url: stack.broker.url, requests, connections: CONNECTIONS, durationSeconds: WARMUP_SECONDS });
    const meter = stackMeter(stack);
    meter.start();
    const result = await runLoad({ url: stack.broker.url, requests, connections: CONNECTIONS, durationSeconds: DURATION_SECONDS });
    const cpu = meter.stop();
    reportFailures(recorder, 'single event', result);
    recorder.log(
      `${CONNECTIONS} connections: ${Math.round(result.requestsPerSecond)} requests/s, p50 ${result.latencyMs.p50.toFixed(3)} ms, p97.5 ${result.latencyMs.p97_5.toFixed(3)} ms, p99 ${result.latencyMs.p99.toFixed(3)} ms`,
    );
    recorder.add('latency p50', round(result.latencyMs.p50, 3), 'ms', { op: '<', value: 1 });
    recorder.add('latency p97.5', round(result.latencyMs.p97_5, 3), 'ms');
    recorder.add('latency p99', round(result.latencyMs.p99, 3), 'ms', { op: '<', value: 5 });
    recorder.add('latency mean', round(result.latencyMs.mean, 3), 'ms');
    recorder.add('requests/s', Math.round(result.requestsPerSecond), 'requests/s');
    recorder.add('non-2xx answers', result.non2xx + result.errors, 'answers', { op: '<=', value: 0 });
    recordCpu(recorder, '', cpu);

    // For comparison, one producer: the latency of a request that does not queue behind others.
    const alone = await runLoad({ url: stack.broker.url, requests, connections: 1, durationSeconds: SINGLE_PRODUCER_SECONDS });
    reportFailures(recorder, 'single event, 1 connection', alone);
    recorder.log(`1 connection: ${Math.round(alone.requestsPerSecond)} requests/s, p50 ${alone.latencyMs.p50.toFixed(3)} ms, p99 ${alone.latencyMs.p99.toFixed(3)} ms`);
    recorder.add('1 producer (for comparison): latency p50', round(alone.latencyMs.p50, 3), 'ms');
    recorder.add('1 producer (for comparison): latency p99', round(alone.latencyMs.p99, 3), 'ms');
    recorder.add('1 producer (for comparison): requests/s', Math.round(alone.requestsPerSecond), 'requests/s');
  } finally {
    await stack.stop(recorder);
  }
}

export const singleEvent: Scenario = {
  name: 'single-event',
  title: `single-event batches, ${CONNECTIONS} concurrent producers: latency p50/p97.5/p99`,
  run,
};
