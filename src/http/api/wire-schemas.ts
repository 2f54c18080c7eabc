/**
 * The JSON objects of the HTTP API as TypeBox schemas (docs/http-api.md; docs/concepts.md), with
 * their TypeScript types derived by `Static<>`. They describe what the node sends and accepts; the
 * route declarations (src/http/routes/*.ts) use them per route and status, the OpenAPI document
 * (`openapi.ts`) names them under `components.schemas` ({@link NAMED_SCHEMAS}), and the integration
 * tests validate every JSON answer against them (test/support/response-schemas.ts).
 *
 * Wire names stay snake_case. Records the node builds itself (event types, subscriptions, storages,
 * timelines, batch items) are closed (`additionalProperties: false`): a field the node starts to send
 * must be described here first, or the integration tests fail. Request bodies are declared and checked
 * where they are read, in `src/domain` (e.g. src/domain/event-type/event-type-input.ts); `wire/` re-exports them.
 *
 * The schemas live in `wire/` by area (common pieces, event types, subscriptions, settings); this
 * module re-exports them and names them for the document.
 */
import type { TSchema } from '@sinclair/typebox';
import { ProblemSchema, AuthorizationAttributeSchema, PageLinksSchema } from './wire/common.js';
import { EventTypeAuthorizationSchema, EventTypeSchemaSchema, EventTypeStatisticsSchema, EventOwnerSelectorSchema, EventTypeRecordSchema, EventTypeInputSchema, CompatibilityCheckSchema, PartitionSchema, CursorSchema, ShiftedCursorSchema, CursorDistanceQuerySchema, CursorDistanceResultSchema, BatchItemResponseSchema, EventSchema } from './wire/event-types.js';
import { SubscriptionCursorSchema, SubscriptionCursorWithoutTokenSchema, SubscriptionAuthorizationSchema, InitialCursorSchema, SubscriptionRecordSchema, SubscriptionInputSchema, SubscriptionListSchema, PartitionStatsSchema, SubscriptionStatsSchema, SubscriptionScalingSchema, SubscriptionCursorsSchema, CursorCommitResultsSchema, StreamParametersBodySchema, StreamBatchSchema } from './wire/subscriptions.js';
import { AdminAuthorizationSchema, BlacklistSchema, FeatureSchema, RedisConfigurationSchema, StorageViewSchema, StorageInputSchema, TimelineSchema, AvroSchemaVersionSchema, ConsoleAccessSchema, StorageHeadroomSchema } from './wire/settings.js';

export * from './wire/common.js';
export * from './wire/event-types.js';
export * from './wire/subscriptions.js';
export * from './wire/settings.js';

/**
 * The schemas named in the OpenAPI document's `components.schemas`: wherever one of them occurs in a
 * route's schemas, the document refers to it by name.
 */
export const NAMED_SCHEMAS: Readonly<Record<string, TSchema>> = {
  Problem: ProblemSchema,
  AuthorizationAttribute: AuthorizationAttributeSchema,
  EventTypeAuthorization: EventTypeAuthorizationSchema,
  EventTypeSchema: EventTypeSchemaSchema,
  EventTypeStatistics: EventTypeStatisticsSchema,
  EventOwnerSelector: EventOwnerSelectorSchema,
  EventType: EventTypeRecordSchema,
  EventTypeInput: EventTypeInputSchema,
  CompatibilityCheck: CompatibilityCheckSchema,
  PageLinks: PageLinksSchema,
  Partition: PartitionSchema,
  Cursor: CursorSchema,
  ShiftedCursor: ShiftedCursorSchema,
  CursorDistanceQuery: CursorDistanceQuerySchema,
  CursorDistanceResult: CursorDistanceResultSchema,
  SubscriptionCursor: SubscriptionCursorSchema,
  SubscriptionCursorWithoutToken: SubscriptionCursorWithoutTokenSchema,
  BatchItemResponse: BatchItemResponseSchema,
  Event: EventSchema,
  SubscriptionAuthorization: SubscriptionAuthorizationSchema,
  InitialCursor: InitialCursorSchema,
  Subscription: SubscriptionRecordSchema,
  SubscriptionInput: SubscriptionInputSchema,
  SubscriptionList: SubscriptionListSchema,
  PartitionStats: PartitionStatsSchema,
  SubscriptionStats: SubscriptionStatsSchema,
  SubscriptionScaling: SubscriptionScalingSchema,
  SubscriptionCursors: SubscriptionCursorsSchema,
  CursorCommitResults: CursorCommitResultsSchema,
  StreamParameters: StreamParametersBodySchema,
  StreamBatch: StreamBatchSchema,
  AdminAuthorization: AdminAuthorizationSchema,
  Blacklist: BlacklistSchema,
  Feature: FeatureSchema,
  RedisConfiguration: RedisConfigurationSchema,
  Storage: StorageViewSchema,
  StorageInput: StorageInputSchema,
  Timeline: TimelineSchema,
  AvroSchemaVersion: AvroSchemaVersionSchema,
  ConsoleAccess: ConsoleAccessSchema,
  StorageHeadroom: StorageHeadroomSchema,
};

