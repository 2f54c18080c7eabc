/**
 * `broker publish <event-type> [file|-]`: publishes the events of an NDJSON file or a JSON array
 * (stdin without a file or with `-`) in batches, gzip-compressed on request, with a progress line on a
 * terminal, and reports every event that was not written with its index in the input.
 *
 * What each answer of `POST /event-types/{name}/events` leads to (docs/publishing.md "Answers"):
 * - 200: the batch is written.
 * - 422 (items): nothing was written; the `failed` events are reported and the `aborted` ones (valid,
 *   refused with their batch) are sent again without them, unless `--all-or-nothing`.
 * - 207 (items): the events that were not stored (`failed` or `aborted`) are sent again, without the
 *   `submitted` ones, after a jittered exponential backoff ({@link retryDelayMs}), each retry said on
 *   stderr; at most `--attempts` (default {@link DEFAULT_ATTEMPTS}) attempts in all, then reported.
 * - 429, 503 and 507 (a full Redis, docs/operations.md "Memory and retention"): nothing was written; the
 *   batch is sent again after `Retry-After` ({@link retryAfterMs}),
 *   jittered upward by up to half of it ({@link jitteredRetryAfterMs}) so producers refused together do
 *   not come back together; the backoff when the answer has none; at most `--attempts` attempts in all.
 * - anything else: the command stops (exit 3 for 4xx, 4 for 5xx) saying how far it got.
 *
 * Where a publishing quota applies, answers carry the `RateLimit-Policy` and `RateLimit` headers
 * (docs/publishing.md "Quotas"): each batch first waits until they say it fits ({@link pacingDelayMs}),
 * so a producer alone on its quota stays under it without being refused.
 */
import { Option, type Command } from 'commander';
import { CliError, EXIT, answerError, usageError } from './exit-codes.js';
import type { CliSession, CommandContext } from './context.js';
import { openEventSource, type EventSource, type InputEvent } from './input.js';
import { formatCount, type Output } from './output.js';
import { encoderOf, type WireEncoding } from './wire-encoding.js';
import { pacingDelayMs } from '../client/rate-limit-pacing.js';

/** Attempts per event when storage fails for its partition (207), and per batch answered 429, 503 or 507, unless `--attempts` says otherwise. */
export const DEFAULT_ATTEMPTS = 5;
/** Answers to a whole batch that wrote nothing and ask to come back later (`Retry-After`): over a quota, node busy, storage full. */
const RETRIED_STATUSES: ReadonlySet<number> = new Set([429, 503, 507]);
/** The first backoff before a retry, in milliseconds; it doubles with each further attempt. */
export const RETRY_BASE_DELAY_MS = 200;
/** Longest backoff before a retry, in milliseconds. */
export const MAX_RETRY_DELAY_MS = 5_000;
/** Longest wait `Retry-After` may ask for before a batch is sent again, in milliseconds. */
export const MAX_RETRY_AFTER_MS = 30_000;

/**
 * The backoff before attempt `attempt + 1` (docs/publishing.md "The command line"):
 * {@link RETRY_BASE_DELAY_MS} doubled per attempt made, capped at {@link MAX_RETRY_DELAY_MS}, then a
 * random share of it between a half and all of it, so clients that failed together do not retry together.
 * @param attempt the attempts made so far (1 after the first)
 * @param random a number in [0, 1) (`Math.random` by default)
 * @returns milliseconds
 */
export function retryDelayMs(attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(MAX_RETRY_DELAY_MS, RETRY_BASE_DELAY_MS * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + (ceiling / 2) * random());
}

/**
 * The wait a `Retry-After` header asks for: delay-seconds or an HTTP date, capped at
 * {@link MAX_RETRY_AFTER_MS}.
 * @param header the header's value, if any
 * @param now the current time in epoch milliseconds
 * @returns milliseconds (0 for a date already past), or undefined when the header is absent or unreadable
 */
export function retryAfterMs(header: string | undefined, now: number = Date.now()): number | undefined {
  if (header === undefined || header.trim() === '') return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Math.min(MAX_RETRY_AFTER_MS, Number(text) * 1000);
  // An HTTP date names its month; Date.parse alone would read "-1" as a year.
  const at = /[a-z]/i.test(text) ? Date.parse(text) : Number.NaN;
  if (Number.isNaN(at)) return undefined;
  return Math.min(MAX_RETRY_AFTER_MS, Math.max(0, at - now));
}

