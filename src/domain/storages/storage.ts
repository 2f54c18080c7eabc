import { Type, type Static } from '@sinclair/typebox';
import { brokerError, BrokerError, invalidInput } from '../../errors/catalog.js';
import { checkInput, fieldOf, type InputProblem } from '../json/input-check.js';
import { Closed, type DeepReadonly } from '../json/wire-parts.js';

/**
 * Where a storage keeps its keys: a Redis deployment (`url`, or `cluster_nodes` seeds) or, with
 * neither, the node's own deployment; `key_prefix` is the namespace inside it (docs/operations.md
 * "Storages and timelines").
 */
export const RedisConfigurationSchema = Type.Object(
  {
    /** `redis://` or `rediss://` URL of a standalone deployment (credentials are never shown back). */
    url: Type.Optional(Type.String({ description: 'redis:// or rediss:// URL (a password is shown as ***)' })),
    /** `host:port` seeds of a Redis Cluster. */
    cluster_nodes: Type.Optional(Type.Array(Type.String({ description: 'host:port' }))),
    /** Prefix of every key of the storage, 0 to 64 characters of `[A-Za-z0-9:._-]`. */
    key_prefix: Type.String({ pattern: '^[A-Za-z0-9:._-]{0,64}$' }),
  },
  Closed,
);
/** Where a storage keeps its keys, derived from {@link RedisConfigurationSchema}. */
export type RedisConfiguration = DeepReadonly<Static<typeof RedisConfigurationSchema>>;

/** A storage as served (`GET/POST /storages`): the stored record with whether it is the default one. */
export const StorageViewSchema = Type.Object(
  {
    /** 1 to 64 characters of `[A-Za-z0-9._-]`. */
    id: Type.String(),
    storage_type: Type.Literal('redis'),
    redis_configuration: RedisConfigurationSchema,
    default: Type.Boolean(),
  },
  Closed,
);
/** A storage as served, derived from {@link StorageViewSchema}. */
export type StorageView = DeepReadonly<Static<typeof StorageViewSchema>>;

/** A storage backend (docs/operations.md "Storages and timelines"): the served record without `default`. */
export type Storage = Omit<StorageView, 'default'>;

/** The id of the storage every node starts with (its own `redis.*` configuration). */
export const NODE_STORAGE_ID = 'default';

/** The texts of a storage's broken fields (answers have always read `<field>: <text>`). */
const ID_TEXT = '1 to 64 characters of letters, digits, ".", "_" and "-"';
const PREFIX_TEXT = '0 to 64 characters of letters, digits, ":", ".", "_" and "-"';
const URL_TEXT = 'a redis:// or rediss:// URL';
const SEEDS_TEXT = 'a non-empty array of "host:port"';
const CONFIGURATION_TEXT = 'must be an object with key_prefix and optionally url or cluster_nodes';

/** Every failure of a node is a broken rule (422) with one text: a storage record has always been answered so. */
const rule = (text: string) => ({ 'x-status': 422, 'x-messages': { required: text, type: text, pattern: text, const: text, minItems: text } });
/** A property the record does not have (storages refuse them, unlike most bodies). */
const Unknown = Type.Not(Type.Unknown(), { 'x-status': 422, 'x-messages': { not: 'unknown field' } });

/** `redis_configuration` of a storage sent to `POST /storages`. */
const RedisConfigurationInput = Type.Object(
  {
    url: Type.Optional(Type.String({ pattern: '^rediss?://[^\\s]+$', description: 'redis:// or rediss:// URL of a standalone deployment', ...rule(URL_TEXT) })),
    cluster_nodes: Type.Optional(Type.Array(Type.String({ pattern: '^[A-Za-z0-9.-]{1,253}:\\d{1,5}$', ...rule(SEEDS_TEXT) }), { minItems: 1, description: '`host:port` seeds of a Redis Cluster', ...rule(SEEDS_TEXT) })),
    key_prefix: Type.String({ pattern: '^[A-Za-z0-9:._-]{0,64}$', description: 'prefix of every key of the storage', ...rule(PREFIX_TEXT) }),
  },
  {
    additionalProperties: Unknown,
    not: { properties: { url: {}, cluster_nodes: {} }, required: ['url', 'cluster_nodes'] },
    'x-status': 422,
    'x-messages': { required: CONFIGURATION_TEXT, type: CONFIGURATION_TEXT, not: 'give url or cluster_nodes, not both' },
    description: 'a deployment (`url`, `cluster_nodes`, or neither: the node\'s own) and the prefix of the keys in it',
  },
);

/**
 * The body of `POST /storages` (docs/operations.md "Storages and timelines"): `id`, `storage_type`
 * `redis` and `redis_configuration`; `default` (as answered) is accepted and ignored, any other field
 * is refused. Every broken field is a 422; a body that is not an object is a 400.
 */
export const StorageInputSchema = Type.Object(
  {
    id: Type.String({ pattern: '^[A-Za-z0-9._-]{1,64}$', description: ID_TEXT, ...rule(ID_TEXT) }),
    storage_type: Type.Literal('redis', rule('must be "redis"')),
    redis_configuration: RedisConfigurationInput,
    default: Type.Optional(Type.Unknown({ description: 'ignored (answers show whether a storage is the default one)' })),
  },
  { additionalProperties: Unknown, 'x-messages': { type: 'must be a Storage object' } },
);

/**
 * A storage problem as storage answers have always worded it, `<field>: <text>` (an item of a list
 * is named by its list), the JSON pointer kept. Problems of the body itself keep their line.
 */
function storageProblem(problem: InputProblem): InputProblem {
  const field = fieldOf(problem.pointer);
  if (field === '') return problem;
  const text = problem.detail.slice(`Field "${field}" `.length);
  const list = fieldOf(problem.pointer.replace(/\/\d+(?=\/|$)/g, ''));
  return { ...problem, detail: `${list}: ${text}` };
}

/**
 * Parses a `POST /storages` body against {@link StorageInputSchema}.
 * @returns the storage as it will be stored
 * @throws BrokerError 400 when the body is not an object; 422 naming every broken field (id, type,
 *   configuration: exactly one of `url`, `cluster_nodes` or neither, a well-formed `key_prefix`, no unknown field)
 */
export function parseStorage(body: unknown): Storage {
  const checked = checkInput(StorageInputSchema, body);
  if (!checked.ok) {
    const problems = checked.problems.map(storageProblem);
    const details = [...new Set(problems.map((p) => p.detail))];
    throw invalidInput(checked.status, details, problems);
  }
  const { id, redis_configuration: { url, cluster_nodes: seeds, key_prefix: prefix } } = checked.value;
  const redis: RedisConfiguration = { key_prefix: prefix, ...(url !== undefined ? { url } : {}), ...(seeds !== undefined ? { cluster_nodes: seeds } : {}) };
  return { id, storage_type: 'redis', redis_configuration: redis };
}

/** The storage as answered: the URL's password replaced by `***`. */
export function storageView(storage: Storage, defaultId: string): StorageView {
  const { url } = storage.redis_configuration;
  const shown = url === undefined ? storage.redis_configuration : { ...storage.redis_configuration, url: url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@') };
  return { ...storage, redis_configuration: shown, default: storage.id === defaultId };
}

/** @throws BrokerError 404 */
export function storageNotFound(id: string): BrokerError {
  return brokerError('STORAGE_NOT_FOUND', { id });
}
