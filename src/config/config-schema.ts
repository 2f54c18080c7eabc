/**
 * The configuration schema: every key the broker reads, its type, bounds and meaning, as TypeBox
 * schemas from which {@link BrokerConfig} is derived, so the shape is written once and the type cannot drift from
 * what ajv checks.
 * `config/default.json` holds the default of every key (a unit test keeps the two in step), and the
 * page docs/configuration.md is generated from this schema (each key's `description`; `npm run docs`).
 *
 * Key names carry their unit (`Ms`, `Bytes`). Environment variables override keys: the path in
 * SCREAMING_SNAKE_CASE behind `BROKER_`, e.g. `redis.url` ← `BROKER_REDIS_URL`, `port` ← `BROKER_PORT`.
 * The `auth` section lives in `auth-config-schema.ts`.
 */
import { Type, type Static } from '@sinclair/typebox';
import { authConfigSchema, type AuthConfig } from './auth-config-schema.js';
import { Closed, OneOf, positiveInt, type DeepReadonly } from './schema-parts.js';

export { authConfigSchema, type AuthConfig };

const redisSchema = Type.Object(
  {
    /** `redis://host:port/db`; empty = start the embedded `redis-server` (unless `clusterNodes` is set). */
    url: Type.String({ pattern: '^(|rediss?://.+|unix://.+)$', description: 'Redis to use; empty starts the embedded redis-server (unless `redis.clusterNodes` is set)' }),
    /** Redis Cluster seed nodes `host:port`; non-empty = cluster mode (then `url` must be empty). */
    clusterNodes: Type.Array(Type.String({ pattern: '^(\\[[0-9a-fA-F:.]+\\]|[^:\\s\\[\\]]+):[0-9]{1,5}$' }), {
      description: 'Redis Cluster seed nodes (JSON array of `host:port`); non-empty = cluster mode, and `redis.url` must be empty (docs/operations.md "Redis Cluster")',
    }),
    keyPrefix: Type.String({ pattern: '^[a-zA-Z0-9_:.-]*$', description: 'prefix of every key the broker writes' }),
    commandTimeoutMs: positiveInt('a Redis command that takes longer (counted from when it was issued) fails: the request answers 503, or 207 for the partitions of a batch not acknowledged in time; also the whole Redis budget of one publish (docs/operations.md "Redis stalls and graceful stops")'),
    connectTimeoutMs: positiveInt('timeout of one connection attempt to Redis'),
  },
  Closed,
);

const embeddedRedisSchema = Type.Object(
  {
    binary: Type.String({ minLength: 1, description: 'redis-server executable (looked up on PATH)' }),
    dataDir: Type.String({ minLength: 1, description: 'data directory of the embedded Redis (AOF files, socket, and `redis.owner`, which names the one node of the checkout that runs it)' }),
    appendfsync: OneOf(['everysec', 'always', 'no'], { description: 'AOF fsync policy of the embedded Redis' }),
    startTimeoutMs: positiveInt('how long to wait for the embedded Redis to accept connections'),
    /** The embedded Redis's `maxmemory`: never unlimited (docs/operations.md "Memory and retention"). */
    maxmemoryBytes: positiveInt('`maxmemory` of the embedded Redis, in bytes; 0 = `embeddedRedis.maxmemoryPercent` of the machine\'s memory (the smaller of the total and a cgroup limit). The embedded Redis never runs without a limit (docs/operations.md "Memory and retention")', 0),
    /** The share of the machine's memory the embedded Redis may use when `maxmemoryBytes` is 0. */
    maxmemoryPercent: Type.Integer({
      minimum: 1,
      maximum: 90,
      description: 'when `embeddedRedis.maxmemoryBytes` is 0, the embedded Redis\'s `maxmemory` is this share of the machine\'s memory. 50 leaves the other half to the broker node, the copy-on-write pages of an AOF rewrite and the operating system',
    }),
  },
  Closed,
);

