/**
 * What the benchmark scenarios share: figures and targets, a fresh Redis + broker node per scenario,
 * an autocannon wrapper that counts events and bytes per answered request and keeps exact latencies,
 * and a CPU meter (per thread, from /proc) that tells where the time goes.
 *
 * Benchmarks are scripts with recorded results (each figure with the date, commit and machine that
 * produced it), never timed tests: a test that fails on a slower or busier machine proves nothing.
 */
import { CpuMeter, type CpuUse } from './cpu-meter.js';
import { startBroker, startRedis, type BrokerProcess, type RedisProcess } from '../scripts/local-processes.js';
import type { Redis } from 'ioredis';

export { CpuMeter, type CpuUse } from './cpu-meter.js';
export { MB, loadRequest, reportFailures, runLoad, type LoadOptions, type LoadRequest, type LoadResult } from './load-generator.js';
import type { LoadRequest } from './load-generator.js';

/** A target a figure is compared with: `value op target`. */
export interface Target {
  readonly op: '>=' | '<=' | '<';
  readonly value: number;
}

/** One measured figure: one line of `bench/results.jsonl`. */
export interface Figure {
  readonly scenario: string;
  readonly metric: string;
  readonly value: number;
  readonly unit: string;
  readonly target?: Target;
}

/** Whether a figure meets its target; `undefined` without a target. */
export function meets(figure: Figure): boolean | undefined {
  const target = figure.target;
  if (target === undefined) return undefined;
  switch (target.op) {
    case '>=':
      return figure.value >= target.value;
    case '<=':
      return figure.value <= target.value;
    case '<':
      return figure.value < target.value;
  }
}

/** `>= 100000` */
export function describeTarget(target: Target | undefined): string {
  return target === undefined ? '' : `${target.op} ${target.value}`;
}

/** Collects the figures of one scenario and prints progress lines. */
export class Recorder {
  readonly figures: Figure[] = [];

  constructor(readonly scenario: string) {}

  add(metric: string, value: number, unit: string, target?: Target): void {
    this.figures.push({ scenario: this.scenario, metric, value, unit, ...(target ? { target } : {}) });
  }

  log(message: string): void {
    process.stdout.write(`  [${this.scenario}] ${message}\n`);
  }

  /** A line that must not go unnoticed (non-2xx answers, broker errors). */
  alarm(message: string): void {
    process.stdout.write(`  [${this.scenario}] !!! ${message}\n`);
  }
}

