import { Type } from '@sinclair/typebox';
import { TimelineInputSchema } from '../../domain/storages/timeline.js';
import type { AccessControl } from '../../services/access-control.js';
import type { AuditLog } from '../../services/audit-log.js';
import type { Timelines } from '../../services/event-types/timelines.js';
import { json, jsonBody, problems, routesOf, type Route } from '../api/route-model.js';
import { NameParam } from '../api/route-parts.js';
import { TimelineSchema } from '../api/wire-schemas.js';
import { name } from './event-types.js';

/** The services the timeline routes use. */
export interface TimelineDeps {
  readonly timelines: Timelines;
  readonly access: AccessControl;
  readonly audit: AuditLog;
}

const route = routesOf<TimelineDeps>();

/**
 * `GET/POST /event-types/{name}/timelines` (docs/concepts.md "Timelines and storages"; docs/operations.md; see
 * {@link Timelines}). Timelines are an operator's tool, like storages: listing needs the
 * administrators' `readers`, creating their `admins` list (403 otherwise). POST checks in this order:
 * 503 while `disable_db_write_operations` is on; 400 body not an object; 404 unknown event type; 403;
 * 422 `storage_id` missing or not a registered storage; 409 a concurrent switch or repartitioning won.
 * It answers 201 with the new, active timeline (audited as resource `timeline`, id `<event type>:<order>`).
 */
export const TIMELINE_ROUTES: readonly Route<TimelineDeps>[] = [
  route({
    method: 'GET', path: '/event-types/{name}/timelines', operationId: 'listTimelines', tag: 'Storages and timelines', access: 'authenticated', params: NameParam,
    summary: 'List the timelines of an event type', description: 'Needs the administrators\' `readers`.',
    responses: { '200': json('the timelines, oldest first', Type.Array(TimelineSchema)), ...problems(403, 404) },
    handler: async (ctx, { timelines, access }) => {
      const eventType = name(ctx.params);
      const list = await timelines.list(eventType);
      access.requireSettings(ctx.subject, 'read');
      return { status: 200, body: list };
    },
  }),
  route({
    method: 'POST', path: '/event-types/{name}/timelines', operationId: 'createTimeline', tag: 'Storages and timelines', access: 'authenticated', params: NameParam,
    summary: 'Switch an event type to a new timeline on a storage', description: 'Needs the administrators\' `admins` list.',
    body: jsonBody(TimelineInputSchema),
    responses: { '201': json('the new, active timeline', TimelineSchema), ...problems(400, 403, 404, 409, 422, 503) },
    handler: async (ctx, { timelines, access, audit }) => {
      access.requireWritable();
      const eventType = name(ctx.params);
      const body = await ctx.json();
      const created = await timelines.create(eventType, body, () => access.requireSettings(ctx.subject, 'admin'));
      audit.record({ subject: ctx.subject, resource: 'timeline', resourceId: `${eventType}:${created.order}`, op: 'C', next: created });
      return { status: 201, body: created };
    },
  }),
];

