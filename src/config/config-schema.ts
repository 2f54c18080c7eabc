/**
 * The configuration schema: every key the broker reads, its type, bounds and meaning.
 * `config/default.json` holds the default of every key (a unit test keeps the two in step), and the
 * README's configuration table is checked against this schema.
 *
 * Key names carry their unit (`Ms`, `Bytes`). Environment variables override keys: the path in
 * SCREAMING_SNAKE_CASE behind `BROKER_`, e.g. `redis.url` ← `BROKER_REDIS_URL`, `port` ← `BROKER_PORT`.
 */
export interface BrokerConfig {
  readonly port: number;
  readonly host: string;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  readonly redis: {
    /** `redis://host:port/db`; empty = start the embedded `redis-server` (unless `clusterNodes` is set). */
    readonly url: string;
    /** Redis Cluster seed nodes `host:port`; non-empty = cluster mode (then `url` must be empty). */
    readonly clusterNodes: readonly string[];
    readonly keyPrefix: string;
    readonly commandTimeoutMs: number;
    readonly connectTimeoutMs: number;
  };
  readonly embeddedRedis: {
    readonly binary: string;
    readonly dataDir: string;
    readonly appendfsync: 'everysec' | 'always' | 'no';
    readonly startTimeoutMs: number;
  };
  readonly http: {
    /** Largest body of publishing and deleted-events requests, as sent (413 above). */
    readonly maxBodyBytes: number;
    readonly maxInflatedBodyBytes: number;
    /** Largest body of every other request, as sent and after gunzip (413 above; issue 13 §2.2). */
    readonly maxControlBodyBytes: number;
    /** Control-plane requests whose work grows with their size that run at once on this node (issue 13 §2.3). */
    readonly controlConcurrency: number;
    /** Such requests that may wait for a slot; one more is refused with 503 (OVERLOADED). */
    readonly controlQueueLength: number;
    /** Browser origins (`scheme://host[:port]`) that get CORS headers and preflight answers; empty = no CORS at all (issue 13 §4). */
    readonly corsAllowedOrigins: readonly string[];
    readonly shutdownGraceMs: number;
  };
  readonly publish: {
    readonly maxEventBytes: number;
    /** 0 = one per available core. */
    readonly workerThreads: number;
    readonly workerTaskTimeoutMs: number;
    /** Batches with bodies up to this size are processed on the main thread (0 = always in workers). */
    readonly inlineMaxBytes: number;
    /** Replicas that must confirm a batch (`WAIT`) before it is acknowledged (0 = none). */
    readonly minReplicas: number;
    /** How long a batch waits for those replicas before its items are failed (207). */
    readonly replicaTimeoutMs: number;
    /** How long a batch waits for a running timeline switch of its event type before it is refused (503; issue 6 §3.2). */
    readonly timelineSwitchWaitMs: number;
  };
  readonly eventTypes: {
    readonly defaultPartitionCount: number;
    readonly maxPartitionCount: number;
    readonly defaultRetentionTimeMs: number;
    readonly minRetentionTimeMs: number;
    readonly maxRetentionTimeMs: number;
    readonly maxSchemaBytes: number;
    readonly schemaCompileTimeoutMs: number;
    /** Schema cost budget (issue 13 §1; src/domain/schema-cost.ts): most subschema applications per value of an event. */
    readonly schemaMaxApplicationsPerValue: number;
    /** Most values one `enum` of a schema may list. */
    readonly schemaMaxEnumValues: number;
    /** Largest `maxItems` a `uniqueItems` array of non-scalar items must declare. */
    readonly schemaMaxUniqueItems: number;
  };
  readonly retention: {
    readonly checkIntervalMs: number;
  };
  /** Log compaction of event types with cleanup_policy compact / compact_and_delete (issue 6). */
  readonly compaction: {
    /** How often one node per event type runs a compaction round over its partitions. */
    readonly intervalMs: number;
    /** Events younger than this (received within it, whole seconds on Redis's clock) are never compacted. */
    readonly lagMs: number;
  };
  readonly subscriptions: {
    readonly maxPartitions: number;
    readonly leaseTtlMs: number;
  };
  readonly auth: AuthConfig;
  readonly consumption: {
    readonly maxStreamBufferBytes: number;
    readonly pollIntervalMs: number;
    readonly readEntries: number;
  };
  /** Bounds of the node's in-memory caches (issue 15 §1.2; lru-cache, least recently used dropped first). */
  readonly caches: {
    /** Event types kept by the event type cache. */
    readonly eventTypeEntries: number;
    /** How long a cached event type is used without reading it again (change notices drop it at once anyway). */
    readonly eventTypeTtlMs: number;
    /** Compiled validators kept per worker thread. */
    readonly workerValidatorEntries: number;
    /** Compiled validators kept on the main thread (small batches). */
    readonly mainThreadValidatorEntries: number;
    /** Verified tokens kept (auth modes `jwt` and `tokeninfo`). */
    readonly tokenEntries: number;
  };
}

