/**
 * The only place Redis keys are spelled.
 *
 * Hash-tag rule (Redis Cluster): the part of a key between the first `{` and the next `}` decides its
 * slot. A partition's keys share the tag `{et:<name>:<partition>}` so its log and counters stay in one
 * slot while partitions spread over shards; registry keys share `{registry}` so the Lua scripts that
 * change an event type touch one slot. Event type names match `[a-zA-Z][-0-9a-zA-Z_.]*` (checked before
 * any key is built), so they can contain neither braces nor the `:` separator and cannot escape into
 * another key. A subscription's records live in `{registry}` (created and listed with the event
 * types); its consumption state (offsets, sessions, topology) shares the tag `{sub:<id>}` so the Lua
 * scripts that fence commits and assignments touch one slot; its change notices go on a sharded channel
 * under the same tag, so those scripts can SPUBLISH them. Administrator settings share `{settings}`.
 * The token buckets of the publishing quotas share `{quotas}`, so the one script that charges a publish
 * to its subject's and its owning application's quota touches one slot (one round trip per publish).
 */
export interface Keys {
  /** Set of all event type names. */
  readonly eventTypeNames: string;
  /** String: the event type record as JSON. */
  eventType(name: string): string;
  /** Hash: schema version → schema record JSON. */
  eventTypeSchemas(name: string): string;
  /** Stream: one entry per (batch, partition), entry id `<events in partition after this entry>-0`. */
  partitionLog(name: string, timeline: number, partition: string): string;
  /**
   * Hash: per-partition counters (`next` = next offset to assign, `oldest` = first retained offset,
   * `replicated` = one past the newest event the replicas are known to hold: the high watermark readers
   * stop at when reads wait for replicas, docs/operations.md "Durability"; one value per partition).
   */
  partitionMeta(name: string, timeline: number, partition: string): string;
  /** Sorted set: first offset received in each second (score = unix second), for retention. */
  partitionTimeIndex(name: string, timeline: number, partition: string): string;
  /** String with expiry: held by the node trimming an event type's partitions this round. */
  retentionLock(name: string): string;
  /**
   * Hash (compacted event types only; docs/concepts.md "Retention and compaction"): compaction key →
   * offset of its newest event in the partition, or `d<offset>` after `deleted-events`: every event of
   * that key before `<offset>` goes.
   */
  partitionCompactionIndex(name: string, timeline: number, partition: string): string;
  /** Sorted set (compacted event types only): keys with a tombstone in the compaction index, score = its `<offset>`. */
  partitionTombstones(name: string, timeline: number, partition: string): string;
  /**
   * Set (event types with idempotent publishing only): one of the two generations `a`, `b` of the eids
   * a partition stored recently, each as its uuid's 16 bytes; the meta hash's `eid_gen` names the current
   * one (docs/publishing.md "Idempotent publishing").
   */
  partitionEids(name: string, timeline: number, partition: string, generation: 'a' | 'b'): string;
  /** String with expiry: held (and renewed) by the one node compacting an event type's partitions. */
  compactionLock(name: string): string;
  /** Sharded pub/sub channel (SPUBLISH, same slot as the partition): a batch was appended; readers wake. */
  partitionNotices(name: string, timeline: number, partition: string): string;
  /**
   * Sharded pub/sub channel (SPUBLISH, same slot as the partition): the partition's `replicated` offset
   * moved (message: its new value); readers that wait for replicas listen here instead of
   * {@link partitionNotices}, so they wake when what they may read grows, not when an append they may not
   * read yet lands.
   */
  partitionReplicatedNotices(name: string, timeline: number, partition: string): string;
  /** Pub/sub channel announcing metadata changes (event type names) to every node. */
  readonly metadataChannel: string;
  /**
   * Integer: how many notices were ever announced on `metadataChannel` (incremented with each); a node
   * whose count of notices heard falls behind it lost some and drops its cached event types.
   */
  readonly metadataChanges: string;

