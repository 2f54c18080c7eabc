import { gunzipSync } from 'node:zlib';
import { decompress as zstdDecompress } from 'zstd-napi';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { CliError, EXIT, answerError, describeProblem } from '../../src/cli/exit-codes.js';
import { openEventSource, type InputEvent } from '../../src/cli/input.js';
import { formatTable } from '../../src/cli/output.js';
import { runCli } from '../../src/cli/program.js';
import { offsetBefore } from '../../src/cli/tail.js';
import { encoderOf } from '../../src/cli/wire-encoding.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'broker-cli-unit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function eventsOf(text: string): Promise<InputEvent[]> {
  const file = path.join(dir, `input-${Math.random()}.txt`);
  writeFileSync(file, text);
  const out: InputEvent[] = [];
  for await (const event of openEventSource(file).events) out.push(event);
  return out;
}

describe('broker CLI: exit codes and problems', () => {
  it('prints a problem as title: detail, and maps 4xx to 3, the rest to 4', () => {
    const notFound = answerError(404, '{"title":"Not Found","status":404,"detail":"EventType \\"x\\" does not exist."}');
    expect(notFound.message).toBe('Not Found: EventType "x" does not exist.');
    expect(notFound.exitCode).toBe(EXIT.clientError);
    expect(answerError(503, '{"title":"Service Unavailable","status":503}').exitCode).toBe(EXIT.serverError);
    expect(describeProblem(502, '<html>bad gateway</html>')).toBe('HTTP 502: <html>bad gateway</html>');
    expect(describeProblem(500, '')).toBe('HTTP 500');
  });

  it('exits 2 for commander usage errors and 0 for help', async () => {
    const sink = (): PassThrough => new PassThrough().resume();
    expect(await runCli(['no-such-command'], sink(), sink())).toBe(EXIT.usage);
    expect(await runCli(['tail', '--limit', 'x', 'a'], sink(), sink())).toBe(EXIT.usage);
    expect(await runCli(['--help'], sink(), sink())).toBe(EXIT.ok);
    expect(await runCli(['--url', 'ftp://x', 'event-types', 'list'], sink(), sink())).toBe(EXIT.usage);
  });
});

describe('broker CLI: input files', () => {
  it('reads NDJSON line by line, skipping blank lines, with bad lines as failed events by index and line', async () => {
    const events = await eventsOf('{"metadata":{"eid":"e1"},"a":1}\n\n  {"b":2}  \nnot json\n[1]\n');
    expect(events.map((e) => [e.index, e.line, e.eid, e.error === undefined])).toEqual([
      [0, 1, 'e1', true],
      [1, 3, '', true],
      [2, 4, '', false],
      [3, 5, '', false],
    ]);
    expect(events[1]?.json).toBe('{"b":2}');
    expect(events[3]?.error).toBe('not a JSON object');
  });

  it('reads a JSON array spread over lines', async () => {
    const events = await eventsOf('[\n  {"metadata": {"eid": "e1"}},\n  7,\n  {"c": 3}\n]\n');
    expect(events.map((e) => [e.index, e.line, e.eid, e.json])).toEqual([
      [0, undefined, 'e1', '{"metadata":{"eid":"e1"}}'],
      [1, undefined, '', undefined],
      [2, undefined, '', '{"c":3}'],
    ]);
  });

  it('refuses a missing file and a broken array as usage errors', async () => {
    expect(() => openEventSource(path.join(dir, 'missing'))).toThrow(CliError);
    await expect(eventsOf('[{"a":1},\n')).rejects.toMatchObject({ exitCode: EXIT.usage });
  });

  it('refuses a path that exists but cannot be read (a directory) as a usage error naming it', async () => {
    const read = async (): Promise<void> => {
      for await (const event of openEventSource(dir).events) void event;
    };
    const failure = read();
    await expect(failure).rejects.toThrow(CliError);
    await expect(failure).rejects.toMatchObject({ exitCode: EXIT.usage, message: `cannot read ${dir}: EISDIR: illegal operation on a directory, read` });
  });
});

describe('broker CLI: output', () => {
  it('derives the offsets of a batch from its cursor', () => {
    expect(offsetBefore('001-0001-000000000000000105', 0)).toBe('001-0001-000000000000000105');
    expect(offsetBefore('001-0001-000000000000000105', 5)).toBe('001-0001-000000000000000100');
    expect(offsetBefore('001-0002-000000000000000001', 3)).toBe('?');
    expect(offsetBefore('BEGIN', 1)).toBe('?');
  });

  it('aligns tables', () => {
    expect(formatTable(['A', 'LONG'], [['xyz', '1'], ['', '22']])).toBe('A    LONG\nxyz  1\n     22\n');
  });

  it('encodes bodies with gzip and zstd', async () => {
    const body = Buffer.from(JSON.stringify([{ a: 'x'.repeat(1000) }]));
    expect(gunzipSync(await encoderOf('gzip')(body))).toEqual(body);
    expect(zstdDecompress(await encoderOf('zstd')(body))).toEqual(body);
  });
});