/** Redis memory as a budget (docs/operations.md "Memory and retention"; docs/decisions/0030-redis-memory-budget.md). */
const redisMemorySchema = Type.Object(
  {
    /** The high-water mark: above it a master's partitions refuse publishes with 507. */
    highWaterPercent: Type.Integer({
      minimum: 1,
      maximum: 1000,
      description:
        'the high-water mark, in percent of each Redis master\'s `maxmemory` (of its machine\'s total memory when it has none): a publish whose partitions lie on a master using more is refused with 507 (`STORAGE_FULL`, `Retry-After`), nothing of it written, so that commits, session heartbeats and control-plane changes keep the room up to `maxmemory`. Above 100 the node never refuses first and Redis\'s own refusals (OOM) are answered the same way',
    }),
    /** How often each node reads every master's `used_memory` and `maxmemory`. */
    checkIntervalMs: positiveInt('how often each node reads `INFO memory` from every Redis master it writes to (one command per master, never per publish); a master that fell below the mark accepts publishes again within this interval', 50),
    /** The per event type measurement of stored bytes (`broker_event_type_stored_bytes`). */
    usageIntervalMs: positiveInt('how often a round measures the Redis bytes of event types\' partitions (`MEMORY USAGE` of each partition\'s keys, `broker_event_type_stored_bytes`)', 1000),
    /** The most partitions one such round measures (bounded work per round). */
    usagePartitionsPerRound: positiveInt('most partitions one measuring round reads (about 8 cheap commands each); the rounds go through every partition of every event type in turn, so a full pass takes (partitions ÷ this) rounds'),
    /** `MEMORY USAGE … SAMPLES n`: stream nodes sampled per partition key. */
    usageSamples: positiveInt('`SAMPLES` of each `MEMORY USAGE`: nested values (stream nodes) sampled to estimate a key\'s bytes; 0 = all of them (exact, costs O(size))', 0),
  },
  Closed,
);

const httpSchema = Type.Object(
  {
    /** Largest body of publishing and deleted-events requests, as sent (413 above). */
    maxBodyBytes: positiveInt('largest body of a publish (`POST /event-types/{name}/events`) or deleted-events request as sent (413 above)', 1024),
    maxInflatedBodyBytes: positiveInt('largest publish or deleted-events body after inflating gzip or zstd (413 above; a gzip or zstd bomb stops there)', 1024),
    /** Largest body of every other request, as sent and after gunzip (413 above): a small request must not be able to make the node hold a large inflated body (docs/security.md "Hostile input"). */
    maxControlBodyBytes: positiveInt(
      'largest body of every other request (event types, subscriptions, cursors, settings, storages), as sent and after gunzip (413 above; the smaller of this and `http.maxBodyBytes` applies). 2 MiB fits an event type whose schema is at `eventTypes.maxSchemaBytes` (1 MiB) with its JSON string escaping, and is 25 times below the publish limit; it must be at least `eventTypes.maxSchemaBytes`, since an event type body carries its schema',
      1024,
    ),
    /** Control-plane requests whose work grows with their size that run at once on this node, so a burst of them cannot starve publishing and streaming (docs/security.md "Hostile input"). */
    controlConcurrency: Type.Integer({
      minimum: 1,
      maximum: 64,
      description: 'control-plane requests whose work grows with their size (event type and subscription create/update, cursor resets, cursor lag and distances, admin lists) that run at once on this node; the others wait in a queue',
    }),
    /** Such requests that may wait for a slot; one more is refused with 503 (OVERLOADED). */
    controlQueueLength: Type.Integer({ minimum: 0, maximum: 10000, description: 'such requests that may wait for a slot; beyond it they are refused with 503 (`OVERLOADED`, `Retry-After: 1`) with nothing done' }),
    /** Bounded admission of publishing (docs/publishing.md "Refusals and deadlines"; docs/decisions/0025-publish-admission-by-bytes-in-flight.md). */
    publishMaxInFlightBytes: positiveInt(
      'bytes of publish bodies (as declared by `Content-Length`, or as received and inflated) this node reads, validates and writes at once; a publish that would pass it is refused at once with 503 (`PUBLISH_OVERLOADED`, `Retry-After: 1`) before its body is read, nothing of it written. One publish is always admitted when none is in flight, whatever its size. 16 MiB is about 30 batches of 1,000 events of 520 bytes: 4 times what 8 connections publishing such batches hold, and about 0.2 s of the work of a node that validates and writes 90 MB/s (docs/decisions/0025-publish-admission-by-bytes-in-flight.md)',
      1024,
    ),
    /** The second bound of publish admission (docs/decisions/0028-publish-admission-by-queue-delay.md). */
    publishMaxQueueDelayMs: Type.Integer({
      minimum: 0,
      maximum: 60000,
      description:
        'ms the oldest batch waiting for a validation worker thread may have waited; beyond it a publish is refused at once with 503 (`PUBLISH_QUEUE_DELAYED`, `Retry-After: 1`) before its body is read, nothing of it written. Bodies of at most `publish.inlineMaxBytes` (validated on the main thread) are not held to it, nor is a publish when none is in flight. 0 = no such bound (docs/decisions/0028-publish-admission-by-queue-delay.md)',
    }),
    /** The floor of the queue-delay bound (docs/decisions/0028-publish-admission-by-queue-delay.md). */
    publishQueueDelayMinInFlight: Type.Integer({
      minimum: 1,
      maximum: 100000,
      description:
        'the queue-delay bound (`http.publishMaxQueueDelayMs`) refuses a publish only while at least this many other publishes are in flight on the node: a few producers are never refused for a slow moment of the validation threads (a cold start, a busy core), since refusing them would only leave the node idle; the bytes bound still applies (docs/decisions/0028-publish-admission-by-queue-delay.md)',
    }),
    /** Browser origins (`scheme://host[:port]`) that get CORS headers and preflight answers; empty = no CORS at all (docs/security.md "Cross-site requests"). */
    corsAllowedOrigins: Type.Array(Type.String({ pattern: '^https?://[^/\\s]+$' }), {
      uniqueItems: true,
      description: 'browser origins (JSON array of `scheme://host[:port]`) whose requests get CORS headers and whose preflights are answered; empty = no CORS headers at all, so browsers cannot send cross-origin JSON (docs/security.md)',
    }),
    shutdownGraceMs: positiveInt('on SIGTERM, how long in-flight requests may take before the node exits'),
  },
  Closed,
);

