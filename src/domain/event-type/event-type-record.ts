/** The record an event type is stored and served as, built from its validated input. */
import type { EventType, EventTypeSchema } from './event-type.js';
import type { EventTypeInput } from './event-type-rules.js';

/**
 * The stored record of an event type: the validated input plus the service-set fields (schema version,
 * creation and update times), in the order the records are served.
 */
export function toEventTypeRecord(input: EventTypeInput, schema: EventTypeSchema, createdAt: string, updatedAt: string): EventType {
  return {
    name: input.name,
    owning_application: input.owning_application,
    category: input.category,
    enrichment_strategies: input.enrichment_strategies,
    partition_strategy: input.partition_strategy,
    partition_key_fields: input.partition_key_fields,
    compatibility_mode: input.compatibility_mode,
    schema,
    cleanup_policy: input.cleanup_policy,
    ...(input.default_statistic ? { default_statistic: input.default_statistic } : {}),
    options: input.options,
    ...(input.authorization ? { authorization: input.authorization } : {}),
    ...(input.annotations ? { annotations: input.annotations } : {}),
    ...(input.labels ? { labels: input.labels } : {}),
    ...(input.ordering_key_fields ? { ordering_key_fields: input.ordering_key_fields } : {}),
    ...(input.audience ? { audience: input.audience } : {}),
    ...(input.event_owner_selector ? { event_owner_selector: input.event_owner_selector } : {}),
    created_at: createdAt,
    updated_at: updatedAt,
  };
}
