import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { inject } from 'vitest';
import { startBroker, type BrokerProcess } from '../../scripts/local-processes.js';
import { createKeys, type Keys } from '../../src/storage/keys.js';

/** A broker node for a test file, on the harness Redis under its own key prefix. */
export interface TestBroker extends BrokerProcess {
  readonly prefix: string;
  readonly keys: Keys;
}

/** A fresh key prefix, so test files never see each other's data. */
export function uniquePrefix(): string {
  return `t${randomUUID().slice(0, 8)}:`;
}

/**
 * Starts a broker node process against the harness Redis.
 * @param env extra `BROKER_*` settings; `BROKER_REDIS_KEY_PREFIX` defaults to a fresh prefix
 */
export async function startTestBroker(env: Record<string, string> = {}): Promise<TestBroker> {
  const prefix = env.BROKER_REDIS_KEY_PREFIX ?? uniquePrefix();
  const broker = await startBroker({
    BROKER_REDIS_URL: inject('redisUrl'),
    BROKER_REDIS_KEY_PREFIX: prefix,
    BROKER_LOG_LEVEL: 'warn',
    BROKER_PUBLISH_WORKER_THREADS: '1',
    ...env,
  });
  return { ...broker, prefix, keys: createKeys(prefix) };
}

/** A client of the harness Redis, for checking what the broker stored. */
export function harnessRedis(): Redis {
  return new Redis(inject('redisUrl'), { lazyConnect: false, maxRetriesPerRequest: 1 });
}

/** A JSON HTTP answer. */
export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  json: unknown;
}

/** Sends a request and reads the whole answer; `body` objects are sent as JSON. */
export async function call(base: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const init: RequestInit = { method, headers: { ...headers } };
  if (body !== undefined) {
    init.body = typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body);
    (init.headers as Record<string, string>)['content-type'] ??= 'application/json';
  }
  const res = await fetch(base + path, init);
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}
