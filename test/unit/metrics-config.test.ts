import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BrokerMetrics } from '../../src/observability/metrics.js';
import { parseExposition, sampleNames } from '../support/prometheus-text.js';
import { parse as parseYaml } from 'yaml';

/**
 * The monitoring config shipped in config/ (docs/metrics.md "Prometheus", "Grafana dashboard") stays true to the broker: every PromQL
 * expression of the Grafana dashboard names metrics (and labels) the broker registers, the
 * dashboard's datasource is the provisioned one, and prometheus.yml scrapes every node.
 */

const root = new URL('../../', import.meta.url);
const read = (path: string): string => readFileSync(new URL(path, root), 'utf8');

interface Target {
  expr: string;
  legendFormat?: string;
  datasource?: { uid?: string };
}
interface Panel {
  title: string;
  datasource?: { type?: string; uid?: string };
  targets?: Target[];
  gridPos?: { x: number; y: number; w: number; h: number };
}
interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
  templating: { list: { name: string; definition?: string; query?: { query?: string } }[] };
}

/** Registered sample names, and the label names of each metric family. */
async function registered(): Promise<{ names: Set<string>; labels: Map<string, Set<string>> }> {
  const metrics = new BrokerMetrics();
  const names = sampleNames(parseExposition((await metrics.scrape()).toString()));
  const families = metrics.families();
  const labels = new Map<string, Set<string>>();
  for (const name of names) labels.set(name, new Set(families.get(families.has(name) ? name : name.replace(/_(bucket|sum|count)$/, '')) ?? []));
  return { names, labels };
}

/** Metric names an expression uses: identifiers starting with `broker_` (PromQL functions and labels never do). */
function metricsIn(expr: string): string[] {
  return [...expr.matchAll(/\b(broker_[a-zA-Z0-9_:]*)/g)].map((m) => m[1] as string);
}

/** Label names an expression uses in `by (…)`, `without (…)` and `{label op "value"}` matchers. */
function labelsIn(expr: string): string[] {
  const out: string[] = [];
  for (const [, list] of expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)) out.push(...(list as string).split(',').map((l) => l.trim()).filter(Boolean));
  for (const [, matchers] of expr.matchAll(/\{([^}]*)\}/g)) for (const [, label] of (matchers as string).matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)) out.push(label as string);
  return out;
}

