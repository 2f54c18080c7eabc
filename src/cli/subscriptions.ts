/**
 * `broker subscriptions list|create`, `broker lag <subscription>` and `broker cursors get|reset
 * <subscription>`: the subscription registry (`GET/POST /subscriptions`), its stats
 * (`GET /subscriptions/{id}/stats`) and its committed cursors (`GET/PATCH /subscriptions/{id}/cursors`).
 */
import { Option, type Command } from 'commander';
import { usageError } from './exit-codes.js';
import type { CliSession, CommandContext } from './context.js';
import { printRecord } from './event-types.js';
import { readJsonDocument } from './input.js';
import { formatCount, formatTable, itemsOf, stringField } from './output.js';

/** Adds `subscriptions`, `lag` and `cursors` to the program. */
export function registerSubscriptions(program: Command, session: CliSession): void {
  const group = program.command('subscriptions').description('list and create subscriptions');

  group
    .command('list')
    .description('list subscriptions, newest first (one page)')
    .option('--owning-application <app>', 'only those of this application')
    .option('--event-type <name...>', 'only those reading all of these event types')
    .option('--limit <n>', 'subscriptions per page (1 to 1000)', '20')
    .option('--offset <n>', 'skip this many', '0')
    .action(async (options: { owningApplication?: string; eventType?: string[]; limit: string; offset: string }, command: Command) => {
      const ctx = session.contextOf(command);
      const query = new URLSearchParams({ limit: options.limit, offset: options.offset });
      if (options.owningApplication !== undefined) query.set('owning_application', options.owningApplication);
      for (const name of options.eventType ?? []) query.append('event_type', name);
      const { body } = await ctx.client.json('GET', `/subscriptions?${query.toString()}`);
      const items = itemsOf(body);
      if (ctx.output.json) return ctx.output.out(`${JSON.stringify(items)}\n`);
      const rows = items.map((s) => [stringField(s, 'id'), stringField(s, 'owning_application'), stringField(s, 'consumer_group'), eventTypesOf(s).join(','), stringField(s, 'created_at')]);
      return ctx.output.out(formatTable(['ID', 'OWNING APPLICATION', 'CONSUMER GROUP', 'EVENT TYPES', 'CREATED'], rows));
    });

  group
    .command('create')
    .description('create a subscription (or get the existing one of the same application, event types and consumer group)')
    .option('--owning-application <app>', 'the consuming application')
    .option('--event-type <name...>', 'event types to read')
    .option('--consumer-group <group>', 'consumer group (broker default: "default")')
    .addOption(new Option('--read-from <where>', 'where a new subscription starts').choices(['begin', 'end']))
    .option('-f, --file <file>', 'the whole body of POST /subscriptions as JSON (- for stdin) instead of the options')
    .action(async (options: { owningApplication?: string; eventType?: string[]; consumerGroup?: string; readFrom?: string; file?: string }, command: Command) => {
      const ctx = session.contextOf(command);
      let document: unknown;
      if (options.file !== undefined) document = await readJsonDocument(options.file);
      else {
        if (options.owningApplication === undefined || options.eventType === undefined) throw usageError('subscriptions create needs --owning-application and --event-type (or -f file)');
        document = {
          owning_application: options.owningApplication,
          event_types: options.eventType,
          ...(options.consumerGroup !== undefined ? { consumer_group: options.consumerGroup } : {}),
          ...(options.readFrom !== undefined ? { read_from: options.readFrom } : {}),
        };
      }
      const { status, body } = await ctx.client.json('POST', '/subscriptions', document);
      if (ctx.output.json) return ctx.output.out(`${JSON.stringify(body)}\n`);
      return ctx.output.out(`${stringField(body, 'id')} (${status === 201 ? 'created' : 'existing'})\n`);
    });

  program
    .command('lag')
    .description('unconsumed events (and their age), consumer status and time to drain per partition of a subscription')
    .argument('<subscription>', 'subscription id')
    .action(async (id: string, _options: unknown, command: Command) => {
      await lag(session.contextOf(command), id);
    });

  registerCursors(program, session);

  group
    .command('get')
    .description('show a subscription')
    .argument('<subscription>', 'subscription id')
    .action(async (id: string, _options: unknown, command: Command) => {
      const ctx = session.contextOf(command);
      const { body } = await ctx.client.json('GET', `/subscriptions/${encodeURIComponent(id)}`);
      await printRecord(ctx, body);
    });
}

