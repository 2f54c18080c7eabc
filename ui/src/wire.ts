// The API's records as the console reads them (docs/http-api.md "Endpoints"). The console is compiled
// for the browser on its own and cannot import the server's modules, so these declare the records again:
// test/unit/console-wire-types.test.ts checks each against the server's wire schema it mirrors (`npm run
// typecheck`), so a field changed on one side alone fails there.

/** `{data_type, value}` of an authorization list. */
export interface Attribute {
  readonly data_type: string;
  readonly value: string;
}

/** An event type's authorization section. */
export interface EventTypeAuthorization {
  readonly admins: readonly Attribute[];
  readonly readers: readonly Attribute[];
  readonly writers: readonly Attribute[];
}

/** A schema version record. */
export interface SchemaRecord {
  readonly type: 'json_schema';
  readonly schema: string;
  readonly version: string;
  readonly created_at: string;
}

/** An event type record. */
export interface EventType {
  readonly name: string;
  readonly owning_application: string;
  readonly category: 'undefined' | 'data' | 'business';
  readonly enrichment_strategies: readonly 'metadata_enrichment'[];
  readonly partition_strategy: 'random' | 'hash' | 'user_defined';
  /** `[]` unless the strategy is `hash`. */
  readonly partition_key_fields: readonly string[];
  readonly compatibility_mode: 'compatible' | 'forward' | 'none';
  readonly schema: SchemaRecord;
  readonly cleanup_policy: 'delete' | 'compact' | 'compact_and_delete';
  readonly default_statistic?: { readonly messages_per_minute: number; readonly message_size: number; readonly read_parallelism: number; readonly write_parallelism: number };
  /** `retention_time` in milliseconds. */
  readonly options: { readonly retention_time: number };
  readonly authorization?: EventTypeAuthorization;
  readonly annotations?: { readonly [key: string]: string };
  readonly labels?: { readonly [key: string]: string };
  readonly ordering_key_fields?: readonly string[];
  /** Who the events are meant for; absent when not given. */
  readonly audience?: 'component-internal' | 'business-unit-internal' | 'company-internal' | 'external-partner' | 'external-public';
  readonly event_owner_selector?: { readonly type: 'path' | 'static'; readonly name: string; readonly value: string };
  readonly created_at: string;
  readonly updated_at: string;
}

/** A partition record of an event type. */
export interface Partition {
  readonly partition: string;
  readonly oldest_available_offset: string;
  readonly newest_available_offset: string;
  readonly unconsumed_events?: number;
}

/** A subscription record. */
export interface Subscription {
  readonly id: string;
  readonly owning_application: string;
  readonly event_types: readonly string[];
  readonly consumer_group: string;
  readonly read_from: 'begin' | 'end' | 'cursors';
  readonly initial_cursors: readonly { readonly event_type: string; readonly partition: string; readonly offset: string }[];
  /** A draft-04 JSON Schema an event must satisfy to be delivered; absent = every event. */
  readonly filter?: { readonly [key: string]: unknown };
  readonly authorization?: { readonly admins: readonly Attribute[]; readonly readers: readonly Attribute[] };
  readonly annotations?: { readonly [key: string]: string };
  readonly labels?: { readonly [key: string]: string };
  readonly created_at: string;
  readonly updated_at: string;
}

/** A page of a listing. */
export interface Page<T> {
  readonly items: readonly T[];
  readonly _links?: { readonly next?: { readonly href: string }; readonly prev?: { readonly href: string } };
}

/** One partition of `GET /subscriptions/{id}/stats`. */
export interface PartitionStats {
  readonly partition: string;
  readonly state: 'unassigned' | 'reassigning' | 'assigned';
  readonly unconsumed_events?: number;
  readonly consumer_lag_seconds?: number;
  /** The consumer's state on the partition over the broker's status window (docs/consuming.md "Consumer status"). */
  readonly consumer_status?: 'ok' | 'lagging' | 'stalled' | 'stopped';
  /** Seconds until the unconsumed events are consumed at the recent commit rate. */
  readonly drain_seconds?: number;
  readonly stream_id: string;
  readonly assignment_type: 'auto' | 'direct';
  /** Dead-letter queue: sends of its events that ended without a commit. */
  readonly failed_send_count?: number;
  /** Dead-letter queue: the last offset of the search window. */
  readonly dead_letter_search_until?: string;
  readonly expired_events?: number;
  /** Queue mode: events handed to streams and not acknowledged. */
  readonly in_flight_events?: number;
  /** Queue mode: of those, events waiting to be handed out again. */
  readonly redelivery_events?: number;
}