const publishSchema = Type.Object(
  {
    maxEventBytes: positiveInt('largest event, as JSON text in UTF-8 bytes'),
    /** 0 = one per available core. */
    workerThreads: Type.Integer({ minimum: 0, maximum: 64, description: 'validation worker threads (0 = one per core)' }),
    workerTaskTimeoutMs: positiveInt('a batch whose validation takes longer is failed (the worker is replaced)'),
    /** Linux niceness of the worker threads: the main thread runs first when the cores are busy (default 5). */
    workerThreadNice: Type.Integer({
      minimum: 0,
      maximum: 19,
      description:
        'scheduling niceness of the validation worker threads (Linux; elsewhere ignored): when the cores are busy, the main thread (health checks, streams, small batches, the control plane) runs before the validation of large batches. 0 = the same priority as the main thread (docs/decisions/0027-worker-threads-yield-to-the-main-thread.md)',
    }),
    /** Batches with bodies up to this size are processed on the main thread (0 = always in workers). */
    inlineMaxBytes: Type.Integer({ minimum: 0, maximum: 65536, description: 'batches with bodies up to this size skip the worker hop and are validated on the main thread (0 = always in workers)' }),
    /** Events stored zstd-compressed (docs/operations.md "Memory and retention"; docs/decisions/0032-events-stored-compressed.md). */
    storedCompression: Type.Boolean({
      description:
        "store a batch's events in a partition as one zstd frame (level 1, compressed in the validation worker threads; readers decompress) when they make at least `publish.storedCompressionMinBytes` and the frame saves at least 10 %. Compacted and idempotent event types are stored plain. Logs mix both forms; switching it off or on affects only new entries. Nodes of versions before it cannot read compressed entries (docs/decisions/0032-events-stored-compressed.md)",
    }),
    /** Smallest share of a batch in one partition (its events' JSON texts joined by `\n`, bytes) that is stored compressed. */
    storedCompressionMinBytes: Type.Integer({
      minimum: 0,
      maximum: 16777216,
      description:
        "smallest share of a batch in one partition, in bytes of its events' JSON (joined by newlines), stored compressed; smaller shares (typically a single event) are stored plain, where the frame saves few bytes and every read would pay a decompression (docs/decisions/0032-events-stored-compressed.md)",
    }),
    /** Replicas that must confirm a batch (`WAIT`) before it is acknowledged (0 = none). */
    minReplicas: Type.Integer({
      minimum: 0,
      maximum: 16,
      description: 'replicas that must confirm a batch (Redis `WAIT` on the connection that wrote it) before it is acknowledged; otherwise its items are `failed` (207). 0 = acknowledged once the master has it. Needs `redis.url` (a standalone master with replicas) or `redis.clusterNodes` (each master written to waits for its own replicas)',
    }),
    /** How long a batch waits for those replicas before its items are failed (207). */
    replicaTimeoutMs: positiveInt('how long a batch waits for `publish.minReplicas` replicas before its items are failed'),
    /** How long a batch waits for a running timeline switch of its event type before it is refused (503), so no batch is written to a timeline that is being closed (docs/concepts.md "Timelines and storages"). */
    timelineSwitchWaitMs: positiveInt('how long a batch waits while its event type switches timelines (publishing is blocked on every node meanwhile) before it is refused with 503'),
    /** The deadline of a publish without `X-Timeout` (docs/publishing.md "Refusals and deadlines"). */
    defaultTimeoutMs: positiveInt('deadline of a publish without an `X-Timeout` header, in ms: a batch not validated by then is refused with 503 (`PUBLISH_DEADLINE_EXCEEDED`), one validated but not yet written is answered 207 with its items `aborted`; writes already sent are awaited, so the answer gives each item\'s true state'),
    /** The largest `X-Timeout` a publish may ask for; larger ones are cut to it. */
    maxTimeoutMs: positiveInt('largest deadline an `X-Timeout` header may ask for, in ms (a larger one is cut to it)'),
    /** The cluster-wide count of the publishing quotas (docs/publishing.md "Quotas"; docs/decisions/0034-cluster-wide-publishing-quotas.md). */
    quotaTimeoutMs: Type.Integer({
      minimum: 1,
      maximum: 10000,
      description: 'most ms a publish a publishing quota applies to waits for its count in Redis (one script call per publish); beyond it the publish goes on unchecked (quotas fail open, `publish.quotaFailOpenMs`). Only publishes with a quota set pay it (docs/publishing.md "Quotas")',
    }),
    quotaFailOpenMs: Type.Integer({
      minimum: 0,
      maximum: 600000,
      description: 'most ms publishes go on unchecked after the count of the publishing quotas in Redis first failed or timed out; after it, this node counts the quotas alone (up to n times a quota behind n nodes) until Redis answers again. 0 = never unchecked: count alone at once',
    }),
    /** Idempotent publishing (docs/publishing.md "Idempotent publishing"): eids remembered per partition. */
    idempotencyMaxEidsPerPartition: positiveInt('most eids one generation of a partition of an event type with `broker.io/idempotency-window-seconds` takes (about 75 bytes of Redis memory each; a partition keeps two generations); a full generation starts a new one, so beyond it the oldest eids are forgotten before their window ends'),
  },
  Closed,
);

