/**
 * Benchmark runner: runs the selected scenarios one after the other, each on its
 * own fresh redis-server and broker node, prints a table, appends one JSON line per figure to
 * `bench/results.jsonl` (date, commit, machine, command, scenario, metric, value, unit, target, met)
 * and regenerates the "Latest results" section of `docs/benchmarks.md`: one table of the latest figure of
 * each target (the latest full run, with scenarios run again after it).
 *
 *   npm run bench                                   # build, then every scenario
 *   node dist/bench/run.js [publish-batches] [github] [single-event] [auth] [memory] [consume] [end-to-end] [commits] [scale-out] [compaction] [compression] [churn] [fan-out]
 *                        [publish-spread] [catalog-scale] [rebalance] [idle-streams]   # cost curves
 *                        [cold-publish] [demo]   # first batch to new event types, `npm run demo` on a fresh node
 *                        [overload]   # one node under a publishing storm, 8 to 1,024 connections
 *                        [filter]   # a subscription stream with a 10 % server-side filter against the same without
 *                        [queue]   # queue-mode subscriptions, 16 and 64 streams on 4 partitions, against stream mode
 *                        [tracing]   # publishing with traces off, on at 1 % and at 100 %, alternating rounds
 *                        [storage]   # events stored compressed against plain, alternating rounds
 *                        [replicated-reads]   # minReplicas 1 with readers waiting for replicas against not (a master and a replica)
 *   BENCH_QUICK=1 node dist/bench/run.js consume    # consumption scenarios: small sizes, to prove they work
 *
 * A missed target never fails the run: it is printed as MISSED. The exit code is 1 only when a
 * scenario crashed (its figures so far are still recorded). `node dist/bench/run.js --docs` only
 * regenerates the section from `results.jsonl`.
 */
import { execFileSync } from 'node:child_process';
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from '../scripts/local-processes.js';
import { commits } from './commits.js';
import { consumerStatus } from './consumer-status.js';
import { consume } from './consume.js';
import { endToEnd } from './end-to-end.js';
import { githubPayloads } from './github-payloads.js';
import { Recorder, describeTarget, meets, type Figure, type Scenario, type Target } from './harness.js';
import { memory } from './memory.js';
import { publishBatches } from './publish-batches.js';
import { singleEvent } from './single-event.js';
import { auth } from './auth.js';
import { compaction } from './compaction.js';
import { churn } from './churn.js';
import { compression } from './compression.js';
import { scaleOut } from './scale-out.js';
import { fanOut } from './fan-out.js';
import { publishSpread } from './publish-spread.js';
import { catalogScale } from './catalog-scale.js';
import { rebalance } from './rebalance.js';
import { idleStreams } from './idle-streams.js';
import { coldPublish } from './cold-publish.js';
import { demoScenario } from './demo.js';
import { publishIdempotent } from './publish-idempotent.js';
import { overload } from './overload.js';
import { filter } from './filter.js';
import { queue } from './queue.js';
import { tracing } from './tracing.js';
import { replicatedReads } from './replicated-reads.js';
import { storage } from './storage.js';

const SCENARIOS: readonly Scenario[] = [publishBatches, githubPayloads, singleEvent, auth, memory, consume, endToEnd, commits, scaleOut, compaction, compression, churn, fanOut, publishSpread, catalogScale, rebalance, idleStreams, coldPublish, demoScenario, publishIdempotent, overload, filter, queue, tracing, replicatedReads, consumerStatus, storage];
const RESULTS_FILE = path.join(repoRoot, 'bench', 'results.jsonl');
const DOCS_FILE = path.join(repoRoot, 'docs', 'benchmarks.md');
const START_MARKER = '<!-- results:start -->';
const END_MARKER = '<!-- results:end -->';

/** The machine a run measured. */
interface Machine {
  readonly cpu: string;
  readonly cores: number;
  readonly memory_gib: number;
  readonly node: string;
  readonly redis: string;
  /**
   * Microseconds for the kernel to give this process one fresh 4 KB page (first write to newly mapped
   * memory; {@link freshPageMicroseconds}), measured as the run starts. Absent from older runs.
   */
  readonly fresh_page_us?: number;
}

/** One line of `bench/results.jsonl`. */
interface ResultLine {
  readonly run_id: string;
  readonly date: string;
  readonly commit: string;
  readonly machine: Machine;
  readonly command: string;
  readonly scenario: string;
  readonly metric: string;
  readonly value: number;
  readonly unit: string;
  readonly target: Target | null;
  readonly met: boolean | null;
}

