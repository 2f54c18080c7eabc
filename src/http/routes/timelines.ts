import type { AccessControl } from '../../services/access-control.js';
import type { AuditLog } from '../../services/audit-log.js';
import type { Timelines } from '../../services/timelines.js';
import type { HttpServer } from '../server.js';
import { name } from './event-types.js';

/**
 * `GET/POST /event-types/{name}/timelines` (spec "Event type registry", "Timeline"; see
 * {@link Timelines}). Timelines are an operator's tool, like storages: listing needs the
 * administrators' `readers`, creating their `admins` list (403 otherwise). POST checks in this order:
 * 503 while `disable_db_write_operations` is on; 400 body not an object; 404 unknown event type; 403;
 * 422 `storage_id` missing or not a registered storage; 409 a concurrent switch or repartitioning won.
 * It answers 201 with the new, active timeline (audited as resource `timeline`, id `<event type>:<order>`).
 */
export function timelineRoutes(http: HttpServer, timelines: Timelines, access: AccessControl, audit: AuditLog): void {
  http.route('GET', '/event-types/:name/timelines', async (ctx) => {
    const eventType = name(ctx.params);
    const list = await timelines.list(eventType);
    access.requireSettings(ctx.subject, 'read');
    return { status: 200, body: list };
  });

  http.route('POST', '/event-types/:name/timelines', async (ctx) => {
    access.requireWritable();
    const eventType = name(ctx.params);
    const body = await ctx.json();
    const created = await timelines.create(eventType, body, () => access.requireSettings(ctx.subject, 'admin'));
    audit.record({ subject: ctx.subject, resource: 'timeline', resourceId: `${eventType}:${created.order}`, op: 'C', next: created });
    return { status: 201, body: created };
  });
}