const eventTypesSchema = Type.Object(
  {
    defaultPartitionCount: positiveInt('partitions of an event type without default_statistic'),
    maxPartitionCount: positiveInt('cap on the partitions default_statistic may ask for'),
    defaultRetentionTimeMs: positiveInt('options.retention_time when not given'),
    minRetentionTimeMs: positiveInt('smallest options.retention_time accepted'),
    maxRetentionTimeMs: positiveInt('largest options.retention_time accepted'),
    maxSchemaBytes: positiveInt('largest schema text accepted (422 above)', 256),
    schemaCompileTimeoutMs: positiveInt('a schema whose checks (meta-schema, validation cost, compilation; each in a worker) take longer is refused (422); the service\'s own event types, registered at start-up, have 60 s; the same limit bounds compiling a new validator in every worker when an event type is created or changed'),
    /** How long a starting node waits for the validators of existing event types before it listens, so its first batches do not each pay a compilation. */
    prepareAtStartMs: positiveInt('a starting node compiles the validators of the event types that exist (the most recently changed, as many as the worker validator cache holds: caches.workerValidatorEntries and caches.workerValidatorBytes) before it listens, for at most this long; the rest are compiled in the background while it serves', 0),
    /** Schema cost budget (docs/security.md "Hostile input"; src/domain/schema/schema-cost.ts): most subschema applications per value of an event. */
    schemaMaxApplicationsPerValue: positiveInt('schema cost budget: a schema that could apply more subschemas (`$ref`, `allOf`, `anyOf`, `oneOf`, `not`, `dependencies`) to one value of an event is refused (422); see docs/publishing.md "Schema cost budget"'),
    /** Most values one `enum` of a schema may list. */
    schemaMaxEnumValues: positiveInt('an `enum` listing more values is refused (422)'),
    /** Largest `maxItems` a `uniqueItems` array of non-scalar items must declare. */
    schemaMaxUniqueItems: positiveInt('an array schema with `uniqueItems` over non-scalar items must declare `maxItems` at most this (422 otherwise)'),
  },
  Closed,
);

