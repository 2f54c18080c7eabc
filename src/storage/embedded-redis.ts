import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { BrokerConfig } from '../config/config-schema.js';
import type { Logger } from '../observability/logger.js';
import { freePort } from './free-port.js';

/** A Redis the node started (or adopted) and stops on exit. */
export interface EmbeddedRedis {
  /** `unix:///…/redis.sock` or `redis://127.0.0.1:<port>`. */
  readonly url: string;
  /** Stops the server (SHUTDOWN, which writes the AOF) and waits for it. */
  stop(): Promise<void>;
}

/** Raised when the embedded Redis cannot run; the message says what to do. */
export class EmbeddedRedisError extends Error {
  override readonly name = 'EmbeddedRedisError';
}

function canConnect(options: net.NetConnectOpts): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(options);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Sends one inline command on a fresh connection (used to adopt or stop a server without a client library). */
function sendInline(options: net.NetConnectOpts, command: string): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect(options, () => socket.end(`${command}\r\n`));
    socket.once('close', () => resolve());
    socket.once('error', () => resolve());
  });
}

/**
 * Starts the embedded default Redis (issue 2 §1.3; DESIGN.md §1): a child `redis-server` with AOF on
 * (`appendfsync` from config), `maxmemory-policy noeviction`, no RDB snapshots, data under
 * `embeddedRedis.dataDir`, listening on a unix socket in that directory (TCP on a free loopback port
 * when the socket path is too long). A server left running there by a killed node is adopted.
 *
 * @throws EmbeddedRedisError when `redis-server` is not installed or does not come up in time
 */
export async function startEmbeddedRedis(config: BrokerConfig['embeddedRedis'], logger: Logger): Promise<EmbeddedRedis> {
  const dataDir = path.resolve(config.dataDir);
  mkdirSync(dataDir, { recursive: true });
  const socketPath = path.join(dataDir, 'redis.sock');
  const useSocket = socketPath.length < 100;

  if (useSocket && existsSync(socketPath) && (await canConnect({ path: socketPath }))) {
    logger.warn({ socketPath }, 'adopting the embedded Redis left running in the data directory');
    return { url: `unix://${socketPath}`, stop: () => sendInline({ path: socketPath }, 'SHUTDOWN') };
  }

  const port = useSocket ? 0 : await freePort();
  const logFile = path.join(dataDir, 'redis.log');
  const args = [
    '--port', String(port), '--bind', '127.0.0.1',
    ...(useSocket ? ['--unixsocket', socketPath, '--unixsocketperm', '700'] : []),
    '--dir', dataDir,
    '--appendonly', 'yes', '--appendfsync', config.appendfsync,
    '--save', '',
    '--maxmemory-policy', 'noeviction',
    '--daemonize', 'no',
    '--logfile', logFile,
  ];
  let child: ChildProcess;
  try {
    child = await new Promise<ChildProcess>((resolve, reject) => {
      const c = spawn(config.binary, args, { stdio: 'ignore' });
      c.once('spawn', () => resolve(c));
      c.once('error', reject);
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new EmbeddedRedisError(
        `"${config.binary}" was not found on PATH. Install Redis 7 (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis), ` +
          'or point the broker at a running Redis with BROKER_REDIS_URL=redis://host:6379.',
      );
    }
    throw err;
  }
  let exited = false;
  const exitedPromise = new Promise<void>((resolve) => child.once('exit', () => ((exited = true), resolve())));
  const target: net.NetConnectOpts = useSocket ? { path: socketPath } : { host: '127.0.0.1', port };
  const deadline = Date.now() + config.startTimeoutMs;
  while (!(await canConnect(target))) {
    if (exited || Date.now() > deadline) {
      child.kill('SIGKILL');
      const tail = existsSync(logFile) ? readFileSync(logFile, 'utf8').split('\n').slice(-5).join('\n') : '';
      throw new EmbeddedRedisError(`the embedded redis-server did not start (${exited ? 'it exited' : 'timed out'}); its log ${logFile} ends:\n${tail}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  logger.info({ redisPid: child.pid, dataDir, appendfsync: config.appendfsync }, 'embedded redis-server started');
  return {
    url: useSocket ? `unix://${socketPath}` : `redis://127.0.0.1:${port}`,
    stop: async () => {
      if (exited) return;
      child.kill('SIGTERM');
      await exitedPromise;
    },
  };
}