/**
 * The wait before sending again a batch answered 429, 503 or 507 with `Retry-After` (docs/publishing.md
 * "Refusals and deadlines"): never less than the broker asked, plus a random share of up to half of it,
 * so that producers refused at the same moment (a node at its admission bound refuses many at once)
 * spread their retries over half a `Retry-After` instead of all coming back at the same instant.
 * @param retryAfter the wait the header asked for, in ms ({@link retryAfterMs})
 * @param random a number in [0, 1) (`Math.random` by default)
 * @returns milliseconds, from `retryAfter` up to 1.5 × `retryAfter`
 */
export function jitteredRetryAfterMs(retryAfter: number, random: () => number = Math.random): number {
  return Math.round(retryAfter + (retryAfter / 2) * random());
}

interface PublishOptions {
  readonly batch: string;
  readonly gzip?: boolean;
  readonly zstd?: boolean;
  readonly progress: boolean;
  readonly allOrNothing?: boolean;
  readonly attempts: string;
}

/** An event that was not written. */
export interface PublishFailure {
  readonly index: number;
  readonly line?: number;
  readonly eid: string;
  readonly publishing_status: string;
  readonly step: string;
  readonly detail: string;
}

/** What `broker publish --json` prints. */
export interface PublishSummary {
  readonly event_type: string;
  readonly events: number;
  readonly published: number;
  readonly failed: number;
  readonly requests: number;
  readonly seconds: number;
  readonly events_per_second: number;
  readonly failures: PublishFailure[];
}

/** Adds `publish` to the program. */
export function registerPublish(program: Command, session: CliSession): void {
  program
    .command('publish')
    .description('publish the events of an NDJSON file or a JSON array (stdin without a file, or with -)')
    .argument('<event-type>', 'event type name')
    .argument('[file]', 'NDJSON (one event per line) or a JSON array; - or none: stdin')
    .option('--batch <n>', 'events per request', '500')
    .addOption(new Option('--gzip', 'gzip each request body (Content-Encoding: gzip)').conflicts('zstd'))
    .addOption(new Option('--zstd', 'zstd each request body (Content-Encoding: zstd)').conflicts('gzip'))
    .option('--all-or-nothing', 'do not send the valid events of a batch refused for an invalid one again (they count as failed)')
    .option('--attempts <n>', 'attempts per event in all: events not stored (207) and batches answered 429, 503 or 507 are sent again with backoff', String(DEFAULT_ATTEMPTS))
    .option('--no-progress', 'no progress line (it is drawn only for a file, on a terminal, without --json)')
    .action(async (eventType: string, file: string | undefined, options: PublishOptions, command: Command) => {
      await publish(session.contextOf(command), eventType, file, options);
    });
}

/**
 * A poster of batches to a publish path: each waits first as the last answer's RateLimit headers ask
 * (docs/publishing.md "Quotas"; {@link pacingDelayMs}), and 429, 503 and 507 answers (nothing written) are
 * sent again after Retry-After (or the backoff), up to `maxAttempts` in all.
 * @param note prints a line about a retry on stderr
 * @param onRequest called for every request sent
 * @returns the function posting one batch, resolving to the last answer's status and text
 */
function pacedPoster(client: CommandContext['client'], path: string, encoding: WireEncoding, maxAttempts: number, note: (line: string) => void, onRequest: () => void): (items: readonly InputEvent[]) => Promise<{ status: number; text: string }> {
  const encode = encoderOf(encoding);
  /** The RateLimit headers of the last answer that had them, and when it came: the next batch waits for them. */
  let limits: { readonly policy: string; readonly current: string | undefined; readonly at: number } | undefined;
  return async (items) => {
    const body = await encode(Buffer.from(`[${items.map((e) => e.json ?? 'null').join(',')}]`));
    const headers: Record<string, string> = encoding === 'identity' ? {} : { 'content-encoding': encoding };
    for (let attempt = 1; ; attempt++) {
      if (limits !== undefined) {
        const waitMs = pacingDelayMs(limits.policy, limits.current, { events: items.length, contentBytes: body.length }, performance.now() - limits.at);
        if (waitMs > 0) await sleep(waitMs);
      }
      const answer = await client.request('POST', path, { body, headers });
      onRequest();
      const policy = fieldValue(answer.headers['ratelimit-policy']);
      limits = policy === undefined ? undefined : { policy, current: fieldValue(answer.headers.ratelimit), at: performance.now() };
      if (!RETRIED_STATUSES.has(answer.status) || attempt >= maxAttempts) return answer;
      const asked = retryAfterMs(answer.headers['retry-after']);
      const waitMs = asked === undefined ? retryDelayMs(attempt) : jitteredRetryAfterMs(asked);
      note(`the broker answered ${answer.status}; sending ${formatCount(items.length)} ${items.length === 1 ? 'event' : 'events'} again in ${(waitMs / 1000).toFixed(1)} s (attempt ${attempt + 1} of ${maxAttempts})`);
      await sleep(waitMs);
    }
  };
}