const retentionSchema = Type.Object({ checkIntervalMs: positiveInt('how often each partition is trimmed to its retention time') }, Closed);

/** Log compaction of event types with cleanup_policy compact / compact_and_delete (docs/concepts.md "Retention and compaction"). */
const compactionSchema = Type.Object(
  {
    /** How often one node per event type runs a compaction round over its partitions. */
    intervalMs: positiveInt('how often the partitions of compacted event types (cleanup_policy compact, compact_and_delete) are compacted, by one node per event type'),
    /** Events younger than this (received within it, whole seconds on Redis's clock) are never compacted. */
    lagMs: positiveInt('events received less than this long ago (whole seconds on Redis clock) are never compacted; 0 = every event from an earlier second', 0),
  },
  Closed,
);

const subscriptionsSchema = Type.Object(
  {
    maxPartitions: positiveInt('most partitions (over all its event types) a subscription may have (422 above)'),
    leaseTtlMs: positiveInt('a streaming session not renewed for this long is dead and its partitions move (heartbeat every third of it)', 1000),
  },
  Closed,
);

const consumptionSchema = Type.Object(
  {
    maxStreamBufferBytes: positiveInt('most bytes one stream holds read but not yet taken by its client; reading pauses above', 65536),
    pollIntervalMs: positiveInt('safety-net poll of a partition with an idle reader (publishes wake readers at once)', 10),
    readEntries: positiveInt('stream entries (each one batch of one partition) fetched per read'),
    /** Reads stop at the high watermark when appends wait for replicas (docs/operations.md "Durability"). */
    waitForReplicas: Type.Boolean({
      description:
        'with `publish.minReplicas` ≥ 1: every reader (streams, server-sent events, dead letters, cursors at a time, stats and lag) is given an event only once the replicas are known to hold it, so a failover cannot take back an event already read nor give its offset to another event (docs/operations.md "Durability"); costs one more script per written partition of each acknowledged batch, and one more round trip to its master before the batch is answered. false = as soon as the master has it: one replica round trip sooner, but a failover may erase events already read. No effect with `publish.minReplicas` 0; give every node the same value',
    }),
  },
  Closed,
);

/** The consumer status of subscription partitions (docs/consuming.md "Consumer status"). */
const consumerStatusSchema = Type.Object(
  {
    /** The sliding window a partition's status is evaluated over. */
    windowMs: positiveInt('the sliding window each subscription partition\'s `consumer_status` is evaluated over: `stalled` and `stopped` need events waiting through a whole window, `lagging` a lag growing across it; `drain_seconds` uses the commit rate over it (docs/consuming.md "Consumer status")', 1000),
    /** How often each node samples the positions. */
    intervalMs: positiveInt('how often each node samples every subscription\'s committed offsets, lag and stream holders for the consumer status (one lag read and one state read per subscription; a partition keeps windowMs ÷ intervalMs + 2 samples)', 10),
  },
  Closed,
);

/**
 * Traces over OpenTelemetry (docs/tracing.md): off by default, and then nothing of it runs (no span
 * objects, no header parsing). On, a publish continues the W3C trace of its `traceparent` header and spans
 * are exported over OTLP/HTTP.
 */
const tracingSchema = Type.Object(
  {
    enabled: Type.Boolean({ description: 'record spans of publishes (receive, validate, append) and of commits that carry a `traceparent` header, store a sampled publish\'s trace context in its events\' `metadata.span_ctx`, and export the spans over OTLP; false = none of it runs (docs/tracing.md)' }),
    otlpEndpoint: Type.String({ pattern: '^https?://.+', description: 'where spans are sent: the URL of an OpenTelemetry collector\'s OTLP/HTTP traces receiver (JSON encoding), e.g. `http://otel-collector:4318/v1/traces`' }),
    sampleRatio: Type.Number({
      minimum: 0,
      maximum: 1,
      description: 'share of the traces this node starts that are recorded (0–1; by trace id, so every node decides alike): publishes without a `traceparent` header. A request whose `traceparent` says sampled is always recorded, one that says not sampled never (parent-based sampling)',
    }),
    serviceName: Type.String({ minLength: 1, description: 'the `service.name` of the exported spans' }),
  },
  Closed,
);

