/**
 * Demo: registers one `data` event type per GitHub webhook event and publishes the real example
 * payloads of `@octokit/webhooks-examples` to a running broker.
 *
 *   node dist/scripts/demo-github.js [--url http://localhost:8080] [--batch 100] [--concurrency 4]
 *
 * Registration: `POST /event-types` (201/200 created, 409 already exists: both fine). Publishing:
 * `POST /event-types/{name}/events` in batches; the broker answers 200 (all submitted, empty body),
 * 422 (a BatchItemResponse array, nothing written), 207 (a BatchItemResponse array, some partitions
 * failed to write: the failed items are retried, at most {@link MAX_ATTEMPTS} attempts in all) or a
 * problem+json for other errors. Progress goes to stderr, the summary table to stdout (per event type:
 * payloads, accepted, rejected with the first rejection, and request body bytes sent, retries included).
 * Exit code 0 when every event type was registered and every event accepted, 1 otherwise.
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { loadGithubEventTypes, wrapAsDataEvent, type GithubEventType } from './github-event-types.js';
import { EXCLUDED_PAYLOADS, SCHEMA_FIXES } from './github-schema-fixes.js';
import { isJsonObject, type JsonObject } from '../src/domain/schema/json-schema-walk.js';
import { BrokerClient } from '../src/cli/http-client.js';

/** Attempts per event when the broker answers 207 (the failed items are sent again). */
export const MAX_ATTEMPTS = 3;
const REQUEST_TIMEOUT_MS = 60_000;
/** A node that takes the connection but does not answer `GET /health` within this is reported as not answering. */
const HEALTH_TIMEOUT_MS = 5_000;
const MB = 1024 * 1024;

/** Command line options. */
interface Options {
  url: string;
  batch: number;
  /** Event types published at once (each one's batches in order), as several producers would. */
  concurrency: number;
}

/** One item of a 207/422 answer (docs/publishing.md "Answers"). */
interface BatchItemResponse {
  eid: string;
  publishing_status: string;
  step: string;
  detail: string;
}

/** Per event type outcome, one row of the final table. */
interface Row {
  eventType: string;
  payloads: number;
  accepted: number;
  rejected: number;
  bytes: number;
  firstRejection: string | undefined;
}