async function publish(ctx: CommandContext, eventType: string, file: string | undefined, options: PublishOptions): Promise<void> {
  const batchSize = Number(options.batch);
  if (!Number.isInteger(batchSize) || batchSize < 1) throw usageError(`--batch must be a positive integer, got "${options.batch}"`);
  const maxAttempts = Number(options.attempts);
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) throw usageError(`--attempts must be a positive integer, got "${options.attempts}"`);
  const encoding: WireEncoding = options.zstd === true ? 'zstd' : options.gzip === true ? 'gzip' : 'identity';
  const source = openEventSource(file);
  const { output, client } = ctx;
  const fromFile = file !== undefined && file !== '-';
  const progress = new Progress(output, source, fromFile && options.progress && !output.json && output.errIsTty);
  const path = `/event-types/${encodeURIComponent(eventType)}/events`;
  const failures: PublishFailure[] = [];
  const started = performance.now();
  let read = 0;
  let published = 0;
  let requests = 0;

  const fail = (event: InputEvent, status: string, step: string, detail: string): void => {
    const failure: PublishFailure = { index: event.index, ...(event.line !== undefined ? { line: event.line } : {}), eid: event.eid, publishing_status: status, step, detail };
    failures.push(failure);
    if (!output.json) {
      progress.clear();
      output.err(`event ${event.index}${event.line !== undefined ? ` (line ${event.line})` : ''}${event.eid ? ` ${event.eid}` : ''}: ${status}${step ? ` at ${step}` : ''}${detail ? `: ${detail}` : ''}`);
    }
  };

  /** A line on stderr about a retry (also with `--json`: it is not a result). */
  const note = (line: string): void => {
    progress.clear();
    output.err(line);
  };

  const post = pacedPoster(client, path, encoding, maxAttempts, note, () => (requests += 1));

  const send = async (items: readonly InputEvent[], attempt = 1): Promise<void> => {
    const answer = await post(items);
    if (answer.status === 200) {
      published += items.length;
      return;
    }
    const results = answer.status === 422 || answer.status === 207 ? batchItems(answer.text) : undefined;
    if (results === undefined) {
      const error = answerError(answer.status, answer.text);
      const first = items[0];
      throw new CliError(`${error.message} (${formatCount(published)} events published; stopped at event ${first ? first.index : read})`, error.exitCode);
    }
    if (results.length !== items.length) throw new CliError(`the broker answered ${answer.status} with ${results.length} items for a batch of ${items.length}`, EXIT.serverError);
    const again: InputEvent[] = [];
    for (const [i, result] of results.entries()) {
      const event = items[i];
      if (event === undefined) continue;
      if (result.publishing_status === 'submitted') published += 1;
      else if (answer.status === 207 && attempt < maxAttempts) again.push(event);
      else if (answer.status === 422 && result.publishing_status === 'aborted' && options.allOrNothing !== true) again.push(event);
      else fail(event, result.publishing_status, result.step, result.detail);
    }
    // A 422 without a failed item would send the same batch forever: count it as failed instead.
    if (answer.status === 422 && again.length === items.length) {
      for (const event of again) fail(event, 'aborted', '', 'the broker refused the batch without naming a failed event');
      return;
    }
    if (again.length === 0) return;
    if (answer.status === 207) {
      note(`retrying ${formatCount(again.length)} of ${formatCount(items.length)} events that were not stored (attempt ${attempt + 1} of ${maxAttempts})`);
      await sleep(retryDelayMs(attempt));
      await send(again, attempt + 1);
    } else await send(again, attempt);
  };

  let batch: InputEvent[] = [];
  for await (const event of source.events) {
    read += 1;
    if (event.error !== undefined) fail(event, 'failed', 'reading', event.error);
    else batch.push(event);
    if (batch.length >= batchSize) {
      await send(batch);
      batch = [];
      progress.update(published + failures.length);
    }
  }
  if (batch.length > 0) await send(batch);
  progress.update(published + failures.length, true);
  progress.end();

  await report(ctx, eventType, { read, published, requests, started, failures });
}