/** Authentication and authorization (spec "Authentication"; DESIGN.md §7). */
export interface AuthConfig {
  /** Verified tokens kept (`caches.tokenEntries`; set by the loader, absent in tests = 10,000). */
  readonly tokenCacheEntries?: number;
  /** `off`: every request is the subject `unauthenticated`; `jwt`: verified bearer tokens; `tokeninfo`: remote introspection. */
  readonly mode: 'off' | 'jwt' | 'tokeninfo';
  /** The claim that names the subject (its id). */
  readonly subjectClaim: string;
  /** Authorization data type → the claim holding the subject's values of it (a string or an array of strings). */
  readonly attributeClaims: Readonly<Record<string, string>>;
  /** The administrators stored on first start when none are (all three lists); empty = `user`/`unauthenticated` (mode `off` only). */
  readonly initialAdmins: readonly { readonly data_type: string; readonly value: string }[];
  readonly jwt: {
    /** JWKS document URL; empty = use `publicKey`. */
    readonly jwksUrl: string;
    /** A PEM public key (SPKI) used when `jwksUrl` is empty. */
    readonly publicKey: string;
    /** Required `iss` (empty = not checked). */
    readonly issuer: string;
    /** Required `aud` (empty = not checked). */
    readonly audience: string;
    readonly algorithms: readonly string[];
    readonly clockToleranceSeconds: number;
  };
  readonly tokeninfo: {
    /** The local token-info URL (GET with the bearer token). */
    readonly url: string;
    /** The remote token-info URL, used while the feature `remote_tokeninfo` is on (empty = always `url`). */
    readonly remoteUrl: string;
    readonly cacheTtlMs: number;
    readonly timeoutMs: number;
  };
}

const positiveInt = (description: string, minimum = 1): Record<string, unknown> => ({ type: 'integer', minimum, description });

