import { Writable } from 'node:stream';
import { Command } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { DIRECT_ARGUMENT_MIN_BYTES, DirectArgumentsCommand } from '../../src/storage/direct-arguments.js';

/**
 * `DirectArgumentsCommand` (src/storage/direct-arguments.ts): a large Buffer argument is handed to the
 * socket as it is, and the bytes on the wire are exactly those ioredis's own serialization makes. Real
 * Redis calls through it: test/integration/direct-arguments.test.ts.
 */

/** A socket stand-in that keeps every chunk written to it, as the chunk object itself. */
class Capture extends Writable {
  readonly chunks: (Buffer | string)[] = [];

  constructor() {
    super({ decodeStrings: false });
  }

  override _write(chunk: Buffer | string, _encoding: BufferEncoding, callback: () => void): void {
    this.chunks.push(chunk);
    callback();
  }

  override _writev(chunks: { chunk: Buffer | string }[], callback: () => void): void {
    for (const { chunk } of chunks) this.chunks.push(chunk);
    callback();
  }
}

/** What ioredis's own `Command` would write for the same command, as bytes. */
function ioredisBytes(name: string, args: (string | number | Buffer)[]): Buffer {
  const writable = new Command(name, args).toWritable(new Capture());
  return Buffer.isBuffer(writable) ? writable : Buffer.from(writable);
}

/** Serializes `command` onto a corked capture socket; returns the chunks written and the bytes ioredis would write after them. */
function serialize(command: Command, corked: boolean): { socket: Capture; wire: Buffer } {
  const socket = new Capture();
  if (corked) socket.cork();
  const returned = command.toWritable(socket);
  socket.write(returned);
  if (corked) socket.uncork();
  return { socket, wire: Buffer.concat(socket.chunks.map((c) => (Buffer.isBuffer(c) ? c : Buffer.from(c)))) };
}

describe('DirectArgumentsCommand', () => {
  const data = Buffer.from(`${'{"order_number":"ünïcode ✓"}\n'.repeat(400)}{"last":true}`);
  const args = ['5f2b…sha', 3, 'key:a', 'key:{b}:c', 'key:c', 1000, data];

  it('puts the same bytes on the wire as ioredis, handing the large argument over without a copy', () => {
    expect(data.length).toBeGreaterThanOrEqual(DIRECT_ARGUMENT_MIN_BYTES);
    const { socket, wire } = serialize(new DirectArgumentsCommand('evalsha', [...args]), true);
    expect(wire.equals(ioredisBytes('evalsha', [...args]))).toBe(true);
    // The argument itself went to the socket: the very object, not a copy of it.
    expect(socket.chunks.some((chunk) => chunk === data)).toBe(true);
  });

  it('keeps the order with several Buffer arguments, small ones among them', () => {
    const small = Buffer.from('tiny\r\nbinary\u0000');
    const many = ['sha', 2, 'k1', 'k2', small, data, 'text ✓', Buffer.alloc(0), data.subarray(7)];
    const { wire } = serialize(new DirectArgumentsCommand('evalsha', [...many]), true);
    expect(wire.equals(ioredisBytes('evalsha', [...many]))).toBe(true);
  });

  it('serializes as ioredis does on a socket that is not corked (the pieces would leave in writes of their own)', () => {
    const { socket, wire } = serialize(new DirectArgumentsCommand('evalsha', [...args]), false);
    expect(socket.chunks).toHaveLength(1);
    expect(wire.equals(ioredisBytes('evalsha', [...args]))).toBe(true);
  });

  it('serializes as ioredis does when no Buffer argument is large', () => {
    const smallOnly = ['sha', 1, 'key', Buffer.from('x'.repeat(DIRECT_ARGUMENT_MIN_BYTES - 1))];
    const { socket, wire } = serialize(new DirectArgumentsCommand('evalsha', [...smallOnly]), true);
    expect(socket.chunks).toHaveLength(1);
    expect(wire.equals(ioredisBytes('evalsha', [...smallOnly]))).toBe(true);
  });
});
