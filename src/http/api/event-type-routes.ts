/** Route table entries of the event type area (spec "Event type registry", "Publishing", "Low-level consumption"; WIRE.md). */
import { Type } from '@sinclair/typebox';
import { PartitionCountInputSchema } from '../../domain/repartitioning.js';
import { CompatibilityCheckInputSchema, SchemaVersionInputSchema } from '../../domain/schema-version-input.js';
import { TimelineInputSchema } from '../../domain/timeline.js';
import { DeletedEventsInputSchema } from '../../domain/deleted-events.js';
import {
  CompatibilityCheckSchema,
  CursorDistanceResultSchema,
  CursorSchema,
  EventSchema,
  EventTypeInputSchema,
  EventTypeRecordSchema,
  EventTypeSchemaSchema,
  PageLinksSchema,
  PartitionSchema,
  TimelineSchema,
} from './wire-schemas.js';
import { batchItems, empty, json, jsonBody, problems, type RouteSpec } from './route-model.js';
import { NameParam, Bool, Paging, Location, streamQuery, stream, route } from './route-parts.js';
import { CursorDistancesInputSchema, CursorsLagInputSchema, ShiftedCursorsInputSchema } from '../../domain/cursor-input.js';

/** The query of `POST /event-types/{name}/schemas`: `fetch` (any case; absent: false). */
export const AddSchemaQuery = Type.Object({ fetch: Type.Optional(Bool('find the stored version equal to the body instead of adding one', true)) });

/**
 * An authorization attribute as a query parameter, `<data_type>:<value>` (split at the first colon,
 * both parts non-empty; another value is 400): `writer` of `GET /event-types`, `reader` of `GET /subscriptions`.
 */
export const AttributeQueryParam = (description: string) =>
  Type.String({ pattern: '^[^:]+:[\\s\\S]+$', 'x-status': 400, 'x-messages': { pattern: 'must have the form <data_type>:<value>, e.g. user:alice' }, description });

/** The query of `GET /event-types` (spec "Event type registry"): both filters optional. */
export const ListEventTypesQuery = Type.Object({
  owning_application: Type.Optional(Type.String({ description: 'only the event types of this application' })),
  writer: Type.Optional(AttributeQueryParam('`<data_type>:<value>`: only the event types whose `writers` name this attribute explicitly')),
});

/** The query of `GET /event-types/{name}/schemas`: paging (limit 1..1000, default 20). */
export const SchemaListQuery = Type.Object(Paging);

/** The query of the low-level stream `GET /event-types/{name}/events`: the stream parameters and `cursors`. */
export const LowLevelStreamQuery = Type.Object({ ...streamQuery, cursors: Type.Optional(Type.String({ description: 'JSON array of cursors (for clients that cannot send headers); not with X-Broker-Cursors (400)' })) });
/** The headers the low-level stream reads (their JSON is checked by src/domain/cursor-input.ts: 400). */
export const LowLevelStreamHeaders = Type.Object({
  'X-Broker-Cursors': Type.Optional(Type.String({ description: 'JSON array of cursors, each partition at most once; only those partitions are streamed' })),
  'Last-Event-ID': Type.Optional(Type.String({ description: 'the `id` of the last server-sent event received (an EventSource reconnecting)' })),
});
/** The query of `GET /event-types/{name}/partitions`. */
export const PartitionsQuery = Type.Object({ cursors: Type.Optional(Type.String({ description: 'JSON array of cursors, each partition at most once: adds unconsumed_events to their partitions (malformed: 422)' })) });
/** The query of `GET /event-types/{name}/partitions/{partition}`. */
export const PartitionQuery = Type.Object({ consumed_offset: Type.Optional(Type.String({ description: 'adds unconsumed_events after this offset (invalid: 422)' })) });

