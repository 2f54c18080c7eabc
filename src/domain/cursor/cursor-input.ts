/**
 * Cursors as requests carry them (docs/concepts.md "Offsets and cursors"; docs/consuming.md "Low-level
 * streams", "Commits"): the schemas of the cursor lists
 * in bodies (cursor tools, commits, cursor reset) and in the JSON text of `X-Broker-Cursors`,
 * `Last-Event-ID` and the `cursors` query parameter, checked with ajv (src/domain/json/input-check.ts), and
 * the rules a schema cannot say: at most {@link MAX_CURSORS_PER_REQUEST} cursors (checked first, so a
 * huge list costs one line) and each partition at most once.
 *
 * Statuses are those the endpoints always answered: a low-level stream's cursors are 400 whatever is
 * wrong (412 is for cursors that parse but name no position); the cursor tools, commits and resets
 * answer 400 for a body of the wrong JSON type and 422 for a cursor without its string fields.
 * Whether a cursor names a position of its partition is the services' (412/422). Pure: no I/O.
 */
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { isJsonObject } from '../schema/json-schema-walk.js';
import { checkInput, type InputPart } from '../json/input-check.js';
import { cursorCountProblem, MAX_CURSORS_PER_REQUEST } from './offsets.js';
import { checkBody, type RuleResult } from '../event-type/rule-problems.js';

const CURSOR_FIELDS = 'a cursor has string fields partition and offset';

/** A cursor `{partition, offset}`; every failure answers `status`. */
function cursor(status: 400 | 422) {
  const field = (description: string) =>
    Type.String({ 'x-status': status, 'x-messages': { type: `must be a string (${CURSOR_FIELDS})`, required: `is missing (${CURSOR_FIELDS})` }, description });
  return Type.Object({ partition: field('a partition of the event type'), offset: field('`BEGIN`, or an offset as served (docs/concepts.md "Offsets and cursors")') }, { 'x-status': status });
}

/** A cursor of the cursor tools and of `?cursors=` (docs/concepts.md "Offsets and cursors"): 422 when it lacks its string fields. */
export const CursorInputSchema = cursor(422);

/** `POST /event-types/{name}/cursors-lag`: a JSON array of cursors (400 otherwise). */
export const CursorsLagInputSchema = Type.Array(CursorInputSchema, { maxItems: MAX_CURSORS_PER_REQUEST, 'x-status': 400, 'x-messages': { type: 'must be a JSON array of cursors' } });

/** A cursor distance query (docs/consuming.md "Cursor tools"): 422 when it is not a pair of cursors. */
export const CursorDistanceQueryInputSchema = Type.Object(
  { initial_cursor: CursorInputSchema, final_cursor: CursorInputSchema },
  { 'x-status': 422, 'x-messages': { type: 'must be an object with initial_cursor and final_cursor' } },
);

/** `POST /event-types/{name}/cursor-distances`: a JSON array of `{initial_cursor, final_cursor}`. */
export const CursorDistancesInputSchema = Type.Array(CursorDistanceQueryInputSchema, {
  maxItems: MAX_CURSORS_PER_REQUEST, 'x-status': 400, 'x-messages': { type: 'must be a JSON array of {initial_cursor, final_cursor}' } },
);

const SHIFT_TEXT = 'must be an integer (the integer field shift counts the events to move by)';

/** A cursor and how many events to move it (docs/consuming.md "Cursor tools"): 422 when it lacks its string fields or `shift` is not a safe integer. */
export const ShiftedCursorInputSchema = Type.Object(
  {
    ...CursorInputSchema.properties,
    shift: Type.Optional(
      Type.Integer({
        minimum: -Number.MAX_SAFE_INTEGER,
        maximum: Number.MAX_SAFE_INTEGER,
        'x-status': 422,
        'x-messages': { type: SHIFT_TEXT, fraction: SHIFT_TEXT, minimum: SHIFT_TEXT, maximum: SHIFT_TEXT },
        description: 'events; negative moves back (absent: 0)',
      }),
    ),
  },
  { 'x-status': 422 },
);

/** `POST /event-types/{name}/shifted-cursors`: a JSON array of shifted cursors. */
export const ShiftedCursorsInputSchema = Type.Array(ShiftedCursorInputSchema, {
  maxItems: MAX_CURSORS_PER_REQUEST,
  'x-status': 400,
  'x-messages': { type: 'must be a JSON array of {partition, offset, shift}' },
});

/** The cursors of the `cursors` query parameter of `GET /event-types/{name}/partitions` (docs/consuming.md "Cursor tools"): 422 for any problem. */
export const PartitionCursorsSchema = Type.Object({
  cursors: Type.Array(CursorInputSchema, { 'x-status': 422, 'x-messages': { type: 'must be a JSON array of {partition, offset}' } }),
});

