/**
 * `broker quotas list|set|remove`: the publishing quotas of the settings (docs/publishing.md "Quotas";
 * `GET /settings/quotas`, `PUT/DELETE /settings/quotas/{kind}/{name}`).
 */
import { Option, type Command } from 'commander';
import { usageError } from './exit-codes.js';
import type { CliSession } from './context.js';
import { formatTable, itemsOf, stringField } from './output.js';

const KINDS = ['subject', 'owning_application'] as const;

/** A quota value of `--events-per-second` or `--bytes-per-second`: a positive integer. @throws CliError usage */
function rate(text: string | undefined, option: string): number | undefined {
  if (text === undefined) return undefined;
  if (!/^[1-9]\d*$/.test(text)) throw usageError(`${option} must be a positive integer, not "${text}"`);
  return Number(text);
}

/** A number field of a listed quota, or `-` when the quota has none. */
function rateField(value: unknown, key: string): string {
  const field = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
  return typeof field === 'number' ? field.toLocaleString('en-US') : '-';
}

/** Adds `quotas` and its subcommands to the program. */
export function registerQuotas(program: Command, session: CliSession): void {
  const group = program.command('quotas').description('list, set and remove publishing quotas (events and bytes per second per subject or owning application, counted for the cluster)');

  group
    .command('list')
    .description('list the publishing quotas (kind, name, events/s, bytes/s)')
    .action(async (_options: unknown, command: Command) => {
      const ctx = session.contextOf(command);
      const { body } = await ctx.client.json('GET', '/settings/quotas');
      const items = itemsOf(body);
      if (ctx.output.json) return ctx.output.out(`${JSON.stringify(items)}\n`);
      const rows = items.map((q) => [stringField(q, 'kind'), stringField(q, 'name'), rateField(q, 'events_per_second'), rateField(q, 'bytes_per_second')]);
      return ctx.output.out(formatTable(['KIND', 'NAME', 'EVENTS/S', 'BYTES/S'], rows));
    });

  group
    .command('set')
    .description('set the publishing quota of a subject or an owning application (replaces the one it had)')
    .addArgument(program.createArgument('<kind>', 'subject or owning_application').choices(KINDS))
    .argument('<name>', 'the subject id or the owning application')
    .addOption(new Option('--events-per-second <n>', 'events per second, counted for the cluster'))
    .addOption(new Option('--bytes-per-second <n>', 'bytes of publish bodies per second, counted for the cluster'))
    .action(async (kind: string, name: string, options: { eventsPerSecond?: string; bytesPerSecond?: string }, command: Command) => {
      const ctx = session.contextOf(command);
      const events = rate(options.eventsPerSecond, '--events-per-second');
      const bytes = rate(options.bytesPerSecond, '--bytes-per-second');
      if (events === undefined && bytes === undefined) throw usageError('give --events-per-second, --bytes-per-second or both');
      const quota = { ...(events === undefined ? {} : { events_per_second: events }), ...(bytes === undefined ? {} : { bytes_per_second: bytes }) };
      const { body } = await ctx.client.json('PUT', `/settings/quotas/${kind}/${encodeURIComponent(name)}`, quota);
      if (ctx.output.json) return ctx.output.out(`${JSON.stringify(body ?? {})}\n`);
      return ctx.output.out(`set the publishing quota of ${kind} ${name}: ${rateField(body, 'events_per_second')} events/s, ${rateField(body, 'bytes_per_second')} bytes/s\n`);
    });

  group
    .command('remove')
    .description('remove the publishing quota of a subject or an owning application')
    .addArgument(program.createArgument('<kind>', 'subject or owning_application').choices(KINDS))
    .argument('<name>', 'the subject id or the owning application')
    .action(async (kind: string, name: string, _options: unknown, command: Command) => {
      const ctx = session.contextOf(command);
      await ctx.client.json('DELETE', `/settings/quotas/${kind}/${encodeURIComponent(name)}`);
      if (ctx.output.json) return ctx.output.out(`${JSON.stringify({ removed: { kind, name } })}\n`);
      return ctx.output.out(`removed the publishing quota of ${kind} ${name}\n`);
    });
}
