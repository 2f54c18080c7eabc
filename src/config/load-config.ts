import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { Ajv } from 'ajv';
import { configSchema, type BrokerConfig } from './config-schema.js';

/** Raised when the configuration cannot be used; the message names the offending key. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

/** Repository root (two levels above this file in both `src/config` and `dist/src/config`). */
export const projectRoot = (() => {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const up = path.resolve(here, '..', '..');
  return path.basename(up) === 'dist' ? path.dirname(up) : up;
})();

/** The env variable name of a config path: `['redis','url']` → `BROKER_REDIS_URL`. */
export function envNameOf(keyPath: readonly string[]): string {
  return 'BROKER_' + keyPath.map((k) => k.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()).join('_');
}

/** Every leaf key of the schema as a path, in schema order. */
export function leafKeyPaths(schema: unknown = configSchema, prefix: string[] = []): string[][] {
  const props = (schema as { properties?: Record<string, unknown> }).properties;
  if (!props) return [prefix];
  return Object.entries(props).flatMap(([key, sub]) => leafKeyPaths(sub, [...prefix, key]));
}

function isObject(v: Json | undefined): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function mergeInto(target: JsonObject, source: JsonObject, where: string): void {
  for (const [key, value] of Object.entries(source)) {
    if (key === '__proto__' || key === 'constructor' || key === 'prototype') throw new ConfigError(`config key "${where}${key}" is not allowed`);
    const current = target[key];
    if (isObject(current) && isObject(value)) mergeInto(current, value, `${where}${key}.`);
    else target[key] = value;
  }
}

