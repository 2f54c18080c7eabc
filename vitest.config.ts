import { defineConfig } from 'vitest/config';

/**
 * The integration files the `cluster` project runs: those whose behaviour depends on the Redis topology
 * — partitions and subscriptions spread over masters by their hash tags, scripts and pipelines sent to
 * several masters, sharded pub/sub and the cluster bus (partition wake-ups, subscription and change
 * notices), failover and replica acknowledgements, rebalancing across nodes. Everything else runs once,
 * on the standalone Redis. docs/getting-started.md "Run the tests" lists them (a unit test compares).
 */
export const CLUSTER_FILES = [
  'cluster-durability',
  'cluster-failover',
  'cluster-quotas',
  'cluster-replicated-reads',
  'cluster-topology',
  'consumer-status',
  'event-types',
  'idempotent-publishing',
  'ioredis-internals',
  'low-level-streams',
  'metrics',
  'publishing',
  'queue-mode',
  'rebalance-handover',
  'repartitioning',
  'storage-full',
  'stream-wakeups',
  'subscription-notices',
  'subscription-streams',
  'subscriptions',
  'timelines',
].map((name) => `test/integration/${name}.test.ts`);

// Integration tests start broker nodes (mostly inside the test's process, from dist/ as `npm test`
// builds it) against a redis-server that test/support/global-setup.ts starts on a free port: project
// `integration` runs every integration file but the cluster-only ones (`cluster-*`) against it; project
// `cluster` (after the others) runs CLUSTER_FILES against a 3-master Redis Cluster. The files wait on
// Redis, sockets and timers more than they compute, so more of them run at once than there are cores.
// `npx vitest run --project unit` (or integration, cluster) runs one project; `npm run test:unit` the unit tests.
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 4,
    reporters: ['default', './test/support/durations-reporter.ts'],
    // The built node is loaded as Node loads it, not compiled again by vitest.
    server: { deps: { external: [/\/dist\//] } },
    // `npm run test:coverage` (scripts/test-coverage.ts): src/ as tests import it, and the built node as
    // test processes run it (the setup file); node processes write their own through NODE_V8_COVERAGE.
    coverage: { provider: 'v8', include: ['src/**/*.ts'], reporter: ['json'] },
    setupFiles: ['test/support/exit-on-sigterm.ts', ...(process.env.NODE_V8_COVERAGE === undefined ? [] : ['test/support/built-node-coverage.ts'])],
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      {
        extends: true,
        test: { name: 'integration', include: ['test/integration/**/*.test.ts'], exclude: ['test/integration/cluster-*.test.ts'], globalSetup: ['test/support/global-setup.ts'] },
      },
      { extends: true, test: { name: 'cluster', include: CLUSTER_FILES, globalSetup: ['test/support/global-setup.ts'], sequence: { groupOrder: 1 } } },
    ],
  },
});
