import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { BrokerConfig } from '../../config/config-schema.js';
import type { Logger } from '../../observability/logger.js';
import { freePort } from '../../util/free-port.js';

/** A Redis the node started (or adopted from a node that died) and owns: it alone stops it. */
export interface EmbeddedRedis {
  /** `unix:///…/redis.sock` or `redis://127.0.0.1:<port>`. */
  readonly url: string;
  /** Stops the server (SIGTERM or SHUTDOWN, which write the AOF), waits for it, then gives up the ownership. */
  stop(): Promise<void>;
}

/** Who runs the embedded Redis of a data directory: the content of `<dataDir>/redis.owner` (JSON). */
export interface EmbeddedRedisOwner {
  /** Process id of the owning broker node. */
  readonly pid: number;
  /** The owning node's HTTP port (`BROKER_PORT`), for the message a second node prints. */
  readonly port: number;
  /** The Redis URL, once the server is up (absent while it starts). */
  readonly redisUrl?: string;
  /** When the node took the ownership, ISO 8601. */
  readonly since: string;
}

/**
 * The machine's memory as a process here may use it: the smaller of the total (`os.totalmem`) and a
 * cgroup limit (`process.constrainedMemory`, a container's memory limit), in bytes.
 */
export function machineMemoryBytes(): number {
  const total = os.totalmem();
  // Node 20 answers undefined without a limit (typed as a number), later versions 0.
  const constrained: number | undefined = process.constrainedMemory();
  return constrained !== undefined && constrained > 0 ? Math.min(total, constrained) : total;
}

/**
 * The embedded Redis's `maxmemory` (docs/operations.md "Memory and retention"): `embeddedRedis.maxmemoryBytes`,
 * or when that is 0, `embeddedRedis.maxmemoryPercent` of {@link machineMemoryBytes}. Never 0 (Redis's "no limit").
 */
export function embeddedMaxmemoryBytes(config: Pick<BrokerConfig['embeddedRedis'], 'maxmemoryBytes' | 'maxmemoryPercent'>, machineBytes = machineMemoryBytes()): number {
  if (config.maxmemoryBytes > 0) return config.maxmemoryBytes;
  return Math.max(1024 * 1024, Math.floor((machineBytes * config.maxmemoryPercent) / 100));
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

/**
 * Sends one inline command on a fresh connection (used to adopt or stop a server without a client
 * library); resolves once the server closed it. Its answer is read and dropped: an unread answer would
 * leave the socket paused, neither closing nor keeping the process alive.
 */
function sendInline(options: net.NetConnectOpts, command: string): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect(options, () => socket.end(`${command}\r\n`));
    socket.resume();
    socket.once('close', () => resolve());
    socket.once('error', () => resolve());
  });
}

/** True while a process with this id exists (EPERM: it exists but belongs to another user). */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readOwner(file: string): EmbeddedRedisOwner | undefined {
  try {
    const owner = JSON.parse(readFileSync(file, 'utf8')) as Partial<EmbeddedRedisOwner>;
    return typeof owner.pid === 'number' && typeof owner.port === 'number' && typeof owner.since === 'string' ? (owner as EmbeddedRedisOwner) : undefined;
  } catch {
    return undefined;
  }
}

/** Writes `owner` to a temporary file beside `file`. @returns the temporary file's path */
function writeTemporary(file: string, owner: EmbeddedRedisOwner): string {
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, JSON.stringify(owner) + '\n');
  return temporary;
}

/**
 * Takes the ownership of the data directory's embedded Redis: creates `<dataDir>/redis.owner` atomically
 * (hard link of a complete temporary file, which fails when the file exists). A file whose process is
 * gone (a node killed with SIGKILL, a crash) is stale and replaced. Two nodes starting at once: exactly
 * one link succeeds, the other sees a live owner.
 * @throws EmbeddedRedisError when a live node owns it; the message names it and says how to run anyway
 */
