import { randomUUID } from 'node:crypto';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { StreamClient } from '../support/stream-client.js';
import { TokenIssuer } from '../support/token-issuer.js';

// The console at /ui (docs/console.md) in a real browser: Debian's chromium (installed by .ci/run when
// absent) driven by puppeteer-core against real broker nodes. Every wait is for a selector or a text,
// never a sleep.

/** Debian's chromium; `.ci/run` installs it when absent. */
const CHROMIUM = process.env.BROKER_TEST_CHROMIUM ?? '/usr/bin/chromium';
/** How long one wait for something on the page may take. */
const WAIT_MS = 15_000;

let broker: TestBroker;
let browser: Browser;

beforeAll(async () => {
  [broker, browser] = await Promise.all([
    startTestBroker(),
    puppeteer.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new', '--disable-gpu', '--disable-dev-shm-usage'] }),
  ]);
});
afterAll(async () => {
  await browser?.close();
  await broker?.stop();
});

/** A new page whose script errors fail the test that reads `errors`. */
async function openPage(): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 900 });
  const errors: string[] = [];
  page.on('pageerror', (err) => errors.push(err instanceof Error ? err.message : String(err)));
  return { page, errors };
}

/**
 * The few browser APIs the callbacks run in the page use: this file is compiled without the DOM library
 * (it would change Node's fetch types for every test), so they cast `globalThis` and elements to these.
 */
interface InPage {
  readonly document: { querySelector(selector: string): InPageElement | null; querySelectorAll(selector: string): ArrayLike<InPageElement> };
  readonly location: { readonly hash: string };
  readonly sessionStorage: { readonly length: number };
  readonly localStorage: { readonly length: number };
}
interface InPageElement {
  readonly textContent: string | null;
  readonly disabled?: boolean;
  value?: string;
  querySelectorAll(selector: string): ArrayLike<InPageElement>;
  dispatchEvent(event: Event): boolean;
}

/** The text of every element matching `selector`, read in the page. */
function textsIn(page: Page, selector: string): Promise<string[]> {
  return page.$$eval(selector, (elements) => Array.from(elements as unknown as ArrayLike<InPageElement>, (e) => e.textContent ?? ''));
}

/** Waits until the element matching `selector` contains `text` (polled: a background tab runs no animation frames). */
async function waitForText(page: Page, selector: string, text: string): Promise<void> {
  await page.waitForFunction(
    (s: string, t: string) => Array.from((globalThis as unknown as InPage).document.querySelectorAll(s)).some((e) => (e.textContent ?? '').includes(t)),
    { timeout: WAIT_MS, polling: 100 },
    selector,
    text,
  );
}

/** Sets an input's or textarea's value as typing would (an `input` event, which Preact listens to). */
async function fill(page: Page, selector: string, value: string): Promise<void> {
  await page.waitForSelector(selector, { timeout: WAIT_MS });
  await page.$eval(
    selector,
    (el, v: string) => {
      const input = el as unknown as InPageElement;
      input.value = v;
      input.dispatchEvent(new Event('input', { bubbles: true }));
      input.dispatchEvent(new Event('change', { bubbles: true }));
    },
    value,
  );
}

/** Clicks the button whose text is `text`. */
async function clickButton(page: Page, text: string): Promise<void> {
  const handle = await page.waitForSelector(`::-p-xpath(//button[normalize-space(.)=${JSON.stringify(text)}])`, { timeout: WAIT_MS });
  await handle?.click();
}

/** The text of the element matching `selector`. */
function textOf(page: Page, selector: string): Promise<string> {
  return page.$eval(selector, (e) => (e as unknown as InPageElement).textContent ?? '');
}