/** `broker cursors get|at|reset`: a subscription's committed cursors, and cursors of an event type at a time. */
function registerCursors(program: Command, session: CliSession): void {
  const cursors = program.command('cursors').description("show or reset a subscription's committed cursors");

  cursors
    .command('get')
    .description('the committed cursor of every partition')
    .argument('<subscription>', 'subscription id')
    .action(async (id: string, _options: unknown, command: Command) => {
      const ctx = session.contextOf(command);
      const { body } = await ctx.client.json('GET', `/subscriptions/${encodeURIComponent(id)}/cursors`);
      const items = itemsOf(body);
      if (ctx.output.json) return ctx.output.out(`${JSON.stringify(items)}\n`);
      if (items.length === 0) return ctx.output.out('no cursors (the subscription was never streamed)\n');
      return ctx.output.out(formatTable(['EVENT TYPE', 'PARTITION', 'OFFSET'], items.map((c) => [stringField(c, 'event_type'), stringField(c, 'partition'), stringField(c, 'offset')])));
    });

  cursors
    .command('at')
    .description('the cursor of every partition of an event type from which a stream starts with the first event received at or after a time')
    .argument('<event-type>', 'event type name')
    .argument('<time>', 'RFC 3339 date-time, e.g. 2026-01-01T12:00:00Z')
    .action(async (eventType: string, time: string, _options: unknown, command: Command) => {
      const ctx = session.contextOf(command);
      const { body } = await ctx.client.json('GET', `/event-types/${encodeURIComponent(eventType)}/cursors-at-time?time=${encodeURIComponent(time)}`);
      const items = itemsOf(body);
      if (ctx.output.json) return ctx.output.out(`${JSON.stringify(items)}\n`);
      return ctx.output.out(formatTable(['PARTITION', 'OFFSET'], items.map((c) => [stringField(c, 'partition'), stringField(c, 'offset')])));
    });

  cursors
    .command('reset')
    .description('move the cursors: to the oldest event, after the newest, or to those of a file; ends the subscription\'s streams')
    .argument('<subscription>', 'subscription id')
    .addOption(new Option('--to <where>', 'every partition to its oldest event or after its newest').choices(['begin', 'end']))
    .option('-f, --file <file>', 'the cursors as JSON: {"items": [...]} or an array of {event_type, partition, offset}; - for stdin')
    .action(async (id: string, options: { to?: 'begin' | 'end'; file?: string }, command: Command) => {
      const ctx = session.contextOf(command);
      if ((options.to === undefined) === (options.file === undefined)) throw usageError('cursors reset needs --to begin|end or -f file (one of them)');
      const items = options.to !== undefined ? await cursorsAt(ctx, id, options.to) : itemsOf(await readJsonDocument(options.file ?? '-'));
      await ctx.client.json('PATCH', `/subscriptions/${encodeURIComponent(id)}/cursors`, { items });
      if (ctx.output.json) return ctx.output.out(`${JSON.stringify({ items })}\n`);
      return ctx.output.out(`reset ${items.length} cursors of subscription ${id}\n`);
    });
}

function eventTypesOf(subscription: unknown): string[] {
  const value = typeof subscription === 'object' && subscription !== null ? (subscription as Record<string, unknown>).event_types : undefined;
  return Array.isArray(value) ? (value as unknown[]).filter((x): x is string => typeof x === 'string') : [];
}

