/** Wire schemas of settings, storages, timelines, Avro envelope schemas and the console (docs/operations.md, docs/http-api.md). */
import { Type } from '@sinclair/typebox';
import { FEATURES } from '../../../services/settings.js';
import { Closed, StringEnum, Timestamp, AttributeList } from './common.js';

/** The administrators (docs/operations.md "Administrator settings"). */
export const AdminAuthorizationSchema = Type.Object({ admins: AttributeList, readers: AttributeList, writers: AttributeList }, { ...Closed, description: 'the administrators: admins change them and storages, readers read settings, writers change the blacklist and features' });

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
/** `POST /settings/features` body: declared and checked in `src/domain/settings-input.ts`. */
export { FeatureInputSchema } from '../../../domain/settings-input.js';
/** `GET /settings/features`. */
export const FeatureListSchema = Type.Object({ items: Type.Array(FeatureSchema) }, Closed);

/** Where a storage keeps its keys. */
export const RedisConfigurationSchema = Type.Object(
  {
    url: Type.Optional(Type.String({ description: 'redis:// or rediss:// URL (a password is shown as ***)' })),
    cluster_nodes: Type.Optional(Type.Array(Type.String({ description: 'host:port' }))),
    key_prefix: Type.String({ pattern: '^[A-Za-z0-9:._-]{0,64}$' }),
  },
  Closed,
);

/** A storage as sent to `POST /storages` (docs/operations.md "Storages and timelines"): declared and checked in `src/domain/storage.ts`. */
export { StorageInputSchema } from '../../../domain/storage.js';

/** A storage as served. */
export const StorageViewSchema = Type.Object(
  { id: Type.String(), storage_type: Type.Literal('redis'), redis_configuration: RedisConfigurationSchema, default: Type.Boolean() },
  Closed,
);

/** A timeline as served (docs/concepts.md "Timelines and storages"). */
export const TimelineSchema = Type.Object(
  {
    id: Type.String({ format: 'uuid' }),
    event_type: Type.String(),
    order: Type.Integer({ minimum: 1 }),
    storage_id: Type.String(),
    topic: Type.String(),
    created_at: Timestamp,
    switched_at: Timestamp,
    cleaned_up_at: Type.Optional(Timestamp),
    latest_position: Type.Optional(Type.Object({ offsets: Type.Array(Type.Integer({ minimum: -1 })) }, Closed)),
  },
  Closed,
);

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

