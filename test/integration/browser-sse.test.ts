import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { businessEventType, orderEvent } from '../support/fixtures.js';

/**
 * A browser consumes the broker's server-sent events (docs/server-sent-events.md "What a browser cannot do"):
 * headless Chromium (Debian's `/usr/bin/chromium`, driven by puppeteer-core, which downloads no
 * browser; `.ci/run` installs it when absent) opens a page on the broker itself (`/health`, so
 * `EventSource` and `fetch` are same-origin and need no CORS), reads a subscription with
 * `EventSource` and commits each batch with `fetch`, then reads a low-level stream that ends every two
 * events and lets `EventSource` reconnect with `Last-Event-ID`.
 *
 * The page scripts are strings: the project compiles without the DOM library.
 */

const CHROMIUM = process.env.BROKER_TEST_CHROMIUM ?? '/usr/bin/chromium';

let broker: TestBroker;
let browser: Browser;
let page: Page;
/** `Content-Encoding` of every stream the page opened (the browser's `Accept-Encoding` negotiated as any client's). */
const streamEncodings: string[] = [];

beforeAll(async () => {
  [broker, browser] = await Promise.all([
    startTestBroker({ BROKER_CONSUMPTION_POLL_INTERVAL_MS: '200' }),
    // --no-sandbox: CI runs as root, where Chromium's sandbox cannot start.
    puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] }),
  ]);
  page = await browser.newPage();
  page.on('response', (response) => {
    if (/\/events\?/.test(response.url())) streamEncodings.push(response.headers()['content-encoding'] ?? 'identity');
  });
  await page.goto(`${broker.url}/health`);
  // The page is the broker's origin (puppeteer's goto may answer null for a navigation, so read the page).
  expect(await page.evaluate('location.origin + " " + document.body.innerText')).toBe(`${broker.url} OK`);
});
afterAll(async () => {
  await browser?.close();
  await broker?.stop();
});

/** Creates a one-partition business event type and publishes one event per order number. */
async function eventTypeWith(name: string, orders: readonly string[]): Promise<void> {
  const oneStat = { messages_per_minute: 1, message_size: 1, read_parallelism: 1, write_parallelism: 1 };
  const created = await call(broker.url, 'POST', '/event-types', businessEventType(name, { default_statistic: oneStat }));
  expect(created.status, created.text).toBe(201);
  const published = await call(broker.url, 'POST', `/event-types/${name}/events`, orders.map((o) => orderEvent(o)));
  expect(published.status, published.text).toBe(200);
}

/** Runs `script` (the source of an async function of one JSON argument) in the page. @returns its result */
async function inPage(script: string, arg: unknown): Promise<unknown> {
  return page.evaluate(`(${script})(${JSON.stringify(arg)})`);
}

/**
 * Reads a subscription with EventSource until `expected` events came, committing each batch with
 * fetch (`X-Broker-StreamId` from the first event's `info.stream_id`).
 */
const CONSUME_SUBSCRIPTION = `async ({ id, expected }) => {
  const source = new EventSource('/subscriptions/' + id + '/events?batch_limit=2&batch_flush_timeout=1');
  let streamId;
  const orders = [];
  const commits = [];
  let previous = Promise.resolve();
  try {
    await new Promise((resolve, reject) => {
      source.onerror = () => reject(new Error('EventSource failed, readyState ' + source.readyState));
      source.onmessage = (message) => {
        const batch = JSON.parse(message.data);
        if (batch.info && batch.info.stream_id) streamId = batch.info.stream_id;
        if (!batch.events) return;
        for (const event of batch.events) orders.push(event.order_number);
        // One commit after the other, so none arrives after a later one (that one would be 200 outdated).
        const commit = previous.then(() => fetch('/subscriptions/' + id + '/cursors', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-broker-streamid': streamId },
          body: JSON.stringify({ items: [batch.cursor] }),
        })).then((answer) => answer.status);
        previous = commit;
        commits.push(commit);
        if (orders.length >= expected) resolve();
      };
    });
    return { streamId, orders, commits: await Promise.all(commits) };
  } finally {
    source.close();
  }
}`;

/**
 * Reads a low-level stream with EventSource until `expected` events came; the stream ends every
 * `stream_limit` events and EventSource reconnects by itself, sending `Last-Event-ID`.
 */
const CONSUME_LOW_LEVEL = `async ({ name, cursors, expected }) => {
  const source = new EventSource('/event-types/' + name + '/events?batch_limit=1&stream_limit=2&batch_flush_timeout=1&cursors=' + encodeURIComponent(cursors));
  const orders = [];
  const ids = [];
  let opened = 0;
  try {
    await new Promise((resolve) => {
      source.onopen = () => opened++;
      source.onmessage = (message) => {
        ids.push(message.lastEventId);
        for (const event of JSON.parse(message.data).events || []) orders.push(event.order_number);
        if (orders.length >= expected) resolve();
      };
    });
    return { orders, ids, opened };
  } finally {
    source.close();
  }
}`;

describe('browser EventSource', () => {
  it('consumes a subscription with EventSource and commits with fetch: lag reaches 0', async () => {
    const name = 'browser.sub';
    const orders = ['o0', 'o1', 'o2', 'o3', 'o4'];
    await eventTypeWith(name, orders);
    const created = await call(broker.url, 'POST', '/subscriptions', { owning_application: 'browser-app', event_types: [name], read_from: 'begin' });
    expect(created.status, created.text).toBe(201);
    const id = (created.json as { id: string }).id;

    const result = (await inPage(CONSUME_SUBSCRIPTION, { id, expected: orders.length })) as { streamId: string; orders: string[]; commits: number[] };
    expect(result.streamId).toMatch(/^[0-9a-f-]{36}$/);
    expect(result.orders).toEqual(orders);
    expect(result.commits).toEqual([204, 204, 204]);
    const stats = await call(broker.url, 'GET', `/subscriptions/${id}/stats`);
    const partitions = (stats.json as { items: { partitions: { unconsumed_events: number; stream_id: string }[] }[] }).items[0]?.partitions;
    expect(partitions?.map((p) => p.unconsumed_events)).toEqual([0]);
    // Chromium asks for zstd (and gzip) on plain HTTP too: the events above were compressed and decoded.
    expect(streamEncodings.length).toBeGreaterThan(0);
    for (const coding of streamEncodings) expect(['zstd', 'gzip']).toContain(coding);
  });

  it('a low-level EventSource reconnecting with Last-Event-ID continues without repeats', async () => {
    const name = 'browser.low';
    const orders = ['l0', 'l1', 'l2', 'l3', 'l4'];
    await eventTypeWith(name, orders);
    const cursors = JSON.stringify([{ partition: '0', offset: '001-0001--1' }]);
    const result = (await inPage(CONSUME_LOW_LEVEL, { name, cursors, expected: orders.length })) as { orders: string[]; ids: string[]; opened: number };
    expect(result.orders).toEqual(orders);
    // Two events per connection: at least three connections, the later ones resumed by Last-Event-ID.
    expect(result.opened).toBeGreaterThanOrEqual(3);
    expect(JSON.parse(result.ids[result.ids.length - 1] ?? '')).toEqual([{ partition: '0', offset: '001-0001-000000000000000004' }]);
  });
});
