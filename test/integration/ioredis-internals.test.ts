import net from 'node:net';
import { Writable } from 'node:stream';
import { Command, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startRedis, type RedisProcess } from '../../scripts/local-processes.js';
import { loadConfig } from '../../src/config/load-config.js';
import { BrokerError } from '../../src/errors/catalog.js';
import { createLogger } from '../../src/observability/logger.js';
import { DirectArgumentsCommand } from '../../src/storage/direct-arguments.js';
import { connectRedis, duplicateForSubscribe, storageError } from '../../src/storage/redis/redis-connection.js';

/**
 * What src/storage/direct-arguments.ts and src/storage/redis/redis-connection.ts take from ioredis beyond its
 * documented API, each checked against a real redis-server. ioredis is pinned to an exact version in
 * package.json; an upgrade that changes one of these fails here, naming it, before it breaks the node.
 *
 * direct-arguments.ts: `Command` is exported and subclassable, keeps `name` and `args` as given, and
 * ioredis writes a command by calling `toWritable(socket)` with the connection's socket, synchronously
 * inside `sendCommand`, then writing what it returns to that same socket; `replyEncoding`.
 * redis-connection.ts: every command of a standalone client goes through the instance's `sendCommand`
 * (coalesceWrites replaces it), `redis.stream` is the connection's socket (a new one per connection),
 * `commandTimeout` starts when the command is sent, `enableOfflineQueue: false` fails commands at once
 * with the messages `storageError` knows, `duplicate` merges the overrides into the options, `ready`
 * fires on every reconnection (`onResubscribed`), and an unknown script answers `NOSCRIPT`.
 * Its own redis-server, so it runs once (project `integration`).
 */

const config = { ...loadConfig({}).redis, commandTimeoutMs: 300 };
const logger = createLogger({ logLevel: 'silent' });

/** The RESP text of a command, as Redis reads it. */
function resp(name: string, args: readonly (string | number | Buffer)[]): Buffer {
  const parts = [name, ...args].map((a) => (Buffer.isBuffer(a) ? a : Buffer.from(String(a))));
  return Buffer.concat([Buffer.from(`*${parts.length}\r\n`), ...parts.flatMap((p) => [Buffer.from(`$${p.length}\r\n`), p, Buffer.from('\r\n')])]);
}

function bytes(writable: string | Buffer): Buffer {
  return Buffer.isBuffer(writable) ? writable : Buffer.from(writable);
}

