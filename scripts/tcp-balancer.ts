/**
 * A minimal round-robin TCP load balancer for `npm run cluster` — a development tool standing in for
 * HAProxy (config/haproxy.cfg), not for production. It balances connections, not requests: a client
 * keeping its connection alive stays on one node until the connection closes. Bytes are piped as they
 * arrive in both directions (no HTTP parsing, no buffering beyond the socket's), so
 * `application/x-json-stream` responses stream through unchanged.
 *
 * Each backend is health-checked with `GET /health` every `healthIntervalMs`; a node answering anything
 * but 200 (a draining node answers 503) or not answering is skipped until it is healthy again. A
 * connection that cannot reach its chosen node tries the next one before giving up.
 */
import net from 'node:net';

/** A node behind the balancer. */
export interface Backend {
  readonly host: string;
  readonly port: number;
}

/** Options of {@link TcpBalancer}. */
export interface TcpBalancerOptions {
  /** The nodes, in round-robin order. */
  readonly backends: readonly Backend[];
  /** Health check period (default 1000 ms). */
  readonly healthIntervalMs?: number;
  /** Health check path (default `/health`). */
  readonly healthPath?: string;
}

/** Round-robin TCP proxy over HTTP nodes with health checks. */
export class TcpBalancer {
  private readonly server: net.Server;
  private readonly healthy: boolean[];
  private readonly sockets = new Set<net.Socket>();
  private next = 0;
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> = Promise.resolve();
  private stopped = false;

  constructor(private readonly options: TcpBalancerOptions) {
    this.healthy = options.backends.map(() => false);
    this.server = net.createServer({ pauseOnConnect: true, allowHalfOpen: true }, (client) => this.accept(client));
  }

  /**
   * Checks the backends once, then listens and keeps checking.
   * @returns the bound port (useful with port 0)
   */
  async listen(port: number, host = '127.0.0.1'): Promise<number> {
    await this.checkAll();
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.scheduleCheck();
    const address = this.server.address();
    return typeof address === 'object' && address !== null ? address.port : port;
  }

  /** Which backends passed their last health check, in backend order. */
  health(): readonly boolean[] {
    return [...this.healthy];
  }

  /**
   * Stops accepting connections and health checks; open connections go on until
   * {@link destroyConnections} or until they end.
   */
  async stopAccepting(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    // net.Server#close calls back only once every open connection ended: do not wait for that.
    if (this.server.listening) this.server.close(() => undefined);
    await this.checking;
  }

  /** Cuts every open connection. */
  destroyConnections(): void {
    for (const socket of this.sockets) socket.destroy();
  }

  /** Stops accepting and cuts every open connection. */
  async close(): Promise<void> {
    await this.stopAccepting();
    this.destroyConnections();
  }

  /** The next health check round, `healthIntervalMs` after the previous one finished. */
  private scheduleCheck(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.checking = this.checkAll().then(() => this.scheduleCheck());
    }, this.options.healthIntervalMs ?? 1000);
  }

  private async checkAll(): Promise<void> {
    const path = this.options.healthPath ?? '/health';
    await Promise.all(
      this.options.backends.map(async (b, i) => {
        try {
          const res = await fetch(`http://${b.host}:${b.port}${path}`, { signal: AbortSignal.timeout(1000) });
          await res.arrayBuffer();
          this.healthy[i] = res.status === 200;
        } catch {
          this.healthy[i] = false;
        }
      }),
    );
  }

  /** The backends to try for a new connection: healthy ones in round-robin order, then the others. */
  private candidates(): Backend[] {
    const n = this.options.backends.length;
    const start = this.next;
    this.next = (this.next + 1) % Math.max(1, n);
    const order = Array.from({ length: n }, (_, k) => (start + k) % n);
    return [...order.filter((i) => this.healthy[i]), ...order.filter((i) => !this.healthy[i])].flatMap((i) => this.options.backends[i] ?? []);
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  private accept(client: net.Socket): void {
    this.track(client);
    client.setNoDelay(true);
    client.once('error', () => undefined);
    this.connect(client, this.candidates());
  }

  private connect(client: net.Socket, candidates: Backend[]): void {
    const [backend, ...rest] = candidates;
    if (!backend || client.destroyed) {
      client.destroy();
      return;
    }
    const upstream = net.connect({ host: backend.host, port: backend.port, allowHalfOpen: true });
    this.track(upstream);
    const failed = () => this.connect(client, rest);
    upstream.once('error', failed);
    upstream.once('connect', () => {
      upstream.off('error', failed);
      if (client.destroyed) {
        upstream.destroy();
        return;
      }
      upstream.setNoDelay(true);
      // Either side failing ends both; a clean end is passed on by pipe (FIN after the last byte).
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      upstream.once('close', (hadError) => {
        if (hadError || !client.writableEnded) client.destroy();
      });
      client.once('close', () => upstream.destroy());
      client.pipe(upstream);
      upstream.pipe(client);
    });
  }
}