  /** Sorted set: subscription ids, score = created_at in ms (newest first = ZREVRANGE). */
  readonly subscriptionIds: string;
  /** String: the subscription record as JSON. */
  subscription(id: string): string;
  /** Hash: subscription key (owning_application, sorted event types, consumer_group as JSON) → id. */
  readonly subscriptionsByKey: string;
  /** Set: ids of the subscriptions that read an event type. */
  eventTypeSubscriptions(name: string): string;
  /** Hash: `<event type>:<partition>` → last committed offset (integer; -1 = nothing yet). Exists once initialized. */
  subscriptionOffsets(id: string): string;
  /** Sorted set: streaming session (stream id) → lease expiry in ms on Redis's clock. */
  subscriptionSessions(id: string): string;
  /** Hash: stream id → session JSON (requested partitions, commit timeout, node, state). */
  subscriptionSessionInfo(id: string): string;
  /** String: the partition assignment JSON `{version, partitions}`. */
  subscriptionTopology(id: string): string;
  /** String with expiry: a cursor reset runs. */
  subscriptionReset(id: string): string;
  /**
   * Hash: dead-letter state per partition (docs/consuming.md "Dead letters"): `failed:<event type>:<partition>` → failed
   * sends since the last commit that moved it; `until:<event type>:<partition>` → last offset of the
   * dead-letter search window while it runs.
   */
  subscriptionDeadLetters(id: string): string;
  /**
   * Hash: `<event type>:<partition>` → events of that partition that retention removed before the
   * subscription read them, counted when the subscription's committed offset passed them.
   */
  subscriptionExpiredEvents(id: string): string;
  /**
   * Hash: the batches of a queue-mode subscription (docs/architecture.md#45-queue-mode-state):
   * `d:<event type>:<partition>` last offset handed out, `b:<event type>:<partition>|<last offset>` a
   * batch (`<from> <to> <stream or -> <deadline ms> <deliveries>`), `h:<stream id>` events a stream holds.
   */
  subscriptionQueue(id: string): string;
  /** Sorted set (lexical): every batch of a queue-mode subscription not acknowledged, `<event type>:<partition>|<from, 16 digits>|<to>`. */
  subscriptionQueueOpen(id: string): string;
  /** Sorted set (lexical): the batches of a queue-mode subscription waiting to be handed out again, same members. */
  subscriptionQueueWaiting(id: string): string;
  /** Sorted set: `<event type>:<partition>|<to>` → deadline (ms on Redis's clock) of each batch a stream holds. */
  subscriptionQueueDeadlines(id: string): string;
  /**
   * Sharded pub/sub channel (SPUBLISH, same slot as the subscription's state): its topology, offsets or
   * sessions changed. Messages: `topology`, `commit`, `reset`, `authz`, and for queue mode `queue` and
   * `ack <stream id>` (see `SubscriptionNotices`). Only
   * nodes that stream the subscription subscribe to it.
   */
  subscriptionNotices(id: string): string;

  /** Hash: feature name → `1` (enabled) or `0`. */
  readonly settingsFeatures: string;
  /** Set: blacklist entries `<BLACKLIST_TYPE>:<name>`. */
  readonly settingsBlacklist: string;
  /** String: the administrators (AdminAuthorization JSON). */
  readonly settingsAdmins: string;
  /** Hash: `<kind>:<name>` → publishing quota JSON (docs/publishing.md "Quotas"). */
  readonly settingsQuotas: string;
  /**
   * Hash with expiry: the token bucket of one publishing quota, counted for the whole cluster
   * (docs/publishing.md "Quotas"): `e` events and `b` bytes left (may be negative: debt), `t` Redis time
   * in ms of the last charge. Its expiry is the time the bucket takes to be full again, after which a
   * missing key reads as a full bucket: a key lives only while its quota is being used, and there is at
   * most one per quota an administrator set. Any subject id or application name is safe in it: the tag
   * `{quotas}` comes first and decides the slot.
   */
  quotaBucket(kind: 'subject' | 'owning_application', name: string): string;
  /** Pub/sub channel: a setting changed (features, blacklist, admins or quotas); every node reloads them. */
  readonly settingsChannel: string;
  /** Hash: storage id → Storage record JSON (docs/operations.md "Storages and timelines"). */
  readonly storages: string;
  /** String: the id of the default storage. */
  readonly defaultStorage: string;
}

