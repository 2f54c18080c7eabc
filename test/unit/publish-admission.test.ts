import { describe, expect, it } from 'vitest';
import { refusalOf } from '../support/broker-error.js';
import { MAX_ADMISSION_RETRY_AFTER_SECONDS, PublishAdmission, RetryAfterEstimate } from '../../src/http/publish-admission.js';

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
    expect(refused.detail).toBe('This node already holds 1000 bytes of publish bodies in flight and this one declares 1 (http.publishMaxInFlightBytes 1000); nothing of it was read or written, retry in 1 s');
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
    expect(refused.detail).toBe('Batches on this node have waited 250 ms for a worker thread (http.publishMaxQueueDelayMs 200); nothing of this publish was read or written, retry in 1 s');
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

/** The `Retry-After` of admission refusals, from the producers already waiting (docs/decisions/0035-retry-after-from-the-waiting-producers.md). */
describe('RetryAfterEstimate', () => {
  it('stays at 1 s while fewer than 50 refusals fall in the last 5 s, whatever was admitted', () => {
    const estimate = new RetryAfterEstimate(() => 10_000);
    expect(Array.from({ length: 50 }, () => estimate.refused())).toEqual(Array.from({ length: 50 }, () => 1));
  });

  it('tells a refused producer how long the producers refused before it take to be admitted at the rate publishes are admitted', () => {
    let now = 0;
    const estimate = new RetryAfterEstimate(() => now);
    // 5 s of a storm: 20 admitted and 200 refused a second, each refused producer told 1 s so far.
    const given: number[] = [];
    for (let second = 0; second < 5; second++) {
      now = second * 1000;
      for (let i = 0; i < 20; i++) estimate.admitted();
      for (let i = 0; i < 200; i++) given.push(estimate.refused());
    }
    // The refusal after the 50th lengthens it: 50 producers told 1 s wait 1.25 s on average, 50 × 1.25 / 5 s = 12.5
    // waiting, 20 admitted in the window (4 a second): about 3 s.
    expect(given.slice(0, 50)).toEqual(Array.from({ length: 50 }, () => 1));
    expect(given[50]).toBe(3);
    // It grows with the line to its cap: 1,000 refused against 100 admitted in 5 s.
    expect(given[given.length - 1]).toBe(MAX_ADMISSION_RETRY_AFTER_SECONDS);
    // Once the window has passed, with publishes admitted and none refused, a refusal is told 1 s again.
    now = 10_000;
    for (let i = 0; i < 100; i++) estimate.admitted();
    expect(estimate.refused()).toBe(1);
  });

  it('with many admitted for each producer waiting, gives 1 s however many refusals', () => {
    let now = 0;
    const estimate = new RetryAfterEstimate(() => now);
    const given = new Set<number>();
    for (let second = 0; second < 10; second++) {
      now = second * 1000;
      for (let i = 0; i < 1000; i++) estimate.admitted();
      for (let i = 0; i < 60; i++) given.add(estimate.refused());
    }
    expect([...given]).toEqual([1]);
  });

  it('is what PublishAdmission refusals carry', () => {
    const admission = new PublishAdmission(1000, undefined, () => 0);
    admission.admit(1000);
    const answers = Array.from({ length: 60 }, () => refusalOf(() => admission.admit(1)).headers['Retry-After']);
    expect(answers.slice(0, 50).every((value) => value === '1')).toBe(true);
    // 50 producers told 1 s, one publish admitted in the window: 50 × 1.25 / 5 ÷ (1 / 5) ≈ 62 s, capped.
    expect(answers[50]).toBe(String(MAX_ADMISSION_RETRY_AFTER_SECONDS));
  });
});
