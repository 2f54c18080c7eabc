import { randomUUID } from 'node:crypto';
import type { EventType } from '../../src/domain/event-type/event-type.js';

/** A business event type body for POST /event-types. */
export function businessEventType(name: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name,
    owning_application: 'test-app',
    category: 'business',
    enrichment_strategies: ['metadata_enrichment'],
    partition_strategy: 'random',
    schema: {
      type: 'json_schema',
      schema: JSON.stringify({
        type: 'object',
        properties: { order_number: { type: 'string' }, amount: { type: 'number' } },
        required: ['order_number'],
      }),
    },
    ...overrides,
  };
}

/** A valid business event for {@link businessEventType}. */
export function orderEvent(orderNumber: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { metadata: { eid: randomUUID(), occurred_at: new Date().toISOString() }, order_number: orderNumber, amount: 1, ...extra };
}

/** Draft-04 schema text with the given properties and required list. */
export function schemaText(properties: Record<string, unknown>, required: string[] = [], extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ type: 'object', properties, ...(required.length ? { required } : {}), ...extra });
}

/**
 * A stored event type record as the registry keeps it (unit tests of publishing and compaction): a
 * business event type hash-partitioned on `id`, schema `{id: string}` at `schemaVersion`, policy `delete`.
 */
export function eventTypeRecord(overrides: Partial<EventType> = {}, schemaVersion = '1.0.0'): EventType {
  const now = '2026-01-01T00:00:00.000Z';
  return {
    name: 'unit.order',
    owning_application: 'app',
    category: 'business',
    enrichment_strategies: ['metadata_enrichment'],
    partition_strategy: 'hash',
    partition_key_fields: ['id'],
    compatibility_mode: 'forward',
    schema: { type: 'json_schema', schema: JSON.stringify({ type: 'object', properties: { id: { type: 'string' } }, required: ['id'] }), version: schemaVersion, created_at: now },
    cleanup_policy: 'delete',
    options: { retention_time: 1000 },
    created_at: now,
    updated_at: now,
    ...overrides,
  };
}