/** `GET /subscriptions/{id}/stats`. */
export interface Stats {
  readonly items: readonly { readonly event_type: string; readonly partitions: readonly PartitionStats[] }[];
}

/** A subscription cursor, as `GET /subscriptions/{id}/cursors` answers it. */
export interface SubscriptionCursor {
  readonly partition: string;
  readonly offset: string;
  readonly event_type: string;
  readonly cursor_token: string;
}

/** A cursor of one event type's partition, as `GET /event-types/{name}/cursors-at-time` answers them. */
export interface Cursor {
  readonly partition: string;
  readonly offset: string;
}

/** A cursor to reset a subscription to (`PATCH /subscriptions/{id}/cursors`): no token. */
export interface SubscriptionCursorWithoutToken {
  readonly partition: string;
  readonly offset: string;
  readonly event_type: string;
}

/** One item of a 422 or 207 publish answer. */
export interface BatchItem {
  /** `metadata.eid` of the event, `""` when it had none. */
  readonly eid: string;
  readonly publishing_status: 'submitted' | 'failed' | 'aborted';
  readonly step: 'none' | 'validating' | 'partitioning' | 'enriching' | 'publishing';
  readonly detail: string;
}

/** One line of a low-level or subscription stream. */
export interface StreamBatch {
  readonly cursor: { readonly partition: string; readonly offset: string; readonly event_type?: string; readonly cursor_token?: string };
  readonly events?: readonly unknown[];
  readonly info?: { readonly debug?: string; readonly stream_close_reason?: StreamCloseReason };
}

/** `info.stream_close_reason` of a stream's last batch: why the broker ended it (docs/consuming.md "Why a stream ended"). */
export type StreamCloseReason =
  | 'stream_limit_reached'
  | 'stream_timeout_reached'
  | 'keep_alive_limit_reached'
  | 'commit_timeout_reached'
  | 'event_type_repartitioned'
  | 'cursors_reset'
  | 'node_shutting_down'
  | 'subscription_deleted'
  | 'event_type_deleted'
  | 'authorization_changed'
  | 'consumption_blocked'
  | 'session_lost';

/** `GET /settings/blacklist`. */
export interface Blacklist {
  readonly producers: { readonly event_types: readonly string[]; readonly apps: readonly string[] };
  readonly consumers: { readonly event_types: readonly string[]; readonly apps: readonly string[] };
}

/** One quota of `GET /settings/quotas` (docs/publishing.md "Quotas"). */
export interface PublishQuotaEntry {
  readonly kind: 'subject' | 'owning_application';
  readonly name: string;
  readonly events_per_second?: number;
  readonly bytes_per_second?: number;
}

/** `GET /settings/quotas`. */
export interface PublishQuotaList {
  readonly items: readonly PublishQuotaEntry[];
}

/** `GET /settings/admins`. */
export interface Admins {
  readonly admins: readonly Attribute[];
  readonly readers: readonly Attribute[];
  readonly writers: readonly Attribute[];
}

/** What the subject may do (`GET /ui/api/access`, src/http/routes/console.ts). */
export interface Access {
  readonly subject: string;
  readonly administrator: boolean;
  readonly settings: { readonly read: boolean; readonly write: boolean; readonly admin: boolean };
  readonly event_type?: { readonly name: string; readonly read: boolean; readonly write: boolean; readonly admin: boolean };
  readonly subscription?: { readonly id: string; readonly read: boolean; readonly admin: boolean; readonly reset: boolean };
}

/** One Redis master's memory (`GET /ui/api/storage-headroom`). */
export interface MasterHeadroom {
  readonly storage: string;
  readonly master: string;
  readonly used_bytes: number;
  readonly limit_bytes: number;
  readonly limit_source: 'maxmemory' | 'system_memory' | 'unknown';
  readonly mark_bytes: number | null;
  readonly full: boolean;
  readonly seconds_to_mark: number | null;
}

/** The Redis memory headroom the overview shows (`GET /ui/api/storage-headroom`). */
export interface StorageHeadroom {
  readonly masters: readonly MasterHeadroom[];
  readonly event_types: readonly { readonly name: string; readonly bytes: number; readonly growth_bytes_per_second: number }[];
  readonly redis_bytes_per_json_byte: number;
  readonly ratio_measured: boolean;
}
