import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import type { BrokerConfig } from '../../src/config/config-schema.js';
import { envNameOf, leafKeyPaths, loadConfig, projectRoot } from '../../src/config/load-config.js';
import { MAX_STREAM_TIMEOUT_SECONDS } from '../../src/domain/stream/stream-parameters.js';

// docker-compose.yml cannot run on the development machines (no Docker engine), so this test keeps it
// true: the broker environment against the config schema, the ports from HAProxy's
// frontend to the brokers and Prometheus's targets, the files it mounts, the timeouts of streams.

const BROKERS = ['broker-1', 'broker-2', 'broker-3'] as const;
const LB_PORT = 8080;

type Yaml = null | boolean | number | string | Yaml[] | { [key: string]: Yaml };
type YamlMap = { [key: string]: Yaml };

function isMap(value: Yaml | undefined): value is YamlMap {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function readYaml(relative: string): YamlMap {
  const doc = parse(readFileSync(path.join(projectRoot, relative), 'utf8'), { merge: true }) as Yaml;
  if (!isMap(doc)) throw new Error(`${relative} is not a YAML mapping`);
  return doc;
}

function map(value: Yaml | undefined, what: string): YamlMap {
  if (!isMap(value)) throw new Error(`${what} is not a mapping`);
  return value;
}

function list(value: Yaml | undefined): Yaml[] {
  return Array.isArray(value) ? value : [];
}

/** A scalar as text (numbers and booleans as written). @throws Error for a mapping, sequence or null */
function text(value: Yaml | undefined, what: string): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  throw new Error(`${what} is not a scalar`);
}

function strings(value: Yaml | undefined): string[] {
  if (typeof value === 'string') return [value];
  return list(value).map((v) => text(v, 'list item'));
}

/** Compose `environment`, as a mapping or as a `KEY=value` list. */
function environmentOf(service: YamlMap): Record<string, string> {
  const env = service.environment;
  if (Array.isArray(env)) {
    return Object.fromEntries(env.map((line) => text(line, 'environment line')).map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]));
  }
  return Object.fromEntries(Object.entries(isMap(env) ? env : {}).map(([k, v]) => [k, v === null ? '' : text(v, k)]));
}

/** Compose short-syntax bind mounts `./host:/container[:ro]`. */
function bindMounts(service: YamlMap): { host: string; target: string }[] {
  return strings(service.volumes)
    .filter((v) => v.startsWith('./') || v.startsWith('/'))
    .map((v) => {
      const [host = '', target = ''] = v.split(':');
      return { host, target };
    });
}

/** Compose short-syntax `ports`: `"host:container"` → [host, container]. */
function publishedPorts(service: YamlMap): [number, number][] {
  return strings(service.ports).map((p) => {
    const parts = p.split(':').map(Number);
    return [parts.at(-2) ?? Number.NaN, parts.at(-1) ?? Number.NaN];
  });
}

/** Compose durations: `1m30s`, `30s`, `500ms`. @returns milliseconds */
function composeDurationMs(duration: string): number {
  const units: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 0.001 };
  let total = 0;
  const rest = duration.replace(/(\d+(?:\.\d+)?)(h|ms|m|s|us)/g, (_, n: string, unit: string) => {
    total += Number(n) * (units[unit] ?? Number.NaN);
    return '';
  });
  if (rest !== '' || duration === '') throw new Error(`not a compose duration: ${duration}`);
  return total;
}

/** HAProxy time values: a number with an optional unit (default milliseconds). */
function haproxyTimeMs(time: string): number {
  const match = /^(\d+)(us|ms|s|m|h|d)?$/.exec(time);
  if (!match) throw new Error(`not an HAProxy time: ${time}`);
  const units: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  return Number(match[1]) * (units[match[2] ?? 'ms'] ?? Number.NaN);
}

/** haproxy.cfg as sections (`global`, `defaults`, `frontend broker`, ...) of directive lines, comments dropped. */
function haproxySections(text: string): Map<string, string[][]> {
  const sections = new Map<string, string[][]>();
  let current: string[][] | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*$/, '').trimEnd();
    if (line.trim() === '') continue;
    const words = line.trim().split(/\s+/);
    if (!/^\s/.test(line)) {
      current = [];
      sections.set(words.join(' '), current);
    } else {
      if (!current) throw new Error(`directive outside a section: ${line}`);
      current.push(words);
    }
  }
  return sections;
}

