// Summarizes V8 CPU profiles (`.cpuprofile`, written by `node --cpu-prof`) for the "Where the time goes"
// analysis of docs/benchmarks.md "Running them" (a missed target explained by where the CPU went): per profile (one per thread), the sampled wall time, the idle time,
// garbage collection, and the self time of the busiest functions and of the code they belong to (a package
// under node_modules, a file of ours, Node's internals, or a native function such as JSON.parse).
//
//   BENCH_BROKER_NODE_FLAGS="--cpu-prof --cpu-prof-dir=/tmp/prof" node dist/bench/run.js single-event
//   node dist/scripts/profile-summary.js [--timeline] [--window FROM:TO] [--top N] /tmp/prof/*.cpuprofile
//
// Times are seconds since the earliest start among the files given (the profiles of one process share its
// monotonic clock, so the threads of one node line up). --timeline prints each thread's busy milliseconds
// per second, to find a scenario's phases; --window then keeps the samples taken FROM..TO seconds, to leave
// out start-up and warm-up; --top is the number of rows per table (default 12). A piscina worker blocked in
// Atomics.wait for its next task is sampled in `atomicsWaitLoop`: that is counted as waiting, not busy.
import { readFileSync } from 'node:fs';
import path from 'node:path';

/** The parts of a `.cpuprofile` this script reads (Chrome DevTools Protocol `Profiler.Profile`). */
interface CpuProfile {
  readonly nodes: readonly { readonly id: number; readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number } }[];
  /** Microseconds, monotonic clock. */
  readonly startTime: number;
  readonly endTime: number;
  /** Node id per sample. */
  readonly samples: readonly number[];
  /** Microseconds since the previous sample (the first: since startTime). */
  readonly timeDeltas: readonly number[];
}

const SPECIAL = new Set(['(idle)', '(garbage collector)', '(program)', '(root)']);

/** A sample in a function that blocks the thread without running (a piscina worker's wait for a task). */
function waiting(functionName: string, url: string): boolean {
  return functionName === '(idle)' || (functionName === 'atomicsWaitLoop' && url.includes('piscina'));
}

/** Which code a function belongs to: a package, a file of ours, Node's internals or a native function. */
function owner(functionName: string, url: string): string {
  if (SPECIAL.has(functionName)) return functionName;
  if (url === '') return `native ${functionName || '(anonymous)'}`;
  const packageAt = url.lastIndexOf('node_modules/');
  if (packageAt >= 0) {
    const parts = url.slice(packageAt + 'node_modules/'.length).split('/');
    return (parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1] ?? ''}` : parts[0]) ?? url;
  }
  if (url.startsWith('node:')) return 'node internals';
  const dist = url.lastIndexOf('/dist/');
  return dist >= 0 ? url.slice(dist + '/dist/'.length) : url;
}

function table(title: string, rows: Map<string, number>, busyUs: number, top: number): void {
  const sorted = [...rows].sort((a, b) => b[1] - a[1]).slice(0, top);
  console.log(`  ${title}`);
  for (const [name, us] of sorted) console.log(`    ${(us / 1000).toFixed(1).padStart(9)} ms ${((100 * us) / busyUs).toFixed(1).padStart(5)} %  ${name}`);
}

/** Options of one summary. */
interface SummaryOptions {
  /** Seconds since the profile started: only samples in [from, to) count. */
  readonly window: { readonly from: number; readonly to: number } | undefined;
  /** Rows per table. */
  readonly top: number;
  /** Also print busy milliseconds per second. */
  readonly timeline: boolean;
  /** Microseconds on the profiles' clock that times are counted from. */
  readonly originUs: number;
}

function summarize(file: string, profile: CpuProfile, { window, top, timeline, originUs }: SummaryOptions): void {
  const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  const byFunction = new Map<string, number>();
  const byOwner = new Map<string, number>();
  const busyPerSecond: number[] = [];
  let sampledUs = 0;
  let idleUs = 0;
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    // A sample stands for the time until the next one.
    const us = profile.timeDeltas[i + 1] ?? 0;
    const seconds = (at - originUs) / 1e6;
    const frame = frames.get(profile.samples[i] ?? -1);
    if (frame !== undefined && !waiting(frame.functionName, frame.url)) busyPerSecond[Math.floor(seconds)] = (busyPerSecond[Math.floor(seconds)] ?? 0) + us;
    if (window !== undefined && (seconds < window.from || seconds >= window.to)) continue;
    if (frame === undefined) continue;
    sampledUs += us;
    if (waiting(frame.functionName, frame.url)) {
      idleUs += us;
      continue;
    }
    const who = owner(frame.functionName, frame.url);
    const where = frame.url === '' ? '' : ` ${path.basename(frame.url)}:${frame.lineNumber + 1}`;
    const name = `${frame.functionName || '(anonymous)'}${where}${who.startsWith('native') || SPECIAL.has(who) ? '' : ` [${who}]`}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
    byOwner.set(who, (byOwner.get(who) ?? 0) + us);
  }
  const busyUs = sampledUs - idleUs;
  const gcUs = byOwner.get('(garbage collector)') ?? 0;
  const span = window === undefined ? `${((profile.startTime - originUs) / 1e6).toFixed(1)}–${((profile.endTime - originUs) / 1e6).toFixed(1)} s` : `window ${window.from}–${window.to} s`;
  console.log(`\n${path.basename(file)}: ${span}, sampled ${(sampledUs / 1e6).toFixed(2)} s, busy ${(busyUs / 1e6).toFixed(2)} s (${((100 * busyUs) / Math.max(sampledUs, 1)).toFixed(0)} %), garbage collection ${(gcUs / 1000).toFixed(0)} ms (${((100 * gcUs) / Math.max(busyUs, 1)).toFixed(1)} % of busy)`);
  if (timeline) console.log(`  busy ms per second: ${Array.from(busyPerSecond, (us, second) => `${second}:${Math.round((us ?? 0) / 1000)}`).join(' ')}`);
  table('self time by code (share of busy):', byOwner, Math.max(busyUs, 1), top);
  table('self time by function:', byFunction, Math.max(busyUs, 1), top);
}

function main(args: readonly string[]): void {
  let window: { from: number; to: number } | undefined;
  let top = 12;
  let timeline = false;
  const files: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? '';
    if (arg === '--window') {
      const [from, to] = (args[++i] ?? '').split(':').map(Number);
      if (from === undefined || to === undefined || !Number.isFinite(from) || !Number.isFinite(to) || to <= from) throw new Error('--window takes FROM:TO in seconds, FROM < TO');
      window = { from, to };
    } else if (arg === '--top') {
      top = Number(args[++i]);
      if (!Number.isInteger(top) || top < 1) throw new Error('--top takes a positive whole number');
    } else if (arg === '--timeline') timeline = true;
    else files.push(arg);
  }
  if (files.length === 0) throw new Error('usage: profile-summary [--timeline] [--window FROM:TO] [--top N] file.cpuprofile ...');
  const profiles = files.map((file) => JSON.parse(readFileSync(file, 'utf8')) as CpuProfile);
  const originUs = Math.min(...profiles.map((profile) => profile.startTime));
  profiles.forEach((profile, i) => summarize(files[i] ?? '', profile, { window, top, timeline, originUs }));
}

main(process.argv.slice(2));