/**
 * A cursor list of a low-level stream (docs/consuming.md "Low-level streams"): a non-empty array of cursors,
 * 400 for anything else. Checked under the name it came from (`X-Broker-Cursors`, `Last-Event-ID`,
 * `cursors`), which the detail lines and pointers name.
 */
function lowLevelCursorList(source: string) {
  return Type.Object({
    [source]: Type.Array(cursor(400), {
      minItems: 1,
      'x-status': 400,
      'x-messages': { type: 'must be a JSON array of cursors', minItems: 'names no partition; leave it out to read every partition from its newest offset' },
    }),
  });
}

/** Where a low-level stream's cursors come from (docs/server-sent-events.md "Low-level streams"). */
export type LowLevelCursorSource = 'X-Broker-Cursors' | 'Last-Event-ID' | 'cursors';

const LOW_LEVEL_LISTS: Readonly<Record<LowLevelCursorSource, TSchema>> = {
  'X-Broker-Cursors': lowLevelCursorList('X-Broker-Cursors'),
  'Last-Event-ID': lowLevelCursorList('Last-Event-ID'),
  cursors: lowLevelCursorList('cursors'),
};

/** A cursor as the checks above give it. */
export type CursorInput = Static<typeof CursorInputSchema>;

/**
 * The cursors a low-level stream was given in `source` (its JSON already parsed): a non-empty array
 * of `{partition, offset}` strings, each partition at most once.
 * @returns the cursors, or 400 with one line per problem and their pointers (`in` the header or query)
 */
export function lowLevelCursors(value: unknown, source: LowLevelCursorSource): RuleResult<CursorInput[]> {
  // Checked as parsed JSON (no coercion: `"partition": 0` is not a string); the answer names the header or query.
  const checked = checkInput(LOW_LEVEL_LISTS[source], { [source]: value }, 'body');
  if (!checked.ok) return { ok: false, status: 400, details: checked.problems.map((p) => p.detail), errors: checked.problems };
  const cursors = (checked.value as Record<string, CursorInput[]>)[source] ?? [];
  const twice = repeatedPartition(cursors);
  return twice === undefined ? { ok: true, value: cursors } : { ok: false, status: 400, details: [`${source} names partition "${twice}" twice`] };
}

/** The request part a low-level cursor source is in. */
export function cursorSourcePart(source: LowLevelCursorSource): InputPart {
  return source === 'cursors' ? 'query' : 'header';
}

/** The first partition named by more than one cursor, or undefined. */
export function repeatedPartition(cursors: readonly { readonly partition: string }[]): string | undefined {
  const seen = new Set<string>();
  for (const { partition } of cursors) {
    if (seen.has(partition)) return partition;
    seen.add(partition);
  }
  return undefined;
}

/**
 * A cursor list body checked against `schema`, its length first: a list longer than
 * {@link MAX_CURSORS_PER_REQUEST} is one 422 line (`<what> has N cursors; at most 1000 are allowed per
 * request`) before any item is looked at.
 * @param list where the list is in `body` (the body itself, or its `items`)
 */
export function checkCursorBody<S extends TSchema>(schema: S, body: unknown, list: 'body' | 'items'): RuleResult<Static<S>> {
  const items: unknown = list === 'body' ? body : isJsonObject(body) ? body.items : undefined;
  const tooMany = Array.isArray(items) ? cursorCountProblem(items.length, list === 'body' ? 'the body' : '"items"') : undefined;
  if (tooMany !== undefined) return { ok: false, status: 422, details: [tooMany] };
  return checkBody(schema, body);
}

/** A subscription cursor to commit or reset to; `cursor_token` is not checked (docs/consuming.md "Commits"). */
const SubscriptionCursorInputSchema = Type.Object(
  {
    event_type: Type.String({ 'x-status': 422, description: 'an event type of the subscription' }),
    partition: Type.String({ 'x-status': 422 }),
    offset: Type.String({ 'x-status': 422 }),
    cursor_token: Type.Optional(Type.Unknown({ description: 'served by the node; not checked' })),
  },
  { 'x-status': 422, 'x-messages': { type: 'must be an object with string fields partition, offset and event_type' } },
);

/**
 * `POST /subscriptions/{id}/cursors` (commit) and `PATCH /subscriptions/{id}/cursors` (reset):
 * `{items: [SubscriptionCursor]}`; 400 for a body or `items` of the wrong JSON type (or no `items`),
 * 422 for a cursor without its string fields.
 */
export const SubscriptionCursorsInputSchema = Type.Object(
  {
    items: Type.Array(SubscriptionCursorInputSchema, {
      maxItems: MAX_CURSORS_PER_REQUEST,
      'x-status': 400,
      'x-messages': { type: 'must be an array of cursors', required: 'must be an array of cursors' },
    }),
  },
  { 'x-status': 400, 'x-messages': { type: 'must be an object with "items", an array of cursors' } },
);

/** A checked commit or reset body. */
export type SubscriptionCursorsInput = Static<typeof SubscriptionCursorsInputSchema>;
