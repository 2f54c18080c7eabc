import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../scripts/local-processes.js';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { runChild } from '../support/child-process.js';

// The README's five-minute tour, run as a reader runs it: every ```sh block under the tour's heading, in
// order, in one bash session (variables such as SUB and STREAM carry from block to block), with curl, jq
// and the `broker` command line, against a node of the test harness. The tour's only address is the line
// `export BROKER_URL=http://localhost:8080`, which the test points at that node. When a command of the
// README stops working, or stops answering what the README says it answers, this test fails.

const TOUR_HEADING = '## A five-minute tour';
const ADDRESS_LINE = 'export BROKER_URL=http://localhost:8080';
const CLI = path.join(repoRoot, 'dist', 'src', 'cli', 'main.js');

/** One fenced ```sh block of the tour: its shell text and the `###` heading it sits under. */
interface TourBlock {
  readonly section: string;
  readonly code: string;
}

/**
 * The ```sh blocks between the tour's `##` heading and the next `##` heading of the README.
 * @throws Error when the README has no tour heading
 */
function tourBlocks(readme: string): TourBlock[] {
  const lines = readme.split('\n');
  const start = lines.indexOf(TOUR_HEADING);
  if (start < 0) throw new Error(`README.md has no "${TOUR_HEADING}" heading`);
  const blocks: TourBlock[] = [];
  let section = '';
  let code: string[] | undefined;
  for (const line of lines.slice(start + 1)) {
    if (code !== undefined) {
      if (line.startsWith('```')) {
        blocks.push({ section, code: code.join('\n') });
        code = undefined;
      } else code.push(line);
    } else if (line.startsWith('## ')) break;
    else if (line.startsWith('### ')) section = line.slice(4).trim();
    else if (line.trim() === '```sh') code = [];
  }
  return blocks;
}

interface TourRun {
  readonly code: number | null;
  /** stdout and stderr of each block, in block order. */
  readonly outputs: readonly string[];
  readonly all: string;
}

/** Runs the blocks in one `bash` (errexit, pipefail) in `cwd`; a failing command stops it and is named. */
async function runTour(blocks: readonly TourBlock[], env: Record<string, string>, cwd: string): Promise<TourRun> {
  const marker = (i: number): string => `::tour-block-${i}::`;
  const script = [
    'exec 2>&1',
    'set -euo pipefail',
    'trap \'echo "tour: command failed with exit code $?: $BASH_COMMAND"\' ERR',
    ...blocks.flatMap((block, i) => [`echo '${marker(i)}'`, block.code]),
  ].join('\n');
  // `exec 2>&1` sends what the blocks print to stderr into stdout, in order, with the block markers.
  const run = await runChild('bash', ['-c', script], { cwd, env: { ...process.env, ...env } });
  const all = run.stdout + run.stderr;
  const outputs = blocks.map((_, i) => {
    const from = all.indexOf(marker(i));
    if (from < 0) return '';
    const to = all.indexOf(marker(i + 1), from);
    return all.slice(from + marker(i).length, to < 0 ? undefined : to);
  });
  return { code: run.code, outputs, all };
}