function output(command: string, args: string[]): string {
  try {
    return execFileSync(command, args, { cwd: repoRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '';
  }
}

/** `git rev-parse --short HEAD`, with `-dirty` when the working tree has changes. */
function commitOf(): string {
  const head = output('git', ['rev-parse', '--short', 'HEAD']) || 'unknown';
  return output('git', ['status', '--porcelain']) === '' ? head : `${head}-dirty`;
}

function machineOf(): Machine {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    cores: cpus.length,
    memory_gib: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    redis: /v=(\S+)/.exec(output('redis-server', ['--version']))?.[1] ?? 'unknown',
    fresh_page_us: Math.round(freshPageMicroseconds() * 100) / 100,
  };
}

/** Bytes of fresh memory {@link freshPageMicroseconds} touches. */
const FRESH_PAGE_PROBE_BYTES = 256 * 1024 * 1024;
const PAGE_BYTES = 4096;

/**
 * Microseconds per 4 KB page to write once into {@link FRESH_PAGE_PROBE_BYTES} of newly mapped memory (a
 * buffer that large is its own mapping, so every page faults once). Whatever stores data pays this per
 * page as its memory grows: Redis for every stored event. On virtual machines of the bench's kind it
 * ranged from 1.4 to 23 µs (a bare-metal machine takes well under 1 µs); at 12-23 µs Redis's `XADD` of a
 * 180 KB entry took 550 µs (330 MB/s) and the Redis-alone baselines fell to a quarter of a run on a
 * machine with cheap pages. Recorded with every run so that figures of different runs can be told apart
 * (docs/benchmarks.md "The machine, and how figures are compared").
 */
function freshPageMicroseconds(): number {
  const started = performance.now();
  const buffer = Buffer.allocUnsafeSlow(FRESH_PAGE_PROBE_BYTES);
  for (let at = 0; at < FRESH_PAGE_PROBE_BYTES; at += PAGE_BYTES) buffer[at] = 1;
  return ((performance.now() - started) * 1000) / (FRESH_PAGE_PROBE_BYTES / PAGE_BYTES);
}

/** A figure as the tables show it; a value that was not a number (NaN is stored as null: nothing measured) shows as `—`. */
function formatValue(value: number | null): string {
  return typeof value === 'number' && Number.isFinite(value) ? value.toLocaleString('en-US', { maximumFractionDigits: 3 }) : '—';
}

function status(met: boolean | null): string {
  return met === null ? '' : met ? 'MET' : 'MISSED';
}

function printTable(lines: readonly ResultLine[]): void {
  const rows = lines.map((l) => [l.scenario, l.metric, formatValue(l.value), l.unit, describeTarget(l.target ?? undefined), status(l.met)]);
  const header = ['scenario', 'metric', 'value', 'unit', 'target', ''];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => (i === 2 ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0))).join('  ').trimEnd();
  process.stdout.write(`\n${line(header)}\n${widths.map((w) => '-'.repeat(w)).join('  ')}\n`);
  for (const row of rows) process.stdout.write(`${line(row)}\n`);
}

/** ` · fresh page N µs` when the run measured it. */
function freshPage(machine: Machine): string {
  return machine.fresh_page_us === undefined ? '' : ` · fresh page ${machine.fresh_page_us} µs`;
}

/** The table of some of one run's lines. */
function linesTable(lines: readonly ResultLine[]): string[] {
  const escape = (s: string) => s.replaceAll('|', '\\|');
  return [
    '| scenario | metric | value | unit | target | | commit |',
    '|---|---|--:|---|---|---|---|',
    ...lines.map((l) => `| ${l.scenario} | ${escape(l.metric)} | ${formatValue(l.value)} | ${l.unit} | ${escape(describeTarget(l.target ?? undefined))} | ${status(l.met)} | \`${l.commit}\` |`),
  ];
}

/**
 * The docs block: one table of the figures with a target, the latest of each — the latest full run's,
 * replaced by the figure of a scenario run again alone after it — with the runs they come from. Every
 * figure of every run stays in results.jsonl.
 */