describe('Grafana dashboard config/grafana/dashboards/broker.json', () => {
  const dashboard = JSON.parse(read('config/grafana/dashboards/broker.json')) as Dashboard;

  it('parses and shows publish rate, publish latency, streams and consumer lag per subscription', () => {
    expect(dashboard.uid).toBe('event-broker');
    const titles = dashboard.panels.map((p) => p.title);
    for (const title of ['Publish rate', 'Publish latency', 'Active streams', 'Consumer lag per subscription (events)', 'Consumer lag per subscription (seconds)']) expect(titles).toContain(title);
    // Consumer status and time to drain (docs/consuming.md "Consumer status").
    for (const title of ['Partitions by consumer status', 'Drain time per partition']) expect(titles).toContain(title);
    // Memory headroom (docs/operations.md "Memory and retention").
    for (const title of ['Redis memory per master', 'Time to the high-water mark', 'Publishes refused for storage', 'Redis bytes per event type']) expect(titles).toContain(title);
    const exprs = dashboard.panels.flatMap((p) => p.targets ?? []).map((t) => t.expr);
    expect(exprs.some((e) => /histogram_quantile\(0\.99, .*broker_publish_duration_seconds_bucket/.test(e))).toBe(true);
    expect(exprs.some((e) => /histogram_quantile\(0\.5, .*broker_publish_duration_seconds_bucket/.test(e))).toBe(true);
  });

  it('names only metrics and labels the broker registers, in every panel and variable', async () => {
    const { names, labels } = await registered();
    const queries = [
      ...dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ where: p.title, expr: t.expr, legend: t.legendFormat ?? '' }))),
      ...dashboard.templating.list.map((v) => ({ where: `variable ${v.name}`, expr: v.query?.query ?? v.definition ?? '', legend: '' })),
    ];
    expect(queries.length).toBeGreaterThan(10);
    for (const { where, expr, legend } of queries) {
      const used = metricsIn(expr);
      expect(used.length, `${where}: ${expr}`).toBeGreaterThan(0);
      for (const name of used) expect(names.has(name), `${where}: ${name} is not registered`).toBe(true);
      // Labels: those of the metrics used, plus what Prometheus adds (instance, job) and histogram buckets (le).
      const known = new Set(['instance', 'job', 'le', ...used.flatMap((n) => [...(labels.get(n) ?? [])])]);
      const label = /^label_values\(\s*[a-zA-Z0-9_:]+\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$/.exec(expr)?.[1];
      for (const l of [...labelsIn(expr), ...(label ? [label] : []), ...[...legend.matchAll(/\{\{\s*(\w+)\s*\}\}/g)].map((m) => m[1] as string)]) {
        expect(known.has(l), `${where}: label ${l} is not a label of ${used.join(', ')}`).toBe(true);
      }
    }
  });

  it('uses the provisioned Prometheus datasource, and panels do not overlap', () => {
    const datasources = parseYaml(read('config/grafana/provisioning/datasources/prometheus.yml')) as { apiVersion: number; datasources: { name: string; type: string; uid: string; url: string }[] };
    expect(datasources.apiVersion).toBe(1);
    const prometheus = datasources.datasources.find((d) => d.name === 'Prometheus');
    expect(prometheus).toMatchObject({ type: 'prometheus', url: 'http://prometheus:9090' });
    for (const p of dashboard.panels) {
      expect(p.datasource, p.title).toEqual({ type: 'prometheus', uid: prometheus?.uid });
      for (const t of p.targets ?? []) expect(t.datasource?.uid).toBe(prometheus?.uid);
    }
    const cells = new Set<string>();
    for (const { gridPos, title } of dashboard.panels) {
      expect(gridPos, title).toBeDefined();
      const g = gridPos ?? { x: 0, y: 0, w: 0, h: 0 };
      expect(g.x + g.w).toBeLessThanOrEqual(24);
      for (let x = g.x; x < g.x + g.w; x++) {
        for (let y = g.y; y < g.y + g.h; y++) {
          expect(cells.has(`${x},${y}`), `${title} overlaps another panel`).toBe(false);
          cells.add(`${x},${y}`);
        }
      }
    }
  });

  it('is loaded by the dashboard provider from /var/lib/grafana/dashboards', () => {
    const provider = parseYaml(read('config/grafana/provisioning/dashboards/broker.yml')) as { apiVersion: number; providers: { type: string; options: { path: string } }[] };
    expect(provider.apiVersion).toBe(1);
    expect(provider.providers).toHaveLength(1);
    expect(provider.providers[0]).toMatchObject({ type: 'file', options: { path: '/var/lib/grafana/dashboards' } });
  });
});

