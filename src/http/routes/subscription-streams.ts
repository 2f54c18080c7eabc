import type { SubscriptionCursors } from '../../services/consumption/subscription-cursors.js';
import type { SubscriptionStreams } from '../../services/consumption/subscription-streams.js';
import type { AccessControl } from '../../services/access-control.js';
import type { Subject } from '../../auth/subject.js';
import type { ResolvedSubscription } from '../../services/consumption/subscription-streams.js';
import type { HttpServer, RequestContext } from '../server.js';
import { negotiateStreamFormat } from '../../domain/stream-format.js';
import { SubscriptionStreamQuerySchema } from '../../domain/stream-parameters.js';
import { inputOf } from '../request-inputs.js';
import { SubscriptionParam } from '../api/route-parts.js';
import { CommitHeaders, StatsQuery } from '../api/subscription-routes.js';

/**
 * Subscription consumption routes (spec "Subscriptions"; WIRE.md "Streaming", "Commits, cursor reset,
 * stats"): streams (GET, or POST with a body for direct assignment), commits, committed cursors,
 * cursor reset and stats. Streaming and commits need reader rights on the subscription and its event
 * types; a cursor reset needs admin rights on the subscription and read access to every one of its
 * event types; reading its cursors or stats needs read access to every one of its event types (issue
 * 13 §3: they show positions in and counts of their events). A reset's body is read and parsed under
 * the control-plane limiter; its wait for the streams to close is not. Path, query and headers are
 * checked by the pipeline against the route table's schemas (src/http/api/subscription-routes.ts)
 * first; the bodies by the services.
 */
export function subscriptionStreamRoutes(http: HttpServer, streams: SubscriptionStreams, cursors: SubscriptionCursors, access: AccessControl): void {
  const id = (ctx: RequestContext): string => inputOf(SubscriptionParam, ctx.input.params, 'path').subscription_id;
  const streamQuery = (ctx: RequestContext) => inputOf(SubscriptionStreamQuerySchema, ctx.input.query, 'query');
  /** Read access to every event type of the subscription, for `subject`. */
  const readable = (subject: Subject) => (subscription: ResolvedSubscription) => access.requireEventTypesReadable(subject, subscription.eventTypes);

  http.route('GET', '/subscriptions/:subscription_id/events', async (ctx) => streams.open(id(ctx), streamQuery(ctx), undefined, ctx.subject, negotiateStreamFormat(ctx.headers.accept)));

  http.route('POST', '/subscriptions/:subscription_id/events', async (ctx) => {
    const body = await ctx.body();
    return streams.open(id(ctx), streamQuery(ctx), body.byteLength === 0 ? undefined : await ctx.json(), ctx.subject, negotiateStreamFormat(ctx.headers.accept));
  });

  http.route('POST', '/subscriptions/:subscription_id/cursors', async (ctx) => {
    const streamId = inputOf(CommitHeaders, ctx.input.headers, 'header')['X-Broker-StreamId'];
    const answer = await cursors.commit(id(ctx), streamId, await ctx.json(), ctx.subject);
    return answer.status === 204 ? { status: 204 } : { status: 200, body: answer.body };
  });

  http.route('GET', '/subscriptions/:subscription_id/cursors', async (ctx) => ({ status: 200, body: await cursors.committed(id(ctx), readable(ctx.subject)) }));

  http.route('PATCH', '/subscriptions/:subscription_id/cursors', async (ctx) => {
    access.requireWritable();
    const body = await http.controlLimiter.run(() => ctx.json());
    await cursors.reset(id(ctx), body, (subscription) => {
      access.requireSubscription(ctx.subject, subscription.record, 'admin');
      readable(ctx.subject)(subscription);
    });
    return { status: 204 };
  });

  http.route('GET', '/subscriptions/:subscription_id/stats', async (ctx) => ({
    status: 200,
    body: await cursors.stats(id(ctx), inputOf(StatsQuery, ctx.input.query, 'query').show_time_lag === 'true', readable(ctx.subject)),
  }));
}