/** A cursor for every partition of the subscription's event types: `BEGIN`, or the newest offset. */
async function cursorsAt(ctx: CommandContext, id: string, where: 'begin' | 'end'): Promise<{ event_type: string; partition: string; offset: string }[]> {
  const { body: subscription } = await ctx.client.json('GET', `/subscriptions/${encodeURIComponent(id)}`);
  const cursors: { event_type: string; partition: string; offset: string }[] = [];
  for (const eventType of eventTypesOf(subscription)) {
    const { body } = await ctx.client.json('GET', `/event-types/${encodeURIComponent(eventType)}/partitions`);
    for (const p of itemsOf(body)) cursors.push({ event_type: eventType, partition: stringField(p, 'partition'), offset: where === 'begin' ? 'BEGIN' : stringField(p, 'newest_available_offset') });
  }
  return cursors;
}

/** One partition's line of `GET /subscriptions/{id}/stats`. */
interface PartitionLag {
  readonly event_type: string;
  readonly partition: string;
  readonly state: string;
  readonly stream_id: string;
  readonly unconsumed_events?: number;
  readonly consumer_lag_seconds?: number;
  readonly consumer_status?: string;
  readonly drain_seconds?: number;
}

async function lag(ctx: CommandContext, id: string): Promise<void> {
  const { body } = await ctx.client.json('GET', `/subscriptions/${encodeURIComponent(id)}/stats?show_time_lag=true`);
  const partitions: PartitionLag[] = [];
  for (const item of itemsOf(body)) {
    const eventType = stringField(item, 'event_type');
    const list = typeof item === 'object' && item !== null ? (item as Record<string, unknown>).partitions : undefined;
    for (const p of Array.isArray(list) ? (list as unknown[]) : []) {
      const record = (typeof p === 'object' && p !== null ? p : {}) as Record<string, unknown>;
      partitions.push({
        event_type: eventType,
        partition: stringField(record, 'partition'),
        state: stringField(record, 'state'),
        stream_id: stringField(record, 'stream_id'),
        ...(typeof record.unconsumed_events === 'number' ? { unconsumed_events: record.unconsumed_events } : {}),
        ...(typeof record.consumer_lag_seconds === 'number' ? { consumer_lag_seconds: record.consumer_lag_seconds } : {}),
        ...(typeof record.consumer_status === 'string' ? { consumer_status: record.consumer_status } : {}),
        ...(typeof record.drain_seconds === 'number' ? { drain_seconds: record.drain_seconds } : {}),
      });
    }
  }
  const known = partitions.filter((p) => p.unconsumed_events !== undefined);
  const total = known.length > 0 ? known.reduce((sum, p) => sum + (p.unconsumed_events ?? 0), 0) : undefined;
  const ages = partitions.map((p) => p.consumer_lag_seconds).filter((s): s is number => s !== undefined);
  const maxSeconds = ages.length > 0 ? Math.max(...ages) : undefined;
  if (ctx.output.json) {
    return ctx.output.out(`${JSON.stringify({ subscription: id, unconsumed_events: total ?? null, consumer_lag_seconds: maxSeconds ?? null, partitions })}\n`);
  }
  const rows = partitions.map((p) => [
    p.event_type,
    p.partition,
    p.state,
    p.unconsumed_events !== undefined ? formatCount(p.unconsumed_events) : '-',
    p.consumer_lag_seconds !== undefined ? String(p.consumer_lag_seconds) : '-',
    p.consumer_status ?? '-',
    p.drain_seconds !== undefined ? String(p.drain_seconds) : '-',
    p.stream_id,
  ]);
  const unhealthy = partitions.filter((p) => p.consumer_status !== undefined && p.consumer_status !== 'ok').length;
  const health = unhealthy > 0 ? `; ${unhealthy} partition${unhealthy === 1 ? '' : 's'} not ok` : '';
  const summary = total === undefined ? 'not streamed yet: no committed cursors, no lag\n' : `unconsumed events: ${formatCount(total)}${maxSeconds !== undefined && total > 0 ? `, the oldest ${maxSeconds} s old` : ''}${health}\n`;
  return ctx.output.out(formatTable(['EVENT TYPE', 'PARTITION', 'STATE', 'UNCONSUMED', 'LAG (S)', 'STATUS', 'DRAIN (S)', 'STREAM'], rows) + summary);
}