describe('serving the console', () => {
  it('serves its files without authentication, with their media types and validators, and nothing else', async () => {
    const index = await fetch(`${broker.url}/ui`);
    expect(index.status).toBe(200);
    expect(index.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(index.headers.get('cache-control')).toBe('no-cache');
    expect(index.headers.get('x-content-type-options')).toBe('nosniff');
    expect(index.headers.get('content-security-policy')).toMatch(/script-src 'self' 'sha256-[^']+'/);
    const html = await index.text();
    expect(html).toContain('<script type="importmap">');
    expect((await fetch(`${broker.url}/ui/`)).status).toBe(200);

    for (const [path, type] of [
      ['/ui/app/main.js', 'text/javascript; charset=utf-8'],
      ['/ui/vendor/preact.module.js', 'text/javascript; charset=utf-8'],
      ['/ui/vendor/uplot.esm.js', 'text/javascript; charset=utf-8'],
      ['/ui/console.css', 'text/css; charset=utf-8'],
      ['/ui/favicon.svg', 'image/svg+xml'],
    ] as const) {
      const res = await fetch(broker.url + path);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type'), path).toBe(type);
      const etag = res.headers.get('etag');
      expect(etag, path).toMatch(/^"[\w-]+"$/);
      await res.arrayBuffer();
      const again = await fetch(broker.url + path, { headers: { 'If-None-Match': etag ?? '' } });
      expect(again.status, path).toBe(304);
    }
    // Only files of the manifest: no traversal, no unknown names, nothing but GET.
    for (const path of ['/ui/nope.js', '/ui/%2e%2e/package.json', '/ui/..%2F..%2Fpackage.json', '/ui/app/..%2f..%2f..%2fpackage.json', '/ui/../dist/src/main.js', '/ui/tsconfig.json']) {
      const res = await fetch(broker.url + path);
      expect(res.status, path).toBe(404);
      expect(res.headers.get('content-type'), path).toBe('application/problem+json');
    }
    expect((await call(broker.url, 'POST', '/ui', {})).status).toBe(405);
  });
});

describe('the console in auth mode off', () => {
  it('shows the Redis memory headroom and a creation\'s capacity warning, creates an event type, shows the 422 of a batch, tails events as they arrive, and follows a subscription lag to 0', { timeout: 60_000 }, async () => {
    const name = `console.order-${randomUUID().slice(0, 8)}`;
    const { page, errors } = await openPage();
    await page.goto(`${broker.url}/ui#/event-types`);
    await waitForText(page, '[data-test=subject]', 'unauthenticated (administrator)');
    // The overview's Redis memory headroom: the harness Redis has no maxmemory, so the machine's memory is its limit.
    await waitForText(page, '[data-test=headroom-master]', 'no maxmemory');

    // An event type whose declared traffic cannot fit the memory budget is created, with the broker's Warning shown.
    const large = `console.large-${randomUUID().slice(0, 8)}`;
    await clickButton(page, 'New event type');
    await fill(page, 'form[data-test=create-event-type] input[name=name]', large);
    await fill(page, 'form[data-test=create-event-type] input[name=owning_application]', 'console-test');
    await fill(page, 'form[data-test=create-event-type] input[name=messages_per_minute]', '1000000');
    await fill(page, 'form[data-test=create-event-type] input[name=message_size]', '10000');
    await clickButton(page, 'Create');
    await waitForText(page, '[data-test=create-warning]', `event type "${large}" needs about`);
    expect((await call(broker.url, 'GET', `/event-types/${large}`)).status).toBe(200);
    await page.goto(`${broker.url}/ui#/subscriptions`);
    await page.goto(`${broker.url}/ui#/event-types`);

    // Create the event type with the form (the default schema requires a string order_number).
    await clickButton(page, 'New event type');
    await fill(page, 'form[data-test=create-event-type] input[name=name]', name);
    await fill(page, 'form[data-test=create-event-type] input[name=owning_application]', 'console-test');
    await fill(page, 'form[data-test=create-event-type] input[name=partitions]', '2');
    await clickButton(page, 'Create');
    await waitForText(page, 'h1', name);
    await waitForText(page, '[data-test=partitions]', '001-0001--1');
    await waitForText(page, '[data-test=schema]', '"order_number"');

    // A batch with one invalid event: 422, one item per event, nothing written.
    const event = (order: unknown): Record<string, unknown> => ({ metadata: { eid: randomUUID(), occurred_at: new Date().toISOString() }, order_number: order, amount: 1 });
    await fill(page, 'textarea[data-test=batch]', JSON.stringify([event('A-1'), event(42), event('A-3')]));
    await clickButton(page, 'Publish');
    await page.waitForSelector('[data-test=publish-items] tbody tr:nth-child(3)', { timeout: WAIT_MS });
    const items = await page.$$eval('[data-test=publish-items] tbody tr', (rows) =>
      Array.from(rows as unknown as ArrayLike<InPageElement>, (r) => Array.from(r.querySelectorAll('td'), (td) => td.textContent).slice(2, 4)),
    );
    expect(items).toEqual([
      ['aborted', 'validating'],
      ['failed', 'validating'],
      ['aborted', 'none'],
    ]);
    expect(await textOf(page, '[data-test=publish-result] .error')).toContain('422: nothing was published; 1 of 3 events failed.');
    expect(await textOf(page, '[data-test=publish-items] tr.failed')).toMatch(/order_number/);

    // The live tail, in a second tab, from the newest offsets: events published after it started arrive.
    const tail = await openPage();
    await tail.page.goto(`${broker.url}/ui#/tail?event_type=${encodeURIComponent(name)}`);
    await waitForText(tail.page, '[data-test=tail-status]', `streaming ${name} from the newest offsets`);
    await page.bringToFront(); // clicks wait for animation frames, which only the front tab runs
    await fill(page, 'textarea[data-test=batch]', JSON.stringify([event('B-1'), event('B-2'), event('B-3')]));
    await clickButton(page, 'Publish');
    await waitForText(page, '[data-test=publish-result]', '200: all 3 events published.');
    await tail.page.bringToFront();
    await waitForText(tail.page, '[data-test=tail-count]', '3 of 3 events');
    for (const order of ['B-1', 'B-2', 'B-3']) await waitForText(tail.page, '[data-test=tail]', order);
    // Filter by text, then expand one event.
    await fill(tail.page, 'input[data-test=tail-filter]', '"B-2"'); // quoted: an eid may hold b-2
    await waitForText(tail.page, '[data-test=tail-count]', '1 of 3 events');
    await tail.page.click('[data-test=tail] tr.event');
    await waitForText(tail.page, '[data-test=tail] pre.json', '"order_number": "B-2"');
    expect(tail.errors).toEqual([]);
    await tail.page.close();
    // A tail from BEGIN with a filter the broker tests (docs/consuming.md "Filters"): only B-2 arrives.
    const filtered = await openPage();
    const schema = JSON.stringify({ properties: { order_number: { enum: ['B-2'] } } });
    await filtered.page.goto(`${broker.url}/ui#/tail?event_type=${encodeURIComponent(name)}&from=begin&filter=${encodeURIComponent(schema)}`);
    await waitForText(filtered.page, '[data-test=tail-status]', `streaming ${name} from BEGIN, filtered by the broker`);
    await waitForText(filtered.page, '[data-test=tail]', 'B-2');
    expect(await textOf(filtered.page, '[data-test=tail-count]')).toBe('1 of 1 events');
    expect(filtered.errors).toEqual([]);
    await filtered.page.close();
    await page.bringToFront();

    // A subscription created with the form, from the beginning.
    await page.goto(`${broker.url}/ui#/subscriptions`);
    await clickButton(page, 'New subscription');
    await fill(page, 'form[data-test=create-subscription] input[name=owning_application]', 'console-test');
    await fill(page, 'form[data-test=create-subscription] input[name=event_types]', name);
    await page.select('form[data-test=create-subscription] select[name=read_from]', 'begin');
    await clickButton(page, 'Create');
    await page.waitForFunction(() => /#\/subscriptions\/[0-9a-f-]{36}$/.test((globalThis as unknown as InPage).location.hash), { timeout: WAIT_MS, polling: 100 });
    const id = (await page.evaluate(() => (globalThis as unknown as InPage).location.hash)).split('/').pop() ?? '';
    await page.waitForSelector('[data-test=lag-chart] canvas', { timeout: WAIT_MS });

    // A consumer streams it: the page shows 3 unconsumed events, then 0 once the consumer committed.
    const stream = await StreamClient.open(`${broker.url}/subscriptions/${id}/events?batch_limit=10&batch_flush_timeout=1`);
    expect(stream.status).toBe(200);
    const streamId = stream.headers.get('x-broker-streamid') ?? '';
    const batches = await stream.events(3);
    await waitForText(page, '[data-test=total-unconsumed]', '3');
    await waitForText(page, '[data-test=lag-table]', streamId);
    const commit = await call(broker.url, 'POST', `/subscriptions/${id}/cursors`, { items: batches.map((b) => b.cursor) }, { 'X-Broker-StreamId': streamId });
    expect(commit.status, commit.text).toBe(204);
    await page.waitForFunction(() => (globalThis as unknown as InPage).document.querySelector('[data-test=total-unconsumed]')?.textContent === '0', { timeout: WAIT_MS, polling: 100 });
    stream.close();

    // Cursor reset to the oldest events, after the confirmation: 3 unconsumed again.
    await page.click('input[type=radio][name=target]');
    await clickButton(page, 'Reset…');
    await page.click('[data-test=confirm]');
    await waitForText(page, '.ok', 'Cursors reset.');
    await page.waitForFunction(() => (globalThis as unknown as InPage).document.querySelector('[data-test=total-unconsumed]')?.textContent === '3', { timeout: WAIT_MS, polling: 100 });

    // Cursor reset to a time after every event (docs/consuming.md "Seeking by time"): the cursors at that
    // time are the newest offsets, so nothing is unconsumed any more.
    await page.click('[data-test=reset-to-time]');
    await fill(page, '[data-test=reset-time]', '2099-01-01T00:00');
    await clickButton(page, 'Reset…');
    await page.click('[data-test=confirm]');
    await page.waitForFunction(() => (globalThis as unknown as InPage).document.querySelector('[data-test=total-unconsumed]')?.textContent === '0', { timeout: WAIT_MS, polling: 100 });

    // Deleting the event type asks for its name, and shows the broker's 409 (a subscription reads it).
    await page.goto(`${broker.url}/ui#/event-types/${encodeURIComponent(name)}`);
    await (await page.waitForSelector('[data-test=delete-event-type]', { timeout: WAIT_MS }))?.click();
    expect(await page.$eval('[data-test=confirm]', (b) => (b as unknown as InPageElement).disabled)).toBe(true);
    await fill(page, '[data-test=confirm-text]', name);
    await page.click('[data-test=confirm]');
    await waitForText(page, '.error', 'Conflict (409)');
    expect(errors).toEqual([]);
    await page.close();
  });
});

describe('the console and events that expired unread', () => {
  it('shows on the subscription page how many events retention removed before the subscription read them', { timeout: 60_000 }, async () => {
    const node = await startTestBroker({ BROKER_EVENT_TYPES_MIN_RETENTION_TIME_MS: '1000', BROKER_RETENTION_CHECK_INTERVAL_MS: '300' });
    try {
      const name = `console.expired-${randomUUID().slice(0, 8)}`;
      const body = {
        name,
        owning_application: 'console-test',
        category: 'business',
        enrichment_strategies: ['metadata_enrichment'],
        partition_strategy: 'random',
        options: { retention_time: 1000 },
        schema: { type: 'json_schema', schema: '{"type":"object"}' },
      };
      expect((await call(node.url, 'POST', '/event-types', body)).status).toBe(201);
      const event = (): Record<string, unknown> => ({ metadata: { eid: randomUUID(), occurred_at: new Date().toISOString() } });
      expect((await call(node.url, 'POST', `/event-types/${name}/events`, Array.from({ length: 20 }, event))).status).toBe(200);
      const created = await call(node.url, 'POST', '/subscriptions', { owning_application: 'console-test', event_types: [name], read_from: 'begin' });
      const id = (created.json as { id: string }).id;
      // Initialized before retention removes the 20 events: the subscription never read them.
      expect((await call(node.url, 'PATCH', `/subscriptions/${id}/cursors`, { items: [] })).status).toBe(204);
      const deadline = Date.now() + WAIT_MS;
      while (((await call(node.url, 'GET', `/event-types/${name}/partitions/0`)).json as { oldest_available_offset: string }).oldest_available_offset.endsWith('000020') === false) {
        if (Date.now() > deadline) throw new Error('retention did not remove the events');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect((await call(node.url, 'PUT', `/event-types/${name}`, { ...body, options: { retention_time: 172_800_000 } })).status).toBe(200);
      expect((await call(node.url, 'POST', `/event-types/${name}/events`, [event()])).status).toBe(200);
      const stream = await StreamClient.open(`${node.url}/subscriptions/${id}/events?batch_flush_timeout=1`);
      const [batch] = await stream.events(1);
      expect((batch?.info as { expired_events?: number } | undefined)?.expired_events).toBe(20);

      const { page, errors } = await openPage();
      await page.goto(`${node.url}/ui#/subscriptions/${id}`);
      await page.waitForFunction(() => (globalThis as unknown as InPage).document.querySelector('[data-test=total-expired]')?.textContent === '20', { timeout: WAIT_MS, polling: 100 });
      await waitForText(page, '[data-test=expired-note]', 'Retention removed some events before this subscription read them');
      expect(await textsIn(page, '[data-test=expired]')).toEqual(['20']);
      stream.close();
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      await node.stop();
    }
  });
});

describe('the console and the consumer status', () => {
  // BROKER_TEST_SCREENSHOTS=<directory> keeps a picture of the page (stalled-partition.png) for the docs.
  it('colours each partition by its consumer status: a stalled partition beside ok ones', { timeout: 60_000 }, async () => {
    const node = await startTestBroker({ BROKER_CONSUMER_STATUS_WINDOW_MS: '1000', BROKER_CONSUMER_STATUS_INTERVAL_MS: '100' });
    try {
      const name = `console.status-${randomUUID().slice(0, 8)}`;
      const body = {
        name,
        owning_application: 'console-test',
        category: 'business',
        enrichment_strategies: ['metadata_enrichment'],
        partition_strategy: 'user_defined',
        default_statistic: { messages_per_minute: 1, message_size: 1, read_parallelism: 4, write_parallelism: 4 },
        schema: { type: 'json_schema', schema: '{"type":"object"}' },
      };
      expect((await call(node.url, 'POST', '/event-types', body)).status).toBe(201);
      const events = Array.from({ length: 40 }, (_, i) => ({ metadata: { eid: randomUUID(), occurred_at: new Date().toISOString(), partition: String(i % 4) } }));
      expect((await call(node.url, 'POST', `/event-types/${name}/events`, events)).status).toBe(200);
      const created = await call(node.url, 'POST', '/subscriptions', { owning_application: 'billing', event_types: [name], read_from: 'begin' });
      const id = (created.json as { id: string }).id;
      // The consumer commits what it gets of partitions 0, 2 and 3; partition 1's events wait while its stream holds it.
      const stream = await StreamClient.open(`${node.url}/subscriptions/${id}/events?batch_limit=10&batch_flush_timeout=1&max_uncommitted_events=100`);
      const streamId = stream.headers.get('x-broker-streamid') ?? '';
      const batches = await stream.events(40);
      const commit = await call(node.url, 'POST', `/subscriptions/${id}/cursors`, { items: batches.filter((b) => b.cursor.partition !== '1').map((b) => b.cursor) }, { 'X-Broker-StreamId': streamId });
      expect(commit.status, commit.text).toBe(204);

      const { page, errors } = await openPage();
      await page.goto(`${node.url}/ui#/subscriptions/${id}`);
      await page.waitForFunction(() => Array.from((globalThis as unknown as InPage).document.querySelectorAll('[data-test=consumer-status]')).map((e) => e.textContent).join(',') === 'ok,stalled,ok,ok', { timeout: WAIT_MS, polling: 100 });
      expect(await textsIn(page, '[data-test=consumer-status] .status-stalled')).toEqual(['stalled']);
      expect(await textsIn(page, '[data-test=consumer-status] .status-ok')).toEqual(['ok', 'ok', 'ok']);
      const shots = process.env.BROKER_TEST_SCREENSHOTS;
      if (shots !== undefined && shots !== '') await page.screenshot({ path: `${shots}/stalled-partition.png`, fullPage: true });
      stream.close();
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      await node.stop();
    }
  });
});

describe('the console and queue-mode subscriptions', () => {
  it('says a subscription is in queue mode and shows its events in flight per partition', { timeout: 60_000 }, async () => {
    const name = `console.queue-${randomUUID().slice(0, 8)}`;
    const body = { name, owning_application: 'console-test', category: 'undefined', partition_strategy: 'random', schema: { type: 'json_schema', schema: '{}' } };
    expect((await call(broker.url, 'POST', '/event-types', body)).status).toBe(201);
    expect((await call(broker.url, 'POST', `/event-types/${name}/events`, [{ n: 1 }, { n: 2 }, { n: 3 }])).status).toBe(200);
    const created = await call(broker.url, 'POST', '/subscriptions', { owning_application: 'console-test', event_types: [name], read_from: 'begin', annotations: { 'broker.io/consumption-mode': 'queue' } });
    expect(created.status, created.text).toBe(201);
    const id = (created.json as { id: string }).id;
    const stream = await StreamClient.open(`${broker.url}/subscriptions/${id}/events?batch_limit=10&batch_flush_timeout=1`);
    const streamId = stream.headers.get('x-broker-streamid') ?? '';
    const batches = await stream.events(3);

    const { page, errors } = await openPage();
    await page.goto(`${broker.url}/ui#/subscriptions/${id}`);
    await waitForText(page, '[data-test=mode]', 'queue');
    await page.waitForFunction(() => Array.from((globalThis as unknown as InPage).document.querySelectorAll('[data-test=in-flight]')).map((e) => Number(e.textContent)).reduce((a, b) => a + b, 0) === 3, { timeout: WAIT_MS, polling: 100 });
    const commit = await call(broker.url, 'POST', `/subscriptions/${id}/cursors`, { items: batches.filter((b) => (b.events?.length ?? 0) > 0).map((b) => b.cursor) }, { 'X-Broker-StreamId': streamId });
    expect(commit.status, commit.text).toBe(204);
    await page.waitForFunction(() => Array.from((globalThis as unknown as InPage).document.querySelectorAll('[data-test=in-flight]')).every((e) => e.textContent === '0'), { timeout: WAIT_MS, polling: 100 });
    stream.close();

    // The live tail of the subscription, beside the API's stream: it acknowledges every batch it shows.
    expect((await call(broker.url, 'POST', `/event-types/${name}/events`, Array.from({ length: 250 }, (_, i) => ({ n: 100 + i })))).status).toBe(200);
    const tail = await openPage();
    await tail.page.goto(`${broker.url}/ui#/tail?subscription=${id}`);
    await waitForText(tail.page, '[data-test=tail-count]', '250 of 250 events');
    await expect.poll(async () => ((await call(broker.url, 'GET', `/subscriptions/${id}/stats`)).json as { items: { partitions: { unconsumed_events?: number }[] }[] }).items[0]?.partitions.reduce((sum, p) => sum + (p.unconsumed_events ?? 0), 0), { timeout: WAIT_MS }).toBe(0);
    expect(tail.errors).toEqual([]);
    await tail.page.close();
    expect(errors).toEqual([]);
    await page.close();
  });
});

describe('the console in auth mode jwt', () => {
  let issuer: TokenIssuer;
  let jwtBroker: TestBroker;
  const eventType = `console.guarded-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    issuer = await TokenIssuer.start();
    jwtBroker = await startTestBroker(issuer.brokerEnv());
    // An event type only `admin` may write to and administer; `alice` may read it.
    const admin = await issuer.sign({ sub: 'admin', audience: 'broker' });
    const created = await call(
      jwtBroker.url,
      'POST',
      '/event-types',
      {
        name: eventType,
        owning_application: 'console-test',
        category: 'undefined',
        partition_strategy: 'random',
        schema: { type: 'json_schema', schema: '{"type":"object"}' },
        authorization: { admins: [{ data_type: 'user', value: 'admin' }], readers: [{ data_type: 'user', value: 'alice' }], writers: [{ data_type: 'user', value: 'admin' }] },
      },
      { Authorization: `Bearer ${admin}` },
    );
    expect(created.status, created.text).toBe(201);
  });
  afterAll(async () => {
    await jwtBroker?.stop();
    await issuer?.close();
  });

  it('serves the files without a token, asks for one, shows a refused one, and offers a subject only what it may do', { timeout: 60_000 }, async () => {
    expect((await fetch(`${jwtBroker.url}/ui`)).status).toBe(200);
    expect((await fetch(`${jwtBroker.url}/ui/app/main.js`)).status).toBe(200);
    expect((await call(jwtBroker.url, 'GET', '/ui/api/access')).status).toBe(401);

    const { page, errors } = await openPage();
    await page.goto(`${jwtBroker.url}/ui#/event-types`);
    await page.waitForSelector('form[data-test=token-form]', { timeout: WAIT_MS });
    // A token the broker refuses: the 401 problem is shown, the prompt stays.
    await fill(page, 'form[data-test=token-form] input[name=token]', await issuer.sign({ sub: 'alice', audience: 'broker', forged: true }));
    await clickButton(page, 'Use token');
    await waitForText(page, '[data-test=token-problem]', 'Unauthorized');

    // alice: no settings, no publish form, no delete on an event type she only reads.
    await fill(page, 'form[data-test=token-form] input[name=token]', await issuer.sign({ sub: 'alice', audience: 'broker' }));
    await clickButton(page, 'Use token');
    await waitForText(page, '[data-test=subject]', 'alice');
    expect(await textOf(page, '[data-test=subject]')).not.toContain('administrator');
    expect(await textsIn(page, 'nav.top a')).toEqual(['Event types', 'Subscriptions', 'Live tail']);
    await waitForText(page, '[data-test=event-types]', eventType);
    await page.goto(`${jwtBroker.url}/ui#/event-types/${encodeURIComponent(eventType)}`);
    await waitForText(page, '[data-test=rights]', 'read');
    expect(await textOf(page, '[data-test=rights]')).toBe('read');
    expect(await page.$('[data-test=publish]')).toBeNull();
    expect(await page.$('[data-test=delete-event-type]')).toBeNull();
    // The token lives in this tab's session storage only.
    expect(await page.evaluate(() => [(globalThis as unknown as InPage).sessionStorage.length, (globalThis as unknown as InPage).localStorage.length])).toEqual([1, 0]);

    // An administrator gets the settings page, with toggles it may change.
    await clickButton(page, 'Forget token');
    await page.waitForSelector('form[data-test=token-form]', { timeout: WAIT_MS });
    await fill(page, 'form[data-test=token-form] input[name=token]', await issuer.sign({ sub: 'admin', audience: 'broker' }));
    await clickButton(page, 'Use token');
    await waitForText(page, '[data-test=subject]', 'admin (administrator)');
    await page.goto(`${jwtBroker.url}/ui#/settings`);
    await page.waitForSelector('[data-test=features] input[name=kpi_collection]:not([disabled])', { timeout: WAIT_MS });
    await waitForText(page, '.card', 'user:admin');
    // Publishing quotas: set one through the form, see it listed, remove it.
    await waitForText(page, '[data-test=quotas]', 'none');
    await fill(page, 'form[data-test=quota-form] input[name=name]', 'console-app');
    await fill(page, 'form[data-test=quota-form] input[name=events_per_second]', '500');
    await clickButton(page, 'Set quota');
    await waitForText(page, '[data-test=quotas]', 'console-app');
    expect(await textOf(page, '[data-test=quotas] tbody')).toContain('owning_application');
    expect(await textOf(page, '[data-test=quotas] tbody')).toContain('500');
    await (await page.waitForSelector('[data-test=quotas] button[title=Remove]', { timeout: WAIT_MS }))?.click();
    await waitForText(page, '[data-test=quotas]', 'none');
    expect(errors).toEqual([]);
    await page.close();
  });
});
