import { defineConfig } from 'vitest/config';

// Integration tests spawn broker processes from dist/ (built by `npm test`) against a redis-server
// that test/support/global-setup.ts starts on a free port.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