/** JSON Schema (draft-07 dialect of ajv's default build) of {@link BrokerConfig}; `description` feeds the README table. */
export const configSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['port', 'host', 'logLevel', 'redis', 'embeddedRedis', 'http', 'publish', 'eventTypes', 'retention', 'compaction', 'subscriptions', 'consumption', 'caches', 'auth'],
  properties: {
    port: { type: 'integer', minimum: 0, maximum: 65535, description: 'HTTP port of this broker node (0 = any free port)' },
    host: { type: 'string', minLength: 1, description: 'address the HTTP server binds to' },
    logLevel: { enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], description: 'pino log level' },
    redis: {
      type: 'object',
      additionalProperties: false,
      required: ['url', 'clusterNodes', 'keyPrefix', 'commandTimeoutMs', 'connectTimeoutMs'],
      properties: {
        url: { type: 'string', pattern: '^(|rediss?://.+|unix://.+)$', description: 'Redis to use; empty starts the embedded redis-server (unless `redis.clusterNodes` is set)' },
        clusterNodes: {
          type: 'array',
          items: { type: 'string', pattern: '^(\\[[0-9a-fA-F:.]+\\]|[^:\\s\\[\\]]+):[0-9]{1,5}$' },
          description: 'Redis Cluster seed nodes (JSON array of `host:port`); non-empty = cluster mode, and `redis.url` must be empty (README "Redis Cluster")',
        },
        keyPrefix: { type: 'string', pattern: '^[a-zA-Z0-9_:.-]*$', description: 'prefix of every key the broker writes' },
        commandTimeoutMs: positiveInt('a Redis command that takes longer fails: the request answers 503, or 207 for the partitions of a batch not acknowledged in time'),
        connectTimeoutMs: positiveInt('timeout of one connection attempt to Redis'),
      },
    },
    embeddedRedis: {
      type: 'object',
      additionalProperties: false,
      required: ['binary', 'dataDir', 'appendfsync', 'startTimeoutMs'],
      properties: {
        binary: { type: 'string', minLength: 1, description: 'redis-server executable (looked up on PATH)' },
        dataDir: { type: 'string', minLength: 1, description: 'data directory of the embedded Redis (AOF files, socket)' },
        appendfsync: { enum: ['everysec', 'always', 'no'], description: 'AOF fsync policy of the embedded Redis' },
        startTimeoutMs: positiveInt('how long to wait for the embedded Redis to accept connections'),
      },
    },
    http: {
      type: 'object',
      additionalProperties: false,
      required: ['maxBodyBytes', 'maxInflatedBodyBytes', 'maxControlBodyBytes', 'controlConcurrency', 'controlQueueLength', 'corsAllowedOrigins', 'shutdownGraceMs'],
      properties: {
        maxBodyBytes: positiveInt('largest body of a publish (`POST /event-types/{name}/events`) or deleted-events request as sent (413 above)', 1024),
        maxInflatedBodyBytes: positiveInt('largest publish or deleted-events body after inflating gzip or zstd (413 above; a gzip or zstd bomb stops there)', 1024),
        maxControlBodyBytes: positiveInt(
          'largest body of every other request (event types, subscriptions, cursors, settings, storages), as sent and after gunzip (413 above; the smaller of this and `http.maxBodyBytes` applies); must be at least `eventTypes.maxSchemaBytes`, since an event type body carries its schema',
          1024,
        ),
        controlConcurrency: { type: 'integer', minimum: 1, maximum: 64, description: 'control-plane requests whose work grows with their size (event type and subscription create/update, cursor resets, cursor lag and distances, admin lists) that run at once on this node; the others wait in a queue' },
        controlQueueLength: { type: 'integer', minimum: 0, maximum: 10000, description: 'such requests that may wait for a slot; beyond it they are refused with 503 (`OVERLOADED`, `Retry-After: 1`) with nothing done' },
        corsAllowedOrigins: {
          type: 'array',
          items: { type: 'string', pattern: '^https?://[^/\\s]+$' },
          uniqueItems: true,
          description: 'browser origins (JSON array of `scheme://host[:port]`) whose requests get CORS headers and whose preflights are answered; empty = no CORS headers at all, so browsers cannot send cross-origin JSON (docs/security.md)',
        },
        shutdownGraceMs: positiveInt('on SIGTERM, how long in-flight requests may take before the node exits'),
      },
    },
    publish: {
      type: 'object',
      additionalProperties: false,
      required: ['maxEventBytes', 'workerThreads', 'workerTaskTimeoutMs', 'inlineMaxBytes', 'minReplicas', 'replicaTimeoutMs', 'timelineSwitchWaitMs'],
      properties: {
        maxEventBytes: positiveInt('largest event, as JSON text in UTF-8 bytes'),
        workerThreads: { type: 'integer', minimum: 0, maximum: 64, description: 'validation worker threads (0 = one per core)' },
        workerTaskTimeoutMs: positiveInt('a batch whose validation takes longer is failed (the worker is replaced)'),
        inlineMaxBytes: { type: 'integer', minimum: 0, maximum: 65536, description: 'batches with bodies up to this size skip the worker hop and are validated on the main thread (0 = always in workers)' },
        minReplicas: { type: 'integer', minimum: 0, maximum: 16, description: 'replicas that must confirm a batch (Redis `WAIT` on the connection that wrote it) before it is acknowledged; otherwise its items are `failed` (207). 0 = acknowledged once the master has it. Needs `redis.url` (a standalone master with replicas) or `redis.clusterNodes` (each master written to waits for its own replicas)' },
        replicaTimeoutMs: positiveInt('how long a batch waits for `publish.minReplicas` replicas before its items are failed'),
        timelineSwitchWaitMs: positiveInt('how long a batch waits while its event type switches timelines (publishing is blocked on every node meanwhile) before it is refused with 503'),
      },
    },
    eventTypes: {
      type: 'object',
      additionalProperties: false,
      required: ['defaultPartitionCount', 'maxPartitionCount', 'defaultRetentionTimeMs', 'minRetentionTimeMs', 'maxRetentionTimeMs', 'maxSchemaBytes', 'schemaCompileTimeoutMs', 'schemaMaxApplicationsPerValue', 'schemaMaxEnumValues', 'schemaMaxUniqueItems'],
      properties: {
        defaultPartitionCount: positiveInt('partitions of an event type without default_statistic'),
        maxPartitionCount: positiveInt('cap on the partitions default_statistic may ask for'),
        defaultRetentionTimeMs: positiveInt('options.retention_time when not given'),
        minRetentionTimeMs: positiveInt('smallest options.retention_time accepted'),
        maxRetentionTimeMs: positiveInt('largest options.retention_time accepted'),
        maxSchemaBytes: positiveInt('largest schema text accepted (422 above)', 256),
        schemaCompileTimeoutMs: positiveInt('a schema whose checks (meta-schema, validation cost, compilation; each in a worker) take longer is refused (422)'),
        schemaMaxApplicationsPerValue: positiveInt('schema cost budget: a schema that could apply more subschemas ($ref, allOf, anyOf, oneOf, not, dependencies) to one value of an event is refused (422)'),
        schemaMaxEnumValues: positiveInt('an enum listing more values is refused (422)'),
        schemaMaxUniqueItems: positiveInt('an array schema with uniqueItems over non-scalar items must declare maxItems at most this (422 otherwise)'),
      },
    },
    retention: {
      type: 'object',
      additionalProperties: false,
      required: ['checkIntervalMs'],
      properties: {
        checkIntervalMs: positiveInt('how often each partition is trimmed to its retention time'),
      },
    },
    compaction: {
      type: 'object',
      additionalProperties: false,
      required: ['intervalMs', 'lagMs'],
      properties: {
        intervalMs: positiveInt('how often the partitions of compacted event types (cleanup_policy compact, compact_and_delete) are compacted, by one node per event type'),
        lagMs: positiveInt('events received less than this long ago (whole seconds on Redis clock) are never compacted; 0 = every event from an earlier second', 0),
      },
    },
    subscriptions: {
      type: 'object',
      additionalProperties: false,
      required: ['maxPartitions', 'leaseTtlMs'],
      properties: {
        maxPartitions: positiveInt('most partitions (over all its event types) a subscription may have (422 above)'),
        leaseTtlMs: positiveInt('a streaming session not renewed for this long is dead and its partitions move (heartbeat every third of it)', 1000),
      },
    },
    consumption: {
      type: 'object',
      additionalProperties: false,
      required: ['maxStreamBufferBytes', 'pollIntervalMs', 'readEntries'],
      properties: {
        maxStreamBufferBytes: positiveInt('most bytes one stream holds read but not yet taken by its client; reading pauses above', 65536),
        pollIntervalMs: positiveInt('safety-net poll of a partition with an idle reader (publishes wake readers at once)', 10),
        readEntries: positiveInt('stream entries (each one batch of one partition) fetched per read'),
      },
    },
    caches: {
      type: 'object',
      additionalProperties: false,
      required: ['eventTypeEntries', 'eventTypeTtlMs', 'workerValidatorEntries', 'mainThreadValidatorEntries', 'tokenEntries'],
      properties: {
        eventTypeEntries: positiveInt('event types the node keeps in its event type cache (least recently used dropped first)'),
        eventTypeTtlMs: positiveInt('how long a cached event type is used before it is read again (change notices drop it at once anyway)', 1000),
        workerValidatorEntries: positiveInt('compiled validators kept per worker thread (least recently used dropped first)'),
        mainThreadValidatorEntries: positiveInt('compiled validators kept on the main thread for small batches'),
        tokenEntries: positiveInt('verified bearer tokens kept (auth modes jwt and tokeninfo)'),
      },
    },
    auth: {
      type: 'object',
      additionalProperties: false,
      required: ['mode', 'subjectClaim', 'attributeClaims', 'initialAdmins', 'jwt', 'tokeninfo'],
      properties: {
        mode: { enum: ['off', 'jwt', 'tokeninfo'], description: '`off`: no token checks, every request is the subject `unauthenticated` (development); `jwt`: bearer tokens verified locally; `tokeninfo`: bearer tokens introspected by a token-info service' },
        subjectClaim: { type: 'string', minLength: 1, description: 'the token claim that names the subject (`published_by`, blacklist `*_APP` names)' },
        attributeClaims: {
          type: 'object',
          minProperties: 1,
          additionalProperties: { type: 'string', minLength: 1 },
          propertyNames: { pattern: '^[a-z][a-z0-9_]*$' },
          description: 'authorization data type → token claim holding the subject\'s values of it (JSON object); its keys are the data types attributes may use',
        },
        initialAdmins: {
          type: 'array',
          items: {
            type: 'object',
            additionalProperties: false,
            required: ['data_type', 'value'],
            properties: { data_type: { type: 'string', minLength: 1 }, value: { type: 'string', minLength: 1 } },
          },
          description: 'administrators (JSON array of attributes) stored for all three admin lists when Redis holds none; empty = `user`/`unauthenticated`, allowed only in mode `off`',
        },
        jwt: {
          type: 'object',
          additionalProperties: false,
          required: ['jwksUrl', 'publicKey', 'issuer', 'audience', 'algorithms', 'clockToleranceSeconds'],
          properties: {
            jwksUrl: { type: 'string', description: 'JWKS URL the token keys come from (mode `jwt`); empty = `auth.jwt.publicKey`' },
            publicKey: { type: 'string', description: 'PEM (SPKI) public key verifying tokens when no JWKS URL is set' },
            issuer: { type: 'string', description: 'required `iss` claim (empty = not checked)' },
            audience: { type: 'string', description: 'required `aud` claim (empty = not checked)' },
            algorithms: { type: 'array', minItems: 1, items: { enum: ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'] }, description: 'accepted signature algorithms (JSON array)' },
            clockToleranceSeconds: { type: 'integer', minimum: 0, maximum: 300, description: 'leeway for `exp`/`nbf`' },
          },
        },
        tokeninfo: {
          type: 'object',
          additionalProperties: false,
          required: ['url', 'remoteUrl', 'cacheTtlMs', 'timeoutMs'],
          properties: {
            url: { type: 'string', description: 'token-info URL (mode `tokeninfo`): GET with the bearer token, answers the claims as JSON' },
            remoteUrl: { type: 'string', description: 'token-info URL used instead while the feature `remote_tokeninfo` is on (empty = `url`)' },
            cacheTtlMs: { type: 'integer', minimum: 0, maximum: 300000, description: 'how long a token-info answer is reused (0 = never)' },
            timeoutMs: positiveInt('a token-info call that takes longer answers 503'),
          },
        },
      },
    },
  },
} as const;
