import { describe, expect, it } from 'vitest';
import { refusalOf } from '../support/broker-error.js';
import { PublishAdmission } from '../../src/http/publish-admission.js';

/** The admission bound of publishing (src/http/publish-admission.ts; docs/publishing.md "Refusals and deadlines"). */
describe('PublishAdmission', () => {
  it('admits up to the bound and refuses the publish that would pass it, naming the bound, with Retry-After', () => {
    const admission = new PublishAdmission(1000);
    const first = admission.admit(600);
    admission.admit(400);
    expect(admission.bytesInFlight).toBe(1000);
    const refused = refusalOf(() => admission.admit(1));
    expect(refused.code).toBe('PUBLISH_OVERLOADED');
    expect(refused.status).toBe(503);
    expect(refused.headers).toEqual({ 'Retry-After': '1' });
    expect(refused.detail).toBe('This node already holds 1000 bytes of publish bodies in flight and this one declares 1 (http.publishMaxInFlightBytes 1000); nothing of it was read or written, retry shortly');
    // A refusal holds nothing; a release makes room.
    expect([admission.bytesInFlight, admission.inFlight]).toEqual([1000, 2]);
    first.release();
    first.release();
    expect([admission.bytesInFlight, admission.inFlight]).toEqual([400, 1]);
    admission.admit(600);
    expect(admission.bytesInFlight).toBe(1000);
  });

  it('admits one publish alone whatever its size', () => {
    const admission = new PublishAdmission(1000);
    const large = admission.admit(50_000);
    expect(refusalOf(() => admission.admit(0)).code).toBe('PUBLISH_OVERLOADED');
    large.release();
    expect([admission.bytesInFlight, admission.inFlight]).toEqual([0, 0]);
  });

  it('counts a body again at its received or inflated size, refusing it then only when others are in flight', () => {
    const admission = new PublishAdmission(1000);
    const chunked = admission.admit(0);
    chunked.grow(700);
    expect(admission.bytesInFlight).toBe(700);
    const gzipped = admission.admit(200);
    expect(refusalOf(() => gzipped.grow(400)).code).toBe('PUBLISH_OVERLOADED');
    // The refused growth is not held; the hold stays as admitted until released.
    expect(admission.bytesInFlight).toBe(900);
    gzipped.release();
    chunked.grow(5000);
    expect(admission.bytesInFlight).toBe(5000);
    chunked.grow(10);
    expect(admission.bytesInFlight).toBe(5000);
    chunked.release();
    chunked.grow(9000);
    expect([admission.bytesInFlight, admission.inFlight]).toEqual([0, 0]);
  });

  it('with a queue-delay bound, refuses a publish while the worker threads\' oldest waiting task has waited longer, naming the bound, but not a small body or a publish alone', () => {
    let waitedMs = 0;
    const admission = new PublishAdmission(1_000_000, { maxMs: 200, exemptBytes: 100, read: () => waitedMs });
    const first = admission.admit(500);
    waitedMs = 200;
    admission.admit(500).release();
    waitedMs = 250.4;
    const refused = refusalOf(() => admission.admit(500));
    expect(refused.code).toBe('PUBLISH_QUEUE_DELAYED');
    expect(refused.status).toBe(503);
    expect(refused.headers).toEqual({ 'Retry-After': '1' });
    expect(refused.detail).toBe('Batches on this node have waited 250 ms for a worker thread (http.publishMaxQueueDelayMs 200); nothing of this publish was read or written, retry shortly');
    // A chunked body (size unknown) is held to it; one declared small enough to be validated on the main thread is not.
    expect(refusalOf(() => admission.admit(0)).code).toBe('PUBLISH_QUEUE_DELAYED');
    admission.admit(100).release();
    expect([admission.bytesInFlight, admission.inFlight]).toEqual([500, 1]);
    // Alone in flight, a publish is admitted whatever the delay.
    first.release();
    admission.admit(500).release();
    expect([admission.bytesInFlight, admission.inFlight]).toEqual([0, 0]);
  });

  it('with a floor of publishes in flight, the queue-delay bound refuses only from that many on: a few producers are never refused for a slow moment', () => {
    const admission = new PublishAdmission(1_000_000, { maxMs: 200, exemptBytes: 100, minInFlight: 3, read: () => 5_000 });
    const held = [admission.admit(500), admission.admit(500)];
    // Two in flight: below the floor, admitted whatever the delay.
    held.push(admission.admit(500));
    // Three in flight: the bound applies.
    expect(refusalOf(() => admission.admit(500)).code).toBe('PUBLISH_QUEUE_DELAYED');
    for (const h of held) h.release();
    expect([admission.bytesInFlight, admission.inFlight]).toEqual([0, 0]);
  });
});
