import { defineConfig } from 'vitest/config';

// Integration tests spawn broker processes from dist/ (built by `npm test`) against a redis-server
// that test/support/global-setup.ts starts on a free port. They run twice: project `integration`
// against that standalone Redis, project `cluster` (after the others) against a 3-master Redis Cluster
// the global setup starts; tests named `cluster-*` need a cluster and run only there.
// `npx vitest run --project unit` (or integration, cluster) runs one of them.
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      {
        extends: true,
        test: { name: 'integration', include: ['test/integration/**/*.test.ts'], exclude: ['test/integration/cluster-*.test.ts'], globalSetup: ['test/support/global-setup.ts'] },
      },
      {
        extends: true,
        // The console's browser test runs once (integration): it tests a client of the HTTP API.
        test: { name: 'cluster', include: ['test/integration/**/*.test.ts'], exclude: ['test/integration/console.test.ts'], globalSetup: ['test/support/global-setup.ts'], sequence: { groupOrder: 1 } },
      },
    ],
  },
});
