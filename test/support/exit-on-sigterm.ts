// vitest ends a test file's worker process with SIGTERM, which would end it without running its 'exit'
// handlers. Turned into an exit, the harness kills the redis-server and node processes the file started
// and did not stop (a test that timed out before its clean-up): scripts/local-processes.ts.
process.once('SIGTERM', () => process.exit(143));
