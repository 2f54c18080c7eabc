import type { Static, TSchema } from '@sinclair/typebox';
import { describe, expectTypeOf, it } from 'vitest';
import type * as wire from '../../src/http/api/wire-schemas.js';
import type * as ui from '../../ui/src/wire.js';
import type * as quotas from '../../src/domain/batch/publish-quota.js';

// The console (ui/src) is compiled for the browser on its own and cannot import the server's modules,
// so ui/src/wire.ts declares the API's records again. These checks, run by the compiler (`npm run
// typecheck` compiles test/), tie each of its types to the wire schema it mirrors: a field added,
// removed, renamed or retyped on either side alone fails here.

/** `T` with every property and array readonly, as the console declares its records. */
type DeepReadonly<T> = T extends readonly (infer E)[] ? readonly DeepReadonly<E>[] : T extends object ? { readonly [K in keyof T]: DeepReadonly<T[K]> } : T;
/** The type a wire schema derives, made readonly like the console's types. */
type Derived<S extends TSchema> = DeepReadonly<Static<S>>;
/** True when `A` and `B` are assignable to each other. */
type Mutual<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

describe('the console\'s wire types mirror the server\'s wire schemas', () => {
  it('event types, their schemas, partitions and batch items, both ways', () => {
    expectTypeOf<Mutual<ui.Attribute, Derived<typeof wire.AuthorizationAttributeSchema>>>().toEqualTypeOf<true>();
    expectTypeOf<Mutual<ui.EventTypeAuthorization, Derived<typeof wire.EventTypeAuthorizationSchema>>>().toEqualTypeOf<true>();
    expectTypeOf<Mutual<ui.SchemaRecord, Derived<typeof wire.EventTypeSchemaSchema>>>().toEqualTypeOf<true>();
    expectTypeOf<Mutual<ui.EventType, Derived<typeof wire.EventTypeRecordSchema>>>().toEqualTypeOf<true>();
    expectTypeOf<Mutual<ui.Partition, Derived<typeof wire.PartitionSchema>>>().toEqualTypeOf<true>();
    expectTypeOf<Mutual<ui.Cursor, Derived<typeof wire.CursorSchema>>>().toEqualTypeOf<true>();
    expectTypeOf<Mutual<ui.BatchItem, Derived<typeof wire.BatchItemResponseSchema>>>().toEqualTypeOf<true>();
  });

  it('subscriptions, their cursors and stats, both ways', () => {
    expectTypeOf<Mutual<ui.Subscription, Derived<typeof wire.SubscriptionRecordSchema>>>().toEqualTypeOf<true>();
    expectTypeOf<Mutual<ui.SubscriptionCursor, Derived<typeof wire.SubscriptionCursorSchema>>>().toEqualTypeOf<true>();
    expectTypeOf<Mutual<ui.SubscriptionCursorWithoutToken, Derived<typeof wire.SubscriptionCursorWithoutTokenSchema>>>().toEqualTypeOf<true>();
    expectTypeOf<Mutual<ui.PartitionStats, Derived<typeof wire.PartitionStatsSchema>>>().toEqualTypeOf<true>();
    expectTypeOf<Mutual<ui.Stats, Derived<typeof wire.SubscriptionStatsSchema>>>().toEqualTypeOf<true>();
  });

  it('settings and the console\'s access answer, both ways', () => {
    expectTypeOf<Mutual<ui.Blacklist, Derived<typeof wire.BlacklistSchema>>>().toEqualTypeOf<true>();
    expectTypeOf<Mutual<ui.Admins, Derived<typeof wire.AdminAuthorizationSchema>>>().toEqualTypeOf<true>();
    expectTypeOf<Mutual<ui.PublishQuotaList, Derived<typeof quotas.PublishQuotaListSchema>>>().toEqualTypeOf<true>();
    expectTypeOf<Mutual<ui.Access, Derived<typeof wire.ConsoleAccessSchema>>>().toEqualTypeOf<true>();
    expectTypeOf<Mutual<ui.MasterHeadroom, Derived<typeof wire.MasterHeadroomSchema>>>().toEqualTypeOf<true>();
    expectTypeOf<Mutual<ui.StorageHeadroom, Derived<typeof wire.StorageHeadroomSchema>>>().toEqualTypeOf<true>();
  });

  it('stream lines and listing pages: what the server sends is what the console reads', () => {
    // A stream line's events are free-form JSON objects (the console only prints them) and a page is
    // generic over its items, so these hold one way: every answer the schema allows fits the console's type.
    expectTypeOf<Derived<typeof wire.StreamBatchSchema>>().toExtend<ui.StreamBatch>();
    expectTypeOf<Derived<typeof wire.SubscriptionListSchema>>().toExtend<ui.Page<ui.Subscription>>();
  });
});
