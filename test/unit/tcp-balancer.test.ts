import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../src/util/free-port.js';
import { TcpBalancer } from '../../scripts/tcp-balancer.js';

// The development load balancer of `npm run cluster` (scripts/tcp-balancer.ts), against plain HTTP servers.

interface Node {
  readonly name: string;
  readonly port: number;
  health: number;
  close(): Promise<void>;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

async function node(name: string, stream?: (res: http.ServerResponse) => void): Promise<Node> {
  const state = { health: 200 };
  const server = http.createServer((req, res) => {
    if (req.url === '/health') {
      res.writeHead(state.health).end();
      return;
    }
    if (stream) return stream(res);
    res.end(name);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const close = () => new Promise<void>((resolve) => server.close(() => resolve()).closeAllConnections());
  const result = {
    name,
    port: (server.address() as AddressInfo).port,
    get health() {
      return state.health;
    },
    set health(value: number) {
      state.health = value;
    },
    close,
  };
  cleanups.push(close);
  return result;
}

async function balancer(ports: number[], healthIntervalMs = 50): Promise<{ lb: TcpBalancer; port: number }> {
  const lb = new TcpBalancer({ backends: ports.map((port) => ({ host: '127.0.0.1', port })), healthIntervalMs });
  const port = await lb.listen(0);
  cleanups.unshift(() => lb.close());
  return { lb, port };
}

/** GET on a fresh connection. @returns the body */
function get(port: number, onFirstChunk?: (chunk: string) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (body === '') onFirstChunk?.(chunk);
          body += chunk;
        });
        res.on('end', () => resolve(body));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

async function until(check: () => boolean, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('TcpBalancer', () => {
  it('spreads connections round robin', async () => {
    const nodes = await Promise.all(['a', 'b', 'c'].map((n) => node(n)));
    const { port } = await balancer(nodes.map((n) => n.port));
    const answers: string[] = [];
    for (let i = 0; i < 6; i++) answers.push(await get(port));
    expect(answers).toEqual(['a', 'b', 'c', 'a', 'b', 'c']);
  });

  it('skips a node whose health check fails, and takes it back once healthy', async () => {
    const nodes = await Promise.all(['a', 'b', 'c'].map((n) => node(n)));
    const { lb, port } = await balancer(nodes.map((n) => n.port));
    const b = nodes[1] as Node;
    b.health = 503;
    await until(() => lb.health()[1] === false);
    const answers = new Set<string>();
    for (let i = 0; i < 6; i++) answers.add(await get(port));
    expect([...answers].sort()).toEqual(['a', 'c']);
    b.health = 200;
    await until(() => lb.health()[1] === true);
    const later = new Set<string>();
    for (let i = 0; i < 6; i++) later.add(await get(port));
    expect(later.has('b')).toBe(true);
  });

  it('never picks a node that was down at the last check', async () => {
    const a = await node('a');
    const { lb, port } = await balancer([await freePort(), a.port]);
    expect(lb.health()).toEqual([false, true]);
    for (let i = 0; i < 4; i++) expect(await get(port)).toBe('a');
  });

  it('tries the next node when the chosen one refuses the connection before a health check noticed', async () => {
    const [a, b] = await Promise.all([node('a'), node('b')]);
    // Health checked once at start, not again during the test.
    const { lb, port } = await balancer([a.port, b.port], 60_000);
    expect(lb.health()).toEqual([true, true]);
    await b.close();
    for (let i = 0; i < 4; i++) expect(await get(port)).toBe('a');
  });

  it('passes a streamed response through as it is written', async () => {
    let release: () => void = () => undefined;
    const second = new Promise<void>((resolve) => (release = resolve));
    const streaming = await node('s', (res) => {
      res.writeHead(200, { 'content-type': 'application/x-json-stream' });
      res.write('{"n":1}\n');
      void second.then(() => res.end('{"n":2}\n'));
    });
    const { port } = await balancer([streaming.port]);
    // The first line arrives while the server still holds back the second.
    const body = await get(port, () => release());
    expect(body).toBe('{"n":1}\n{"n":2}\n');
  });
});
