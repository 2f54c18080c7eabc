import { Writable } from 'node:stream';
import { Command } from 'ioredis';

/**
 * Buffer arguments of at least this many bytes are handed to the socket as they are by
 * {@link DirectArgumentsCommand}. A command whose Buffer arguments are all shorter is serialized by
 * ioredis: a copy that small (from Node's shared buffer pool below 4 KB in all, `Buffer.poolSize >>> 1`)
 * costs less than socket writes of its own.
 */
export const DIRECT_ARGUMENT_MIN_BYTES = 4 * 1024;

/**
 * A Redis command whose large Buffer arguments go to the socket as they are, not copied
 * (docs/decisions/0014-direct-script-arguments.md).
 * ioredis serializes a command with any Buffer argument into one new buffer (`Command.toWritable`): for
 * a `publishBatch` call that is a copy of the partition's whole payload on the main thread (527 KB per
 * 1000-event batch), each in a fresh allocation outside the V8 heap. Measured under 1000-event batches
 * (docs/decisions/0014-direct-script-arguments.md): the node's CPU per event fell 5–15 % (a fifth with
 * 100-event batches), its main thread's mark-compacts 85 → 63 in 11 s.
 *
 * When an argument is that large, {@link toWritable} writes the RESP text before each Buffer argument,
 * then the argument itself, to the socket, and returns the text after the last one, which ioredis writes
 * next: the same bytes in the same order. It does so only on a corked socket (`coalesceWrites` in
 * redis-connection.ts corks it for the event-loop turn), so the pieces leave in one `writev`; on any other
 * target it serializes as ioredis does. Send it only with `sendCommand` on a client that writes each
 * command to its socket when sent (a standalone client without auto-pipelining): a pipeline would queue
 * the returned text while the pieces were already written.
 */
export class DirectArgumentsCommand extends Command {
  /**
   * @param socket the connection's stream, as ioredis passes it
   * @returns what ioredis writes after the pieces written here (all of the command when nothing was)
   */
  override toWritable(socket: object): string | Buffer {
    if (!(socket instanceof Writable) || socket.writableCorked === 0 || !this.args.some(isLarge)) return super.toWritable(socket);
    let text = `*${this.args.length + 1}\r\n$${Buffer.byteLength(this.name)}\r\n${this.name}\r\n`;
    for (const arg of this.args) {
      if (Buffer.isBuffer(arg)) {
        socket.write(`${text}$${arg.length}\r\n`);
        socket.write(arg);
        text = '\r\n';
      } else {
        const value = String(arg);
        text += `$${Buffer.byteLength(value)}\r\n${value}\r\n`;
      }
    }
    return text;
  }
}

function isLarge(arg: unknown): boolean {
  return Buffer.isBuffer(arg) && arg.length >= DIRECT_ARGUMENT_MIN_BYTES;
}
