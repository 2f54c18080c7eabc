import type { SubscriptionCursors } from '../../services/consumption/subscription-cursors.js';
import type { SubscriptionStreams } from '../../services/consumption/subscription-streams.js';
import type { AccessControl } from '../../services/access-control.js';
import type { Subject } from '../../auth/subject.js';
import type { ResolvedSubscription } from '../../services/consumption/subscription-streams.js';
import type { HttpServer } from '../server.js';
import { negotiateStreamFormat } from '../../domain/stream-format.js';

/**
 * Subscription consumption routes (spec "Subscriptions"; WIRE.md "Streaming", "Commits, cursor reset,
 * stats"): streams (GET, or POST with a body for direct assignment), commits, committed cursors,
 * cursor reset and stats. Streaming and commits need reader rights on the subscription and its event
 * types; a cursor reset needs admin rights on the subscription and read access to every one of its
 * event types; reading its cursors or stats needs read access to every one of its event types (issue
 * 13 §3: they show positions in and counts of their events). A reset's body is read and parsed under
 * the control-plane limiter; its wait for the streams to close is not.
 */
export function subscriptionStreamRoutes(http: HttpServer, streams: SubscriptionStreams, cursors: SubscriptionCursors, access: AccessControl): void {
  const id = (params: Readonly<Record<string, string>>): string => params.id ?? '';
  /** Read access to every event type of the subscription, for `subject`. */
  const readable = (subject: Subject) => (subscription: ResolvedSubscription) => access.requireEventTypesReadable(subject, subscription.eventTypes);

  http.route('GET', '/subscriptions/:id/events', async (ctx) => streams.open(id(ctx.params), ctx.query, undefined, ctx.subject, negotiateStreamFormat(ctx.headers.accept)));

  http.route('POST', '/subscriptions/:id/events', async (ctx) => {
    const body = await ctx.body();
    return streams.open(id(ctx.params), ctx.query, body.byteLength === 0 ? undefined : await ctx.json(), ctx.subject, negotiateStreamFormat(ctx.headers.accept));
  });

  http.route('POST', '/subscriptions/:id/cursors', async (ctx) => {
    const answer = await cursors.commit(id(ctx.params), ctx.headers['x-broker-streamid'], await ctx.json(), ctx.subject);
    return answer.status === 204 ? { status: 204 } : { status: 200, body: answer.body };
  });

  http.route('GET', '/subscriptions/:id/cursors', async (ctx) => ({ status: 200, body: await cursors.committed(id(ctx.params), readable(ctx.subject)) }));

  http.route('PATCH', '/subscriptions/:id/cursors', async (ctx) => {
    access.requireWritable();
    const body = await http.controlLimiter.run(() => ctx.json());
    await cursors.reset(id(ctx.params), body, (subscription) => {
      access.requireSubscription(ctx.subject, subscription.record, 'admin');
      readable(ctx.subject)(subscription);
    });
    return { status: 204 };
  });

  http.route('GET', '/subscriptions/:id/stats', async (ctx) => ({
    status: 200,
    body: await cursors.stats(id(ctx.params), ctx.query.get('show_time_lag') === 'true', readable(ctx.subject)),
  }));
}