describe.skipIf(inject('clusterNodes').length > 0)('ioredis internals the storage layer relies on', () => {
  let server: RedisProcess;
  let redis: Redis;

  beforeAll(async () => {
    server = await startRedis();
    redis = await connectRedis(server.url, config, logger, 'internals');
  });
  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });

  it('Command: exported, keeps name and args as given (Buffers by identity), serializes to RESP with toWritable', () => {
    const data = Buffer.from('ünïcode\r\n');
    const command = new Command('evalsha', ['sha', 2, 'k1', 'k2', data], { replyEncoding: 'utf8' });
    expect(command.name).toBe('evalsha');
    expect(command.args).toHaveLength(5);
    expect(String(command.args[1])).toBe('2');
    expect(command.args[4]).toBe(data);
    expect(bytes(command.toWritable(new Writable())).equals(resp('evalsha', ['sha', 2, 'k1', 'k2', data]))).toBe(true);
    expect(new DirectArgumentsCommand('get', ['k'])).toBeInstanceOf(Command);
  });

  it('sendCommand calls toWritable with the connection socket and writes what it returns to that socket, before it returns', async () => {
    const socket = redis.stream;
    expect(socket).toBeInstanceOf(net.Socket);
    const seen: { socket?: object; returned?: string | Buffer } = {};
    class Recording extends Command {
      override toWritable(target: object): string | Buffer {
        seen.socket = target;
        seen.returned = super.toWritable(target);
        return seen.returned;
      }
    }
    const writes: unknown[] = [];
    const write = socket.write.bind(socket) as (chunk: unknown, ...rest: unknown[]) => boolean;
    socket.write = (chunk: unknown, ...rest: unknown[]) => (writes.push(chunk), write(chunk, ...rest));
    try {
      const reply = redis.sendCommand(new Recording('echo', ['héllo'], { replyEncoding: 'utf8' })) as Promise<unknown>;
      // Synchronously: serialized with the socket and written to it.
      expect(seen.socket).toBe(socket);
      expect(writes).toEqual([seen.returned]);
      // replyEncoding 'utf8': the answer is a string, not a Buffer.
      expect(await reply).toBe('héllo');
    } finally {
      Reflect.deleteProperty(socket, 'write');
    }
    expect(Buffer.isBuffer(await redis.sendCommand(new Command('echo', ['x'])))).toBe(true);
  });

  it('every command of a standalone client (plain, defined scripts, MULTI) goes through the instance sendCommand; coalesceWrites sends one turn in one write', async () => {
    redis.defineCommand('internalsProbe', { numberOfKeys: 1, lua: "return redis.call('GET', KEYS[1])" });
    const socket = redis.stream;
    const names: string[] = [];
    const installed = Reflect.get(redis, 'sendCommand'); // coalesceWrites's, an own property
    redis.sendCommand = (command, stream) => {
      names.push(command.name);
      return installed.call(redis, command, stream);
    };
    const writev = socket._writev?.bind(socket);
    let writevs = 0;
    let writesAlone = 0;
    const writeOne = socket._write.bind(socket);
    socket._writev = (chunks, callback) => ((writevs += 1), writev?.(chunks, callback));
    socket._write = (chunk, encoding, callback) => ((writesAlone += 1), writeOne(chunk, encoding, callback));
    try {
      const scripted = (redis as unknown as Record<string, (key: string) => Promise<unknown>>).internalsProbe;
      const replies = Promise.all([redis.set('internals:a', '1'), redis.get('internals:a'), scripted?.call(redis, 'internals:a'), redis.multi().incr('internals:n').get('internals:n').exec()]);
      // Issued in one turn: the socket is corked until the turn ends.
      expect(socket.writableCorked).toBeGreaterThan(0);
      const [set, get, script, multi] = await replies;
      expect([set, get, script]).toEqual(['OK', '1', '1']);
      expect(multi).toEqual([
        [null, 1],
        [null, '1'],
      ]);
      expect(names).toEqual(expect.arrayContaining(['set', 'get', 'multi', 'incr', 'get', 'exec']));
      expect(names.filter((n) => n === 'evalsha' || n === 'eval').length).toBeGreaterThanOrEqual(1);
      // The turn's writes left together: one writev, no write of its own.
      expect(writevs).toBe(1);
      expect(writesAlone).toBe(0);
    } finally {
      redis.sendCommand = installed;
      Reflect.deleteProperty(socket, '_writev');
      Reflect.deleteProperty(socket, '_write');
    }
  });

  it('an unknown script answers an error starting with NOSCRIPT (the EVAL fallback of direct arguments)', async () => {
    await expect(redis.sendCommand(new DirectArgumentsCommand('evalsha', ['0'.repeat(40), 0], { replyEncoding: 'utf8' }))).rejects.toThrow(/^NOSCRIPT/);
  });

  it('commandTimeout: a command without an answer fails that long after it was sent, with a message storageError maps to 503', async () => {
    const pauser = new Redis(server.url, { maxRetriesPerRequest: 0 });
    try {
      // Writes wait while paused; CLIENT UNPAUSE (not a write) still runs.
      await pauser.call('CLIENT', 'PAUSE', '5000', 'WRITE');
      const started = performance.now();
      const err = await redis.set('internals:b', '1').then(
        () => undefined,
        (e: unknown) => e,
      );
      const waited = performance.now() - started;
      expect(String(err)).toMatch(/timed out/);
      expect(waited).toBeGreaterThanOrEqual(config.commandTimeoutMs - 20);
      expect(waited).toBeLessThan(2000);
      expect(() => storageError(err)).toThrow(BrokerError);
    } finally {
      await pauser.call('CLIENT', 'UNPAUSE');
      pauser.disconnect();
    }
  });

  it('redis.stream is a new socket per connection, ready fires on every reconnection, and while down commands fail at once (no offline queue)', async () => {
    const first = redis.stream;
    const ready = new Promise<void>((resolve) => redis.once('ready', () => resolve()));
    redis.disconnect(true);
    const err = await redis.get('internals:a').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(String(err)).toMatch(/enableOfflineQueue|Connection is closed/);
    expect(() => storageError(err)).toThrow(BrokerError);
    await ready;
    expect(redis.stream).not.toBe(first);
    expect(redis.stream).toBeInstanceOf(net.Socket);
    expect(await redis.get('internals:a')).toBe('1');
  });

  it('options: auto-pipelining settings are read from redis.options, and duplicate() merges overrides into them', async () => {
    expect(redis.options.enableAutoPipelining).toBe(false);
    expect(Array.isArray(redis.options.autoPipeliningIgnoredCommands)).toBe(true);
    expect(redis.options.commandTimeout).toBe(config.commandTimeoutMs);
    const subscriber = duplicateForSubscribe(redis, logger);
    try {
      expect(subscriber).toBeInstanceOf(Redis);
      const options = (subscriber as Redis).options;
      expect(options.commandTimeout).toBeUndefined();
      expect(options.enableReadyCheck).toBe(false);
      expect(options.enableOfflineQueue).toBe(true);
      expect(options.port).toBe(server.port);
      await subscriber.subscribe('internals:channel');
      const clients = (await redis.call('CLIENT', 'LIST')) as string;
      expect(clients).toContain('name=broker-subscriber');
    } finally {
      subscriber.disconnect();
    }
  });
});
