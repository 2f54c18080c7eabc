import { existsSync } from 'node:fs';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { repoRoot, startRedis } from '../../scripts/local-processes.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The harness's redis-server (never the machine's 6379). */
    redisUrl: string;
  }
}

/**
 * Starts one `redis-server` on a free loopback port for the whole run (nothing persisted) and stops
 * it afterwards. Test files isolate themselves with their own key prefix.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (!existsSync(path.join(repoRoot, 'dist', 'src', 'main.js'))) {
    throw new Error('dist/ is missing: run the tests with `npm test` (it builds first)');
  }
  const redis = await startRedis();
  project.provide('redisUrl', redis.url);
  return () => redis.stop();
}