/** The node process's own runtime settings (V8 heap tuning, which trades memory for garbage-collection work). */
const nodeSchema = Type.Object(
  {
    /**
     * V8's old-generation growing factor, as `--heap-growing-percent` (factor = 1 + percent ÷ 100), set by
     * the process entry before anything is allocated in earnest; 0 leaves V8's own choice (up to 4× the
     * live heap between major collections when allocation is fast).
     */
    heapGrowingPercent: positiveInt('how far V8 lets the heap grow past what the last major collection kept, in percent (V8\'s `--heap-growing-percent`, set by the node at start; 0 = V8\'s own choice, up to 300 % when allocation is fast: more memory for the same work); applies to the worker threads too; a `--heap-growing-percent` in `NODE_OPTIONS` or on the command line wins. 100 holds a node\'s memory flat under churn at no measured throughput cost (docs/decisions/0011-heap-growing-factor.md)', 0),
  },
  Closed,
);

/** Bounds of the node's in-memory caches, so memory stays bounded however many event types exist (lru-cache, least recently used dropped first; docs/architecture.md "Bounded state"). */
const cachesSchema = Type.Object(
  {
    /** Event types kept by the event type cache. */
    eventTypeEntries: positiveInt('event types the node keeps in its event type cache (least recently used dropped first)'),
    /** How long a cached event type is used without reading it again (change notices drop it at once anyway). */
    eventTypeTtlMs: positiveInt('how long a cached event type is used before it is read again (change notices drop it at once anyway)', 1000),
    /** Compiled validators kept per worker thread. */
    workerValidatorEntries: positiveInt('compiled validators kept per worker thread (least recently used dropped first; 256 thrashed with 1,000 event types published to in turn: each miss compiles again; docs/decisions/0015-validator-caches-by-estimated-heap.md)'),
    /** Their estimated heap together, per worker thread (bytes; `compiledValidatorBytes`). */
    workerValidatorBytes: positiveInt('estimated heap of the validators kept per worker thread, together (bytes; each 32 KB + 10 bytes per character of its effective schema): about 1,400 validators of the benchmarks\' order schema (46.5 KB each), 140–480 of GitHub webhook schemas'),
    /** Compiled validators kept on the main thread (small batches). */
    mainThreadValidatorEntries: positiveInt('validators kept on the main thread for small batches (made from code a worker generated; 64 thrashed with 100 event types published to in turn: each miss costs a worker a compile)'),
    /** Their estimated heap together, on the main thread (bytes; `instantiatedValidatorBytes`). */
    mainThreadValidatorBytes: positiveInt('estimated heap of the validators kept on the main thread, together (bytes; each 2.3 bytes per character of its standalone code): about 1,400 of the benchmarks\' order schema (45 KB each)'),
    /** Verified tokens kept (auth modes `jwt` and `tokeninfo`). */
    tokenEntries: positiveInt('verified bearer tokens kept (auth modes jwt and tokeninfo)'),
  },
  Closed,
);

/**
 * JSON Schema (draft-07 dialect of ajv's default build) of {@link BrokerConfig}: every section closed,
 * every key required; `description` feeds docs/configuration.md.
 */
export const configSchema = Type.Object(
  {
    port: Type.Integer({ minimum: 0, maximum: 65535, description: 'HTTP port of this broker node (0 = any free port)' }),
    host: Type.String({ minLength: 1, description: 'address the HTTP server binds to' }),
    logLevel: OneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], { description: 'pino log level' }),
    redis: redisSchema,
    embeddedRedis: embeddedRedisSchema,
    redisMemory: redisMemorySchema,
    http: httpSchema,
    publish: publishSchema,
    eventTypes: eventTypesSchema,
    retention: retentionSchema,
    compaction: compactionSchema,
    subscriptions: subscriptionsSchema,
    consumption: consumptionSchema,
    consumerStatus: consumerStatusSchema,
    caches: cachesSchema,
    node: nodeSchema,
    tracing: tracingSchema,
    auth: authConfigSchema,
  },
  Closed,
);

/**
 * The loaded configuration (deep-frozen by `loadConfig`), derived from {@link configSchema}; its
 * `auth` section is what {@link AuthConfig} extends.
 */
export type BrokerConfig = DeepReadonly<Static<typeof configSchema>>;
