import { randomUUID } from 'node:crypto';

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
