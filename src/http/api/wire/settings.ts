/** Wire schemas of settings, storages, timelines, Avro envelope schemas and the console (docs/operations.md, docs/http-api.md). */
import { Type } from '@sinclair/typebox';
import { FEATURES } from '../../../services/settings.js';
import { Closed, StringEnum } from './common.js';

/** The administrators (docs/operations.md "Administrator settings"): declared in src/domain/settings/admin-authorization.ts, whose `AdminAuthorization` type is derived from it. */
export { AdminAuthorizationSchema } from '../../../domain/settings/admin-authorization.js';

/** `GET /settings/blacklist`. */
export const BlacklistSchema = Type.Object(
  {
    producers: Type.Object({ event_types: Type.Array(Type.String()), apps: Type.Array(Type.String()) }, Closed),
    consumers: Type.Object({ event_types: Type.Array(Type.String()), apps: Type.Array(Type.String()) }, Closed),
  },
  Closed,
);

/** A feature toggle (docs/operations.md "Feature toggles"). */
export const FeatureSchema = Type.Object({ feature: StringEnum(FEATURES), enabled: Type.Boolean() }, Closed);
/** `POST /settings/features` body: declared and checked in `src/domain/settings/settings-input.ts`. */
export { FeatureInputSchema } from '../../../domain/settings/settings-input.js';
/** `GET /settings/features`. */
export const FeatureListSchema = Type.Object({ items: Type.Array(FeatureSchema) }, Closed);

/** A storage as sent to `POST /storages` (docs/operations.md "Storages and timelines"): declared and checked in `src/domain/storages/storage.ts`. */
export { StorageInputSchema } from '../../../domain/storages/storage.js';

/**
 * A storage as served, where it keeps its keys, and a timeline as served: declared with their records in
 * src/domain/storages/storage.ts and src/domain/storages/timeline.ts, whose types are derived from them.
 */
export { RedisConfigurationSchema, StorageViewSchema } from '../../../domain/storages/storage.js';
export { TimelineSchema } from '../../../domain/storages/timeline.js';

/** An Avro schema version of the service's envelopes. */
export const AvroSchemaVersionSchema = Type.Object({ version: Type.String(), avro_schema: Type.Object({}, { description: 'an Avro record schema' }) }, Closed);

/** `GET /ui/api/access`: what the subject may do (console). */
export const ConsoleAccessSchema = Type.Object(
  {
    subject: Type.String(),
    administrator: Type.Boolean(),
    settings: Type.Object({ read: Type.Boolean(), write: Type.Boolean(), admin: Type.Boolean() }, Closed),
    event_type: Type.Optional(Type.Object({ name: Type.String(), read: Type.Boolean(), write: Type.Boolean(), admin: Type.Boolean() }, Closed)),
    subscription: Type.Optional(Type.Object({ id: Type.String(), read: Type.Boolean(), admin: Type.Boolean(), reset: Type.Boolean() }, Closed)),
  },
  Closed,
);


/** One Redis master's memory in `GET /ui/api/storage-headroom` (console). */
export const MasterHeadroomSchema = Type.Object(
  {
    storage: Type.String({ description: 'the storage (Redis deployment) id; `default` for the node\'s own' }),
    master: Type.String({ description: 'the master\'s address as the node reaches it' }),
    used_bytes: Type.Integer({ description: 'used_memory' }),
    limit_bytes: Type.Integer({ description: 'maxmemory, or the machine\'s memory when it has none; 0 when unknown' }),
    limit_source: Type.Union([Type.Literal('maxmemory'), Type.Literal('system_memory'), Type.Literal('unknown')]),
    mark_bytes: Type.Union([Type.Integer(), Type.Null()], { description: 'the high-water mark; null when the limit is unknown' }),
    full: Type.Boolean({ description: 'at or above the mark: publishes to its partitions are refused with 507' }),
    seconds_to_mark: Type.Union([Type.Number(), Type.Null()], { description: 'projected seconds until the mark at the last minute\'s net rate; null when not growing' }),
  },
  Closed,
);

/** `GET /ui/api/storage-headroom`: the Redis memory headroom (console overview). */
export const StorageHeadroomSchema = Type.Object(
  {
    masters: Type.Array(MasterHeadroomSchema),
    event_types: Type.Array(
      Type.Object({ name: Type.String(), bytes: Type.Integer(), growth_bytes_per_second: Type.Number() }, Closed),
      { description: 'the event types holding the most Redis bytes, largest first (at most 10)' },
    ),
    redis_bytes_per_json_byte: Type.Number({ description: 'Redis bytes per byte of event JSON: measured, or the documented assumption' }),
    ratio_measured: Type.Boolean(),
  },
  Closed,
);
