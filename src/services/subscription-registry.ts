import { randomUUID } from 'node:crypto';
import type { BrokerConfig } from '../config/config-schema.js';
import { partitionIds, type AuthorizationAttribute, type EventType } from '../domain/event-type/event-type.js';
import type { RuleResult } from '../domain/event-type/rule-problems.js';
import type { EventFilters } from './event-filters.js';
import { filterText, parseSubscriptionInput, parseSubscriptionUpdate } from '../domain/subscription/subscription-input.js';
import {
  initialCursorProblems,
  isEventTypeName,
  isSubscriptionId,
  subscriptionKey,
  type EventTypePartitions,
  type Subscription,
  type SubscriptionInput,
} from '../domain/subscription/subscription.js';
import type { PartitionRange } from '../domain/cursor/offsets.js';
import { brokerError, BrokerError, invalidInput } from '../errors/catalog.js';
import { scriptError } from '../storage/script-failures.js';
import type { EventTypeStore, StoredEventType } from '../storage/event-type-store.js';
import type { PartitionLogs } from '../storage/partition-logs.js';
import type { SubscriptionStore } from '../storage/subscription-store.js';

/**
 * Filters of `GET /subscriptions` (docs/http-api.md "Paging"): all optional; `eventTypes` must all be read;
 * `reader` must be listed explicitly in the subscription's `authorization.readers`.
 */
export interface SubscriptionFilter {
  readonly owningApplication?: string;
  readonly eventTypes: readonly string[];
  readonly reader?: AuthorizationAttribute;
}

/**
 * A position in the newest-first listing for token paging (feature `token_subscription_iteration`):
 * the page continues after (`next`) or before (`prev`) the subscription `id` created at `createdMs`.
 */
export interface SubscriptionCursor {
  readonly direction: 'next' | 'prev';
  readonly createdMs: number;
  readonly id: string;
}

/** A token-paged result: the page and the positions of the pages around it (undefined = none). */
export interface SubscriptionTokenPage {
  readonly items: Subscription[];
  readonly next: SubscriptionCursor | undefined;
  readonly prev: SubscriptionCursor | undefined;
}

/** Rules the caller applies to a subscription body (authorization, attribute validation, feature toggles). */
export interface SubscriptionCreationRules {
  /** Runs only when the key is new. @throws BrokerError 403/422/503 to refuse the creation (toggles, attribute validation) */
  check(input: SubscriptionInput): void;
  /**
   * Runs with the stored records of the subscription's event types, also when the key exists already:
   * the caller must be allowed to read every one of them, or the answer would reveal a subscription of
   * event types it may not read.
   * @throws BrokerError 403 to refuse
   */
  authorizeRead(eventTypes: readonly EventType[]): void;
}

/** A page of a listing: `offset` ≥ 0 and `limit` 1..1000, already checked (see `pageOf`). */
export interface SubscriptionPage {
  readonly offset: number;
  readonly limit: number;
}

/** The 404 of an unknown subscription (reference wording). */
export function subscriptionNotFound(id: string): BrokerError {
  return brokerError('SUBSCRIPTION_NOT_FOUND', { id });
}

/**
 * The subscription registry (docs/concepts.md "Subscriptions"): create-or-get by subscription key, read, list, update of the
 * mutable fields and delete. Consumption state (offsets, sessions) is not touched here except that a
 * delete removes it.
 */
export class SubscriptionRegistry {
  constructor(
    private readonly store: SubscriptionStore,
    private readonly eventTypes: EventTypeStore,
    private readonly partitions: PartitionLogs,
    private readonly config: BrokerConfig['subscriptions'],
    /** Checks a subscription's `filter` (docs/consuming.md "Filters") in the worker threads. */
    private readonly filters: Pick<EventFilters, 'check'>,
  ) {}