function readJsonFile(file: string): JsonObject {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${file}: ${(err as Error).message}`);
  }
  try {
    const parsed = JSON.parse(text) as Json;
    if (!isObject(parsed)) throw new Error('not a JSON object');
    return parsed;
  } catch (err) {
    throw new ConfigError(`config file ${file} is not a JSON object: ${(err as Error).message}`);
  }
}

/**
 * Settings renamed, old path → new path. The old name is still read from a config file and from its
 * environment variable (the new name wins when both are given), with a warning naming the new one.
 */
export const RENAMED_KEYS: readonly (readonly [old: readonly string[], current: readonly string[]])[] = [
  [['http', 'publishMaxBytesInFlight'], ['http', 'publishMaxInFlightBytes']],
];

/** Moves the renamed keys of a config file's object to their new names (unless given there too). */
function renameFileKeys(file: JsonObject, source: string, warn: (message: string) => void): void {
  for (const [old, current] of RENAMED_KEYS) {
    const parent = old.slice(0, -1).reduce<Json | undefined>((node, key) => (isObject(node) ? node[key] : undefined), file);
    const oldKey = old[old.length - 1] as string;
    const newKey = current[current.length - 1] as string;
    if (!isObject(parent) || !Object.hasOwn(parent, oldKey)) continue;
    warn(`config key "${old.join('.')}" in ${source} is renamed "${current.join('.')}"; the old name is read for now`);
    const value = parent[oldKey] as Json;
    delete parent[oldKey];
    if (!Object.hasOwn(parent, newKey)) parent[newKey] = value;
  }
}

/** Reads the renamed keys' old environment variables as their new ones (unless those are set too). */
function renameEnvKeys(env: NodeJS.ProcessEnv, warn: (message: string) => void): NodeJS.ProcessEnv {
  const out = { ...env };
  for (const [old, current] of RENAMED_KEYS) {
    const value = env[envNameOf(old)];
    if (value === undefined) continue;
    warn(`env ${envNameOf(old)} is renamed ${envNameOf(current)} (config key "${current.join('.')}"); the old name is read for now`);
    out[envNameOf(current)] ??= value;
  }
  return out;
}

const ajv = new Ajv({ allErrors: true, coerceTypes: true, useDefaults: false });
const validate = ajv.compile<BrokerConfig>(configSchema);

/**
 * Loads the configuration: `config/default.json`, then the JSON file named by `BROKER_CONFIG_FILE`
 * (if set), then `BROKER_*` environment variables (strings, coerced to the key's type).
 *
 * @param env the environment to read (default `process.env`)
 * @param warn called with each warning about the configuration (a renamed key given under its old
 *   name, {@link RENAMED_KEYS}); default: a process warning
 * @returns a deep-frozen {@link BrokerConfig}
 * @throws ConfigError naming the key, when a file is unreadable or a value breaks the schema
 */
export function loadConfig(given: NodeJS.ProcessEnv = process.env, warn: (message: string) => void = (message) => process.emitWarning(message)): BrokerConfig {
  const merged = readJsonFile(path.join(projectRoot, 'config', 'default.json'));
  const extraFile = given.BROKER_CONFIG_FILE;
  if (extraFile) {
    const file = readJsonFile(path.resolve(extraFile));
    renameFileKeys(file, extraFile, warn);
    mergeInto(merged, file, '');
  }
  const env = renameEnvKeys(given, warn);
  for (const keyPath of leafKeyPaths()) {
    const value = env[envNameOf(keyPath)];
    if (value === undefined) continue;
    let node = merged;
    for (const segment of keyPath.slice(0, -1)) {
      const next = node[segment];
      if (!isObject(next)) node[segment] = {};
      node = node[segment] as JsonObject;
    }
    node[keyPath[keyPath.length - 1] as string] = isJsonKey(keyPath) ? parseJsonEnv(keyPath, value) : value;
  }
  if (!validate(merged)) {
    const messages = (validate.errors ?? []).map((e) => {
      const key = e.instancePath.slice(1).replaceAll('/', '.');
      const extra = e.keyword === 'additionalProperties' ? ` "${String(e.params.additionalProperty)}"` : '';
      const envHint = key ? ` (env ${envNameOf(key.split('.'))})` : '';
      return `config key "${key || '(root)'}"${envHint} ${e.message ?? 'is invalid'}${extra}`;
    });
    throw new ConfigError(`invalid configuration: ${messages.join('; ')}`);
  }
  const config = merged as unknown as BrokerConfig;
  checkAuth(config);
  checkRedis(config);
  checkHttp(config);
  return deepFreeze(config);
}

/** One storage: a standalone Redis (`redis.url`, or the embedded one) or a cluster (`redis.clusterNodes`), never both. */
function checkRedis(config: BrokerConfig): void {
  if (config.redis.url && config.redis.clusterNodes.length > 0) {
    throw new ConfigError('invalid configuration: config key "redis.clusterNodes" (cluster mode) and "redis.url" cannot both be set');
  }
}

/** A control-plane body must be able to carry an event type whose schema is at the schema limit. */
function checkHttp(config: BrokerConfig): void {
  if (config.http.maxControlBodyBytes < config.eventTypes.maxSchemaBytes) {
    throw new ConfigError(
      `invalid configuration: config key "http.maxControlBodyBytes" (${config.http.maxControlBodyBytes}) must be at least "eventTypes.maxSchemaBytes" (${config.eventTypes.maxSchemaBytes}): an event type body carries its schema`,
    );
  }
}

/** True for keys whose value is a JSON array or object (their env variables hold JSON text). */
function isJsonKey(keyPath: readonly string[]): boolean {
  let node: unknown = configSchema;
  for (const segment of keyPath) node = (node as { properties: Record<string, unknown> }).properties[segment];
  const type = (node as { type?: string }).type;
  return type === 'array' || type === 'object';
}

function parseJsonEnv(keyPath: readonly string[], value: string): Json {
  try {
    return JSON.parse(value) as Json;
  } catch (err) {
    throw new ConfigError(`config key "${keyPath.join('.')}" (env ${envNameOf(keyPath)}) is not valid JSON: ${(err as Error).message}`);
  }
}

/** Rules across keys: what each auth mode needs, initial admins of known data types, replicas need an external Redis (standalone or cluster). */
function checkAuth(config: BrokerConfig): void {
  const { auth } = config;
  const problems: string[] = [];
  if (auth.mode !== 'off' && auth.initialAdmins.length === 0) problems.push('config key "auth.initialAdmins" must name at least one administrator when auth.mode is not off');
  if (auth.mode === 'jwt' && !auth.jwt.jwksUrl && !auth.jwt.publicKey) problems.push('config key "auth.jwt.jwksUrl" or "auth.jwt.publicKey" must be set when auth.mode is jwt');
  if (auth.mode === 'tokeninfo' && !auth.tokeninfo.url) problems.push('config key "auth.tokeninfo.url" must be set when auth.mode is tokeninfo');
  for (const attribute of auth.initialAdmins) {
    const wildcard = attribute.data_type === '*' && attribute.value === '*';
    if (!wildcard && !Object.hasOwn(auth.attributeClaims, attribute.data_type)) {
      problems.push(`config key "auth.initialAdmins" uses the data type "${attribute.data_type}", which is not a key of auth.attributeClaims`);
    }
  }
  if (config.publish.minReplicas > 0 && !config.redis.url && config.redis.clusterNodes.length === 0) {
    problems.push('config key "publish.minReplicas" needs "redis.url" or "redis.clusterNodes": the embedded Redis has no replicas');
  }
  if (problems.length > 0) throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