describe('the README tour', () => {
  let broker: TestBroker;
  let dir: string;
  const blocks = tourBlocks(readFileSync(path.join(repoRoot, 'README.md'), 'utf8'));

  beforeAll(async () => {
    broker = await startTestBroker();
    dir = mkdtempSync(path.join(os.tmpdir(), 'broker-tour-'));
    // `npm link` puts `broker` on the PATH for a reader; the test puts the built CLI there itself.
    mkdirSync(path.join(dir, 'bin'));
    const shim = path.join(dir, 'bin', 'broker');
    writeFileSync(shim, `#!/bin/sh\nexec '${process.execPath}' '${CLI}' "$@"\n`);
    chmodSync(shim, 0o755);
  });
  afterAll(async () => {
    await broker.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The output of the one block whose text matches `pattern`. */
  function outputOf(run: TourRun, pattern: RegExp): string {
    const found = blocks.flatMap((block, i) => (pattern.test(block.code) ? [i] : []));
    expect(found, `exactly one tour block matches ${String(pattern)}`).toHaveLength(1);
    return run.outputs[found[0] ?? -1] ?? '';
  }

  it('has curl and command-line blocks, and one address for all of them', () => {
    expect(blocks.filter((b) => b.section === 'With curl').length).toBeGreaterThanOrEqual(4);
    expect(blocks.filter((b) => b.section === 'With the command line').length).toBeGreaterThanOrEqual(1);
    const code = blocks.map((b) => b.code).join('\n');
    expect(code.split('\n').filter((line) => line === ADDRESS_LINE)).toHaveLength(1);
    expect(code.replace(ADDRESS_LINE, ''), 'every command uses $BROKER_URL').not.toContain('localhost:');
  });

  it('runs every command against a node and gets the answers the README describes', { timeout: 90_000 }, async () => {
    const jq = await new Promise<number | null>((resolve) => spawn('jq', ['--version'], { stdio: 'ignore' }).on('close', resolve).on('error', () => resolve(null)));
    expect(jq, 'the tour needs jq on the PATH').toBe(0);

    const pointed = blocks.map((b) => ({ ...b, code: b.code.replace(ADDRESS_LINE, `export BROKER_URL=${broker.url}`) }));
    const run = await runTour(pointed, { PATH: `${path.join(dir, 'bin')}:${process.env.PATH ?? ''}`, BROKER_TOKEN: '' }, dir);
    expect(run.code, run.all).toBe(0);
    expect(run.all).not.toContain('tour: command failed');

    // curl: created, published, subscribed, streamed, committed, nothing left.
    expect(outputOf(run, /-X POST "\$BROKER_URL\/event-types" /)).toMatch(/^HTTP\/1\.1 201 /m);
    expect(outputOf(run, /\/event-types\/order\.created\/events"/)).toMatch(/^HTTP\/1\.1 200 /m);
    const sub = outputOf(run, /^SUB=/m).trim();
    expect(sub).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    const streamed = outputOf(run, /\/subscriptions\/\$SUB\/events/);
    expect(streamed).toContain('"Stream started"');
    expect(streamed).toContain('9f1a2c4e-0b6d-4f3a-9c55-6a0e0c1d2b3f');
    expect(streamed).toContain('1d6f7e80-3a4b-4c5d-8e9f-a0b1c2d3e4f5');
    const committed = outputOf(run, /\/subscriptions\/\$SUB\/cursors"/);
    expect(committed).toMatch(/^HTTP\/1\.1 204 /m);
    const lags = committed.split('\n').filter((line) => line.startsWith('{"partition"'));
    expect(lags.map((line) => JSON.parse(line) as unknown)).toEqual([
      { partition: '0', unconsumed_events: 0 },
      { partition: '1', unconsumed_events: 0 },
    ]);

    // broker: listed, published from the file, tailed and committed, no lag.
    const cli = outputOf(run, /broker publish order\.created orders\.ndjson/);
    expect(cli).toMatch(/^order\.created\s+business\s+shop\s+hash/m);
    expect(cli).toMatch(/published 2 of 2 events to order\.created/);
    const tailed = cli.split('\n').filter((line) => line.startsWith('order.created '));
    expect(tailed.filter((line) => /"order_number": ?"A-[34]"/.test(line))).toHaveLength(2);

    // What the broker holds afterwards: four events, every one of them committed.
    const stats = await call(broker.url, 'GET', `/subscriptions/${sub}/stats`);
    expect(stats.status).toBe(200);
    const partitions = (stats.json as { items: { partitions: { partition: string; unconsumed_events: number }[] }[] }).items.flatMap((i) => i.partitions);
    expect(partitions.map((p) => p.unconsumed_events)).toEqual([0, 0]);
    const records = await call(broker.url, 'GET', '/event-types/order.created/partitions');
    const stored = (records.json as { newest_available_offset: string }[]).map((p) => Number(/^001-0001-(-?\d+)$/.exec(p.newest_available_offset)?.[1]) + 1);
    expect(stored.reduce((a, b) => a + b, 0)).toBe(4);
  });
});
