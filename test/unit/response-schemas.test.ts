import { describe, expect, it } from 'vitest';
import { responseMismatch } from '../support/response-schemas.js';

// The test-support check every integration test's JSON answers go through, so the API document
// cannot drift from what the node sends.
describe('responseMismatch', () => {
  const subscription = {
    id: '0b7a4c36-2b1e-4c55-9a53-3c1f9a0e8c11',
    owning_application: 'shop',
    event_types: ['orders'],
    consumer_group: 'default',
    read_from: 'end',
    initial_cursors: [],
    created_at: '2026-11-24T22:00:00.000Z',
    updated_at: '2026-11-24T22:00:00.000Z',
  };

  it('accepts an answer that matches its route and status', () => {
    expect(responseMismatch('GET', `/subscriptions/${subscription.id}`, 200, 'application/json', subscription)).toBeUndefined();
    expect(responseMismatch('GET', '/subscriptions?limit=5', 200, 'application/json', { items: [subscription], _links: {} })).toBeUndefined();
  });

  it('names the route, the status and the JSON pointer of what does not match', () => {
    const mismatch = responseMismatch('GET', '/subscriptions?limit=5', 200, 'application/json; charset=utf-8', { items: [{ ...subscription, read_from: 'BEGIN', extra: 1 }], _links: {} });
    expect(mismatch).toContain('GET /subscriptions?limit=5 → 200 (route listSubscriptions GET /subscriptions)');
    expect(mismatch).toContain('/items/0/read_from must be equal to one of the allowed values');
    expect(mismatch).toContain('/items/0 must NOT have additional properties ({"additionalProperty":"extra"})');
  });

  it('checks failures against the problem schema, and refuses a success status the route does not list', () => {
    expect(responseMismatch('GET', '/nowhere', 404, 'application/problem+json', { title: 'Not Found', status: 404, detail: 'no route for GET /nowhere' })).toBeUndefined();
    expect(responseMismatch('GET', '/event-types/x', 404, 'application/problem+json', { title: 'Not Found' })).toContain("/ must have required property 'status'");
    expect(responseMismatch('DELETE', '/subscriptions/x', 200, 'application/json', {})).toContain('status 200 is not described in the route table');
    expect(responseMismatch('DELETE', '/event-types/x', 200, 'application/json', {})).toContain('describes no application/json body for this status');
  });

  it('leaves streams and text alone', () => {
    expect(responseMismatch('GET', '/metrics', 200, 'text/plain; version=0.0.4', 'x')).toBeUndefined();
    expect(responseMismatch('GET', '/subscriptions/x/events', 200, 'application/x-json-stream', {})).toBeUndefined();
  });
});
