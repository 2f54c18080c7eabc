import { writeFileSync } from 'node:fs';
import inspector from 'node:inspector';
import path from 'node:path';

// Set up for `npm run test:coverage` only (vitest.config.ts adds it when NODE_V8_COVERAGE is set): the
// built node's code (dist/) that ran in this test process — nodes started in the test's process — is
// written to NODE_V8_COVERAGE in V8's own format, for the same report as the node processes' coverage.
//
// Vitest's coverage provider takes the process's precise (block) coverage once, when the test file has
// run, and that take resets V8's counters and then stops precise coverage. So the built code's part is
// written from that same take, as it passes: the provider's inspector session is wrapped to see its
// answer. (V8's best-effort coverage, read any time, counts per function only: every line of a called
// function would look run, and a merge with another process's block counts drops what it ran.) The
// process's own NODE_V8_COVERAGE file, written at its exit after precise coverage stopped, holds such
// per-function counts only: scripts/test-coverage.ts leaves out the exit files of the processes that
// wrote here, named by their pid.

type Post = (this: inspector.Session, method: string, ...rest: unknown[]) => void;
type ScriptCoverage = { readonly url: string };

const dir = process.env.NODE_V8_COVERAGE;
if (dir !== undefined) {
  const prototype = inspector.Session.prototype as unknown as { post: Post };
  const post = prototype.post;
  prototype.post = function (this: inspector.Session, method: string, ...rest: unknown[]): void {
    const callback = rest[rest.length - 1];
    if (method === 'Profiler.takePreciseCoverage' && typeof callback === 'function') {
      rest[rest.length - 1] = (err: Error | null, coverage?: { readonly result: readonly ScriptCoverage[] }): void => {
        if (err === null && coverage !== undefined) {
          const built = coverage.result.filter((script) => script.url.includes('/dist/src/') || script.url.includes('/dist/workers/'));
          writeFileSync(path.join(dir, `coverage-test-process-${process.pid}-${Date.now()}.json`), JSON.stringify({ result: built }));
        }
        (callback as (...args: unknown[]) => void)(err, coverage);
      };
    }
    post.call(this, method, ...rest);
  };
}
