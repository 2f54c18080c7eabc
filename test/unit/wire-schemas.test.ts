import type { Static, TSchema } from '@sinclair/typebox';
import { describe, expectTypeOf, it } from 'vitest';
import type { EventType, EventTypeSchema } from '../../src/domain/event-type.js';
import type { StorageView } from '../../src/domain/storage.js';
import type { Subscription } from '../../src/domain/subscription.js';
import type { TimelineView } from '../../src/domain/timeline.js';
import type { Problem } from '../../src/errors/catalog.js';
import type * as wire from '../../src/http/api/wire-schemas.js';
import type { CompatibilityCheck } from '../../src/services/event-type-registry.js';
import type { PartitionRecord } from '../../src/services/cursor-service.js';
import type { PartitionStats, SubscriptionCursor } from '../../src/services/consumption/subscription-cursors.js';
import type { AdminAuthorization } from '../../src/storage/settings-store.js';
import type { BatchItemResponse } from '../../src/domain/batch-item-response.js';

/** `T` with every property and array readonly, as the hand-written interfaces declare them. */
type DeepReadonly<T> = T extends readonly (infer E)[] ? readonly DeepReadonly<E>[] : T extends object ? { readonly [K in keyof T]: DeepReadonly<T[K]> } : T;
/** The type a schema derives, made readonly like the hand-written interfaces. */
type Derived<S extends TSchema> = DeepReadonly<Static<S>>;
type Loose<T> = DeepReadonly<T>;

// The types derived from the wire schemas (`Static<>`) are the domain's types that describe the same
// JSON — checked by the compiler (`npm run typecheck`), so either side changing alone fails here. The
// event type, subscription, storage and timeline records declare their schemas in src/domain and derive
// their types from them (so those lines hold by construction); the others are still written twice.
describe('the wire schemas derive the hand-written wire types', () => {
  it('event types, schemas and compatibility checks', () => {
    expectTypeOf<Derived<typeof wire.EventTypeRecordSchema>>().toEqualTypeOf<Loose<EventType>>();
    expectTypeOf<Derived<typeof wire.EventTypeSchemaSchema>>().toEqualTypeOf<Loose<EventTypeSchema>>();
    expectTypeOf<Derived<typeof wire.CompatibilityCheckSchema>>().toEqualTypeOf<Loose<CompatibilityCheck>>();
  });

  it('subscriptions, their cursors and stats', () => {
    expectTypeOf<Derived<typeof wire.SubscriptionRecordSchema>>().toEqualTypeOf<Loose<Subscription>>();
    expectTypeOf<Derived<typeof wire.SubscriptionCursorSchema>>().toEqualTypeOf<Loose<SubscriptionCursor>>();
    expectTypeOf<Derived<typeof wire.PartitionStatsSchema>>().toEqualTypeOf<Loose<PartitionStats>>();
  });

  it('partitions, batch items, problems, settings, storages and timelines', () => {
    expectTypeOf<Derived<typeof wire.PartitionSchema>>().toEqualTypeOf<Loose<PartitionRecord>>();
    expectTypeOf<Derived<typeof wire.BatchItemResponseSchema>>().toEqualTypeOf<Loose<BatchItemResponse>>();
    expectTypeOf<Derived<typeof wire.AdminAuthorizationSchema>>().toEqualTypeOf<Loose<AdminAuthorization>>();
    expectTypeOf<Derived<typeof wire.StorageViewSchema>>().toEqualTypeOf<Loose<StorageView>>();
    expectTypeOf<Derived<typeof wire.TimelineSchema>>().toEqualTypeOf<Loose<TimelineView>>();
    // The catalog's Problem always has a detail; the wire schema also allows `type` and `instance`
    // (RFC 7807), so a node's problem is a wire problem, not the other way round.
    expectTypeOf<Loose<Problem>>().toExtend<Derived<typeof wire.ProblemSchema>>();
  });
});
