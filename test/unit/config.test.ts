import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, envNameOf, leafKeyPaths, loadConfig, projectRoot } from '../../src/config/load-config.js';
import { DEFAULT_MAIN_THREAD_VALIDATOR_BOUNDS, DEFAULT_WORKER_VALIDATOR_BOUNDS } from '../../workers/validator-cache.js';
import { committedText, configurationDoc, defaultOf, generatedDocs, unitOf } from '../../scripts/generate-docs.js';

describe('configuration', () => {
  const defaults = JSON.parse(readFileSync(path.join(projectRoot, 'config', 'default.json'), 'utf8')) as Record<string, unknown>;

  it('config/default.json holds exactly the keys of the schema', () => {
    // A key whose value is a free-form JSON object (auth.attributeClaims) is one leaf.
    const freeForm = new Set(['auth.attributeClaims']);
    const leaves = (obj: Record<string, unknown>, prefix: string[] = []): string[][] =>
      Object.entries(obj).flatMap(([k, v]) =>
        typeof v === 'object' && v !== null && !Array.isArray(v) && !freeForm.has([...prefix, k].join('.')) ? leaves(v as Record<string, unknown>, [...prefix, k]) : [[...prefix, k]],
      );
    expect(leaves(defaults).map((p) => p.join('.')).sort()).toEqual(leafKeyPaths().map((p) => p.join('.')).sort());
  });

  it('the validator cache bounds used where no config is at hand equal config/default.json', () => {
    const caches = defaults.caches as Record<string, number>;
    expect(DEFAULT_WORKER_VALIDATOR_BOUNDS).toEqual({ maxEntries: caches.workerValidatorEntries, maxBytes: caches.workerValidatorBytes });
    expect(DEFAULT_MAIN_THREAD_VALIDATOR_BOUNDS).toEqual({ maxEntries: caches.mainThreadValidatorEntries, maxBytes: caches.mainThreadValidatorBytes });
  });

  it('loads the defaults and lets BROKER_* variables override, coerced to the key type', () => {
    const config = loadConfig({ BROKER_PORT: '9999', BROKER_REDIS_URL: 'redis://h:1', BROKER_PUBLISH_MAX_EVENT_BYTES: '1234' });
    expect(config.port).toBe(9999);
    expect(config.redis.url).toBe('redis://h:1');
    expect(config.publish.maxEventBytes).toBe(1234);
    expect(config.eventTypes.defaultRetentionTimeMs).toBe(172_800_000);
    expect(Object.isFrozen(config.redis)).toBe(true);
  });

  it('reads JSON values of object and array keys from BROKER_* variables', () => {
    const config = loadConfig({
      BROKER_AUTH_MODE: 'jwt',
      BROKER_AUTH_JWT_PUBLIC_KEY: 'pem',
      BROKER_AUTH_ATTRIBUTE_CLAIMS: '{"user":"sub","team":"groups"}',
      BROKER_AUTH_INITIAL_ADMINS: '[{"data_type":"team","value":"ops"}]',
    });
    expect(config.auth.attributeClaims).toEqual({ user: 'sub', team: 'groups' });
    expect(config.auth.initialAdmins).toEqual([{ data_type: 'team', value: 'ops' }]);
  });

  it('accepts publish.minReplicas with a Redis Cluster as with redis.url', () => {
    expect(loadConfig({ BROKER_PUBLISH_MIN_REPLICAS: '1', BROKER_REDIS_CLUSTER_NODES: '["127.0.0.1:7000"]' }).publish.minReplicas).toBe(1);
    expect(loadConfig({ BROKER_PUBLISH_MIN_REPLICAS: '1', BROKER_REDIS_URL: 'redis://127.0.0.1:6380' }).publish.minReplicas).toBe(1);
  });

  it('still reads a renamed key under its old name, from a file and from the environment, with a warning', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'broker-config-'));
    try {
      const file = path.join(dir, 'config.json');
      writeFileSync(file, JSON.stringify({ http: { publishMaxBytesInFlight: 2048 } }));
      const warnings: string[] = [];
      expect(loadConfig({ BROKER_CONFIG_FILE: file }, (m) => warnings.push(m)).http.publishMaxInFlightBytes).toBe(2048);
      expect(warnings).toEqual([`config key "http.publishMaxBytesInFlight" in ${file} is renamed "http.publishMaxInFlightBytes"; the old name is read for now`]);
      warnings.length = 0;
      expect(loadConfig({ BROKER_HTTP_PUBLISH_MAX_BYTES_IN_FLIGHT: '4096' }, (m) => warnings.push(m)).http.publishMaxInFlightBytes).toBe(4096);
      expect(warnings).toEqual(['env BROKER_HTTP_PUBLISH_MAX_BYTES_IN_FLIGHT is renamed BROKER_HTTP_PUBLISH_MAX_IN_FLIGHT_BYTES (config key "http.publishMaxInFlightBytes"); the old name is read for now']);
      // The new name wins when both are given.
      expect(loadConfig({ BROKER_HTTP_PUBLISH_MAX_BYTES_IN_FLIGHT: '4096', BROKER_HTTP_PUBLISH_MAX_IN_FLIGHT_BYTES: '8192' }, () => undefined).http.publishMaxInFlightBytes).toBe(8192);
      const noWarnings: string[] = [];
      expect(loadConfig({}, (m) => noWarnings.push(m)).http.publishMaxInFlightBytes).toBe(16_777_216);
      expect(noWarnings).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a config file that is not JSON, or JSON but not an object, naming the file', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'broker-config-'));
    try {
      const notJson = path.join(dir, 'not-json.json');
      writeFileSync(notJson, '{ "port": 8080');
      expect(() => loadConfig({ BROKER_CONFIG_FILE: notJson })).toThrow(ConfigError);
      expect(() => loadConfig({ BROKER_CONFIG_FILE: notJson })).toThrow(new RegExp(`^config file ${notJson} is not a JSON object: .*JSON`));
      const array = path.join(dir, 'array.json');
      writeFileSync(array, '[{ "port": 8080 }]');
      expect(() => loadConfig({ BROKER_CONFIG_FILE: array })).toThrow(new ConfigError(`config file ${array} is not a JSON object: not a JSON object`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('derives env names from key paths', () => {
    expect(envNameOf(['redis', 'url'])).toBe('BROKER_REDIS_URL');
    expect(envNameOf(['port'])).toBe('BROKER_PORT');
    expect(envNameOf(['publish', 'maxEventBytes'])).toBe('BROKER_PUBLISH_MAX_EVENT_BYTES');
  });

  it.each([
    [{ BROKER_PORT: 'eighty' }, 'port'],
    [{ BROKER_PORT: '70000' }, 'port'],
    [{ BROKER_LOG_LEVEL: 'loud' }, 'logLevel'],
    [{ BROKER_REDIS_URL: 'http://nope' }, 'redis.url'],
    [{ BROKER_EMBEDDED_REDIS_APPENDFSYNC: 'sometimes' }, 'embeddedRedis.appendfsync'],
    [{ BROKER_CONFIG_FILE: '/nonexistent/file.json' }, '/nonexistent/file.json'],
    [{ BROKER_AUTH_MODE: 'jwt' }, 'auth.initialAdmins'],
    [{ BROKER_AUTH_MODE: 'jwt', BROKER_AUTH_INITIAL_ADMINS: '[{"data_type":"user","value":"root"}]' }, 'auth.jwt.jwksUrl'],
    [{ BROKER_AUTH_MODE: 'tokeninfo', BROKER_AUTH_INITIAL_ADMINS: '[{"data_type":"user","value":"root"}]' }, 'auth.tokeninfo.url'],
    [{ BROKER_AUTH_ATTRIBUTE_CLAIMS: '{"user":' }, 'auth.attributeClaims'],
    [{ BROKER_AUTH_INITIAL_ADMINS: '[{"data_type":"robot","value":"r2"}]' }, 'auth.initialAdmins'],
    [{ BROKER_PUBLISH_MIN_REPLICAS: '1' }, 'publish.minReplicas'],
  ])('stops on invalid configuration %j naming %s', (env, key) => {
    expect(() => loadConfig(env)).toThrow(key);
  });

  it('documents every key in docs/configuration.md with its type, default, unit, environment variable and description', () => {
    const doc = configurationDoc();
    const rows = new Map([...doc.matchAll(/^\| `([A-Za-z.]+)` \| (.+?) \| (.+?) \| (\w*) \| `(BROKER_[A-Z0-9_]+)` \| (.+) \|$/gm)].map((m) => [m[1], m]));
    for (const keyPath of leafKeyPaths()) {
      const key = keyPath.join('.');
      const row = rows.get(key);
      expect(row, `docs/configuration.md lacks ${key}`).toBeDefined();
      const value = keyPath.reduce<unknown>((at, k) => (at as Record<string, unknown>)[k], defaults);
      expect(row?.[3], key).toMatch(new RegExp(`^\`${JSON.stringify(value).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\``));
      expect(row?.[4], key).toBe(unitOf(keyPath[keyPath.length - 1] ?? ''));
      expect(row?.[5], key).toBe(envNameOf(keyPath));
      expect(row?.[6]?.length ?? 0, `${key} has no description`).toBeGreaterThan(10);
    }
    expect(rows.size).toBe(leafKeyPaths().length);
  });

  it('shows sizes in the unit they were chosen in', () => {
    expect(defaultOf(64_000_000, 'bytes')).toBe('`64000000` (64 MB)');
    expect(defaultOf(1_500_000, 'bytes')).toBe('`1500000` (1.5 MB)');
    expect(defaultOf(16_777_216, 'bytes')).toBe('`16777216` (16 MiB)');
    expect(defaultOf(4096, 'bytes')).toBe('`4096` (4 KiB)');
    expect(defaultOf(1000, 'bytes')).toBe('`1000`');
  });

  it('docs/configuration.md is what npm run docs generates from the schema and config/default.json', () => {
    const page = generatedDocs.find((d) => d.file === 'docs/configuration.md');
    expect(page).toBeDefined();
    if (page) expect(committedText(page), 'docs/configuration.md is stale: run npm run docs').toBe(page.render());
  });
});

describe('node flags', () => {
  it('npm start runs the broker with the flags the test and bench harness use, exec-ing node', async () => {
    const { BROKER_NODE_FLAGS } = await import('../../scripts/local-processes.js');
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.start).toBe(['exec node', ...BROKER_NODE_FLAGS, 'dist/src/main.js'].join(' '));
  });
});