  /**
   * Creates a subscription, or finds the one with the same key (owning_application, set of event types,
   * consumer_group): that one is returned unchanged with `created: false` (answered 200), even when the
   * rest of the body differs, except its `filter` (docs/consuming.md "Filters"): a body whose filter is not the existing
   * subscription's (as canonical JSON; none and one differ too) is refused with 422 naming the difference. A new
   * key's filter is checked as an event type's schema is (guard, cost, compilation, in a worker). Only a body whose key is new is checked against storage: its event types
   * must exist, their partitions together must not exceed `subscriptions.maxPartitions`, and with
   * `read_from: cursors` there must be one valid initial cursor per partition. The body's lists are
   * counted first (at most `subscriptions.maxPartitions` event types), before any Redis call.
   * @returns the record and whether it was created (201) or already existed (200)
   * @param rules `check` only when the key is new (an existing subscription is returned even while
   *   creation is disabled); `authorizeRead` on both paths, with the event types that exist
   * @throws BrokerError 400 (shape, `read_from`), 422 (rules, too many event types, unknown event type,
   *   too many partitions, initial cursors, an unusable filter or one that differs from the existing subscription's), what `rules` throws (403 when the caller may not read an
   *   event type), 503 (storage)
   */
  async create(body: unknown, rules?: SubscriptionCreationRules): Promise<{ record: Subscription; created: boolean }> {
    const input = ruleChecked(parseSubscriptionInput(body, this.config));
    const existing = await this.existing(subscriptionKey(input));
    if (existing) {
      if (rules) rules.authorizeRead((await this.lookup(existing.event_types)).flatMap((s) => (s.eventType ? [s.eventType.record] : [])));
      if (filterText(input.filter) !== filterText(existing.filter)) throw filterDiffers(existing);
      return { record: existing, created: false };
    }
    rules?.check(input);
    // Checked in the worker threads under the schema time limit, as an event type's schema.
    if (input.filter !== undefined) await this.filters.check(JSON.stringify(input.filter), 'Field "filter"');

    const stored = await this.lookup(input.event_types);
    const missing = stored.filter((s) => s.eventType === undefined).map((s) => `"${s.name}"`);
    if (missing.length > 0) throw brokerError('UNKNOWN_EVENT_TYPES', { names: missing.join(', ') });
    const found = stored.flatMap((s) => (s.eventType ? [s.eventType] : []));
    rules?.authorizeRead(found.map((s) => s.record));
    const total = found.reduce((sum, et) => sum + et.topology.partitionCount, 0);
    if (total > this.config.maxPartitions) {
      throw brokerError('TOO_MANY_PARTITIONS', { count: total, limit: this.config.maxPartitions });
    }
    if (input.read_from === 'cursors') {
      const problems = initialCursorProblems(input, await this.partitionsOf(found));
      if (problems.length > 0) throw brokerError('UNPROCESSABLE', { reason: problems.join('\n') });
    }

    const now = new Date().toISOString();
    const record = toRecord(randomUUID(), input, now, now);
    const id = await this.store.create(record);
    if (id === record.id) return { record, created: true };
    // Another request stored the same key between the lookup and the script.
    const winner = await this.store.get(id);
    if (!winner) throw brokerError('SUBSCRIPTION_CHANGED_CONCURRENTLY');
    return { record: winner, created: false };
  }

  /** @throws BrokerError 404 (also for an id that is not a uuid), 503 */
  async get(id: string): Promise<Subscription> {
    if (!isSubscriptionId(id)) throw subscriptionNotFound(id);
    const record = await this.store.get(id);
    if (!record) throw subscriptionNotFound(id);
    return record;
  }

  /**
   * One page of subscriptions, newest first (created_at, then id, descending), optionally only those of
   * an owning application and reading every given event type.
   * Without filters one page is read; with filters the candidates are read and filtered in memory.
   * @throws BrokerError 503
   */
  async list(filter: SubscriptionFilter, page: SubscriptionPage): Promise<Subscription[]> {
    if (filter.owningApplication === undefined && filter.eventTypes.length === 0 && filter.reader === undefined) {
      return this.store.getMany(await this.store.idsNewestFirst(page.offset, page.limit));
    }
    return (await this.matching(filter)).slice(page.offset, page.offset + page.limit);
  }

  /**
   * Token paging (feature `token_subscription_iteration`): up to `limit` subscriptions after or before a
   * position of the newest-first order, so pages stay stable while subscriptions are created or deleted.
   * `cursor` undefined = the first page.
   * @throws BrokerError 503
   */
  async listByCursor(filter: SubscriptionFilter, cursor: SubscriptionCursor | undefined, limit: number): Promise<SubscriptionTokenPage> {
    const all = await this.matching(filter);
    const position = (s: Subscription) => ({ createdMs: Date.parse(s.created_at), id: s.id });
    // Newest first: a is before b when created later, or at the same ms with a larger id.
    const before = (a: { createdMs: number; id: string }, b: { createdMs: number; id: string }) => a.createdMs > b.createdMs || (a.createdMs === b.createdMs && a.id > b.id);
    let start = 0;
    if (cursor?.direction === 'next') start = all.findIndex((s) => before(cursor, position(s)));
    if (cursor?.direction === 'prev') {
      const end = all.findIndex((s) => !before(position(s), cursor));
      start = Math.max(0, (end === -1 ? all.length : end) - limit);
    }
    if (start === -1) start = all.length;
    const items = all.slice(start, start + limit);
    const first = items[0];
    const last = items[items.length - 1];
    return {
      items,
      next: last !== undefined && start + limit < all.length ? { direction: 'next', ...position(last) } : undefined,
      prev: first !== undefined && start > 0 ? { direction: 'prev', ...position(first) } : undefined,
    };
  }