function claimOwnership(dataDir: string, ownerFile: string, httpPort: number, socketPath: string): EmbeddedRedisOwner {
  const me: EmbeddedRedisOwner = { pid: process.pid, port: httpPort, since: new Date().toISOString() };
  for (let attempt = 0; attempt < 5; attempt++) {
    const temporary = writeTemporary(ownerFile, me);
    try {
      linkSync(temporary, ownerFile);
      return me;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      unlinkSync(temporary);
    }
    const owner = readOwner(ownerFile);
    if (owner && owner.pid !== process.pid && processAlive(owner.pid)) {
      const url = owner.redisUrl ?? (socketPath.length < 100 ? `unix://${socketPath}` : 'its URL (it is still starting)');
      throw new EmbeddedRedisError(
        `the embedded Redis of data directory ${dataDir} belongs to another broker node (pid ${owner.pid}, port ${owner.port}, since ${owner.since}); ` +
          'only the node that started it stops it. To run this node on the same data anyway, use that Redis as an external one, ' +
          `which this node never stops (it stops when its owner does): BROKER_REDIS_URL=${url}. ` +
          `To run a separate node, give it its own data directory: BROKER_EMBEDDED_REDIS_DATA_DIR=<dir>. ` +
          `If no broker runs with pid ${owner.pid}, delete ${ownerFile}.`,
      );
    }
    // Stale (its node is gone) or unreadable: replace it, unless another starting node did so meanwhile.
    const again = readOwner(ownerFile);
    if (JSON.stringify(again) === JSON.stringify(owner)) {
      try {
        unlinkSync(ownerFile);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
  }
  throw new EmbeddedRedisError(`could not take the ownership of the embedded Redis in ${dataDir} (${ownerFile} keeps changing)`);
}

/** Gives the ownership up: removes the owner file if it still names this process. */
function releaseOwnership(ownerFile: string): void {
  if (readOwner(ownerFile)?.pid !== process.pid) return;
  try {
    unlinkSync(ownerFile);
  } catch {
    // already gone
  }
}

/**
 * Starts the embedded default Redis, so `npm start` runs a node with one command and no setup
 * (docs/getting-started.md "The embedded Redis"): a child `redis-server` with AOF on
 * (`appendfsync` from config), a `maxmemory` ({@link embeddedMaxmemoryBytes}: never unlimited) with
 * `maxmemory-policy noeviction`, no RDB snapshots, data under
 * `embeddedRedis.dataDir`, listening on a unix socket in that directory (TCP on a free loopback port
 * when the socket path is too long).
 *
 * The server belongs to one node, so a second node started on the same data directory cannot stop the
 * Redis the first one still uses: the node records itself in `<dataDir>/redis.owner`
 * first, and only the owner stops the server. A second node on the same data directory refuses to start
 * while the owner lives (the message says how to use that Redis anyway: as `BROKER_REDIS_URL`, which it
 * then never stops). A server left running by a node that died (SIGKILL) is adopted: the new node owns
 * it and stops it on exit.
 *
 * @param httpPort the node's own HTTP port, recorded for the message a second node prints
 * @throws EmbeddedRedisError when another live node owns the data directory's Redis, when `redis-server`
 *   is not installed, or when it does not come up in time
 */
export async function startEmbeddedRedis(config: BrokerConfig['embeddedRedis'], logger: Logger, httpPort = 0): Promise<EmbeddedRedis> {
  const dataDir = path.resolve(config.dataDir);
  mkdirSync(dataDir, { recursive: true });
  const socketPath = path.join(dataDir, 'redis.sock');
  const useSocket = socketPath.length < 100;
  const ownerFile = path.join(dataDir, 'redis.owner');
  const owner = claimOwnership(dataDir, ownerFile, httpPort, socketPath);
  const recordUrl = (redisUrl: string) => renameSync(writeTemporary(ownerFile, { ...owner, redisUrl }), ownerFile);
  try {
    const redis = await startOwned(config, logger, dataDir, socketPath, useSocket);
    recordUrl(redis.url);
    return {
      url: redis.url,
      stop: async () => {
        await redis.stop();
        releaseOwnership(ownerFile);
      },
    };
  } catch (err) {
    releaseOwnership(ownerFile);
    throw err;
  }
}

/** Starts (or, left running by a dead owner, adopts) the server once this node owns the data directory. */
async function startOwned(config: BrokerConfig['embeddedRedis'], logger: Logger, dataDir: string, socketPath: string, useSocket: boolean): Promise<EmbeddedRedis> {
  if (useSocket && existsSync(socketPath) && (await canConnect({ path: socketPath }))) {
    logger.warn({ socketPath }, 'adopting the embedded Redis left running in the data directory by a node that is gone; this node now owns it and stops it on exit');
    // Its limit as this node's configuration says (the node that started it may have had another).
    await sendInline({ path: socketPath }, `CONFIG SET maxmemory ${embeddedMaxmemoryBytes(config)}`);
    const exited = async () => {
      // SHUTDOWN closes the connection without an answer; the server is gone once the socket refuses.
      await sendInline({ path: socketPath }, 'SHUTDOWN');
      const deadline = Date.now() + 10_000;
      while ((await canConnect({ path: socketPath })) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    };
    return { url: `unix://${socketPath}`, stop: exited };
  }

  const port = useSocket ? 0 : await freePort();
  const logFile = path.join(dataDir, 'redis.log');
  const maxmemory = embeddedMaxmemoryBytes(config);
  const args = [
    '--port', String(port), '--bind', '127.0.0.1',
    ...(useSocket ? ['--unixsocket', socketPath, '--unixsocketperm', '700'] : []),
    '--dir', dataDir,
    '--appendonly', 'yes', '--appendfsync', config.appendfsync,
    '--save', '',
    '--maxmemory', String(maxmemory),
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
  logger.info({ redisPid: child.pid, dataDir, appendfsync: config.appendfsync, maxmemory }, 'embedded redis-server started');
  return {
    url: useSocket ? `unix://${socketPath}` : `redis://127.0.0.1:${port}`,
    stop: async () => {
      if (exited) return;
      child.kill('SIGTERM');
      await exitedPromise;
    },
  };
}
