import type { BrokerConfig } from '../../config/config-schema.js';
import { canonicalJson } from '../../domain/json/canonical-json.js';
import { partitionIds, servedEventType, type CompatibilityCheck, type CompatibilityMode, type EventType, type EventTypeSchema, type EventTypeTopology } from '../../domain/event-type/event-type.js';
import { parseEventTypeInput } from '../../domain/event-type/event-type-input.js';
import { toEventTypeRecord } from '../../domain/event-type/event-type-record.js';
import { checkBody } from '../../domain/event-type/rule-problems.js';
import { CompatibilityCheckInputSchema, SchemaAdditionCheck, SchemaFetchInputSchema } from '../../domain/schema/schema-version-input.js';
import { checkUpdate, partitionCountOf, type EventTypeInput } from '../../domain/event-type/event-type-rules.js';
import type { JsonObject } from '../../domain/schema/json-schema-walk.js';
import { evolveSchema } from '../../domain/schema/schema-evolution.js';
import { brokerError, BrokerError, errorDetail, invalidInput } from '../../errors/catalog.js';
import { scriptError } from '../../storage/script-failures.js';
import { randomUUID } from 'node:crypto';
import type { StoredTimeline } from '../../domain/storages/timeline.js';
import type { EventTypeStore } from '../../storage/event-type-store.js';
import type { PartitionLogs } from '../../storage/partition-logs.js';
import type { EventTypeCache } from './event-type-cache.js';
import { eventTypeListJson, type EventTypeListFilter } from './event-type-listing.js';
import { SchemaChecks } from './schema-checks.js';
import type { WorkerPool } from '../worker-pool.js';

/**
 * Who asks, and the authorization rules the registry applies for them (docs/security.md "Authorization: what a subject may do"):
 * administrators may widen retention bounds and relax compatibility modes.
 */
export interface RegistryCaller {
  readonly isAdmin: boolean;
  /** 422 detail lines for the authorization section and owner selector of a new or updated event type (plugin validation, `force_event_type_authz`). */
  authorizationProblems(input: Pick<EventType, 'authorization' | 'event_owner_selector'>, creating: boolean): string[];
  /** @throws BrokerError 403 unless the caller may update or delete `existing` */
  requireAdmin(existing: EventType): void;
  /**
   * The service itself, registering its own event types at start-up: their schemas are the broker's,
   * so the schema checks run under `TRUSTED_SCHEMA_CHECK_TIMEOUT_MS` (src/services/event-types/schema-checks.ts) instead of
   * `eventTypes.schemaCompileTimeoutMs` (a node on a loaded machine must not fail to start on its own schema).
   */
  readonly trusted?: boolean;
}

const FIRST_VERSION = '1.0.0';

/** The outcome of a schema addition: the event type afterwards and the one before. */
export interface SchemaAddition {
  readonly record: EventType;
  readonly previous: EventType;
  /** Whether a new schema version was stored (false: the schema was unchanged, nothing was written). */
  readonly changed: boolean;
}

/** What an {@link EventTypeRegistry} works with. */
export interface EventTypeRegistryOptions {
  readonly store: EventTypeStore;
  readonly cache: EventTypeCache;
  readonly pool: WorkerPool;
  readonly config: BrokerConfig['eventTypes'];
  /** Partition data over all timelines (deleted with the event type). */
  readonly logs: PartitionLogs;
  /** The id of the default storage, where a new event type's first timeline goes (docs/operations.md "Storages and timelines"). */
  readonly defaultStorage: () => Promise<string>;
  /**
   * Gets a created or changed event type's validation ready on this node before the registry answers
   * (`Publisher.prepare`), so its first batch does not wait for a compilation; never throws. Default: nothing.
   */
  readonly prepare?: (name: string) => Promise<void>;
}

/**
 * The event type registry (docs/concepts.md "Event types", "Schema versions"): input rules,
 * untrusted-schema checks (the guard, the validation cost budget and compilation, each in a worker under
 * a time limit, one at a time per node), schema evolution under the compatibility mode, storage and cache
 * invalidation on every node.
 */
export class EventTypeRegistry {
  private readonly store: EventTypeStore;
  private readonly cache: EventTypeCache;
  private readonly checks: SchemaChecks;
  private readonly config: BrokerConfig['eventTypes'];
  private readonly logs: PartitionLogs;
  private readonly defaultStorage: () => Promise<string>;
  private readonly prepare: (name: string) => Promise<void>;