/** What one `broker publish` run did, for its summary. */
interface PublishRun {
  readonly read: number;
  readonly published: number;
  readonly requests: number;
  /** `performance.now()` at its start, ms. */
  readonly started: number;
  readonly failures: PublishFailure[];
}

/** Writes the run's summary (JSON with `--json`, else one line) and marks a run with failures as partial. */
async function report(ctx: CommandContext, eventType: string, run: PublishRun): Promise<void> {
  const { output } = ctx;
  const { read, published, requests, failures } = run;
  failures.sort((x, y) => x.index - y.index);
  const seconds = (performance.now() - run.started) / 1000;
  const summary: PublishSummary = {
    event_type: eventType,
    events: read,
    published,
    failed: failures.length,
    requests,
    seconds: Math.round(seconds * 1000) / 1000,
    events_per_second: seconds > 0 ? Math.round(published / seconds) : 0,
    failures,
  };
  if (output.json) await output.out(`${JSON.stringify(summary)}\n`);
  else {
    const rate = seconds > 0 ? `, ${formatCount(published / seconds)} events/s` : '';
    const failed = failures.length > 0 ? `; ${formatCount(failures.length)} failed` : '';
    await output.out(`published ${formatCount(published)} of ${formatCount(read)} events to ${eventType} in ${formatCount(requests)} ${requests === 1 ? 'request' : 'requests'} (${seconds.toFixed(2)} s${rate})${failed}\n`);
  }
  if (failures.length > 0) ctx.partial();
}

/** A header's value, its lines joined as one list (a structured-field List may be split over several). */
function fieldValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** One item of a 207/422 answer. */
interface BatchItem {
  readonly publishing_status: string;
  readonly step: string;
  readonly detail: string;
}

/** The items of a 207/422 answer; undefined when the body is not such an array (e.g. a problem). */
function batchItems(text: string): BatchItem[] | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(body)) return undefined;
  const items: BatchItem[] = [];
  for (const item of body as unknown[]) {
    if (typeof item !== 'object' || item === null) return undefined;
    const { publishing_status: status, step, detail } = item as Record<string, unknown>;
    if (typeof status !== 'string') return undefined;
    items.push({ publishing_status: status, step: typeof step === 'string' ? step : '', detail: typeof detail === 'string' ? detail : '' });
  }
  return items;
}

/** A progress line on stderr (a terminal only): a bar, the share done, events and events/s. */
class Progress {
  private readonly started = performance.now();
  private lastDraw = 0;
  private drawn = false;

  constructor(
    private readonly output: Output,
    private readonly source: EventSource,
    private readonly enabled: boolean,
  ) {}

  /** Redraws at most every 100 ms (or now with `force`). @param events events done (published or failed) */
  update(events: number, force = false): void {
    if (!this.enabled) return;
    const now = performance.now();
    if (!force && now - this.lastDraw < 100) return;
    this.lastDraw = now;
    const { totalEvents, totalBytes, bytesRead } = this.source;
    const share = totalEvents !== undefined && totalEvents > 0 ? events / totalEvents : totalBytes !== undefined && totalBytes > 0 ? bytesRead / totalBytes : 0;
    const width = 30;
    const filled = Math.max(0, Math.min(width, Math.round(share * width)));
    const seconds = (now - this.started) / 1000;
    const rate = seconds > 0 ? events / seconds : 0;
    this.output.errRaw(`\r[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${Math.floor(share * 100)
      .toString()
      .padStart(3)}%  ${formatCount(events)} events  ${formatCount(rate)} events/s\x1b[K`);
    this.drawn = true;
  }

  /** Erases the line, so a message can be printed (it is drawn again at the next update). */
  clear(): void {
    if (this.drawn) this.output.errRaw('\r\x1b[K');
    this.drawn = false;
  }

  /** Ends the line, keeping the last state on the screen. */
  end(): void {
    if (this.drawn) this.output.errRaw('\n');
    this.drawn = false;
  }
}
