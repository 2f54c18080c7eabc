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
    /** `redis://host:port/db`; empty = start the embedded `redis-server`. */
    readonly url: string;
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
    readonly maxBodyBytes: number;
    readonly maxInflatedBodyBytes: number;
    readonly shutdownGraceMs: number;
  };
  readonly publish: {
    readonly maxEventBytes: number;
    /** 0 = one per available core. */
    readonly workerThreads: number;
    readonly workerTaskTimeoutMs: number;
    /** Batches with bodies up to this size are processed on the main thread (0 = always in workers). */
    readonly inlineMaxBytes: number;
  };
  readonly eventTypes: {
    readonly defaultPartitionCount: number;
    readonly maxPartitionCount: number;
    readonly defaultRetentionTimeMs: number;
    readonly minRetentionTimeMs: number;
    readonly maxRetentionTimeMs: number;
    readonly maxSchemaBytes: number;
    readonly schemaCompileTimeoutMs: number;
  };
  readonly retention: {
    readonly checkIntervalMs: number;
  };
  readonly subscriptions: {
    readonly maxPartitions: number;
    readonly leaseTtlMs: number;
  };
  readonly consumption: {
    readonly maxStreamBufferBytes: number;
    readonly pollIntervalMs: number;
    readonly readEntries: number;
  };
}

const positiveInt = (description: string, minimum = 1): Record<string, unknown> => ({ type: 'integer', minimum, description });

/** JSON Schema (draft-07 dialect of ajv's default build) of {@link BrokerConfig}; `description` feeds the README table. */
export const configSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['port', 'host', 'logLevel', 'redis', 'embeddedRedis', 'http', 'publish', 'eventTypes', 'retention', 'subscriptions', 'consumption'],
  properties: {
    port: { type: 'integer', minimum: 0, maximum: 65535, description: 'HTTP port of this broker node (0 = any free port)' },
    host: { type: 'string', minLength: 1, description: 'address the HTTP server binds to' },
    logLevel: { enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], description: 'pino log level' },
    redis: {
      type: 'object',
      additionalProperties: false,
      required: ['url', 'keyPrefix', 'commandTimeoutMs', 'connectTimeoutMs'],
      properties: {
        url: { type: 'string', pattern: '^(|rediss?://.+|unix://.+)$', description: 'Redis to use; empty starts the embedded redis-server' },
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
      required: ['maxBodyBytes', 'maxInflatedBodyBytes', 'shutdownGraceMs'],
      properties: {
        maxBodyBytes: positiveInt('largest request body accepted as sent (413 above)', 1024),
        maxInflatedBodyBytes: positiveInt('largest request body after gunzip (413 above; a gzip bomb stops there)', 1024),
        shutdownGraceMs: positiveInt('on SIGTERM, how long in-flight requests may take before the node exits'),
      },
    },
    publish: {
      type: 'object',
      additionalProperties: false,
      required: ['maxEventBytes', 'workerThreads', 'workerTaskTimeoutMs', 'inlineMaxBytes'],
      properties: {
        maxEventBytes: positiveInt('largest event, as JSON text in UTF-8 bytes'),
        workerThreads: { type: 'integer', minimum: 0, maximum: 64, description: 'validation worker threads (0 = one per core)' },
        workerTaskTimeoutMs: positiveInt('a batch whose validation takes longer is failed (the worker is replaced)'),
        inlineMaxBytes: { type: 'integer', minimum: 0, maximum: 65536, description: 'batches with bodies up to this size skip the worker hop and are validated on the main thread (0 = always in workers)' },
      },
    },
    eventTypes: {
      type: 'object',
      additionalProperties: false,
      required: ['defaultPartitionCount', 'maxPartitionCount', 'defaultRetentionTimeMs', 'minRetentionTimeMs', 'maxRetentionTimeMs', 'maxSchemaBytes', 'schemaCompileTimeoutMs'],
      properties: {
        defaultPartitionCount: positiveInt('partitions of an event type without default_statistic'),
        maxPartitionCount: positiveInt('cap on the partitions default_statistic may ask for'),
        defaultRetentionTimeMs: positiveInt('options.retention_time when not given'),
        minRetentionTimeMs: positiveInt('smallest options.retention_time accepted'),
        maxRetentionTimeMs: positiveInt('largest options.retention_time accepted'),
        maxSchemaBytes: positiveInt('largest schema text accepted (422 above)', 256),
        schemaCompileTimeoutMs: positiveInt('a schema whose compilation takes longer is refused (422)'),
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
  },
} as const;
