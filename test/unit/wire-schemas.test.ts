import type { Static, TSchema } from '@sinclair/typebox';
import { describe, expectTypeOf, it } from 'vitest';
import type { AdminAuthorization } from '../../src/domain/settings/admin-authorization.js';
import type { BatchItemResponse } from '../../src/domain/batch/batch-item-response.js';
import type { CompatibilityCheck, EventType, EventTypeSchema } from '../../src/domain/event-type/event-type.js';
import type { PartitionRecord } from '../../src/domain/event-type/partition-record.js';
import type { StorageView } from '../../src/domain/storages/storage.js';
import type { PartitionStats, Subscription, SubscriptionCursor } from '../../src/domain/subscription/subscription.js';
import type { TimelineView } from '../../src/domain/storages/timeline.js';
import type { DeepReadonly } from '../../src/domain/json/wire-parts.js';
import type { Problem } from '../../src/errors/catalog.js';
import type * as wire from '../../src/http/api/wire-schemas.js';

/** The type a schema derives, made readonly as the domain hands records around. */
type Derived<S extends TSchema> = DeepReadonly<Static<S>>;
/** A domain type made readonly throughout (batch items, stats entries are built mutable). */
type Loose<T> = DeepReadonly<T>;

// Every record the node serves declares its TypeBox schema in src/domain beside its type, which is derived
// from it (`Static<>`), and src/http/api/wire/ re-exports the schema for the OpenAPI document. These lines,
// checked by the compiler (`npm run typecheck`), fail when a record's type and the schema the wire module
// serves drift apart (a type written by hand again and changed alone, or the wire module serving another
// schema than the domain's). The one type still written by hand is the catalog's Problem, checked against
// the wire schema below.
describe('the wire schemas derive the domain\'s record types', () => {
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
