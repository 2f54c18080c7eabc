/**
 * `broker event-types list|get|create|update|delete`: the event type registry
 * (`GET/POST /event-types`, `GET/PUT/DELETE /event-types/{name}`). A create or update answered with a
 * `Warning` (the declared traffic cannot fit the Redis memory budget) prints it on stderr.
 */
import type { Command } from 'commander';
import { usageError } from './exit-codes.js';
import type { CliSession, CommandContext } from './context.js';
import { readJsonDocument } from './input.js';
import { formatTable, itemsOf, stringField } from './output.js';

/** Adds `event-types` and its subcommands to the program. */
export function registerEventTypes(program: Command, session: CliSession): void {
  const group = program.command('event-types').description('list, show, create, update and delete event types');

  group
    .command('list')
    .description('list event types (name, category, owning application, partitioning)')
    .action(async (_options: unknown, command: Command) => {
      const ctx = session.contextOf(command);
      const { body } = await ctx.client.json('GET', '/event-types');
      const items = itemsOf(body);
      if (ctx.output.json) return ctx.output.out(`${JSON.stringify(items)}\n`);
      const rows = items.map((e) => [stringField(e, 'name'), stringField(e, 'category'), stringField(e, 'owning_application'), stringField(e, 'partition_strategy'), stringField(e, 'compatibility_mode')]);
      return ctx.output.out(formatTable(['NAME', 'CATEGORY', 'OWNING APPLICATION', 'PARTITIONING', 'COMPATIBILITY'], rows));
    });

  group
    .command('get')
    .description('show an event type')
    .argument('<name>', 'event type name')
    .action(async (name: string, _options: unknown, command: Command) => {
      const ctx = session.contextOf(command);
      const { body } = await ctx.client.json('GET', `/event-types/${encodeURIComponent(name)}`);
      await printRecord(ctx, body);
    });

  group
    .command('create')
    .description('create an event type from a JSON file (the body of POST /event-types)')
    .requiredOption('-f, --file <file>', 'JSON file; - for stdin')
    .action(async (options: { file: string }, command: Command) => {
      const ctx = session.contextOf(command);
      const document = await readJsonDocument(options.file);
      const name = stringField(document, 'name');
      const { body, warnings } = await ctx.client.json('POST', '/event-types', document);
      for (const warning of warnings) ctx.output.err(`warning: ${warning}`);
      if (ctx.output.json) return ctx.output.out(`${JSON.stringify(body ?? {})}\n`);
      return ctx.output.out(`created event type ${name || stringField(body, 'name')}\n`);
    });

  group
    .command('update')
    .description('replace an event type with the JSON of a file (PUT /event-types/{name}); the name defaults to the file\'s "name"')
    .argument('[name]', 'event type name (default: "name" in the file)')
    .requiredOption('-f, --file <file>', 'JSON file; - for stdin')
    .action(async (nameArgument: string | undefined, options: { file: string }, command: Command) => {
      const ctx = session.contextOf(command);
      const document = await readJsonDocument(options.file);
      const name = nameArgument ?? stringField(document, 'name');
      if (name === '') throw usageError('update needs an event type name: as an argument or as "name" in the file');
      const { body, warnings } = await ctx.client.json('PUT', `/event-types/${encodeURIComponent(name)}`, document);
      for (const warning of warnings) ctx.output.err(`warning: ${warning}`);
      if (ctx.output.json) return ctx.output.out(`${JSON.stringify(body ?? {})}\n`);
      return ctx.output.out(`updated event type ${name}\n`);
    });

  group
    .command('delete')
    .description('delete an event type and its events')
    .argument('<name>', 'event type name')
    .action(async (name: string, _options: unknown, command: Command) => {
      const ctx = session.contextOf(command);
      await ctx.client.json('DELETE', `/event-types/${encodeURIComponent(name)}`);
      if (ctx.output.json) return ctx.output.out(`${JSON.stringify({ deleted: name })}\n`);
      return ctx.output.out(`deleted event type ${name}\n`);
    });
}

/** A record: indented JSON for people, one line with `--json`. */
export function printRecord(ctx: CommandContext, body: unknown): Promise<void> {
  return ctx.output.out(ctx.output.json ? `${JSON.stringify(body)}\n` : `${JSON.stringify(body, null, 2)}\n`);
}