function parseOptions(argv: string[]): Options | undefined {
  const { values } = parseArgs({
    args: argv,
    options: {
      url: { type: 'string', default: 'http://localhost:8080' },
      batch: { type: 'string', default: '100' },
      concurrency: { type: 'string', default: '4' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) return undefined;
  const batch = Number(values.batch);
  if (!Number.isInteger(batch) || batch < 1) throw new Error(`--batch must be a positive integer, got "${values.batch}"`);
  const concurrency = Number(values.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new Error(`--concurrency must be a positive integer, got "${values.concurrency}"`);
  return { url: values.url.replace(/\/+$/, ''), batch, concurrency };
}

/** `title: detail` of a problem+json body, or the start of any other body. */
function describeProblem(status: number, text: string): string {
  try {
    const body: unknown = JSON.parse(text);
    if (isJsonObject(body)) {
      const title = typeof body.title === 'string' ? body.title : `HTTP ${status}`;
      return typeof body.detail === 'string' ? `${status} ${title}: ${body.detail}` : `${status} ${title}`;
    }
  } catch {
    // not JSON
  }
  return `HTTP ${status}${text ? `: ${text.slice(0, 200)}` : ''}`;
}

function parseBatchItems(text: string): BatchItemResponse[] | undefined {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!Array.isArray(body)) return undefined;
  const items: BatchItemResponse[] = [];
  for (const item of body as unknown[]) {
    if (!isJsonObject(item) || typeof item.publishing_status !== 'string') return undefined;
    items.push({
      eid: typeof item.eid === 'string' ? item.eid : '',
      publishing_status: item.publishing_status,
      step: typeof item.step === 'string' ? item.step : '',
      detail: typeof item.detail === 'string' ? item.detail : '',
    });
  }
  return items;
}

function describeItem(item: BatchItemResponse): string {
  return [item.publishing_status, item.step, item.detail].filter((s) => s !== '').join(' / ');
}

/** Progress on stderr: one rewritten line on a TTY, a plain line every few seconds otherwise. */
class Progress {
  private readonly started = performance.now();
  private lastDraw = 0;
  private drawnSent = -1;
  private sent = 0;
  private bytes = 0;

  constructor(
    private readonly total: number,
    private readonly tty: boolean,
  ) {}

  add(events: number, bytes: number): void {
    this.sent += events;
    this.bytes += bytes;
    const now = performance.now();
    if (now - this.lastDraw >= (this.tty ? 100 : 2000) || this.sent === this.total) this.draw(now);
  }

  /** Ends the progress line (drawing the final state if it is not shown yet). */
  done(): void {
    if (this.drawnSent !== this.sent) this.draw(performance.now());
    if (this.tty) process.stderr.write('\n');
  }

  /** Events sent so far (first attempts only). */
  sentEvents(): number {
    return this.sent;
  }

  /** Seconds since the first event was sent. */
  elapsedSeconds(): number {
    return (performance.now() - this.started) / 1000;
  }

  private draw(now: number): void {
    this.lastDraw = now;
    this.drawnSent = this.sent;
    const seconds = Math.max((now - this.started) / 1000, 1e-6);
    const percent = this.total === 0 ? 100 : Math.floor((this.sent * 100) / this.total);
    const line = `sent ${this.sent}/${this.total} events (${percent}%), ${(this.bytes / MB).toFixed(2)} MB, ${Math.round(this.sent / seconds)} events/s`;
    if (this.tty) process.stderr.write(`\r\x1b[2K${line}`);
    else process.stderr.write(`${line}\n`);
  }
}

/**
 * The demo's HTTP side: the command line's client (src/cli/http-client.ts: `node:http` on keep-alive
 * sockets), which costs the demo process about half the CPU per request of `fetch` (measured: 37–40 ms
 * against 59–79 ms for the 58 publish requests), CPU the broker shares on a small machine.
 */
class Client {
  private readonly http: BrokerClient;

  constructor(
    url: string,
    private readonly flowId: string,
  ) {
    this.http = new BrokerClient({ url, timeoutMs: REQUEST_TIMEOUT_MS });
  }

  /** @throws Error when the broker cannot be reached or does not answer in time */
  async post(path: string, body: string): Promise<{ status: number; text: string }> {
    const { status, text } = await this.http.request('POST', path, { body, headers: { 'x-flow-id': this.flowId } });
    return { status, text };
  }

  async healthy(): Promise<boolean> {
    try {
      const answer = await this.http.request('GET', '/health', { timeoutMs: HEALTH_TIMEOUT_MS });
      return answer.status >= 200 && answer.status < 300;
    } catch {
      return false;
    }
  }

  /** Frees the kept-alive sockets so the process can exit. */
  close(): void {
    this.http.close();
  }
}

/** Registers an event type; `undefined` when it exists afterwards (created or already there), else the error. */
async function register(client: Client, type: GithubEventType): Promise<string | undefined> {
  try {
    const { status, text } = await client.post('/event-types', JSON.stringify(type.definition));
    if (status === 200 || status === 201 || status === 409) return undefined;
    return `registration failed: ${describeProblem(status, text)}`;
  } catch (error) {
    return `registration failed: ${error instanceof Error ? error.message : String(error)}`;
  }
}

/** Publishes one batch (retrying the failed items of a 207); updates the row and the progress. */
async function publishBatch(client: Client, path: string, events: JsonObject[], row: Row, progress: Progress): Promise<void> {
  let pending = events;
  let firstAttempt = true;
  const reject = (count: number, reason: string): void => {
    row.rejected += count;
    row.firstRejection ??= reason;
  };
  for (let attempt = 1; pending.length > 0; attempt++) {
    const body = JSON.stringify(pending);
    const bytes = Buffer.byteLength(body);
    row.bytes += bytes;
    let status: number;
    let text: string;
    try {
      ({ status, text } = await client.post(path, body));
    } catch (error) {
      reject(pending.length, error instanceof Error ? error.message : String(error));
      return;
    } finally {
      if (firstAttempt) progress.add(pending.length, bytes);
      firstAttempt = false;
    }
    if (status === 200) {
      row.accepted += pending.length;
      return;
    }
    const items = status === 207 || status === 422 ? parseBatchItems(text) : undefined;
    if (!items || items.length !== pending.length) {
      reject(pending.length, describeProblem(status, text));
      return;
    }
    if (status === 422) {
      // Nothing of the batch was written: the failed items say why, the others were aborted.
      const failed = items.find((item) => item.publishing_status === 'failed') ?? items.find((item) => item.publishing_status !== 'submitted');
      reject(pending.length, `422 ${failed ? describeItem(failed) : 'unprocessable'}`);
      return;
    }
    // 207: written items are submitted; the others may be retried.
    const retry: JsonObject[] = [];
    items.forEach((item, i) => {
      const event = pending[i];
      if (item.publishing_status === 'submitted') row.accepted += 1;
      else if (event !== undefined && attempt < MAX_ATTEMPTS) retry.push(event);
      else reject(1, `207 ${describeItem(item)} (after ${attempt} attempts)`);
    });
    pending = retry;
    if (retry.length > 0) await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
  }
}

function formatTable(rows: readonly Row[], seconds: number, sentEvents: number): string {
  const totals = rows.reduce((t, r) => ({ payloads: t.payloads + r.payloads, accepted: t.accepted + r.accepted, rejected: t.rejected + r.rejected, bytes: t.bytes + r.bytes }), {
    payloads: 0,
    accepted: 0,
    rejected: 0,
    bytes: 0,
  });
  const header = ['event type', 'payloads', 'accepted', 'rejected', 'bytes', 'first rejection'];
  const body = rows.map((r) => [r.eventType, String(r.payloads), String(r.accepted), String(r.rejected), String(r.bytes), truncate(r.firstRejection ?? '', 120)]);
  const footer = ['total', String(totals.payloads), String(totals.accepted), String(totals.rejected), String(totals.bytes), ''];
  const widths = header.map((h, c) => Math.max(h.length, ...[...body, footer].map((cells) => (cells[c] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, c) => (c >= 1 && c <= 4 ? cell.padStart(widths[c] ?? 0) : cell.padEnd(widths[c] ?? 0)))
      .join('  ')
      .trimEnd();
  const rule = widths.map((w) => '-'.repeat(w)).join('  ');
  const safeSeconds = Math.max(seconds, 1e-6);
  return [
    line(header),
    rule,
    ...body.map(line),
    rule,
    line(footer),
    '',
    `${totals.accepted}/${totals.payloads} events accepted, ${totals.rejected} rejected; ${(totals.bytes / MB).toFixed(2)} MB in ${seconds.toFixed(2)} s: ` +
      `${(totals.bytes / MB / safeSeconds).toFixed(2)} MB/s, ${Math.round(sentEvents / safeSeconds)} events/s`,
  ].join('\n');
}

function truncate(text: string, max: number): string {
  const oneLine = text.replace(/\s+/g, ' ');
  return oneLine.length <= max ? oneLine : oneLine.slice(0, max - 1) + '…';
}

/** Runs the demo; resolves to the process exit code. */
export async function main(argv: string[]): Promise<number> {
  const options = parseOptions(argv);
  if (!options) {
    process.stdout.write('usage: node dist/scripts/demo-github.js [--url http://localhost:8080] [--batch 100] [--concurrency 4]\n');
    return 0;
  }
  const types = loadGithubEventTypes();
  const total = types.reduce((sum, t) => sum + t.payloads.length, 0);
  process.stderr.write(`${types.length} event types, ${total} payloads; ${SCHEMA_FIXES.length} fixes applied to the official schemas (see SCHEMA_FIXES)\n`);
  for (const excluded of EXCLUDED_PAYLOADS) process.stderr.write(`excluded ${excluded.event}[${excluded.index}]: ${excluded.reason}\n`);

  const client = new Client(options.url, `github-demo-${randomUUID()}`);
  try {
    return await publishAll(client, options, types);
  } finally {
    client.close();
  }
}

/** Registers the event types and publishes their payloads; prints the table. @returns the exit code */
async function publishAll(client: Client, options: Options, types: readonly GithubEventType[]): Promise<number> {
  if (!(await client.healthy())) {
    process.stderr.write(`the broker at ${options.url} does not answer GET /health\n`);
    return 1;
  }

  const rows: Row[] = [];
  const registered: GithubEventType[] = [];
  for (const type of types) {
    const row: Row = { eventType: type.definition.name, payloads: type.payloads.length, accepted: 0, rejected: 0, bytes: 0, firstRejection: undefined };
    rows.push(row);
    const error = await register(client, type);
    if (error === undefined) registered.push(type);
    else {
      row.rejected = type.payloads.length;
      row.firstRejection = error;
    }
  }
  process.stderr.write(`registered ${registered.length}/${types.length} event types\n`);

  const progress = new Progress(registered.reduce((sum, t) => sum + t.payloads.length, 0), process.stderr.isTTY === true);
  // `--concurrency` lanes take the event types in turn; each publishes one event type's batches in order.
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < registered.length) {
      const type = registered[next++] as GithubEventType;
      const row = rows.find((r) => r.eventType === type.definition.name);
      if (!row) continue;
      const path = `/event-types/${encodeURIComponent(type.definition.name)}/events`;
      for (let start = 0; start < type.payloads.length; start += options.batch) {
        const events = type.payloads.slice(start, start + options.batch).map((payload) => wrapAsDataEvent(type.name, payload, randomUUID()));
        await publishBatch(client, path, events, row, progress);
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, lane));
  progress.done();
  process.stdout.write(formatTable(rows, progress.elapsedSeconds(), progress.sentEvents()) + '\n');
  const ok = rows.every((r) => r.rejected === 0 && r.accepted === r.payloads) && registered.length === types.length;
  return ok ? 0 : 1;
}

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
