/**
 * The checks of an untrusted schema submitted with an event type (docs/security.md "Hostile input"):
 * the guard (meta-schema and keyword bounds), then the effective schema's rules, the key fields, its
 * validation cost and compilation, each step that costs what the schema decides run in a worker under
 * a time limit.
 */
import type { BrokerConfig } from '../../config/config-schema.js';
import { buildEffectiveSchema } from '../../domain/schema/effective-schema.js';
import { checkFieldsAgainstSchema, type EventTypeInput } from '../../domain/event-type/event-type-rules.js';
import type { JsonObject } from '../../domain/schema/json-schema-walk.js';
import { compatibleModeViolations } from '../../domain/schema/schema-evolution.js';
import { schemaCostLimitsOf } from '../../domain/schema/schema-cost.js';
import { brokerError } from '../../errors/catalog.js';
import type { WorkerPool } from '../worker-pool.js';

/** Time limit of the schema checks of the service's own event types, in ms. */
export const TRUSTED_SCHEMA_CHECK_TIMEOUT_MS = 60_000;

/** Whether the schema is the service's own (its event types registered at start-up): checked under {@link TRUSTED_SCHEMA_CHECK_TIMEOUT_MS}. */
export interface SchemaSubmitter {
  readonly trusted?: boolean;
}

/** Runs the schema checks of the event type registry in the worker threads. */
export class SchemaChecks {
  constructor(
    private readonly pool: WorkerPool,
    private readonly config: BrokerConfig['eventTypes'],
  ) {}

  /**
   * The submitted schema checked in a worker under `schemaCompileTimeoutMs` (the
   * meta-schema check and the keyword bounds cost what the user's schema decides), then parsed here:
   * once accepted it is proven bounded (size, depth, subschemas, enum sizes), so the rules below that
   * walk it on the main thread are too. @throws BrokerError 422, 503 (BUSY: too many checks waiting)
   */
  async guard(text: string, input: EventTypeInput, caller?: SchemaSubmitter): Promise<JsonObject> {
    const guarded = await this.pool.guardSchema(text, this.config.maxSchemaBytes, schemaCostLimitsOf(this.config), this.schemaCheckTimeoutMs(caller));
    if (!guarded.ok) throw brokerError('INVALID_SCHEMA', { reason: guarded.reason });
    const schema = JSON.parse(text) as JsonObject;
    if (input.compatibility_mode === 'compatible') {
      const violations = compatibleModeViolations(schema);
      if (violations.length > 0) throw brokerError('INVALID_SCHEMA', { reason: violations.join('\n') });
    }
    return schema;
  }

  private schemaCheckTimeoutMs(caller: SchemaSubmitter | undefined): number {
    return caller?.trusted === true ? TRUSTED_SCHEMA_CHECK_TIMEOUT_MS : this.config.schemaCompileTimeoutMs;
  }

  /**
   * Effective schema rules, key fields, then its validation cost and compilation in a worker under
   * `schemaCompileTimeoutMs`. @throws BrokerError 422, 503 (BUSY: too many checks waiting)
   */
  async check(submitted: JsonObject, input: EventTypeInput, caller?: SchemaSubmitter): Promise<void> {
    const effective = buildEffectiveSchema(submitted, input.category, input.cleanup_policy, input.compatibility_mode);
    if (!effective.ok) throw brokerError('INVALID_SCHEMA', { reason: effective.reason });
    const fieldProblems = checkFieldsAgainstSchema(input, effective.schema);
    if (fieldProblems.length > 0) throw brokerError('UNPROCESSABLE', { reason: fieldProblems.join('\n') });
    const compiled = await this.pool.compile(JSON.stringify(effective.schema), schemaCostLimitsOf(this.config), this.schemaCheckTimeoutMs(caller));
    if (!compiled.ok) throw brokerError('INVALID_SCHEMA', { reason: compiled.reason });
  }
}
