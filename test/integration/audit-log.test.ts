import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType } from '../support/fixtures.js';
import { StreamClient } from '../support/stream-client.js';

/**
 * The audit log (docs/operations.md "The broker's own event types"; feature `audit_log_collection`):
 * the event type `broker.audit-log` exists from startup; while the feature is on, changes to event
 * types, subscriptions and settings are published to it with who, what, before and after.
 */

let broker: TestBroker;

beforeAll(async () => {
  broker = await startTestBroker();
});
afterAll(async () => {
  await broker?.stop();
});

interface AuditEvent {
  metadata: { published_by: string; event_type: string };
  data_type: string;
  data_op: string;
  data: { resource_type: string; resource_id: string; user: string; previous_object: Record<string, unknown> | null; new_object: Record<string, unknown> | null };
}

/** Every audit event stored so far (low-level stream from BEGIN until `count` arrived). */
async function auditEvents(count: number): Promise<AuditEvent[]> {
  const stream = await StreamClient.open(`${broker.url}/event-types/broker.audit-log/events?batch_limit=100&batch_flush_timeout=1&stream_timeout=5`, {
    headers: { 'X-Broker-Cursors': JSON.stringify([{ partition: '0', offset: 'BEGIN' }]) },
  });
  expect(stream.status).toBe(200);
  try {
    const batches = await stream.events(count, 5000);
    return batches.flatMap((b) => b.events ?? []) as unknown as AuditEvent[];
  } finally {
    stream.close();
  }
}

async function newestOffset(): Promise<string> {
  return ((await call(broker.url, 'GET', '/event-types/broker.audit-log/partitions/0')).json as { newest_available_offset: string }).newest_available_offset;
}

describe('audit log', () => {
  it('exists from startup as a data event type only administrators may change, publish to and read', async () => {
    const answer = await call(broker.url, 'GET', '/event-types/broker.audit-log');
    expect(answer.status).toBe(200);
    expect(answer.json).toMatchObject({
      category: 'data',
      owning_application: 'broker',
      authorization: { admins: [{ data_type: 'user', value: 'unauthenticated' }], writers: [{ data_type: 'user', value: 'unauthenticated' }] },
    });
  });

  it('publishes nothing while the feature is off', async () => {
    expect((await call(broker.url, 'POST', '/event-types', businessEventType('audit.quiet'))).status).toBe(201);
    // A negative check: audit events are written in the background, this is the time one would take to land.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await newestOffset()).toBe('001-0001--1');
  });

  it('records who changed which event type, subscription or setting, with the objects before and after', async () => {
    expect((await call(broker.url, 'POST', '/settings/features', { feature: 'audit_log_collection', enabled: true })).status).toBe(204);
    expect((await call(broker.url, 'POST', '/event-types', businessEventType('audit.orders'))).status).toBe(201);
    const updated = businessEventType('audit.orders', { annotations: { 'team.example/owner': 'payments' } });
    expect((await call(broker.url, 'PUT', '/event-types/audit.orders', updated)).status).toBe(200);
    const created = await call(broker.url, 'POST', '/subscriptions', { owning_application: 'audit-app', event_types: ['audit.orders'] });
    const id = (created.json as { id: string }).id;
    expect((await call(broker.url, 'PUT', '/settings/blacklist/PRODUCER_APP/rogue')).status).toBe(204);
    expect((await call(broker.url, 'DELETE', `/subscriptions/${id}`)).status).toBe(204);
    expect((await call(broker.url, 'DELETE', '/event-types/audit.orders')).status).toBe(200);

    const events = await auditEvents(7);
    const find = (type: string, op: string, resourceId: string) => events.find((e) => e.data_type === type && e.data_op === op && e.data.resource_id === resourceId);
    expect(find('feature', 'U', 'audit_log_collection')?.data).toMatchObject({ previous_object: { enabled: false }, new_object: { enabled: true } });
    expect(find('event_type', 'C', 'audit.orders')?.data).toMatchObject({ user: 'unauthenticated', previous_object: null, new_object: { name: 'audit.orders' } });
    const update = find('event_type', 'U', 'audit.orders');
    expect(update?.data.previous_object).not.toHaveProperty('annotations');
    expect(update?.data.new_object).toMatchObject({ annotations: { 'team.example/owner': 'payments' } });
    expect(find('subscription', 'C', id)?.data.new_object).toMatchObject({ owning_application: 'audit-app' });
    expect(find('blacklist', 'C', 'PRODUCER_APP:rogue')?.data.new_object).toEqual({ type: 'PRODUCER_APP', name: 'rogue' });
    expect(find('subscription', 'D', id)?.data).toMatchObject({ previous_object: { id }, new_object: null });
    expect(find('event_type', 'D', 'audit.orders')?.data).toMatchObject({ previous_object: { name: 'audit.orders' }, new_object: null });
    for (const event of events) expect(event.metadata).toMatchObject({ event_type: 'broker.audit-log', published_by: 'broker' });
    expect((await call(broker.url, 'DELETE', '/settings/blacklist/PRODUCER_APP/rogue')).status).toBe(204);
    expect((await call(broker.url, 'POST', '/settings/features', { feature: 'audit_log_collection', enabled: false })).status).toBe(204);
    // Turning it off is its last entry; the unblock before it too.
    const all = await auditEvents(9);
    expect(all.find((e) => e.data_type === 'blacklist' && e.data_op === 'D')?.data.previous_object).toEqual({ type: 'PRODUCER_APP', name: 'rogue' });
    expect(all.find((e) => e.data_type === 'feature' && (e.data.new_object as { enabled?: boolean } | null)?.enabled === false)?.data.resource_id).toBe('audit_log_collection');
    expect((await call(broker.url, 'POST', '/event-types', businessEventType('audit.after'))).status).toBe(201);
    // A negative check, as above: no audit event lands once the feature is off.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await newestOffset()).toBe('001-0001-000000000000000008');
  });
});