  constructor(options: EventTypeRegistryOptions) {
    ({ store: this.store, cache: this.cache, config: this.config, logs: this.logs, defaultStorage: this.defaultStorage } = options);
    this.checks = new SchemaChecks(options.pool, options.config);
    this.prepare = options.prepare ?? (() => Promise.resolve());
  }

  /**
   * Gets an existing event type's validation ready on this node ({@link EventTypeRegistryOptions.prepare}):
   * for one another node created while this one could not hear its change notice yet (both starting at
   * once, each registering the broker's own event types). Never throws.
   */
  async prepareValidators(name: string): Promise<void> {
    await this.prepare(name);
  }

  /**
   * Registers an event type. @returns the stored record (served with 201)
   * @throws BrokerError 400 (shape, enum), 422 (rules, schema), 409 (name taken: before the schema is
   *   checked, so a taken name answers 409 even with a schema that would be refused), 503 (storage)
   */
  async create(body: unknown, caller: RegistryCaller): Promise<EventType> {
    const input = this.parse(body, caller.isAdmin);
    const authorizationProblems = caller.authorizationProblems(input, true);
    if (authorizationProblems.length > 0) throw brokerError('UNPROCESSABLE', { reason: authorizationProblems.join('\n') });
    // A taken name answers 409 before the schema is checked: producers that create their event type at every
    // start and take 409 as "already there" would otherwise cost a guard and a compilation in a worker each
    // time (30-40 ms each for a GitHub webhook schema, one at a time per node). The create script still
    // refuses a name taken meanwhile.
    if (await this.store.exists(input.name)) throw scriptError('createEventType', 'ALREADY_EXISTS', { name: input.name });
    const submitted = await this.checks.guard(input.schema.schema, input, caller);
    await this.checks.check(submitted, input, caller);
    const now = new Date().toISOString();
    const record = toEventTypeRecord(input, { type: 'json_schema', schema: input.schema.schema, version: FIRST_VERSION, created_at: now }, now, now);
    const topology: EventTypeTopology = { partitionCount: partitionCountOf(input, this.config), timeline: 1 };
    const first: StoredTimeline = { id: randomUUID(), order: 1, storageId: await this.defaultStorage(), createdAt: now, switchedAt: now, firstOffsets: [] };
    if (!(await this.store.create(record, topology, [first]))) throw scriptError('createEventType', 'ALREADY_EXISTS', { name: input.name });
    // Opened partitions are what appends check (PARTITION_MISSING): a node still holding an earlier event
    // type of this name after its deletion must not write into keys no event type owns. A publish that
    // comes before this opens the partition itself (`Publisher`).
    await this.logs.openPartitions(record.name, first, partitionIds(topology));
    await this.cache.announce(record.name);
    await this.prepare(record.name);
    return record;
  }

  /**
   * Updates an event type; a changed schema becomes a new version when its mode allows the change.
   * Fields absent from the body keep their stored value where they cannot change
   * (`default_statistic`) or optional with a stored default (`options`).
   * @throws BrokerError 404, 400, 422 (rules, immutable fields, incompatible schema), 409 (concurrent update), 503
   */
  async update(name: string, body: unknown, caller: RegistryCaller): Promise<EventType> {
    const merge = (previous: EventType): unknown =>
      isObject(body) ? { name, ...body, options: body.options ?? previous.options, default_statistic: body.default_statistic ?? previous.default_statistic } : body;
    return (await this.change(name, merge, caller, false)).record;
  }

  /**
   * Adds a schema version (`POST /event-types/{name}/schemas`): an update whose input
   * is the stored event type with only its `schema` replaced by `body` (`{type, schema}`), so it passes
   * exactly the checks of {@link update} — the admin right, the input rules, the schema checks in a
   * worker, evolution under the compatibility mode, the effective schema and its fields. A schema with
   * no change (the same text, or no structural difference) writes nothing.
   * The body's malformed problems (400: not an object, a field of the wrong JSON type) are answered before
   * the event type is looked up; its other problems as those of the event type's `schema` field.
   * @throws BrokerError 400 (malformed body), 404, 403, 422 (schema, incompatible change), 409 (concurrent update), 503
   */
  async addSchema(name: string, body: unknown, caller: RegistryCaller): Promise<SchemaAddition> {
    const shape = checkBody(SchemaAdditionCheck, { schema: body });
    if (!shape.ok && shape.status === 400) throw invalidInput(shape.status, shape.details, shape.errors);
    return this.change(name, (previous) => ({ ...previous, schema: body }), caller, true);
  }

