// Screenshots of the console's pages for the README and docs/console.md, taken from a real node:
//   npm run build && node dist/scripts/console-screenshots.js
// Starts a redis-server and a broker node of its own (free ports), puts example data in (an event type
// with two schema versions, events, a subscription a consumer is working through), and writes
// docs/console/*.png with Debian's chromium (BROKER_TEST_CHROMIUM overrides the path) and puppeteer-core.
// Run manually; it waits a few seconds on the subscription page so its lag chart has points.
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import puppeteer, { type Page } from 'puppeteer-core';
import { STREAM_ID_HEADER, openStream, streamPath } from '../src/client/stream-client.js';
import { repoRoot, startBroker, startRedis } from './local-processes.js';

const OUT = path.join(repoRoot, 'docs', 'console');
const CHROMIUM = process.env.BROKER_TEST_CHROMIUM ?? '/usr/bin/chromium';

/** The page's globals these callbacks use (compiled without the DOM library). */
interface InPage {
  readonly document: { querySelector(selector: string): { textContent: string | null; value?: string; dispatchEvent(e: Event): boolean; click(): void } | null };
}

/** Sends a JSON request; throws unless the status is 2xx. @returns the parsed answer, if any */
async function send(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<unknown> {
  const res = await fetch(base + path, { method, headers: { ...(body === undefined ? {} : { 'Content-Type': 'application/json' }), ...headers }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${String(res.status)} ${text}`);
  return text === '' ? undefined : (JSON.parse(text) as unknown);
}

const order = (n: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ metadata: { eid: randomUUID(), occurred_at: new Date().toISOString() }, order_number: n, amount: 12.5, ...extra });

/** Waits until `selector` shows `text`. */
async function waitForText(page: Page, selector: string, text: string): Promise<void> {
  await page.waitForFunction((s: string, t: string) => ((globalThis as unknown as InPage).document.querySelector(s)?.textContent ?? '').includes(t), { timeout: 20_000, polling: 100 }, selector, text);
}

async function shoot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(OUT, `${name}.png`), fullPage: true });
  process.stdout.write(`docs/console/${name}.png\n`);
}

async function main(): Promise<void> {
  // With a maxmemory, as a deployment has one (the overview shows the headroom against it).
  const redis = await startRedis({ extraArgs: ['--maxmemory', '1gb'] });
  const broker = await startBroker({ BROKER_REDIS_URL: redis.url, BROKER_LOG_LEVEL: 'warn', BROKER_PUBLISH_WORKER_THREADS: '1' });
  const browser = await puppeteer.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new', '--disable-gpu'] });
  try {
    const base = broker.url;
    const schema = (extra: Record<string, unknown>): string => JSON.stringify({ type: 'object', properties: { order_number: { type: 'string' }, amount: { type: 'number' }, ...extra }, required: ['order_number'] });
    await send(base, 'POST', '/event-types', {
      name: 'shop.order.created',
      owning_application: 'shop',
      category: 'business',
      enrichment_strategies: ['metadata_enrichment'],
      partition_strategy: 'hash',
      partition_key_fields: ['order_number'],
      default_statistic: { messages_per_minute: 1000, message_size: 500, read_parallelism: 4, write_parallelism: 4 },
      schema: { type: 'json_schema', schema: schema({}) },
    });
    await send(base, 'POST', '/event-types/shop.order.created/schemas', { type: 'json_schema', schema: schema({ note: { type: 'string', description: 'free text from the customer' } }) });
    for (const [name, owner] of [['shop.order.shipped', 'shop'], ['billing.invoice.issued', 'billing'], ['search.query.logged', 'search']] as const) {
      await send(base, 'POST', '/event-types', { name, owning_application: owner, category: 'undefined', partition_strategy: 'random', schema: { type: 'json_schema', schema: '{"type":"object"}' } });
    }
    await send(base, 'POST', '/event-types/shop.order.created/events', Array.from({ length: 40 }, (_, i) => order(`A-${String(i)}`)));
    const sub = (await send(base, 'POST', '/subscriptions', { owning_application: 'billing', event_types: ['shop.order.created'], read_from: 'begin' })) as { id: string };
    await send(base, 'POST', '/subscriptions', { owning_application: 'analytics', event_types: ['shop.order.created', 'shop.order.shipped'], consumer_group: 'daily' });

    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 800 });
    await page.goto(`${base}/ui#/event-types`);
    await waitForText(page, '[data-test=event-types]', 'shop.order.created');
    await shoot(page, 'event-types');

    // The event type, with the versions' diff and the per-item results of a 422.
    await page.goto(`${base}/ui#/event-types/shop.order.created`);
    await waitForText(page, '[data-test=partitions]', '001-0001-0000');
    await page.$eval(
      'textarea[data-test=batch]',
      (el, v: string) => {
        const input = el as unknown as { value: string; dispatchEvent(e: Event): boolean };
        input.value = v;
        input.dispatchEvent(new Event('input', { bubbles: true }));
      },
      JSON.stringify([order('B-1'), order('B-2', { amount: 'twelve' }), order('B-3')], null, 2),
    );
    await page.click('[data-test=publish]');
    await page.waitForSelector('[data-test=publish-items]');
    await shoot(page, 'event-type');

    // The subscription: a consumer commits part of it while the page samples the lag.
    await page.goto(`${base}/ui#/subscriptions`);
    await waitForText(page, '[data-test=subscriptions]', 'billing');
    await shoot(page, 'subscriptions');
    await page.goto(`${base}/ui#/subscriptions/${sub.id}`);
    const stream = await openStream(`${base}${streamPath({ subscription: sub.id }, { batch_limit: 5, batch_flush_timeout: 1 })}`);
    const streamId = stream.streamId ?? '';
    // Read batch by batch without leaving a loop: the stream stays open (its partitions assigned) until the shot.
    const batches = stream[Symbol.asyncIterator]();
    let commits = 0;
    const deadline = Date.now() + 12_000;
    while (Date.now() < deadline && commits < 6) {
      const next = await batches.next();
      if (next.done === true) break;
      const batch = next.value;
      if (batch.events === undefined) continue;
      await sleep(1500); // a slow consumer, so the chart shows the lag falling
      await send(base, 'POST', `/subscriptions/${sub.id}/cursors`, { items: [batch.cursor] }, { [STREAM_ID_HEADER]: streamId });
      commits++;
    }
    await waitForText(page, '[data-test=lag-table]', streamId);
    await shoot(page, 'subscription');
    stream.close();

    // The live tail from BEGIN, one event expanded.
    await page.goto(`${base}/ui#/tail?event_type=shop.order.created&from=begin`);
    await waitForText(page, '[data-test=tail-count]', '40 of 40 events');
    await page.click('[data-test=tail] tr.event');
    await page.waitForSelector('[data-test=tail] pre.json');
    await shoot(page, 'tail');

    await page.goto(`${base}/ui#/settings`);
    await page.waitForSelector('[data-test=features] input');
    await waitForText(page, 'main', 'user:unauthenticated');
    await shoot(page, 'settings');
  } finally {
    await browser.close();
    await broker.stop();
    await redis.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`console-screenshots: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