function markdownTable(runs: readonly (readonly ResultLine[])[]): string {
  const first = runs[0]?.[0];
  if (first === undefined) return '_No results yet: run `npm run bench`._';
  const m = first.machine;
  const latest = new Map<string, ResultLine>();
  for (const lines of runs) for (const l of lines) if (l.met !== null) latest.set(`${l.scenario}\u0000${l.metric}`, l);
  const targeted = [...latest.values()];
  const missed = targeted.filter((l) => l.met === false);
  const runLine = (lines: readonly ResultLine[]): string => {
    const l = lines[0];
    return l === undefined ? '' : `- ${l.date} · commit \`${l.commit}\` · \`${l.command}\``;
  };
  const out = [
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memory_gib} GiB · Node ${m.node} · Redis ${m.redis}${freshPage(m)}`,
    '',
    'Runs (the full run first; a scenario run again after it replaces its figures):',
    '',
    ...runs.map(runLine),
    '',
    `Targets: **${targeted.length - missed.length} met, ${missed.length} missed**${missed.length > 0 ? ` (${missed.map((l) => `${l.scenario}: ${l.metric}`).join('; ')})` : ''}.`,
    '',
    ...linesTable(targeted),
  ];
  return out.join('\n');
}

/**
 * Rewrites the block between the markers of docs/benchmarks.md from results.jsonl: the latest full run
 * (every scenario: `npm run bench`) with the latest run of each command of named scenarios after it
 * (oldest first), as one table of the latest figure of each target.
 */
function updateDocs(): void {
  const all = readFileSync(RESULTS_FILE, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as ResultLine);
  const runIds = [...new Set(all.map((l) => l.run_id))];
  const isFull = (id: string): boolean => all.some((l) => l.run_id === id && /run\.js$/.test(l.command));
  const fullIndex = runIds.findLastIndex(isFull);
  const after = fullIndex >= 0 ? runIds.slice(fullIndex + 1) : [];
  const commandOf = (id: string): string => all.find((l) => l.run_id === id)?.command ?? '';
  // Of the runs after the full one, the latest of each command (a scenario measured again replaces its earlier rerun).
  const latestPerCommand = after.filter((id, i) => !after.slice(i + 1).some((later) => commandOf(later) === commandOf(id)));
  const shown = fullIndex >= 0 ? [runIds[fullIndex] ?? '', ...latestPerCommand] : runIds.slice(-1);
  const block = `${START_MARKER}\n${markdownTable(shown.map((id) => all.filter((l) => l.run_id === id)))}\n${END_MARKER}`;
  const docs = existsSync(DOCS_FILE) ? readFileSync(DOCS_FILE, 'utf8') : '# Benchmarks\n\n## Latest results\n\n';
  const start = docs.indexOf(START_MARKER);
  const end = docs.indexOf(END_MARKER);
  const updated = start >= 0 && end > start ? docs.slice(0, start) + block + docs.slice(end + END_MARKER.length) : `${docs.trimEnd()}\n\n${block}\n`;
  writeFileSync(DOCS_FILE, updated);
}

async function main(): Promise<number> {
  const names = process.argv.slice(2);
  if (names.length === 1 && names[0] === '--docs') {
    // After results.jsonl was edited or merged from several checkouts: only the section is rewritten.
    updateDocs();
    return 0;
  }
  const unknown = names.filter((n) => !SCENARIOS.some((s) => s.name === n));
  if (unknown.length > 0) {
    process.stderr.write(`unknown scenario(s): ${unknown.join(', ')}\nscenarios:\n${SCENARIOS.map((s) => `  ${s.name.padEnd(16)} ${s.title}`).join('\n')}\n`);
    return 2;
  }
  const selected = names.length === 0 ? SCENARIOS : SCENARIOS.filter((s) => names.includes(s.name));
  const date = new Date().toISOString();
  const commit = commitOf();
  const machine = machineOf();
  // The environment the nodes inherit and that changes them: node flags and config overrides (BROKER_*).
  const overrides = Object.entries(process.env)
    .filter(([key]) => key === 'BENCH_BROKER_NODE_FLAGS' || key.startsWith('BROKER_'))
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([key, value]) => `${key}='${value ?? ''}'`);
  const command = [...overrides, 'node', path.relative(repoRoot, process.argv[1] ?? 'dist/bench/run.js'), ...names].join(' ');
  process.stdout.write(`bench: ${selected.map((s) => s.name).join(', ')} · commit ${commit} · ${machine.cpu} (${machine.cores} cores) · Node ${machine.node} · Redis ${machine.redis}${freshPage(machine)}\n`);
  process.stdout.write('broker, Redis and the load generator share this machine\'s cores.\n');

  const figures: Figure[] = [];
  let crashed = false;
  for (const scenario of selected) {
    process.stdout.write(`\n== ${scenario.name}: ${scenario.title}\n`);
    const recorder = new Recorder(scenario.name);
    const started = performance.now();
    try {
      await scenario.run(recorder);
    } catch (err) {
      crashed = true;
      recorder.alarm(`CRASHED: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    }
    figures.push(...recorder.figures);
    recorder.log(`done in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }

  const lines: ResultLine[] = figures.map((f) => {
    const met = meets(f);
    return { run_id: date, date, commit, machine, command, scenario: f.scenario, metric: f.metric, value: f.value, unit: f.unit, target: f.target ?? null, met: met ?? null };
  });
  printTable(lines);
  const withTargets = lines.filter((l) => l.met !== null);
  const missed = withTargets.filter((l) => l.met === false);
  process.stdout.write(`\ntargets: ${withTargets.length - missed.length} MET, ${missed.length} MISSED${missed.length > 0 ? `: ${missed.map((l) => `${l.scenario} / ${l.metric}`).join('; ')}` : ''}\n`);
  if (lines.length > 0) {
    appendFileSync(RESULTS_FILE, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    updateDocs();
    process.stdout.write(`appended ${lines.length} figures to ${path.relative(repoRoot, RESULTS_FILE)}; updated ${path.relative(repoRoot, DOCS_FILE)}\n`);
  }
  if (crashed) process.stdout.write('a scenario crashed: exit code 1\n');
  return crashed ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
