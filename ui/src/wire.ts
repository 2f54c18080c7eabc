// The API's records as the console reads them (docs/http-api.md "Endpoints"); only the fields the console uses.

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
  readonly type: string;
  readonly schema: string;
  readonly version?: string;
  readonly created_at?: string;
}

/** An event type record. */
export interface EventType {
  readonly name: string;
  readonly owning_application: string;
  readonly category: string;
  readonly partition_strategy: string;
  /** `[]` unless the strategy is `hash`. */
  readonly partition_key_fields: readonly string[];
  readonly compatibility_mode?: string;
  readonly cleanup_policy?: string;
  readonly enrichment_strategies?: readonly string[];
  readonly schema: SchemaRecord;
  readonly authorization?: EventTypeAuthorization;
  readonly options?: { readonly retention_time?: number };
  /** Who the events are meant for; absent when not given. */
  readonly audience?: 'component-internal' | 'business-unit-internal' | 'company-internal' | 'external-partner' | 'external-public';
  readonly created_at?: string;
  readonly updated_at?: string;
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
  readonly read_from: string;
  readonly authorization?: { readonly admins: readonly Attribute[]; readonly readers: readonly Attribute[] };
  readonly created_at: string;
}

/** A page of a listing. */
export interface Page<T> {
  readonly items: readonly T[];
  readonly _links?: { readonly next?: { readonly href: string }; readonly prev?: { readonly href: string } };
}

/** One partition of `GET /subscriptions/{id}/stats`. */
export interface PartitionStats {
  readonly partition: string;
  readonly state: string;
  readonly unconsumed_events?: number;
  readonly consumer_lag_seconds?: number;
  readonly stream_id: string;
  readonly assignment_type: string;
  readonly expired_events?: number;
}

/** `GET /subscriptions/{id}/stats`. */
export interface Stats {
  readonly items: readonly { readonly event_type: string; readonly partitions: readonly PartitionStats[] }[];
}

/** A subscription cursor. */
export interface SubscriptionCursor {
  readonly event_type: string;
  readonly partition: string;
  readonly offset: string;
  readonly cursor_token?: string;
}

/** One item of a 422 or 207 publish answer. */
export interface BatchItem {
  readonly eid?: string;
  readonly publishing_status: 'submitted' | 'failed' | 'aborted';
  readonly step?: string;
  readonly detail?: string;
}

/** One line of a low-level or subscription stream. */
export interface StreamBatch {
  readonly cursor: { readonly partition: string; readonly offset: string; readonly event_type?: string; readonly cursor_token?: string };
  readonly events?: readonly unknown[];
  readonly info?: { readonly debug?: string };
}

/** `GET /settings/blacklist`. */
export interface Blacklist {
  readonly producers: { readonly event_types: readonly string[]; readonly apps: readonly string[] };
  readonly consumers: { readonly event_types: readonly string[]; readonly apps: readonly string[] };
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
