import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { NoAuthentication } from '../../src/auth/authenticator.js';
import { assertPortFree, PortInUseError } from '../../src/http/port-check.js';
import { HttpServer } from '../../src/http/server.js';
import { createLogger } from '../../src/observability/logger.js';
import { freePort } from '../../src/util/free-port.js';

// uWebSockets.js binds with SO_REUSEPORT by default, so a second node on a taken port
// used to share it silently. The node's listen is exclusive, and main.ts probes the port first.

const servers: HttpServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.shutdown();
});

function httpServer(): HttpServer {
  const server = new HttpServer({ maxBodyBytes: 1024, maxInflatedBodyBytes: 1024, maxControlBodyBytes: 1024, controlConcurrency: 1, controlQueueLength: 0, publishMaxInFlightBytes: 1024, corsAllowedOrigins: [] }, new NoAuthentication(), createLogger({ logLevel: 'silent' }));
  servers.push(server);
  return server;
}

describe('exclusive HTTP port', () => {
  it('a second listen on the same host and port fails with PortInUseError instead of sharing the port', async () => {
    const port = await freePort();
    expect(await httpServer().listen(port, '127.0.0.1')).toBe(port);
    const second = httpServer().listen(port, '127.0.0.1');
    await expect(second).rejects.toBeInstanceOf(PortInUseError);
    await expect(second).rejects.toThrow(`port ${port} on 127.0.0.1 is already in use`);
  });

  it('a listen on a port another program holds fails too, and the server can listen again elsewhere', async () => {
    const port = await freePort();
    const other = net.createServer();
    await new Promise<void>((resolve) => other.listen(port, '127.0.0.1', resolve));
    try {
      const server = httpServer();
      await expect(server.listen(port, '127.0.0.1')).rejects.toBeInstanceOf(PortInUseError);
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it('the probe sees a port held by a node (uWS, SO_REUSEPORT) as taken, and a free one as free', async () => {
    const port = await freePort();
    await expect(assertPortFree('127.0.0.1', port)).resolves.toBeUndefined();
    await httpServer().listen(port, '127.0.0.1');
    await expect(assertPortFree('127.0.0.1', port)).rejects.toBeInstanceOf(PortInUseError);
    await expect(assertPortFree('0.0.0.0', port)).rejects.toBeInstanceOf(PortInUseError);
    await expect(assertPortFree('127.0.0.1', 0)).resolves.toBeUndefined();
  });
});