/** Event types, schemas and registry listings. */
export const EVENT_TYPE_ROUTES: RouteSpec[] = [
  route({
    method: 'GET', path: '/event-types', operationId: 'listEventTypes', tag: 'Event types', access: 'authenticated',
    summary: 'List event types',
    query: ListEventTypesQuery,
    responses: { '200': json('every event type (filtered)', Type.Array(EventTypeRecordSchema)), ...problems(400) },
  }),
  route({
    method: 'POST', path: '/event-types', operationId: 'createEventType', tag: 'Event types', access: 'authenticated',
    summary: 'Create an event type',
    description: 'Refused while the feature `disable_event_type_creation` is on; `authorization` is required with `force_event_type_authz`. Runs under the control-plane limiter.',
    body: jsonBody(EventTypeInputSchema),
    responses: { '201': json('created', EventTypeRecordSchema, { Location }), ...problems(400, 403, 409, 422, 503) },
  }),
  route({
    method: 'GET', path: '/event-types/{name}', operationId: 'getEventType', tag: 'Event types', access: 'authenticated', params: NameParam,
    summary: 'Get an event type',
    responses: { '200': json('the event type', EventTypeRecordSchema), ...problems(404) },
  }),
  route({
    method: 'PUT', path: '/event-types/{name}', operationId: 'updateEventType', tag: 'Event types', access: 'authenticated', params: NameParam,
    summary: 'Update an event type', description: 'Needs the event type\'s `admins` (or an administrator). A schema change is checked against `compatibility_mode`.',
    body: jsonBody(EventTypeInputSchema),
    responses: { '200': json('the updated event type', EventTypeRecordSchema), ...problems(400, 403, 404, 409, 422, 503) },
  }),
  route({
    method: 'DELETE', path: '/event-types/{name}', operationId: 'deleteEventType', tag: 'Event types', access: 'authenticated', params: NameParam,
    summary: 'Delete an event type',
    description: 'Needs its `admins`; features `disable_event_type_deletion`, `event_type_deletion_only_admins`, `delete_event_type_with_subscriptions` apply.',
    responses: { '200': empty('deleted'), ...problems(403, 404, 409, 503) },
  }),
  route({
    method: 'GET', path: '/event-types/{name}/schemas', operationId: 'listSchemas', tag: 'Schemas', access: 'authenticated', params: NameParam,
    summary: 'List the schema versions of an event type (newest first)', query: SchemaListQuery,
    responses: { '200': json('a page of versions', Type.Object({ _links: PageLinksSchema, items: Type.Array(EventTypeSchemaSchema) }, { additionalProperties: false })), ...problems(400, 404) },
  }),
  route({
    method: 'POST', path: '/event-types/{name}/schemas', operationId: 'addSchema', tag: 'Schemas', access: 'authenticated', params: NameParam,
    summary: 'Add a schema version, or find one (`fetch=true`)',
    description:
      'Without `fetch`: a schema update (needs the event type\'s `admins`), answering the latest schema; the body is checked as the event type\'s `schema` field (problems name `schema.type`, `schema.schema`). With `fetch=true`: the stored version equal to the schema sent (404 when none is); there any field missing or of the wrong type is 422.',
    query: AddSchemaQuery,
    body: jsonBody(SchemaVersionInputSchema),
    responses: { '200': json('the latest (or found) schema version', EventTypeSchemaSchema), ...problems(400, 403, 404, 422, 503) },
  }),
  route({
    method: 'GET', path: '/event-types/{name}/schemas/{version}', operationId: 'getSchema', tag: 'Schemas', access: 'authenticated',
    params: Type.Object({ name: Type.String(), version: Type.String({ description: 'a semantic version, or `latest`' }) }),
    summary: 'Get one schema version',
    responses: { '200': json('the schema version', EventTypeSchemaSchema), ...problems(404) },
  }),
  route({
    method: 'POST', path: '/event-types/{name}/schemas/{version}/compatibility-check', operationId: 'checkSchemaCompatibility', tag: 'Schemas', access: 'authenticated',
    params: Type.Object({ name: Type.String(), version: Type.String({ description: 'the version to compare with, or `latest`' }) }),
    summary: 'Check a schema against a stored version (stores nothing)',
    body: jsonBody(CompatibilityCheckInputSchema),
    responses: { '200': json('whether the schema would be accepted', CompatibilityCheckSchema), ...problems(400, 404, 422) },
  }),
  route({
    method: 'GET', path: '/registry/partition-strategies', operationId: 'listPartitionStrategies', tag: 'Event types', access: 'authenticated',
    summary: 'Partition strategies', responses: { '200': json('their names', Type.Array(Type.String())) },
  }),
  route({
    method: 'GET', path: '/registry/enrichment-strategies', operationId: 'listEnrichmentStrategies', tag: 'Event types', access: 'authenticated',
    summary: 'Enrichment strategies', responses: { '200': json('their names', Type.Array(Type.String())) },
  }),
];

