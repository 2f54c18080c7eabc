/**
 * Scenario `github`: the real GitHub webhook payloads of `@octokit/webhooks-examples`,
 * registered as `data` event types (scripts/github-event-types.ts) and published wrapped as data
 * events in batches of 100. Each event type gets one 100-event body cycling through its payloads
 * (distinct eids); autocannon rotates over the event types' bodies for the measured period. Reports
 * MB/s of event JSON accepted (2xx) and events/s; every rejection is reported.
 */
import { randomUUID } from 'node:crypto';
import { loadGithubEventTypes, wrapAsDataEvent } from '../scripts/github-event-types.js';
import { MB, createEventType, loadRequest, post, recordCpu, reportFailures, round, runLoad, startStack, type LoadRequest, type Recorder, type Scenario, stackMeter } from './harness.js';

export const BATCH = 100;
export const CONNECTIONS = 8;
export const DURATION_SECONDS = 10;
export const WARMUP_SECONDS = 2;
/** Warm-up passes over every body, each body sent as this many concurrent requests (one per worker). */
const WARMUP_PASSES = 2;
const WARMUP_CONCURRENCY = 2;
const TARGET_MB_PER_SECOND = 50;

async function run(recorder: Recorder): Promise<void> {
  const types = loadGithubEventTypes().filter((t) => t.payloads.length > 0);
  const requests: LoadRequest[] = types.map((type) => {
    const events = Array.from({ length: BATCH }, (_, i) => wrapAsDataEvent(type.name, type.payloads[i % type.payloads.length] ?? {}, randomUUID()));
    return loadRequest(`/event-types/${type.definition.name}/events`, events);
  });
  const payloads = types.reduce((sum, t) => sum + t.payloads.length, 0);
  const eventBytes = requests.reduce((sum, r) => sum + r.eventBytes, 0);
  const events = requests.reduce((sum, r) => sum + r.events, 0);
  recorder.add('event types', types.length, 'event types');
  recorder.add('distinct payloads', payloads, 'payloads');
  recorder.add('mean event size (wrapped, as sent, over the bodies)', Math.round(eventBytes / events), 'bytes');

  const stack = await startStack();
  try {
    let started = performance.now();
    for (const type of types) await createEventType(stack.broker.url, type.definition);
    recorder.log(`registered ${types.length} event types in ${((performance.now() - started) / 1000).toFixed(1)} s`);

    // Warm-up: each worker compiles the validator of every event type on first use (seconds for
    // these schemas), so every body goes out as two concurrent requests (one per idle worker), twice.
    let rejected = 0;
    started = performance.now();
    for (let pass = 0; pass < WARMUP_PASSES; pass++) {
      for (const request of requests) {
        await Promise.all(
          Array.from({ length: WARMUP_CONCURRENCY }, async () => {
            const { status, text } = await post(stack.broker.url + request.path, request.body);
            if (status !== 200) {
              rejected += request.events;
              recorder.alarm(`warm-up: ${request.path} answered ${status}: ${text.slice(0, 600)}`);
            }
          }),
        );
      }
    }
    recorder.log(`warm-up: ${WARMUP_PASSES} passes of ${WARMUP_CONCURRENCY} concurrent copies of every body in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    recorder.add('events rejected in the warm-up', rejected, 'events', { op: '<=', value: 0 });
    await runLoad({ url: stack.broker.url, requests, connections: CONNECTIONS, durationSeconds: WARMUP_SECONDS });

    const meter = stackMeter(stack);
    meter.start();
    const result = await runLoad({ url: stack.broker.url, requests, connections: CONNECTIONS, durationSeconds: DURATION_SECONDS });
    const cpu = meter.stop();
    reportFailures(recorder, 'github payloads', result);
    recorder.log(`${CONNECTIONS} connections: ${result.eventMBps.toFixed(1)} MB/s of event JSON, ${Math.round(result.eventsPerSecond)} events/s, ${result.okRequests} batches accepted`);
    recorder.add('MB/s of event JSON accepted', round(result.eventMBps, 1), 'MB/s', { op: '>=', value: TARGET_MB_PER_SECOND });
    recorder.add('events/s', Math.round(result.eventsPerSecond), 'events/s');
    recorder.add('batches/s', round(result.requestsPerSecond, 1), 'requests/s');
    recorder.add('MB accepted in the measured period', round(result.eventBytes / MB, 1), 'MB');
    recorder.add('latency p50', round(result.latencyMs.p50, 2), 'ms');
    recorder.add('latency p99', round(result.latencyMs.p99, 2), 'ms');
    recorder.add('non-2xx answers', result.non2xx + result.errors, 'answers', { op: '<=', value: 0 });
    recordCpu(recorder, '', cpu);
  } finally {
    await stack.stop(recorder);
  }
}

export const githubPayloads: Scenario = {
  name: 'github',
  title: `GitHub webhook payloads as data events, batches of ${BATCH}: MB/s`,
  run,
};
