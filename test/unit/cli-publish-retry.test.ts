import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/exit-codes.js';
import { MAX_RETRY_AFTER_MS, MAX_RETRY_DELAY_MS, jitteredRetryAfterMs, retryAfterMs, retryDelayMs } from '../../src/cli/publish.js';
import { runCli } from '../../src/cli/program.js';

// `broker publish` retries (docs/publishing.md "The command line"): the events a 207
// answer says were not stored, with backoff and a bounded number of attempts, and batches answered 429
// or 503 after Retry-After. A stand-in node (node:http) answers as scripted and records every batch.

const dir = mkdtempSync(path.join(os.tmpdir(), 'broker-cli-retry-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Scripted {
  readonly status: number;
  readonly headers?: Record<string, string>;
  /** The body for a batch of events (their eids in order). */
  readonly body?: (eids: readonly string[]) => unknown;
}

/** Runs `broker [global] publish x <file> [extra]` against a stand-in answering `script` in turn (its last answer from then on). */
async function publishAgainst(script: readonly Scripted[], events: number, extra: readonly string[] = [], global: readonly string[] = []): Promise<{ code: number; stderr: string; stdout: string; batches: string[][] }> {
  const batches: string[][] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const eids = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { metadata: { eid: string } }[]).map((e) => e.metadata.eid);
      batches.push(eids);
      const answer = script[Math.min(batches.length, script.length) - 1] ?? { status: 200 };
      const body = answer.body?.(eids);
      res.writeHead(answer.status, { 'content-type': 'application/json', ...(answer.headers ?? {}) });
      res.end(body === undefined ? '' : JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const file = path.join(dir, `events-${Math.random()}.ndjson`);
  writeFileSync(file, Array.from({ length: events }, (_, i) => JSON.stringify({ metadata: { eid: `e${i}`, occurred_at: '2026-01-01T00:00:00Z' } })).join('\n'));
  let stdout = '';
  let stderr = '';
  const out = new PassThrough().on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const err = new PassThrough().on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  try {
    const code = await runCli(['--url', `http://127.0.0.1:${(server.address() as AddressInfo).port}`, ...global, 'publish', 'x', file, ...extra], out, err);
    return { code, stdout, stderr, batches };
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** A 207 body: the eids in `failed` failed at publishing, the ones in `aborted` were aborted, the rest submitted. */
function partial(failed: readonly string[], aborted: readonly string[] = []): (eids: readonly string[]) => unknown {
  return (eids) =>
    eids.map((eid) => ({
      eid,
      publishing_status: failed.includes(eid) ? 'failed' : aborted.includes(eid) ? 'aborted' : 'submitted',
      step: failed.includes(eid) || aborted.includes(eid) ? 'publishing' : 'none',
      detail: failed.includes(eid) ? 'storage failed for partition 1' : '',
    }));
}

describe('broker publish: backoff and Retry-After', () => {
  it('backs off exponentially from 200 ms, capped, with a random share between a half and all of it', () => {
    expect([retryDelayMs(1, () => 0), retryDelayMs(1, () => 0.999999)]).toEqual([100, 200]);
    expect([retryDelayMs(2, () => 0), retryDelayMs(3, () => 0), retryDelayMs(4, () => 0.5)]).toEqual([200, 400, 1200]);
    expect(retryDelayMs(30, () => 0)).toBe(MAX_RETRY_DELAY_MS / 2);
    expect(retryDelayMs(30, () => 0.999999)).toBe(MAX_RETRY_DELAY_MS);
    for (let i = 0; i < 50; i++) {
      const delay = retryDelayMs(3);
      expect(delay).toBeGreaterThanOrEqual(400);
      expect(delay).toBeLessThanOrEqual(800);
    }
  });

  it('reads Retry-After as seconds or an HTTP date, capped', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryAfterMs('2', now)).toBe(2000);
    expect(retryAfterMs(' 0 ', now)).toBe(0);
    expect(retryAfterMs('3600', now)).toBe(MAX_RETRY_AFTER_MS);
    expect(retryAfterMs('Thu, 01 Jan 2026 00:00:03 GMT', now)).toBe(3000);
    expect(retryAfterMs('Wed, 31 Dec 2025 23:59:00 GMT', now)).toBe(0);
    expect(retryAfterMs('soon', now)).toBeUndefined();
    expect(retryAfterMs('-1', now)).toBeUndefined();
    expect(retryAfterMs(undefined, now)).toBeUndefined();
  });

  it('waits at least what Retry-After asks, plus a random share of up to half of it, so refused producers spread out', () => {
    expect([jitteredRetryAfterMs(1000, () => 0), jitteredRetryAfterMs(1000, () => 0.5), jitteredRetryAfterMs(1000, () => 0.999999)]).toEqual([1000, 1250, 1500]);
    expect(jitteredRetryAfterMs(0, () => 0.9)).toBe(0);
    const waits = new Set(Array.from({ length: 50 }, () => jitteredRetryAfterMs(1000)));
    for (const wait of waits) {
      expect(wait).toBeGreaterThanOrEqual(1000);
      expect(wait).toBeLessThanOrEqual(1500);
    }
    expect(waits.size).toBeGreaterThan(1);
  });
});

describe('broker publish: retries against a stand-in node', () => {
  it('after a 207 sends only the events that were not stored (failed and aborted) again, saying so', async () => {
    const run = await publishAgainst([{ status: 207, body: partial(['e1', 'e4'], ['e2']) }, { status: 200 }], 6);
    expect(run.code, run.stderr).toBe(EXIT.ok);
    expect(run.batches).toEqual([['e0', 'e1', 'e2', 'e3', 'e4', 'e5'], ['e1', 'e2', 'e4']]);
    expect(run.stderr).toBe('retrying 3 of 6 events that were not stored (attempt 2 of 5)\n');
    expect(run.stdout).toContain('published 6 of 6 events to x in 2 requests');
  });

  it('gives up after --attempts attempts and reports the events that were never stored', async () => {
    const run = await publishAgainst([{ status: 207, body: partial(['e0']) }], 3, ['--attempts', '3']);
    expect(run.code).toBe(EXIT.partial);
    expect(run.batches).toEqual([['e0', 'e1', 'e2'], ['e0'], ['e0']]);
    expect(run.stderr.split('\n').filter((line) => line !== '')).toEqual([
      'retrying 1 of 3 events that were not stored (attempt 2 of 3)',
      'retrying 1 of 1 events that were not stored (attempt 3 of 3)',
      'event 0 (line 1) e0: failed at publishing: storage failed for partition 1',
    ]);
    expect(run.stdout).toContain('published 2 of 3 events');
  });

  it('with --json keeps stdout for the summary and still says on stderr what it retries', async () => {
    const run = await publishAgainst([{ status: 207, body: partial(['e1']) }, { status: 200 }], 2, [], ['--json']);
    expect(run.code, run.stderr).toBe(EXIT.ok);
    expect(JSON.parse(run.stdout)).toMatchObject({ events: 2, published: 2, failed: 0, requests: 2 });
    expect(run.stderr).toBe('retrying 1 of 2 events that were not stored (attempt 2 of 5)\n');
  });

  it('sends a batch answered 429 again after Retry-After, as one answered 503', async () => {
    for (const status of [429, 503]) {
      const run = await publishAgainst([{ status, headers: { 'retry-after': '0' }, body: () => ({ title: 'Too Many Requests', status }) }, { status: 200 }], 3);
      expect(run.code, run.stderr).toBe(EXIT.ok);
      expect(run.batches).toEqual([
        ['e0', 'e1', 'e2'],
        ['e0', 'e1', 'e2'],
      ]);
      expect(run.stderr).toBe(`the broker answered ${status}; sending 3 events again in 0.0 s (attempt 2 of 5)\n`);
    }
  });

  it('stops with the answer once the attempts are used up on 429', async () => {
    const run = await publishAgainst([{ status: 429, headers: { 'retry-after': '0' }, body: () => ({ title: 'Too Many Requests', status: 429, detail: 'slow down' }) }], 1, ['--attempts', '2']);
    expect(run.code).toBe(EXIT.clientError);
    expect(run.batches).toHaveLength(2);
    expect(run.stderr).toContain('broker: Too Many Requests: slow down');
  });

  it('refuses --attempts that is not a positive integer', async () => {
    const run = await publishAgainst([{ status: 200 }], 1, ['--attempts', '0']);
    expect(run.code).toBe(EXIT.usage);
    expect(run.batches).toEqual([]);
  });
});