  /** Every subscription passing `filter`, newest first (created_at, then id, descending). */
  private async matching(filter: SubscriptionFilter): Promise<Subscription[]> {
    const { owningApplication, eventTypes, reader } = filter;
    // A name that cannot be an event type is read by no subscription (and must not reach a key).
    if (!eventTypes.every(isEventTypeName)) return [];
    const candidates = newestFirst(
      await this.store.getMany(eventTypes.length > 0 ? await this.store.idsOfEventTypes([...new Set(eventTypes)]) : await this.store.idsNewestFirst(0)),
    );
    return candidates.filter(
      (s) =>
        (owningApplication === undefined || s.owning_application === owningApplication) &&
        (reader === undefined || (s.authorization?.readers ?? []).some((a) => a.data_type === reader.data_type && a.value === reader.value)),
    );
  }

  /**
   * Updates authorization, annotations and labels (everything else is immutable; docs/concepts.md
   * "Subscriptions");
   * fields absent from the body keep their stored value. Stores a new `updated_at`.
   * @param authorize runs with the stored record and the checked input before anything is written
   * @throws BrokerError 404, 400 (shape), 422 (rules or a changed immutable field), what `authorize` throws, 503
   */
  async update(id: string, body: unknown, authorize?: (existing: Subscription, next: SubscriptionInput) => void): Promise<Subscription> {
    const existing = await this.get(id);
    // A subscription stored under a larger subscriptions.maxPartitions stays updatable.
    const maxPartitions = Math.max(this.config.maxPartitions, existing.event_types.length, existing.initial_cursors.length);
    const input = ruleChecked(parseSubscriptionUpdate(existing, body, { maxPartitions }));
    authorize?.(existing, input);
    const record = toRecord(existing.id, input, existing.created_at, new Date().toISOString());
    if (!(await this.store.replace(record))) throw subscriptionNotFound(id);
    return record;
  }

  /** Deletes a subscription and its consumption state; live streams of it are told to close. @throws BrokerError 404, 503 */
  async delete(id: string, authorize?: (existing: Subscription) => void): Promise<void> {
    const record = await this.get(id);
    authorize?.(record);
    if (!(await this.store.delete(record))) throw scriptError('deleteSubscription', 'NOT_FOUND', { id });
  }

  /** The stored event type of each name (undefined when it does not exist), one lookup per name. */
  private lookup(names: readonly string[]): Promise<{ name: string; eventType: StoredEventType | undefined }[]> {
    return Promise.all(names.map(async (name) => ({ name, eventType: await this.eventTypes.get(name) })));
  }

  private async existing(key: string): Promise<Subscription | undefined> {
    const id = await this.store.idOfKey(key);
    return id === undefined ? undefined : this.store.get(id);
  }

  private async partitionsOf(eventTypes: readonly StoredEventType[]): Promise<Map<string, EventTypePartitions>> {
    const entries = await Promise.all(
      eventTypes.map(async ({ record, topology, timelines }): Promise<[string, EventTypePartitions]> => {
        const ids = partitionIds(topology);
        const ranges = await this.partitions.ranges(record.name, timelines, ids);
        return [record.name, { timelines, ranges: new Map(ids.map((p, i) => [p, ranges[i] as PartitionRange])) }];
      }),
    );
    return new Map(entries);
  }
}

/** The 422 of a create whose key exists with another filter (docs/consuming.md "Filters"). */
function filterDiffers(existing: Subscription): BrokerError {
  const stored = existing.filter === undefined ? 'has no filter' : 'has another filter';
  return brokerError('UNPROCESSABLE', {
    reason: `Field "filter" differs from the existing subscription ${existing.id} with the same owning_application, event_types and consumer_group, which ${stored}; a filter is fixed with its subscription: use another consumer_group for another filter`,
  });
}

function ruleChecked(parsed: RuleResult<SubscriptionInput>): SubscriptionInput {
  if (!parsed.ok) throw invalidInput(parsed.status, parsed.details, parsed.errors);
  return parsed.value;
}

/** Newest first, ties by id descending: the order of the ids sorted set read backwards. */
function newestFirst(records: Subscription[]): Subscription[] {
  return records.sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? 1 : a.id > b.id ? -1 : 0) : a.created_at < b.created_at ? 1 : -1));
}

/** The stored record: validated input plus the service-set fields, in the record's field order. */
function toRecord(id: string, input: SubscriptionInput, createdAt: string, updatedAt: string): Subscription {
  return {
    id,
    owning_application: input.owning_application,
    event_types: input.event_types,
    consumer_group: input.consumer_group,
    read_from: input.read_from,
    initial_cursors: input.initial_cursors,
    ...(input.filter ? { filter: input.filter } : {}),
    ...(input.authorization ? { authorization: input.authorization } : {}),
    ...(input.annotations ? { annotations: input.annotations } : {}),
    ...(input.labels ? { labels: input.labels } : {}),
    created_at: createdAt,
    updated_at: updatedAt,
  };
}
