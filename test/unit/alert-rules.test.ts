import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { BrokerMetrics } from '../../src/observability/metrics.js';
import { parseExposition, sampleNames } from '../support/prometheus-text.js';
import { promtoolAvailable } from '../support/promtool.js';

/**
 * The alert rules shipped in config/prometheus/alerts.yml (docs/metrics.md "Alerts"): their own unit tests
 * pass under promtool, they name only metrics the broker registers, and each runbook link points to a
 * section of the docs. promtool is Debian's `prometheus` package (CI installs it, .ci/run); a machine
 * without it skips the promtool run, CI never does.
 */

const root = new URL('../../', import.meta.url);
const rules = fileURLToPath(new URL('config/prometheus/alerts.yml', root));
const tests = fileURLToPath(new URL('config/prometheus/alerts.test.yml', root));

interface Rule {
  alert: string;
  expr: string;
  annotations: Record<string, string>;
}

const groups = (parseYaml(readFileSync(rules, 'utf8')) as { groups: { name: string; rules: Rule[] }[] }).groups;
const alerts = groups.flatMap((g) => g.rules);

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes. */
function anchorOf(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^a-z0-9 -]/g, '')
    .replace(/ /g, '-');
}

describe('config/prometheus/alerts.yml', () => {
  it.skipIf(!promtoolAvailable())('passes promtool check rules and its tests (promtool test rules alerts.test.yml)', () => {
    expect(execFileSync('promtool', ['check', 'rules', rules], { encoding: 'utf8' })).toContain('SUCCESS');
    const run = spawnSync('promtool', ['test', 'rules', tests], { encoding: 'utf8' });
    expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0);
  });

  it('alerts on stalled and stopped consumers, lag seconds, drain time, publish refusals and a node down', () => {
    expect(alerts.map((a) => a.alert).sort()).toEqual(['BrokerConsumerDrainTimeHigh', 'BrokerConsumerLagHigh', 'BrokerConsumerStalled', 'BrokerConsumerStopped', 'BrokerNodeDown', 'BrokerPublishOverloaded', 'BrokerPublishQuotaExceeded', 'BrokerPublishStorageFull']);
  });

  it('names only metrics the broker registers', async () => {
    const registered = sampleNames(parseExposition((await new BrokerMetrics().scrape()).toString()));
    for (const a of alerts) for (const [name] of a.expr.matchAll(/\bbroker_[a-zA-Z0-9_]*/g)) expect(registered.has(name), `${a.alert}: ${name}`).toBe(true);
  });

  it('links every alert to a section of the docs as its runbook', () => {
    for (const a of alerts) {
      const [file, anchor] = (a.annotations.runbook_url ?? '').split('#');
      expect(file, a.alert).toMatch(/^docs\/[a-z-]+\.md$/);
      const headings = readFileSync(new URL(file as string, root), 'utf8')
        .split('\n')
        .filter((l) => l.startsWith('#'))
        .map((l) => anchorOf(l.replace(/^#+\s*/, '')));
      expect(headings, `${a.alert}: #${anchor ?? ''}`).toContain(anchor);
    }
  });
});