/** A scenario of `bench/`: one file each, run by `bench/run.ts`. */
export interface Scenario {
  readonly name: string;
  /** One line for the runner's listing. */
  readonly title: string;
  run(recorder: Recorder): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------------

/** A fresh redis-server and one broker node using it. */
export interface Stack {
  readonly redis: RedisProcess;
  readonly broker: BrokerProcess;
  /** Stops the broker (SIGTERM) then Redis; reports a non-zero exit and warn/error log lines. */
  stop(recorder: Recorder): Promise<void>;
}

/**
 * Pause before stopping a broker: autocannon ends a run by closing its connections with requests in
 * flight, and the broker's SIGTERM drain does not wait for a request whose client went away (it
 * destroys the worker pool under it and logs a 500 "Terminating worker thread"). Letting those
 * abandoned requests finish first keeps that shutdown artefact out of the warn/error count.
 */
const SETTLE_BEFORE_STOP_MS = 1000;

/** pino levels: 40 warn, 50 error, 60 fatal. */
const WARN_LEVEL = 40;

/** Log lines of a broker at warn level or above (pino JSON lines; other text lines count too). */
export function brokerWarnings(output: string): string[] {
  return output.split('\n').filter((line) => {
    if (line.trim() === '') return false;
    try {
      const parsed: unknown = JSON.parse(line);
      if (typeof parsed === 'object' && parsed !== null && 'level' in parsed && typeof parsed.level === 'number') return parsed.level >= WARN_LEVEL;
      return true;
    } catch {
      return true;
    }
  });
}

/** A CPU meter over a stack's broker node (main thread and other threads apart) and its redis-server. */
export function stackMeter(stack: Stack): CpuMeter {
  return new CpuMeter([
    { label: 'broker', pid: pidOf(stack.broker.process), split: true },
    { label: 'redis-server', pid: pidOf(stack.redis.process) },
  ]);
}

/** Starts a fresh Redis on a free port and a broker node from `dist/` with `BROKER_LOG_LEVEL=warn`. */
export async function startStack(env: Record<string, string> = {}): Promise<Stack> {
  const redis = await startRedis();
  let broker: BrokerProcess;
  try {
    broker = await startBroker({ BROKER_REDIS_URL: redis.url, BROKER_LOG_LEVEL: 'warn', ...env });
  } catch (err) {
    await redis.stop();
    throw err;
  }
  return {
    redis,
    broker,
    stop: async (recorder) => {
      await sleep(SETTLE_BEFORE_STOP_MS);
      const code = await broker.stop('SIGTERM');
      await redis.stop();
      if (code !== 0) recorder.alarm(`broker exited with code ${String(code)} on SIGTERM`);
      const warnings = brokerWarnings(broker.output());
      if (warnings.length > 0) {
        recorder.alarm(`broker wrote ${warnings.length} log line(s) at warn or above; first ones:`);
        for (const line of warnings.slice(0, 5)) recorder.alarm(`  ${line.slice(0, 400)}`);
      }
      recorder.add('broker log lines at warn or above', warnings.length, 'lines');
    },
  };
}

/** The pid of a child process. @throws Error when it has none (it failed to spawn) */
export function pidOf(child: { readonly pid?: number | undefined }): number {
  if (child.pid === undefined) throw new Error('child process has no pid');
  return child.pid;
}

// ---------------------------------------------------------------------------------------------
// HTTP helpers
// ---------------------------------------------------------------------------------------------

/** POSTs a JSON text. */
export async function post(url: string, body: string | Buffer, headers: Readonly<Record<string, string>> = {}): Promise<{ status: number; text: string }> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body, signal: AbortSignal.timeout(120_000) });
  return { status: response.status, text: await response.text() };
}

/** Registers an event type. @throws Error unless the broker answers 201 */
export async function createEventType(brokerUrl: string, definition: object, headers: Readonly<Record<string, string>> = {}): Promise<void> {
  const { status, text } = await post(`${brokerUrl}/event-types`, JSON.stringify(definition), headers);
  if (status !== 201) throw new Error(`POST /event-types answered ${status}: ${text.slice(0, 500)}`);
}

/** Runs `tasks` with at most `limit` in flight; rejects on the first failure. */
export async function runBounded(count: number, limit: number, task: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < count) {
      const index = next++;
      await task(index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, lane));
}

/**
 * Fills an event type for a consuming scenario: posts `count` requests to `url` + each body's path,
 * request i carrying `bodies[i % bodies.length]`, at most `inFlight` at once; the first answer other than
 * 200 raises an alarm.
 * @throws Error when any request was not answered 200 (the scenario needs every event)
 */
export async function publishAll(recorder: Recorder, url: string, bodies: readonly LoadRequest[], count: number, inFlight: number): Promise<void> {
  let failures = 0;
  await runBounded(count, inFlight, async (i) => {
    const body = bodies[i % bodies.length];
    if (!body) return;
    const { status, text } = await post(url + body.path, body.body);
    if (status !== 200) {
      failures += 1;
      if (failures === 1) recorder.alarm(`publish answered ${status}: ${text.slice(0, 600)}`);
    }
  });
  if (failures > 0) throw new Error(`${failures} of ${count} batches were not published: the scenario needs every event`);
}

/** Records a CPU breakdown as figures `<prefix>CPU <label>` in % of one core. */
export function recordCpu(recorder: Recorder, prefix: string, use: CpuUse): void {
  for (const [label, value] of Object.entries(use.byLabel)) recorder.add(`${prefix}CPU ${label}`, round(value, 0), '% of a core');
}

/** The median of `values` (the upper one of an even count); NaN when there are none. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** Rounds to `digits` decimals. */
export function round(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** Waits `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Every key matching a glob pattern (SCAN), sorted. */
export async function keysMatching(client: Redis, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await client.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys.sort();
}
