/**
 * `broker tail <event-type>` (a low-level stream, no commits) and `broker tail --subscription <id>`
 * (a subscription stream, committing what it printed): prints every event as it arrives, one line per
 * event — `<event type>  <partition>  <offset>  <event JSON>` for people, the event JSON alone (NDJSON)
 * with `--json`.
 *
 * Offsets: a batch carries one cursor, the offset of its last event; offsets are dense per partition,
 * so an event `k` places before the end of its batch is shown at that offset minus `k`. On compacted
 * event types (whose removed events leave gaps) only the batch's last event is exact; the others are
 * upper bounds.
 */
import { Option, type Command } from 'commander';
import { CursorCommitter, STREAM_ID_HEADER, commitPath, streamPath, type StreamParameters } from '../client/stream-client.js';
import { CliError, EXIT, answerError, usageError } from './exit-codes.js';
import type { CliSession, CommandContext } from './context.js';
import type { BrokerClient, StreamLine } from './http-client.js';
import { itemsOf, stringField } from './output.js';

interface TailOptions {
  readonly subscription?: string;
  readonly from: 'begin' | 'end';
  readonly commit: boolean;
  readonly limit?: string;
  readonly batchLimit: string;
  readonly flushTimeout: string;
  readonly streamTimeout?: string;
  readonly commitTimeout?: string;
  readonly filter?: string;
}

/** Adds `tail` to the program. */
export function registerTail(program: Command, session: CliSession): void {
  program
    .command('tail')
    .description('print the events of an event type (low-level stream) or of a subscription (committing them) as they arrive')
    .argument('[event-type]', 'event type to read without a subscription')
    .option('--subscription <id>', 'read through this subscription and commit what was printed')
    .addOption(new Option('--from <where>', 'event type streams: start at the oldest event or after the newest').choices(['begin', 'end']).default('end'))
    .option('--no-commit', 'subscription streams: do not commit (the broker ends the stream after its commit timeout and keeps its partitions that long after it ended; their events go again to the next stream)')
    .option('--commit-timeout <s>', 'subscription streams: seconds a sent batch may stay uncommitted (commit_timeout; broker default and maximum 60)')
    .option('--limit <n>', 'stop after n events')
    .option('--batch-limit <n>', 'events per batch (batch_limit)', '100')
    .option('--flush-timeout <s>', 'longest wait for a batch to fill, in seconds (batch_flush_timeout)', '1')
    .option('--filter <json>', 'event type streams: only events this draft-04 JSON Schema matches (metadata included; docs/consuming.md "Filters"); a subscription applies its own filter')
    .option('--stream-timeout <s>', 'end the stream after this many seconds (stream_timeout; default: the broker\'s, about an hour)')
    .action(async (eventType: string | undefined, options: TailOptions, command: Command) => {
      await tail(session.contextOf(command), eventType, options);
    });
}

function positiveInteger(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw usageError(`${name} must be a positive integer, got "${value}"`);
  return n;
}

