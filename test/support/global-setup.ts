import { existsSync } from 'node:fs';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { repoRoot, startRedis, startRedisCluster } from '../../scripts/local-processes.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The harness's redis-server (never the machine's 6379); empty in the `cluster` project. */
    redisUrl: string;
    /** Seed nodes `host:port` of the harness's Redis Cluster in the `cluster` project; empty otherwise. */
    clusterNodes: string[];
  }
}

/**
 * Starts one `redis-server` on a free loopback port for the whole run (nothing persisted) and stops
 * it afterwards; in the `cluster` project (vitest.config.ts) a 3-master Redis Cluster instead, so the
 * same integration tests run against both. Test files isolate themselves with their own key prefix.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (!existsSync(path.join(repoRoot, 'dist', 'src', 'main.js'))) {
    throw new Error('dist/ is missing: run the tests with `npm test` (it builds first)');
  }
  if (project.name === 'cluster') {
    const cluster = await startRedisCluster({ masters: 3 });
    project.provide('redisUrl', '');
    project.provide('clusterNodes', [...cluster.nodes]);
    return () => cluster.stop();
  }
  const redis = await startRedis();
  project.provide('redisUrl', redis.url);
  project.provide('clusterNodes', []);
  return () => redis.stop();
}