const compose = readYaml('docker-compose.yml');
const services = map(compose.services, 'services');
const service = (name: string): YamlMap => map(services[name], `service ${name}`);
/** The configuration a broker service's node would run with (throws like the node would refuse to start). */
const brokerConfig = (name: string): BrokerConfig => loadConfig(environmentOf(service(name)));
const haproxy = haproxySections(readFileSync(path.join(projectRoot, 'config', 'haproxy.cfg'), 'utf8'));
const section = (name: string): string[][] => {
  const found = haproxy.get(name);
  if (!found) throw new Error(`haproxy.cfg has no section "${name}"`);
  return found;
};
const directives = (lines: string[][], keyword: string): string[][] => lines.filter((l) => l[0] === keyword).map((l) => l.slice(1));

describe('docker-compose.yml', () => {
  it('has Redis, three broker nodes, the load balancer, Prometheus and Grafana', () => {
    expect(Object.keys(services).sort()).toEqual(['broker-1', 'broker-2', 'broker-3', 'grafana', 'lb', 'prometheus', 'redis']);
    expect(text(service('lb').image, 'lb image')).toMatch(/^haproxy:/);
    expect(text(service('prometheus').image, 'prometheus image')).toMatch(/^prom\/prometheus:/);
    expect(text(service('grafana').image, 'grafana image')).toMatch(/^grafana\/grafana:/);
  });

  it('runs Redis with the shipped config: AOF on, appendfsync everysec, a maxmemory, noeviction', () => {
    const redis = service('redis');
    const conf = bindMounts(redis).find((m) => m.host === './config/redis.conf');
    expect(conf).toBeDefined();
    expect(strings(redis.command)).toContain(conf?.target);
    const settings = new Map(
      readFileSync(path.join(projectRoot, 'config', 'redis.conf'), 'utf8')
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith('#'))
        .map((l) => [l.split(/\s+/)[0] ?? '', l.split(/\s+/).slice(1).join(' ')]),
    );
    expect(settings.get('appendonly')).toBe('yes');
    expect(settings.get('appendfsync')).toBe('everysec');
    expect(settings.get('maxmemory-policy')).toBe('noeviction');
    // Never unlimited (docs/operations.md "Memory and retention"): a size Redis parses, above zero.
    expect(settings.get('maxmemory')).toMatch(/^[1-9]\d*(b|kb|mb|gb)?$/i);
  });

  it.each(BROKERS)('%s sets only real config keys, with values the schema accepts', (name) => {
    const env = environmentOf(service(name));
    const known = new Set(leafKeyPaths().map(envNameOf));
    const brokerVars = Object.keys(env).filter((k) => k.startsWith('BROKER_'));
    expect(brokerVars.length).toBeGreaterThan(0);
    expect(brokerVars.filter((k) => !known.has(k))).toEqual([]);
    expect(() => loadConfig(env)).not.toThrow();
  });

  it.each(BROKERS)('%s uses the compose Redis, is health-checked on /health and gets its shutdown grace', (name) => {
    const broker = service(name);
    const config = brokerConfig(name);
    // The compose Redis on its default port (config/redis.conf sets no other).
    const redisUrl = new URL(config.redis.url);
    expect(redisUrl.hostname).toBe('redis');
    expect(Number(redisUrl.port || 6379)).toBe(6379);
    expect(readFileSync(path.join(projectRoot, 'config', 'redis.conf'), 'utf8')).not.toMatch(/^\s*port\s/m);
    expect(config.redis.clusterNodes).toEqual([]);
    expect(map(map(broker.depends_on, 'depends_on').redis, 'depends_on.redis').condition).toBe('service_healthy');
    // Reachable from the other containers.
    expect(config.host).toBe('0.0.0.0');
    // Health check: GET /health on the node's own port.
    const check = strings(map(broker.healthcheck, 'healthcheck').test).join(' ');
    expect(check).toContain(`:${config.port}/health`);
    // Docker waits longer than the node's drain before SIGKILL.
    expect(text(broker.stop_signal ?? 'SIGTERM', 'stop_signal')).toBe('SIGTERM');
    expect(composeDurationMs(text(broker.stop_grace_period ?? '10s', 'stop_grace_period'))).toBeGreaterThanOrEqual(config.http.shutdownGraceMs);
    // Built from this repository (Dockerfile running dist/src/main.js), or a Node 20 image.
    if (broker.build !== undefined) {
      const context = typeof broker.build === 'string' ? broker.build : text(map(broker.build, 'build').context ?? '.', 'build context');
      const dockerfile = readFileSync(path.join(projectRoot, context, 'Dockerfile'), 'utf8');
      expect(dockerfile).toMatch(/^FROM node:20/m);
      expect(dockerfile).toMatch(/^CMD .*dist\/src\/main\.js/m);
    } else {
      expect(text(broker.image, 'image')).toMatch(/^node:20/);
    }
  });

  it('publishes port 8080 on the load balancer only; no host port twice', () => {
    expect(publishedPorts(service('lb'))).toEqual([[LB_PORT, LB_PORT]]);
    for (const name of BROKERS) expect(service(name).ports).toBeUndefined();
    const hostPorts = Object.values(services).flatMap((s) => publishedPorts(map(s, 'service')).map(([host]) => host));
    expect(new Set(hostPorts).size).toBe(hostPorts.length);
  });

  it('mounts only files and directories that exist in the repository', () => {
    const mounts = Object.entries(services).flatMap(([name, s]) => bindMounts(map(s, name)).map((m) => ({ service: name, ...m })));
    expect(mounts.length).toBeGreaterThanOrEqual(5);
    for (const m of mounts) {
      expect(m.host.startsWith('./'), `${m.service} mounts ${m.host} from outside the repository`).toBe(true);
      expect(existsSync(path.join(projectRoot, m.host)), `${m.service} mounts ${m.host}, which does not exist`).toBe(true);
    }
  });
});

