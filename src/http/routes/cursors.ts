import { Type } from '@sinclair/typebox';
import { CursorDistancesInputSchema, CursorsLagInputSchema, ShiftedCursorsInputSchema } from '../../domain/cursor/cursor-input.js';
import { json, jsonBody, problems, routesOf, type Route } from '../api/route-model.js';
import { NameParam } from '../api/route-parts.js';
import { CursorDistanceResultSchema, CursorSchema, PartitionSchema } from '../api/wire-schemas.js';
import { readable, type PartitionDeps } from './partitions.js';

/** The query of `GET /event-types/{name}/cursors-at-time` (docs/consuming.md "Seeking by time"). */
export const CursorsAtTimeQuery = Type.Object({ time: Type.String({ format: 'date-time', description: 'RFC 3339 date-time, e.g. `2026-01-01T12:00:00.250Z` (missing or malformed: 422)' }) });

const route = routesOf<PartitionDeps>();

/**
 * Cursor routes of an event type (docs/concepts.md "Offsets and cursors"; docs/consuming.md "Seeking by
 * time"): cursors at a time, distances between cursors, their lag, and cursors shifted by a number of
 * events. They need the event type's `readers`.
 */
export const CURSOR_ROUTES: readonly Route<PartitionDeps>[] = [
  route({
    method: 'GET', path: '/event-types/{name}/cursors-at-time', operationId: 'cursorsAtTime', tag: 'Partitions and cursors', access: 'authenticated', params: NameParam, limited: true,
    summary: 'Cursors at a time',
    description: 'One cursor per partition from which a stream starts with the first event received at or after `time` (by `metadata.received_at`, to the millisecond; category `undefined`: to the second). Every retained event later: the offset before the oldest one (as `BEGIN`); none at or after `time`: the newest offset. Missing or malformed `time`: 422.',
    query: CursorsAtTimeQuery,
    responses: { '200': json('one cursor per partition, in partition order', Type.Array(CursorSchema)), ...problems(400, 403, 404, 422) },
    handler: async (ctx, deps) => ({ status: 200, body: await deps.cursors.atTime(await readable(ctx, deps), ctx.input.query.time) }),
  }),
  // The cursor tools' work grows with the number of cursors: they run under the control-plane limiter.
  route({
    method: 'POST', path: '/event-types/{name}/cursor-distances', operationId: 'cursorDistances', tag: 'Partitions and cursors', access: 'authenticated', params: NameParam, limited: true,
    summary: 'Distances between cursors', body: jsonBody(CursorDistancesInputSchema),
    responses: { '200': json('one result per query', Type.Array(CursorDistanceResultSchema)), ...problems(400, 403, 404, 422) },
    handler: async (ctx, deps) => ({ status: 200, body: await deps.cursors.distances(await readable(ctx, deps), await ctx.json()) }),
  }),
  route({
    method: 'POST', path: '/event-types/{name}/cursors-lag', operationId: 'cursorsLag', tag: 'Partitions and cursors', access: 'authenticated', params: NameParam, limited: true,
    summary: 'Events after each cursor', body: jsonBody(CursorsLagInputSchema),
    responses: { '200': json('the partitions with unconsumed_events', Type.Array(PartitionSchema)), ...problems(400, 403, 404, 422) },
    handler: async (ctx, deps) => ({ status: 200, body: await deps.cursors.lag(await readable(ctx, deps), await ctx.json()) }),
  }),
  route({
    method: 'POST', path: '/event-types/{name}/shifted-cursors', operationId: 'shiftCursors', tag: 'Partitions and cursors', access: 'authenticated', params: NameParam, limited: true,
    summary: 'Move cursors by a number of events', body: jsonBody(ShiftedCursorsInputSchema),
    responses: { '200': json('the moved cursors', Type.Array(CursorSchema)), ...problems(400, 403, 404, 422) },
    handler: async (ctx, deps) => ({ status: 200, body: await deps.cursors.shift(await readable(ctx, deps), await ctx.json()) }),
  }),
];
