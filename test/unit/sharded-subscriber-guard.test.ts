import { EventEmitter } from 'node:events';
import { createRequire } from 'node:module';
import { expect, it } from 'vitest';
import { guardStoppedShardedSubscribers } from '../../src/storage/redis/redis-connection.js';

// ioredis's per-shard subscriber, as src/storage/redis/redis-connection.ts patches it: stop() removes every
// listener of its connection; a reply parsed after that is emitted as 'error' and would be uncaught.
interface Subscriber {
  instance: EventEmitter | null;
  stop(): void;
}
const { default: ShardedSubscriber } = createRequire(import.meta.url)('ioredis/built/cluster/ShardedSubscriber.js') as {
  default: new (emitter: EventEmitter, options: { host: string; port: number }, redisOptions: object) => Subscriber;
};

it('a stopped sharded subscriber connection keeps a listener for errors parsed after its stop', () => {
  guardStoppedShardedSubscribers();
  // lazyConnect: nothing connects.
  const subscriber = new ShardedSubscriber(new EventEmitter(), { host: '127.0.0.1', port: 1 }, {});
  const connection = subscriber.instance;
  if (connection === null) throw new Error('ioredis created no connection for the shard');
  subscriber.stop();
  expect(subscriber.instance).toBeNull();
  expect(() => connection.emit('error', new Error('Command queue state error. Last reply: sunsubscribe,channel,0'))).not.toThrow();
});