describe('config/haproxy.cfg', () => {
  const lb = service('lb');
  const backend = section('backend brokers');

  it('is the config the lb service runs, listening on the published port', () => {
    expect(bindMounts(lb)).toContainEqual({ host: './config/haproxy.cfg', target: '/usr/local/etc/haproxy/haproxy.cfg' });
    const binds = directives(section('frontend broker'), 'bind').map(([address = '']) => Number(address.slice(address.lastIndexOf(':') + 1)));
    expect(binds).toEqual([LB_PORT]);
    expect(directives(section('frontend broker'), 'default_backend')).toEqual([['brokers']]);
  });

  it('balances round robin over exactly the three broker services, on each one\'s BROKER_PORT', () => {
    expect(directives(backend, 'balance')).toEqual([['roundrobin']]);
    const servers = directives(backend, 'server').map(([id = '', address = '']) => ({ id, host: address.split(':')[0], port: Number(address.split(':')[1]) }));
    expect(servers.map((s) => s.host)).toEqual([...BROKERS]);
    for (const s of servers) expect(s.port).toBe(brokerConfig(s.host ?? '').port);
  });

  it('health-checks every server with GET /health, expecting 200', () => {
    expect(directives(backend, 'option')).toContainEqual(['httpchk']);
    const send = directives(backend, 'http-check').find((d) => d[0] === 'send') ?? [];
    expect(send.slice(1, 5)).toEqual(['meth', 'GET', 'uri', '/health']);
    expect(directives(backend, 'http-check')).toContainEqual(['expect', 'status', '200']);
    const defaultServer = directives(backend, 'default-server').flat();
    for (const server of directives(backend, 'server')) expect([...defaultServer, ...server]).toContain('check');
  });

  it('keeps streams open longer than the broker\'s maximum stream_timeout', () => {
    const timeouts = new Map(directives(section('defaults'), 'timeout').map(([name = '', value = '']) => [name, haproxyTimeMs(value)]));
    for (const name of ['client', 'server', 'tunnel']) {
      expect(timeouts.get(name), `timeout ${name}`).toBeGreaterThan(MAX_STREAM_TIMEOUT_SECONDS * 1000);
    }
    // Draining is faster than HAProxy gives up on a server answer.
    for (const name of BROKERS) expect(timeouts.get('server')).toBeGreaterThan(brokerConfig(name).http.shutdownGraceMs);
  });

  it('gets the file descriptors its maxconn needs (two per proxied connection)', () => {
    const maxconn = Number(directives(section('global'), 'maxconn')[0]?.[0]);
    expect(maxconn).toBeGreaterThan(0);
    const nofile = map(map(lb.ulimits, 'ulimits').nofile, 'ulimits.nofile');
    expect(Number(text(nofile.soft, 'nofile soft'))).toBeGreaterThan(2 * maxconn);
  });

  it('passes streams through unbuffered on keep-alive connections', () => {
    const all = [...haproxy.values()].flat();
    const options = all.filter((l) => l[0] === 'option').map((l) => l.slice(1).join(' '));
    expect(options).not.toContain('http-server-close');
    expect(options).not.toContain('httpclose');
    expect(options).not.toContain('http-buffer-request');
    expect(options).toContain('http-keep-alive');
    expect(all.filter((l) => l[0] === 'compression' || (l[0] === 'filter' && (l[1] === 'compression' || l[1] === 'cache')))).toEqual([]);
  });
});