async function tail(ctx: CommandContext, eventType: string | undefined, options: TailOptions): Promise<void> {
  if ((eventType === undefined) === (options.subscription === undefined)) throw usageError('tail needs an event type or --subscription <id> (one of them)');
  const limit = positiveInteger('--limit', options.limit);
  const batchLimit = Math.min(positiveInteger('--batch-limit', options.batchLimit) ?? 100, limit ?? Number.MAX_SAFE_INTEGER);
  const flushTimeout = positiveInteger('--flush-timeout', options.flushTimeout) ?? 1;
  const streamTimeout = positiveInteger('--stream-timeout', options.streamTimeout);
  const commitTimeout = positiveInteger('--commit-timeout', options.commitTimeout);
  const parameters: StreamParameters = { batch_limit: batchLimit, batch_flush_timeout: flushTimeout, stream_limit: limit, stream_timeout: streamTimeout };
  const { client, output } = ctx;
  const filter = filterOption(options.filter, options.subscription !== undefined);

  let committer: CursorCommitter | undefined;
  let path: string;
  // With a filter, a batch's events are not consecutive: offsets are shown as at most the batch's cursor.
  let filtered = filter !== undefined;
  // Queue mode (docs/consuming.md "Queue mode"): a commit acknowledges only its own batch, so every printed batch is committed.
  let queueMode = false;
  const headers: Record<string, string> = {};
  const subscription = options.subscription;
  if (subscription !== undefined) {
    // Sending pauses at max_uncommitted_events: room for ten batches while commits are on their way;
    // without commits, as many as will be printed.
    const maxUncommitted = options.commit ? batchLimit * 10 : (limit ?? 1_000_000);
    path = streamPath({ subscription }, { ...parameters, max_uncommitted_events: maxUncommitted, commit_timeout: commitTimeout });
    ({ filtered, queueMode } = await subscriptionTraits(client, subscription));
  } else {
    const name = eventType ?? '';
    if (options.from === 'begin') headers['x-broker-cursors'] = JSON.stringify(await beginCursors(client, encodeURIComponent(name)));
    path = streamPath({ eventType: name }, parameters);
    if (filter !== undefined) path += `${path.includes('?') ? '&' : '?'}filter=${encodeURIComponent(filter)}`;
  }

  const stream = await client.openStream('GET', path, { headers });
  if (subscription !== undefined && options.commit) {
    const streamId = stream.streamId;
    if (streamId === undefined) throw new CliError(`the subscription stream has no ${STREAM_ID_HEADER} header`, EXIT.serverError);
    // At most one commit in flight; the next one carries the latest cursor of every partition printed
    // meanwhile (in queue mode, every cursor printed meanwhile).
    committer = new CursorCommitter(
      (items) => client.request('POST', commitPath(subscription), { body: JSON.stringify({ items }), headers: { [STREAM_ID_HEADER]: streamId }, use: 'commits' }),
      { coalesce: !queueMode, onFailure: (failure) => output.err(`commit failed: ${failure.status === 0 ? failure.text : answerError(failure.status, failure.text).message}`) },
    );
  }

  let stopping = false;
  const stop = (): void => {
    stopping = true;
    stream.close();
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  let printed = 0;
  let lastDebug: string | undefined;
  let closeReason: string | undefined;
  try {
    for await (const line of stream.lines) {
      if (line.info?.debug !== undefined) lastDebug = line.info.debug;
      if (line.info?.stream_close_reason !== undefined) closeReason = line.info.stream_close_reason;
      const events = line.events ?? [];
      if (events.length === 0) continue;
      const room = limit === undefined ? events.length : Math.min(events.length, limit - printed);
      await ctx.output.out(render(line, room, eventType, output.json, filtered));
      printed += room;
      // A batch printed only in part is not committed: its cursor covers events not shown.
      if (room === events.length) committer?.add(line.cursor);
      if (limit !== undefined && printed >= limit) {
        stopping = true;
        stream.close();
        break;
      }
    }
  } finally {
    process.removeListener('SIGINT', stop);
    process.removeListener('SIGTERM', stop);
    if (committer) await committer.flush();
  }
  // Why the broker ended the stream (docs/consuming.md "Why a stream ended"): the reason's code, then its text.
  if (!stopping && closeReason !== undefined) output.err(`stream ended: ${closeReason}${lastDebug === undefined ? '' : ` (${lastDebug})`}`);
  else if (!stopping && lastDebug !== undefined) output.err(`stream ended: ${lastDebug}`);
  if (committer && committer.failures > 0) ctx.partial();
}

/** `BEGIN` cursors of every partition of an event type (low-level streams from the start). */
async function beginCursors(client: BrokerClient, name: string): Promise<{ partition: string; offset: string }[]> {
  const { body } = await client.json('GET', `/event-types/${name}/partitions`);
  return itemsOf(body).map((p) => ({ partition: stringField(p, 'partition'), offset: 'BEGIN' }));
}

/**
 * `--filter` checked as JSON text of an object (the broker checks it as a schema: 422).
 * @throws CliError usage (exit 2) when it is not a JSON object, or given with `--subscription`
 */
function filterOption(text: string | undefined, subscription: boolean): string | undefined {
  if (text === undefined) return undefined;
  if (subscription) throw usageError('--filter applies to event type streams; a subscription has its own filter, fixed when it was created');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw usageError('--filter must be a JSON Schema as JSON text');
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw usageError('--filter must be a JSON object (a draft-04 JSON Schema)');
  return text;
}

/** Whether the subscription has a filter (docs/consuming.md "Filters"). */
async function subscriptionTraits(client: BrokerClient, subscription: string): Promise<{ filtered: boolean; queueMode: boolean }> {
  const { body } = await client.json('GET', `/subscriptions/${encodeURIComponent(subscription)}`);
  const record = body !== null && typeof body === 'object' ? (body as { filter?: unknown; annotations?: Record<string, unknown> }) : {};
  return { filtered: record.filter !== undefined, queueMode: record.annotations?.['broker.io/consumption-mode'] === 'queue' };
}

/**
 * The lines printed for the first `count` events of a batch. With `filtered`, the events of a batch need
 * not be consecutive (and its cursor may cover events passed over after the last one), so each event's
 * offset is shown as `<=` the batch's cursor.
 */
function render(line: StreamLine, count: number, eventType: string | undefined, json: boolean, filtered = false): string {
  const events = line.events ?? [];
  let text = '';
  if (json) {
    for (let i = 0; i < count; i++) text += `${JSON.stringify(events[i])}\n`;
    return text;
  }
  const type = line.cursor.event_type ?? eventType ?? '';
  for (let i = 0; i < count; i++) {
    const offset = filtered ? `<=${line.cursor.offset}` : offsetBefore(line.cursor.offset, events.length - 1 - i);
    text += `${type}  ${line.cursor.partition}  ${offset}  ${JSON.stringify(events[i])}\n`;
  }
  return text;
}

/** The offset `back` events before `offset` (`001-<timeline>-<18 digits>`); `?` when it is not of that form or would leave its timeline. */
export function offsetBefore(offset: string, back: number): string {
  if (back === 0) return offset;
  const match = /^(\d{3}-[0-9a-f]{4}-)(\d{18})$/.exec(offset);
  const prefix = match?.[1];
  const digits = match?.[2];
  if (prefix === undefined || digits === undefined) return '?';
  const n = BigInt(digits) - BigInt(back);
  return n < 0n ? '?' : `${prefix}${n.toString().padStart(18, '0')}`;
}
