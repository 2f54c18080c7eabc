import net from 'node:net';

/** Raised when the node's HTTP port is taken; the message names the port and what to do. */
export class PortInUseError extends Error {
  override readonly name = 'PortInUseError';

  /**
   * @param host the address the node was to bind (`BROKER_HOST`)
   * @param port the TCP port (`BROKER_PORT`)
   */
  constructor(
    readonly host: string,
    readonly port: number,
  ) {
    super(
      `port ${port} on ${host} is already in use (another broker node — a second \`npm start\` or \`npm run cluster\` in this checkout? — or another program). ` +
        'Stop it, or start this node on another port with BROKER_PORT=<port>.',
    );
  }
}

/**
 * Checks that `host:port` can be bound, with a plain `net` server bound and released at once. uWebSockets.js
 * listens with SO_REUSEPORT unless told otherwise, and Node's server does not set it, so the probe fails
 * while any other socket (a broker node, or any program) listens on the port. Port 0 (any free port) is
 * always free. The port may still be taken between this check and the listen; the node's listen is
 * exclusive too (HttpServer.listen), so the check only makes the common case fail early, before Redis.
 * @throws PortInUseError when the port is taken (EADDRINUSE)
 * @throws Error (EADDRNOTAVAIL, EACCES …) when the address cannot be bound for another reason
 */
export function assertPortFree(host: string, port: number): Promise<void> {
  if (port === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => {
      reject(err.code === 'EADDRINUSE' ? new PortInUseError(host, port) : new Error(`cannot listen on ${host}:${port}: ${err.message}`));
    });
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}