describe('Prometheus and Grafana', () => {
  it('Prometheus runs config/prometheus.yml, which scrapes every broker on its BROKER_PORT', () => {
    const prometheus = service('prometheus');
    const mount = bindMounts(prometheus).find((m) => m.host === './config/prometheus.yml');
    expect(mount).toBeDefined();
    expect(strings(prometheus.command)).toContain(`--config.file=${mount?.target ?? ''}`);
    const scrape = list(readYaml('config/prometheus.yml').scrape_configs).map((job) => map(job, 'scrape config'));
    const targets = scrape.flatMap((job) => list(job.static_configs).flatMap((s) => strings(map(s, 'static config').targets)));
    for (const name of BROKERS) expect(targets).toContain(`${name}:${brokerConfig(name).port}`);
    // Scraped on the path the broker serves.
    const brokerJobs = scrape.filter((job) => list(job.static_configs).some((s) => strings(map(s, 'static config').targets).some((t) => t.startsWith('broker-'))));
    for (const job of brokerJobs) expect(text(job.metrics_path ?? '/metrics', 'metrics_path')).toBe('/metrics');
  });

  it('Grafana gets its provisioning and the broker dashboard, pointing at the compose Prometheus', () => {
    const mounts = bindMounts(service('grafana'));
    const provisioning = mounts.find((m) => m.target === '/etc/grafana/provisioning');
    expect(provisioning).toBeDefined();
    const provisioningDir = provisioning?.host ?? '';
    // Dashboard providers load from a directory mounted from the repository, holding the dashboard JSON.
    const providerFiles = readdirSync(path.join(projectRoot, provisioningDir, 'dashboards')).filter((f) => /\.ya?ml$/.test(f));
    expect(providerFiles.length).toBeGreaterThan(0);
    const providerPaths = providerFiles.flatMap((f) =>
      list(readYaml(path.join(provisioningDir, 'dashboards', f)).providers).map((p) => text(map(map(p, 'provider').options, 'provider options').path, 'provider path')),
    );
    expect(providerPaths.length).toBeGreaterThan(0);
    for (const providerPath of providerPaths) {
      const mounted = mounts.find((m) => m.target === providerPath);
      expect(mounted, `dashboard path ${providerPath} is not mounted`).toBeDefined();
      const dir = path.join(projectRoot, mounted?.host ?? '');
      expect(statSync(dir).isDirectory()).toBe(true);
      const dashboards = readdirSync(dir).filter((f) => f.endsWith('.json'));
      expect(dashboards.length).toBeGreaterThan(0);
      for (const file of dashboards) expect(() => JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as unknown).not.toThrow();
    }
    // The data source is the compose Prometheus on the port its image listens on.
    const sourceFiles = readdirSync(path.join(projectRoot, provisioningDir, 'datasources')).filter((f) => /\.ya?ml$/.test(f));
    const urls = sourceFiles.flatMap((f) => list(readYaml(path.join(provisioningDir, 'datasources', f)).datasources).map((d) => text(map(d, 'datasource').url, 'datasource url')));
    expect(urls).toContain('http://prometheus:9090');
    expect(publishedPorts(service('prometheus')).map(([, container]) => container)).toContain(9090);
  });
});