describe('config/prometheus.yml', () => {
  it('parses and scrapes /metrics of the three broker nodes', () => {
    const config = parseYaml(read('config/prometheus.yml')) as { global: Record<string, unknown>; scrape_configs: { job_name: string; metrics_path?: string; static_configs: { targets: string[] }[] }[] };
    expect(config.global.scrape_interval).toBe('15s');
    const jobs = config.scrape_configs.filter((j) => j.job_name === 'broker');
    expect(jobs).toHaveLength(1);
    expect(jobs[0]?.metrics_path ?? '/metrics').toBe('/metrics');
    expect(jobs[0]?.static_configs.flatMap((s) => s.targets).sort()).toEqual(['broker-1:8080', 'broker-2:8080', 'broker-3:8080']);
  });

  it('documents the Kafka consumer-lag relabelling for metrics the broker registers', async () => {
    const { names } = await registered();
    const text = read('config/prometheus.yml');
    for (const name of ['broker_subscription_lag_events', 'broker_subscription_event_type_lag_events', 'broker_subscription_lag_seconds', 'broker_partition_newest_offset', 'broker_subscription_committed_offset']) {
      expect(names.has(name)).toBe(true);
      expect(text).toContain(`regex: ${name}\n`);
    }
  });

  it('whose commented-out relabelling, applied as Prometheus would, gives the Kafka exporter names and labels', () => {
    const text = read('config/prometheus.yml');
    const start = text.indexOf('    # metric_relabel_configs:\n');
    expect(start).toBeGreaterThan(0);
    const block = text
      .slice(start)
      .split('\n')
      .filter((line) => line.startsWith('    #'))
      .map((line) => line.slice('    # '.length))
      .join('\n');
    const rules = (parseYaml(block) as { metric_relabel_configs: { source_labels: string[]; regex: string; target_label: string; replacement?: string }[] }).metric_relabel_configs;
    expect(rules.length).toBeGreaterThan(5);
    // Prometheus `replace`: source values joined by ';', the regex anchored, `$n` expanded; an empty result removes the label.
    const relabel = (series: Record<string, string>): Record<string, string> => {
      const out = { ...series };
      for (const rule of rules) {
        const match = new RegExp(`^(?:${rule.regex})$`).exec(rule.source_labels.map((l) => out[l] ?? '').join(';'));
        if (!match) continue;
        const value = (rule.replacement ?? '$1').replace(/\$(\d+)/g, (_, n: string) => match[Number(n)] ?? '');
        if (value === '') delete out[rule.target_label];
        else out[rule.target_label] = value;
      }
      return out;
    };
    const labels = { subscription_id: 'f0e1', consumer_group: 'billing', event_type: 'order.created', partition: '3' };
    expect(relabel({ __name__: 'broker_subscription_lag_events', ...labels })).toMatchObject({ __name__: 'kafka_consumergroup_lag', consumergroup: 'f0e1', topic: 'order.created', partition: '3' });
    expect(relabel({ __name__: 'broker_subscription_event_type_lag_events', subscription_id: 'f0e1', consumer_group: 'billing', event_type: 'order.created' })).toMatchObject({
      __name__: 'kafka_consumergroup_lag_sum',
      consumergroup: 'f0e1',
      topic: 'order.created',
    });
    expect(relabel({ __name__: 'broker_subscription_committed_offset', ...labels })).toMatchObject({ __name__: 'kafka_consumergroup_current_offset', consumergroup: 'f0e1', topic: 'order.created' });
    expect(relabel({ __name__: 'broker_partition_newest_offset', event_type: 'order.created', partition: '3' })).toMatchObject({ __name__: 'kafka_topic_partition_current_offset', topic: 'order.created', partition: '3' });
    const seconds = relabel({ __name__: 'broker_subscription_lag_seconds', ...labels });
    expect(seconds).toMatchObject({ __name__: 'kafka_consumergroup_group_lag_seconds', group: 'f0e1', topic: 'order.created', partition: '3' });
    expect(seconds.consumergroup).toBeUndefined();
    // Other series pass unchanged.
    expect(relabel({ __name__: 'broker_active_streams', kind: 'subscription' })).toEqual({ __name__: 'broker_active_streams', kind: 'subscription' });
  });
});

describe('the checks used above', () => {
  it('find metric and label names in PromQL', async () => {
    const expr = 'histogram_quantile(0.99, sum by (le, route) (rate(broker_http_request_duration_seconds_bucket{method="GET", status=~"5.."}[5m])))';
    expect(metricsIn(expr)).toEqual(['broker_http_request_duration_seconds_bucket']);
    expect(labelsIn(expr)).toEqual(['le', 'route', 'method', 'status']);
    const { names, labels } = await registered();
    expect(names.has('broker_made_up_total')).toBe(false);
    expect([...(labels.get('broker_subscription_event_type_lag_events') ?? [])].sort()).toEqual(['consumer_group', 'event_type', 'subscription_id']);
    expect([...(labels.get('broker_publish_duration_seconds_bucket') ?? [])]).toEqual(['event_type']);
  });
});