const NAME = /^[a-zA-Z][-0-9a-zA-Z_]*(\.[0-9a-zA-Z][-0-9a-zA-Z_]*)*$/;
const PARTITION = /^(0|[1-9][0-9]{0,5})$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function checked(value: string, pattern: RegExp, what: string): string {
  if (!pattern.test(value)) throw new Error(`refusing to build a key from invalid ${what} ${JSON.stringify(value)}`);
  return value;
}

/** Builds the key set for a prefix (`redis.keyPrefix`). Throws on a name or partition that could escape its key. */
export function createKeys(prefix: string): Keys {
  const registry = `${prefix}{registry}`;
  const partition = (name: string, timeline: number, p: string) =>
    `${prefix}{et:${checked(name, NAME, 'event type name')}:${checked(p, PARTITION, 'partition')}}:t${timeline}`;
  const subscriptionState = (id: string) => `${prefix}{sub:${checked(id, UUID, 'subscription id')}}`;
  return {
    eventTypeNames: `${registry}:event-types`,
    eventType: (name) => `${registry}:event-type:${checked(name, NAME, 'event type name')}`,
    eventTypeSchemas: (name) => `${registry}:event-type:${checked(name, NAME, 'event type name')}:schemas`,
    partitionLog: (name, timeline, p) => `${partition(name, timeline, p)}:log`,
    partitionMeta: (name, timeline, p) => `${partition(name, timeline, p)}:meta`,
    partitionTimeIndex: (name, timeline, p) => `${partition(name, timeline, p)}:time-index`,
    retentionLock: (name) => `${prefix}{et:${checked(name, NAME, 'event type name')}}:retention-lock`,
    partitionCompactionIndex: (name, timeline, p) => `${partition(name, timeline, p)}:compaction-keys`,
    partitionTombstones: (name, timeline, p) => `${partition(name, timeline, p)}:tombstones`,
    partitionEids: (name, timeline, p, generation) => `${partition(name, timeline, p)}:eid-keys-${generation}`,
    compactionLock: (name) => `${prefix}{et:${checked(name, NAME, 'event type name')}}:compaction-lock`,
    partitionNotices: (name, timeline, p) => `${partition(name, timeline, p)}:notices`,
    partitionReplicatedNotices: (name, timeline, p) => `${partition(name, timeline, p)}:replicated-notices`,
    metadataChannel: `${prefix}metadata-changes`,
    metadataChanges: `${registry}:metadata-changes`,
    subscriptionIds: `${registry}:subscriptions`,
    subscription: (id) => `${registry}:subscription:${checked(id, UUID, 'subscription id')}`,
    subscriptionsByKey: `${registry}:subscription-keys`,
    eventTypeSubscriptions: (name) => `${registry}:event-type:${checked(name, NAME, 'event type name')}:subscriptions`,
    subscriptionOffsets: (id) => `${subscriptionState(id)}:offsets`,
    subscriptionSessions: (id) => `${subscriptionState(id)}:sessions`,
    subscriptionSessionInfo: (id) => `${subscriptionState(id)}:session-info`,
    subscriptionTopology: (id) => `${subscriptionState(id)}:topology`,
    subscriptionReset: (id) => `${subscriptionState(id)}:reset`,
    subscriptionDeadLetters: (id) => `${subscriptionState(id)}:dead-letters`,
    subscriptionExpiredEvents: (id) => `${subscriptionState(id)}:expired-events`,
    subscriptionNotices: (id) => `${subscriptionState(id)}:notices`,
    subscriptionQueue: (id) => `${subscriptionState(id)}:queue`,
    subscriptionQueueOpen: (id) => `${subscriptionState(id)}:queue-open`,
    subscriptionQueueWaiting: (id) => `${subscriptionState(id)}:queue-waiting`,
    subscriptionQueueDeadlines: (id) => `${subscriptionState(id)}:queue-deadlines`,
    settingsFeatures: `${prefix}{settings}:features`,
    settingsBlacklist: `${prefix}{settings}:blacklist`,
    settingsAdmins: `${prefix}{settings}:admins`,
    settingsQuotas: `${prefix}{settings}:quotas`,
    quotaBucket: (kind, name) => `${prefix}{quotas}:${kind}:${name}`,
    settingsChannel: `${prefix}settings-changes`,
    storages: `${prefix}{settings}:storages`,
    defaultStorage: `${prefix}{settings}:default-storage`,
  };
}
