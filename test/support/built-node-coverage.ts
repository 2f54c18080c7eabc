import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import path from 'node:path';
import { afterAll } from 'vitest';

// Set up for `npm run test:coverage` only (vitest.config.ts adds it when NODE_V8_COVERAGE is set): the
// built node's code (dist/) that ran in this test process — nodes started in the test's process — is
// written to NODE_V8_COVERAGE in V8's own format, for the same report as the node processes' coverage.
// Vitest's coverage provider covers the TypeScript it compiled itself (src/ imported by tests), and ends
// each file by taking (and resetting) the process's counters; this reads them first, without resetting.
afterAll(async () => {
  const dir = process.env.NODE_V8_COVERAGE;
  if (dir === undefined) return;
  const session = new Session();
  session.connect();
  try {
    await session.post('Profiler.enable');
    const { result } = await session.post('Profiler.getBestEffortCoverage');
    const built = result.filter((script) => script.url.includes('/dist/src/'));
    if (built.length > 0) writeFileSync(path.join(dir, `coverage-test-process-${process.pid}-${Date.now()}.json`), JSON.stringify({ result: built }));
  } finally {
    session.disconnect();
  }
});
