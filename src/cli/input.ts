/**
 * Input files of the `broker` command line: a JSON document (`-f file`, `-` for stdin) and the events
 * of `broker publish`, read as they are consumed from NDJSON (one event per line) or a JSON array.
 */
import { createReadStream, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { usageError } from './exit-codes.js';

/**
 * Reads and parses a JSON document from a file, or from stdin for `-`.
 * @throws CliError (exit 2) when the file cannot be read or is not JSON
 */
export async function readJsonDocument(file: string): Promise<unknown> {
  let text: string;
  try {
    text = file === '-' ? await readAll(process.stdin) : await readFile(file, 'utf8');
  } catch (err) {
    throw usageError(`cannot read ${file}: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw usageError(`${file === '-' ? 'stdin' : file} is not JSON: ${(err as Error).message}`);
  }
}

async function readAll(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer | string>) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString('utf8');
}

/** One event read from the input, or the reason it could not be. */
export interface InputEvent {
  /** 0-based position among the events of the input (blank NDJSON lines do not count). */
  readonly index: number;
  /** 1-based line of NDJSON input (undefined for a JSON array). */
  readonly line: number | undefined;
  /** The event as JSON text, ready to be joined into a batch (undefined when unusable). */
  readonly json: string | undefined;
  /** `metadata.eid` when the event has one. */
  readonly eid: string;
  /** Why the event cannot be sent (not JSON, not an object); undefined for a usable one. */
  readonly error: string | undefined;
}

/** A source of events with what progress can be measured against. */
export interface EventSource {
  /** Bytes of the file (undefined for stdin). */
  readonly totalBytes: number | undefined;
  /** Input bytes consumed so far (NDJSON) or, for a JSON array, its whole size once parsed. */
  readonly bytesRead: number;
  /** Events of a JSON array once it was parsed (NDJSON: undefined; counted as read). */
  readonly totalEvents: number | undefined;
  /** The events, in input order. @throws CliError (exit 2) when the input cannot be read or a JSON array does not parse */
  readonly events: AsyncIterable<InputEvent>;
}

/**
 * Opens the events of a file (or stdin for `-`/undefined). The format is told by the first non-blank
 * character: `[` is a JSON array (parsed whole), anything else NDJSON (read line by line, so a file of
 * any size streams through). A line or array item that is not a JSON object becomes an event with an
 * `error`, reported by index, never sent.
 * @throws CliError (exit 2) when the file does not exist
 */
export function openEventSource(file: string | undefined): EventSource {
  const stdin = file === undefined || file === '-';
  let totalBytes: number | undefined;
  if (!stdin) {
    try {
      totalBytes = statSync(file).size;
    } catch (err) {
      throw usageError(`cannot read ${file}: ${(err as Error).message}`);
    }
  }
  const state = { bytesRead: 0, totalEvents: undefined as number | undefined };
  const stream: Readable = stdin ? process.stdin : createReadStream(file);
  const name = stdin ? 'stdin' : file;

  async function* events(): AsyncGenerator<InputEvent> {
    const lines = createInterface({ input: stream, crlfDelay: Infinity });
    let lineNumber = 0;
    let index = 0;
    let arrayText: string[] | undefined;
    try {
      for await (const line of lines) {
        lineNumber += 1;
        if (arrayText !== undefined) {
          arrayText.push(line);
          continue;
        }
        const trimmed = line.trim();
        if (trimmed === '') {
          state.bytesRead += Buffer.byteLength(line) + 1;
          continue;
        }
        if (index === 0 && trimmed.startsWith('[')) {
          arrayText = [line];
          continue;
        }
        state.bytesRead += Buffer.byteLength(line) + 1;
        yield eventOf(index, lineNumber, trimmed);
        index += 1;
      }
    } catch (err) {
      throw usageError(`cannot read ${name}: ${(err as Error).message}`);
    }
    if (arrayText === undefined) return;
    const text = arrayText.join('\n');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      throw usageError(`${name} starts with "[" but is not a JSON array: ${(err as Error).message}`);
    }
    if (!Array.isArray(parsed)) throw usageError(`${name} starts with "[" but is not a JSON array`);
    const items = parsed as unknown[];
    state.totalEvents = items.length;
    state.bytesRead = Buffer.byteLength(text);
    for (const [i, item] of items.entries()) yield valueEvent(i, undefined, item);
  }

  return {
    totalBytes,
    get bytesRead() {
      return state.bytesRead;
    },
    get totalEvents() {
      return state.totalEvents;
    },
    events: events(),
  };
}

function eventOf(index: number, line: number, text: string): InputEvent {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    return { index, line, json: undefined, eid: '', error: `not JSON: ${(err as Error).message}` };
  }
  return valueEvent(index, line, value, text);
}

function valueEvent(index: number, line: number | undefined, value: unknown, text?: string): InputEvent {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { index, line, json: undefined, eid: '', error: 'not a JSON object' };
  const metadata = (value as Record<string, unknown>).metadata;
  const eid = typeof metadata === 'object' && metadata !== null && typeof (metadata as Record<string, unknown>).eid === 'string' ? ((metadata as Record<string, unknown>).eid as string) : '';
  return { index, line, json: text ?? JSON.stringify(value), eid, error: undefined };
}