const partitionCountBody = jsonBody(PartitionCountInputSchema);
const partitionCountResponses = { '204': empty('repartitioned (or already that count)'), ...problems(400, 403, 404, 409, 422, 503) };
const partitionCountDescription = 'Grows the partition count (feature `repartitioning`; config `eventTypes.maxPartitionCount`, `subscriptions.maxPartitions`). Needs the event type\'s `admins`.';

/** Publishing, deleted events, partitions and cursor tools, repartitioning, timelines and the low-level stream. */
export const PUBLISHING_ROUTES: RouteSpec[] = [
  route({
    method: 'POST', path: '/event-types/{name}/events', operationId: 'publishEvents', tag: 'Publishing', access: 'authenticated', params: NameParam,
    summary: 'Publish a batch of events',
    description: 'Checks in order: blacklist (403), body (400), event type (404), `writers` (403), then per event. 422: nothing was written; 207: storage failed some partitions (retry the `failed` items). Body limits: config `http.maxBodyBytes`, `http.maxInflatedBodyBytes`; `Content-Encoding: gzip` or `zstd` accepted.',
    body: jsonBody(Type.Array(EventSchema)),
    responses: {
      '200': empty('every event submitted'),
      '207': batchItems('some partitions could not be written: one item per event, in input order'),
      '422': batchItems('validation, partitioning or enrichment failed for some events; nothing was written'),
      ...problems(400, 403, 404, 413, 415, 503),
    },
  }),
  route({
    method: 'POST', path: '/event-types/{name}/deleted-events', operationId: 'deleteEvents', tag: 'Publishing', access: 'authenticated', params: NameParam,
    summary: 'Delete events of a compacted event type (tombstones)',
    description: 'Body: events with their compaction key and partition data. Authorization as for publishing. The request header `span-ctx` is echoed as `span_ctx`.',
    headers: Type.Object({ 'span-ctx': Type.Optional(Type.String({ description: 'span context, echoed in the answer header span_ctx' })) }),
    body: jsonBody(DeletedEventsInputSchema),
    responses: {
      '200': empty('the tombstones were written', { span_ctx: { description: 'the request\'s span-ctx', schema: Type.String() } }),
      '207': batchItems('some partitions could not be written'),
      '422': batchItems('some events were refused, one item per event; or a problem: the event type\'s cleanup_policy is `delete`. Nothing was written', true),
      ...problems(400, 403, 404, 413, 415, 503),
    },
  }),
  route({
    method: 'GET', path: '/event-types/{name}/partitions', operationId: 'listPartitions', tag: 'Partitions and cursors', access: 'authenticated', params: NameParam,
    summary: 'List partitions',
    query: PartitionsQuery,
    responses: { '200': json('the partitions', Type.Array(PartitionSchema)), ...problems(400, 403, 404, 422) },
  }),
  route({
    method: 'GET', path: '/event-types/{name}/partitions/{partition}', operationId: 'getPartition', tag: 'Partitions and cursors', access: 'authenticated',
    params: Type.Object({ name: Type.String(), partition: Type.String() }),
    summary: 'Get one partition',
    query: PartitionQuery,
    responses: { '200': json('the partition', PartitionSchema), ...problems(400, 403, 404, 422) },
  }),
  route({
    method: 'POST', path: '/event-types/{name}/cursor-distances', operationId: 'cursorDistances', tag: 'Partitions and cursors', access: 'authenticated', params: NameParam,
    summary: 'Distances between cursors', body: jsonBody(CursorDistancesInputSchema),
    responses: { '200': json('one result per query', Type.Array(CursorDistanceResultSchema)), ...problems(400, 403, 404, 422) },
  }),
  route({
    method: 'POST', path: '/event-types/{name}/cursors-lag', operationId: 'cursorsLag', tag: 'Partitions and cursors', access: 'authenticated', params: NameParam,
    summary: 'Events after each cursor', body: jsonBody(CursorsLagInputSchema),
    responses: { '200': json('the partitions with unconsumed_events', Type.Array(PartitionSchema)), ...problems(400, 403, 404, 422) },
  }),
  route({
    method: 'POST', path: '/event-types/{name}/shifted-cursors', operationId: 'shiftCursors', tag: 'Partitions and cursors', access: 'authenticated', params: NameParam,
    summary: 'Move cursors by a number of events', body: jsonBody(ShiftedCursorsInputSchema),
    responses: { '200': json('the moved cursors', Type.Array(CursorSchema)), ...problems(400, 403, 404, 422) },
  }),
  route({
    method: 'POST', path: '/event-types/{name}/partition-count', operationId: 'repartition', tag: 'Event types', access: 'authenticated', params: NameParam,
    summary: 'Repartition an event type', description: partitionCountDescription, body: partitionCountBody, responses: partitionCountResponses,
  }),
  route({
    method: 'PUT', path: '/event-types/{name}/partition-count', operationId: 'repartitionPut', tag: 'Event types', access: 'authenticated', params: NameParam,
    summary: 'Repartition an event type (PUT form)', description: partitionCountDescription, body: partitionCountBody, responses: partitionCountResponses,
  }),
  route({
    method: 'GET', path: '/event-types/{name}/timelines', operationId: 'listTimelines', tag: 'Storages and timelines', access: 'authenticated', params: NameParam,
    summary: 'List the timelines of an event type', description: 'Needs the administrators\' `readers`.',
    responses: { '200': json('the timelines, oldest first', Type.Array(TimelineSchema)), ...problems(403, 404) },
  }),
  route({
    method: 'POST', path: '/event-types/{name}/timelines', operationId: 'createTimeline', tag: 'Storages and timelines', access: 'authenticated', params: NameParam,
    summary: 'Switch an event type to a new timeline on a storage', description: 'Needs the administrators\' `admins` list.',
    body: jsonBody(TimelineInputSchema),
    responses: { '201': json('the new, active timeline', TimelineSchema), ...problems(400, 403, 404, 409, 422, 503) },
  }),
  route({
    method: 'GET', path: '/event-types/{name}/events', operationId: 'lowLevelStream', tag: 'Low-level streams', access: 'authenticated', params: NameParam, deprecated: true,
    summary: 'Stream an event type (low-level, deprecated)',
    description: 'Cursors in `X-Broker-Cursors` (or `Last-Event-ID`, or the query parameter `cursors`); absent: every partition from its newest offset. `Accept: text/event-stream` asks for server-sent events. `Accept-Encoding: zstd` or `gzip` compresses the stream.',
    headers: LowLevelStreamHeaders,
    query: LowLevelStreamQuery,
    responses: {
      '200': stream('the stream: a batch per line; keep-alive batches have no `events`', { Warning: { description: 'the low-level interface is deprecated', schema: Type.String(), required: true } }, true),
      ...problems(400, 403, 404, 412, 422),
    },
  }),
];