  /**
   * Whether `body.schema` could become the next schema of the event type, compared with its stored
   * version `version` (`latest` allowed) under the event type's compatibility mode
   * (`POST /event-types/{name}/schemas/{version}/compatibility-check`). The schema goes
   * through the checks of {@link addSchema} (in a worker where a PUT runs them) but nothing is stored.
   * A change the mode refuses answers `compatible: false` with the reason; a schema that is invalid in
   * itself or for the event type's fields is a 422, as for an update.
   * @throws BrokerError 404 (event type, version), 400 (body not an object), 422 (no string `schema`, invalid
   *   schema; the body's schema is `CompatibilityCheckInputSchema`), 503
   */
  async checkCompatibility(name: string, version: string, body: unknown): Promise<CompatibilityCheck> {
    const existing = await this.store.get(name);
    if (!existing) throw brokerError('EVENT_TYPE_NOT_FOUND', { name });
    const against = version === 'latest' ? existing.record.schema : await this.store.schema(name, version);
    if (!against) throw schemaVersionNotFound(name, version);
    const checked = checkBody(CompatibilityCheckInputSchema, body);
    if (!checked.ok) throw invalidInput(checked.status, checked.details, checked.errors);
    // Retention bounds and other rules are not the check's concern: the stored event type passed them.
    const input = this.parse({ ...existing.record, schema: { type: existing.record.schema.type, schema: checked.value.schema } }, true);
    const submitted = await this.checks.guard(input.schema.schema, input);
    const mode = input.compatibility_mode;
    const evolution = evolveSchema(JSON.parse(against.schema) as JsonObject, submitted, against.version, mode);
    if (!evolution.ok) return { compatible: false, compatibility_mode: mode, validated_against_version: against.version, error: incompatibility(mode, evolution.reasons) };
    await this.checks.check(submitted, input);
    return { compatible: true, compatibility_mode: mode, validated_against_version: against.version };
  }

  /**
   * The newest stored schema version whose schema equals `body.schema` as JSON (key order and
   * whitespace aside; `POST /event-types/{name}/schemas?fetch=true`). Reads only.
   * @throws BrokerError 404 (event type, or no equal schema), 400 (body not an object), 422 (no string
   *   `schema`, unsupported `type`: `SchemaFetchInputSchema`; `schema` not JSON)
   */
  async findSchema(name: string, body: unknown): Promise<EventTypeSchema> {
    const checked = checkBody(SchemaFetchInputSchema, body);
    if (!checked.ok) throw invalidInput(checked.status, checked.details, checked.errors);
    const wanted = canonicalJson(checked.value.schema);
    if (wanted === undefined) throw brokerError('INVALID_SCHEMA', { reason: 'the schema is not JSON text nested at most 512 levels' });
    const found = (await this.schemas(name)).find((stored) => canonicalJson(stored.schema) === wanted);
    if (!found) throw brokerError('MATCHING_SCHEMA_NOT_FOUND', { name });
    return found;
  }

