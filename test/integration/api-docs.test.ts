import { Validator } from '@seriousme/openapi-schema-validator';
import puppeteer, { type Browser } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROUTES } from '../../src/http/api/route-table.js';
import { call, startTestBroker, type TestBroker } from '../support/broker.js';
import { TokenIssuer } from '../support/token-issuer.js';

// The served API description (docs/http-api.md "API description"): /openapi.json and /docs on a node in auth mode jwt, fetched
// without a token (both are public), and the reference page rendered by Debian's chromium (installed
// by .ci/run when absent), driven by puppeteer-core. Every wait is for a text, never a sleep.

/** Debian's chromium; `.ci/run` installs it when absent. */
const CHROMIUM = process.env.BROKER_TEST_CHROMIUM ?? '/usr/bin/chromium';

let broker: TestBroker;
let issuer: TokenIssuer;

beforeAll(async () => {
  issuer = await TokenIssuer.start();
  broker = await startTestBroker(issuer.brokerEnv());
});
afterAll(async () => {
  await broker?.stop();
  await issuer?.close();
});

/** The console error of the CSP blocking Redoc's hard-coded footer logo (src/http/routes/api-docs.ts). */
const REDOC_LOGO_BLOCKED = /^Loading the image 'https:\/\/cdn\.redoc\.ly\/redoc\/logo-mini\.svg' violates the following Content Security Policy directive/;

/** A documented path with each parameter filled in. */
function concrete(path: string): string {
  return path.replace(/\{[^}]+\}/g, 'x');
}

describe('GET /openapi.json', () => {
  it('serves a valid OpenAPI 3.1 document without a token, with an ETag', async () => {
    const answer = await call(broker.url, 'GET', '/openapi.json');
    expect(answer.status, answer.text).toBe(200);
    expect(answer.headers.get('content-type')).toBe('application/json');
    const result = await new Validator().validate(answer.json as Record<string, unknown>);
    expect(result.errors, JSON.stringify(result.errors)).toBeUndefined();
    expect(result.valid).toBe(true);
    const etag = answer.headers.get('etag') ?? '';
    expect(etag).toMatch(/^"[\w-]{32}"$/);
    expect((await call(broker.url, 'GET', '/openapi.json', undefined, { 'If-None-Match': etag })).status).toBe(304);
  });

  it('describes exactly the routes the node serves: each documented operation reaches a registered route', async () => {
    // Every route the node registers is in the table, or the node would not have started (registerRoutes
    // checks the server's registrations). The other way round: a request without a token to each
    // documented operation is answered by that route (401 for authenticated ones, before any work),
    // never by the "no route" 404 or the 405 of an unknown method.
    const doc = (await call(broker.url, 'GET', '/openapi.json')).json as { paths: Record<string, Record<string, { security: unknown[] }>> };
    const operations = Object.entries(doc.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, op]) => ({ path, method: method.toUpperCase(), op })));
    expect(operations).toHaveLength(ROUTES.length);
    for (const { path, method, op } of operations) {
      const answer = await call(broker.url, method, concrete(path), method === 'GET' || method === 'DELETE' ? undefined : {});
      const problem = answer.json as { detail?: string } | undefined;
      expect(answer.status, `${method} ${path}: ${answer.text}`).not.toBe(405);
      expect(problem?.detail ?? '', `${method} ${path}`).not.toMatch(/^no route for/);
      if (op.security.length > 0) expect(answer.status, `${method} ${path} needs a token`).toBe(401);
    }
  });
});

describe('GET /problems/{type}', () => {
  it('resolves the type of problems the node answers with, without a token; lists every code; 404 for an unknown type', async () => {
    // Real problems: a request without a token (401) and an unknown event type (404 after auth).
    const unauthorized = await call(broker.url, 'GET', '/event-types');
    expect(unauthorized.status).toBe(401);
    const notFound = await call(broker.url, 'GET', '/event-types/no.such.type', undefined, { Authorization: `Bearer ${await issuer.sign({ sub: 'admin', audience: 'broker' })}` });
    expect(notFound.status).toBe(404);
    for (const [answer, code] of [
      [unauthorized, 'UNAUTHORIZED'],
      [notFound, 'EVENT_TYPE_NOT_FOUND'],
    ] as const) {
      const type = (answer.json as { type: string }).type;
      const resolved = await call(broker.url, 'GET', type);
      expect(resolved.status, resolved.text).toBe(200);
      expect(resolved.json).toMatchObject({ type, code, status: answer.status, title: (answer.json as { title: string }).title });
    }
    const all = (await call(broker.url, 'GET', '/problems')).json as { items: { type: string; code: string }[] };
    expect(all.items.length).toBeGreaterThanOrEqual(75);
    expect(new Set(all.items.map((t) => t.type)).size).toBe(all.items.length);
    const doc = (await call(broker.url, 'GET', '/openapi.json')).json as { info: { description: string } };
    for (const t of all.items) expect(doc.info.description).toContain(`| \`${t.type}\` |`);
    const unknown = await call(broker.url, 'GET', '/problems/no-such-problem');
    expect(unknown.status).toBe(404);
    expect((unknown.json as { type: string }).type).toBe('/problems/problem-type-not-found');
  });
});

describe('GET /docs', () => {
  it('serves the reference page and its script from the node, without a token', async () => {
    const page = await call(broker.url, 'GET', '/docs');
    expect(page.status, page.text).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.text).toContain('<redoc spec-url="/openapi.json">');
    const src = /<script src="([^"]+)">/.exec(page.text)?.[1] ?? '';
    expect(src).toBe('/docs/redoc.standalone.js');
    const script = await call(broker.url, 'GET', src);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(script.text.length).toBeGreaterThan(500_000);
    expect((await call(broker.url, 'GET', '/docs/redoc.LICENSE.txt')).text).toContain('MIT');
    expect((await call(broker.url, 'GET', '/docs/other.js')).status).toBe(404);
  });

  it('renders the operations in a browser, with no script error and no request off the node', async () => {
    let browser: Browser | undefined;
    try {
      browser = await puppeteer.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--headless=new', '--disable-gpu', '--disable-dev-shm-usage'] });
      const page = await browser.newPage();
      const errors: string[] = [];
      const elsewhere: string[] = [];
      page.on('pageerror', (err) => errors.push(err instanceof Error ? err.message : String(err)));
      page.on('console', (message) => {
        // Redoc's footer logo (hard-coded to cdn.redoc.ly) is blocked by the page's CSP: expected, and why no request leaves the node.
        if (message.type() === 'error' && !REDOC_LOGO_BLOCKED.test(message.text())) errors.push(message.text());
      });
      // Requests answered by anyone but the node (a request the CSP blocks gets no response).
      page.on('response', (response) => {
        const url = response.url();
        if (!url.startsWith(broker.url) && !url.startsWith('data:') && !url.startsWith('blob:')) elsewhere.push(url);
      });
      await page.goto(`${broker.url}/docs`);
      await page.waitForFunction(() => (globalThis as unknown as { document: { body: { innerText: string } } }).document.body.innerText.includes('Publish a batch of events'), { timeout: 20_000 });
      const text = await page.evaluate(() => (globalThis as unknown as { document: { body: { innerText: string } } }).document.body.innerText);
      expect(text).toContain('Stream a subscription');
      expect(text).toContain('broker.io/unprocessable-event-policy');
      expect(errors).toEqual([]);
      expect(elsewhere).toEqual([]);
    } finally {
      await browser?.close();
    }
  });
});
