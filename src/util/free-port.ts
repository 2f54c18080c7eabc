import { readFileSync } from 'node:fs';
import net from 'node:net';

/** Lowest port {@link freePort} picks from. */
const LOWEST_PORT = 20_000;
/** Random candidates tried below the ephemeral range before falling back to one the kernel picks. */
const ATTEMPTS = 50;

/**
 * The first port of the kernel's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`; 32768 when
 * it cannot be read): the ports outgoing connections get their local port from.
 */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) && low > 0 ? low : 32_768;
  } catch {
    return 32_768;
  }
}

/** Whether `port` can be bound on 127.0.0.1 right now (bound and released at once). */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** A port the kernel picks (bound to port 0, then released). */
function kernelPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * A free TCP port on 127.0.0.1 for a server to listen on (bound, then released: another process may
 * still take it before use, so a caller starting a server retries on failure). Picked at random below
 * the kernel's ephemeral range, from 20000 up: a port the kernel hands out for port 0 is also where
 * outgoing connections take their local ports from, so under many connections (a parallel test suite)
 * one of them could hold it by the time the server binds. Falls back to a kernel-picked port when that
 * range is too small or nothing in it was free after 50 tries.
 * @param companionOffsets further ports that must be free too, as offsets from the result (a Redis
 *   Cluster node's bus port is its port + 10000); they stay below the ephemeral range as well
 * @returns the port
 */
export async function freePort(companionOffsets: readonly number[] = []): Promise<number> {
  const highest = ephemeralLow() - 1 - Math.max(0, ...companionOffsets);
  if (highest - LOWEST_PORT >= 1_000) {
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const port = LOWEST_PORT + Math.floor(Math.random() * (highest - LOWEST_PORT + 1));
      if (!(await bindable(port))) continue;
      if ((await Promise.all(companionOffsets.map((offset) => bindable(port + offset)))).every(Boolean)) return port;
    }
  }
  for (;;) {
    const port = await kernelPort();
    if (port + Math.max(0, ...companionOffsets) > 65_535) continue;
    if ((await Promise.all(companionOffsets.map((offset) => bindable(port + offset)))).every(Boolean)) return port;
  }
}