  /**
   * The update path shared by {@link update} and {@link addSchema}.
   * @param inputOf the update's input from the stored record
   * @param onlyWhenSchemaChanges write nothing when no new schema version results (a schema addition)
   */
  private async change(name: string, inputOf: (previous: EventType) => unknown, caller: RegistryCaller, onlyWhenSchemaChanges: boolean): Promise<SchemaAddition> {
    const existing = await this.store.get(name);
    if (!existing) throw brokerError('EVENT_TYPE_NOT_FOUND', { name });
    const previous = existing.record;
    caller.requireAdmin(previous);
    const input = this.parse(inputOf(previous), caller.isAdmin);
    const updateProblems = [...checkUpdate(previous, input, caller.isAdmin), ...caller.authorizationProblems(input, false)];
    if (updateProblems.length > 0) throw brokerError('UNPROCESSABLE', { reason: updateProblems.join('\n') });

    const submitted = await this.checks.guard(input.schema.schema, input, caller);
    let schema: EventTypeSchema = previous.schema;
    let newSchema: EventTypeSchema | undefined;
    if (input.schema.schema !== previous.schema.schema) {
      const evolution = evolveSchema(JSON.parse(previous.schema.schema) as JsonObject, submitted, previous.schema.version, input.compatibility_mode);
      if (!evolution.ok) throw brokerError('INCOMPATIBLE_SCHEMA', { mode: input.compatibility_mode, reasons: evolution.reasons.join('\n') });
      if (evolution.level !== 'none') {
        newSchema = { type: 'json_schema', schema: input.schema.schema, version: evolution.version, created_at: new Date().toISOString() };
        schema = newSchema;
      }
    }
    await this.checks.check(submitted, input, caller);
    if (onlyWhenSchemaChanges && newSchema === undefined) return { record: previous, previous, changed: false };
    const record = toEventTypeRecord(input, schema, previous.created_at, new Date().toISOString());
    const outcome = await this.store.update(record, existing.revision, newSchema);
    if (outcome !== 'updated') throw scriptError('updateEventType', outcome, { name });
    await this.cache.announce(name);
    await this.prepare(name);
    return { record, previous, changed: newSchema !== undefined };
  }

  /**
   * Deletes an event type and its events.
   * @param beforeDelete runs after the caller's admin right was checked and before anything is removed (the
   *   route checks the delete toggles and removes or refuses the event type's subscriptions there)
   * @throws BrokerError 404, 403 (not an admin of it), what `beforeDelete` throws, 503
   */
  async delete(name: string, caller: RegistryCaller, beforeDelete: (existing: EventType) => Promise<void>): Promise<void> {
    const existing = await this.store.get(name);
    if (!existing) throw brokerError('EVENT_TYPE_NOT_FOUND', { name });
    caller.requireAdmin(existing.record);
    await beforeDelete(existing.record);
    const removed = await this.store.delete(name);
    if (!removed) throw scriptError('deleteEventType', 'NOT_FOUND', { name });
    await this.cache.announce(name);
    // Every timeline's partitions, in its own storage (a closed timeline held the partitions it had then).
    await Promise.all(removed.timelines.all.map((t) => this.logs.dropTimeline(name, t, t.lastOffsets?.length ?? removed.topology.partitionCount)));
  }

  /** The record as served ({@link servedEventType}). @throws BrokerError 404 */
  async get(name: string): Promise<EventType> {
    const stored = await this.store.get(name);
    if (!stored) throw brokerError('EVENT_TYPE_NOT_FOUND', { name });
    return servedEventType(stored.record);
  }

  /**
   * Every event type as the JSON `GET /event-types` answers (UTF-8: an array of the records, sorted by
   * name), optionally only those of one owning application and those whose `writers` list names `writer`
   * explicitly (`GET /event-types?writer=`), built from the stored bytes ({@link eventTypeListJson}).
   * @throws BrokerError 503
   */
  async listJson(filter: EventTypeListFilter): Promise<Buffer> {
    return eventTypeListJson(await this.store.listStored(), filter);
  }

  /** Schema versions newest first. @throws BrokerError 404 */
  async schemas(name: string): Promise<EventTypeSchema[]> {
    await this.get(name);
    return this.store.schemas(name);
  }

  /** One schema version (`latest` allowed). @throws BrokerError 404 */
  async schema(name: string, version: string): Promise<EventTypeSchema> {
    const eventType = await this.get(name);
    const found = version === 'latest' ? eventType.schema : await this.store.schema(name, version);
    if (!found) throw schemaVersionNotFound(name, version);
    return found;
  }

  /** @param isAdmin whether the caller is an administrator (lifts the retention bounds) */
  private parse(body: unknown, isAdmin: boolean): EventTypeInput {
    const parsed = parseEventTypeInput(body, this.config, isAdmin);
    if (!parsed.ok) throw invalidInput(parsed.status, parsed.details, parsed.errors);
    return parsed.value;
  }

}

function schemaVersionNotFound(name: string, version: string): BrokerError {
  return brokerError('SCHEMA_VERSION_NOT_FOUND', { version, name });
}

/** The 422 detail of a schema change the compatibility mode refuses. */
function incompatibility(mode: CompatibilityMode, reasons: readonly string[]): string {
  return errorDetail('INCOMPATIBLE_SCHEMA', { mode, reasons: reasons.join('\n') });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
