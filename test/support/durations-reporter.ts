import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';
import type { FileDuration } from '../../scripts/slowest-test-files.js';

/**
 * Writes every test file's duration to `test-results/durations.json` when a run ends (sorted, slowest
 * first), so a run can tell where its time went; `.ci/run` prints the slowest ten
 * (docs/getting-started.md "Run the tests").
 */
export default class DurationsReporter implements Reporter {
  private readonly started = new Map<TestModule, number>();
  private readonly ended = new Map<TestModule, number>();

  onTestModuleStart(testModule: TestModule): void {
    this.started.set(testModule, performance.now());
  }

  onTestModuleEnd(testModule: TestModule): void {
    this.ended.set(testModule, performance.now());
  }

  onTestRunEnd(testModules: readonly TestModule[]): void {
    const rows: FileDuration[] = testModules.map((m) => {
      const start = this.started.get(m);
      const end = this.ended.get(m);
      const diagnostic = m.diagnostic();
      return {
        project: m.project.name,
        file: path.relative(process.cwd(), m.moduleId),
        wallSeconds: round(start === undefined || end === undefined ? 0 : (end - start) / 1000),
        testsSeconds: round(diagnostic.duration / 1000),
        tests: [...m.children.allTests()].length,
        state: m.state(),
      };
    });
    rows.sort((a, b) => b.wallSeconds - a.wallSeconds);
    mkdirSync('test-results', { recursive: true });
    writeFileSync(path.join('test-results', 'durations.json'), `${JSON.stringify(rows, null, 2)}\n`);
  }
}

const round = (seconds: number): number => Math.round(seconds * 10) / 10;
