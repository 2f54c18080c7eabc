/**
 * Event types and events of the benchmarks: `bench.order` (business, a 10-field schema, ~500-byte
 * events) and the small (~100-byte) events of the memory scenario. Content is pseudo-random from a
 * fixed seed; every event gets its own `eid`.
 */
import { randomUUID } from 'node:crypto';

/** The 10 fields of an order (besides the business `metadata` the broker defines). */
export const ORDER_SCHEMA = {
  type: 'object',
  properties: {
    order_number: { type: 'string', minLength: 1, maxLength: 64 },
    customer_id: { type: 'string', minLength: 1, maxLength: 64 },
    status: { type: 'string', enum: ['created', 'paid', 'packed', 'shipped', 'delivered', 'cancelled'] },
    amount: { type: 'number', minimum: 0 },
    currency: { type: 'string', minLength: 3, maxLength: 3 },
    quantity: { type: 'integer', minimum: 1 },
    priority: { type: 'integer', minimum: 0, maximum: 9 },
    channel: { type: 'string', maxLength: 32 },
    shipping_address: {
      type: 'object',
      properties: {
        street: { type: 'string' },
        city: { type: 'string' },
        postal_code: { type: 'string' },
        country_code: { type: 'string', minLength: 2, maxLength: 2 },
      },
      required: ['street', 'city', 'postal_code', 'country_code'],
    },
    note: { type: 'string', maxLength: 1000 },
  },
  required: ['order_number', 'customer_id', 'status', 'amount', 'currency', 'quantity', 'priority', 'channel', 'shipping_address'],
} as const;

/** `POST /event-types` body of a business event type with `partitions` partitions (random strategy). */
export function businessEventType(name: string, schema: object, partitions: number): object {
  return {
    name,
    owning_application: 'bench',
    category: 'business',
    enrichment_strategies: ['metadata_enrichment'],
    partition_strategy: 'random',
    schema: { type: 'json_schema', schema: JSON.stringify(schema) },
    default_statistic: { messages_per_minute: 100_000, message_size: 500, read_parallelism: partitions, write_parallelism: partitions },
  };
}

/** `POST /event-types` body of an `undefined` category event type (no enrichment, stored as sent). */
export function undefinedEventType(name: string, schema: object, partitions: number): object {
  return {
    name,
    owning_application: 'bench',
    category: 'undefined',
    enrichment_strategies: [],
    partition_strategy: 'random',
    schema: { type: 'json_schema', schema: JSON.stringify(schema) },
    default_statistic: { messages_per_minute: 100_000, message_size: 100, read_parallelism: partitions, write_parallelism: partitions },
  };
}

/** A small deterministic PRNG (mulberry32). */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = ['amber', 'birch', 'cedar', 'delta', 'ember', 'fjord', 'grove', 'harbor', 'island', 'juniper', 'kestrel', 'linden', 'meadow', 'nettle', 'orchid', 'prairie'];
const CITIES = ['Berlin', 'Dublin', 'Helsinki', 'Lisbon', 'Madrid', 'Oslo', 'Prague', 'Vienna'];
const STATUSES = ORDER_SCHEMA.properties.status.enum;

/** An order event of about 500 bytes as JSON. */
export function orderEvent(random: () => number): object {
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)] as T;
  const words = (n: number) => Array.from({ length: n }, () => pick(WORDS)).join(' ');
  return {
    metadata: { eid: randomUUID(), occurred_at: new Date().toISOString() },
    order_number: `ORD-${Math.floor(random() * 1e10).toString().padStart(10, '0')}`,
    customer_id: `cust-${Math.floor(random() * 1e8)}`,
    status: pick(STATUSES),
    amount: Math.round(random() * 1e6) / 100,
    currency: pick(['EUR', 'USD', 'GBP', 'SEK']),
    quantity: 1 + Math.floor(random() * 20),
    priority: Math.floor(random() * 10),
    channel: pick(['web', 'mobile-app', 'store', 'partner-api']),
    shipping_address: {
      street: `${10 + Math.floor(random() * 200)} ${words(2)} street`,
      city: pick(CITIES),
      postal_code: String(10000 + Math.floor(random() * 89999)),
      country_code: pick(['DE', 'IE', 'FI', 'PT', 'ES', 'NO', 'CZ', 'AT']),
    },
    note: words(21),
  };
}

/** Schema of the small events of the memory scenario (`undefined` category: the whole event). */
export const SMALL_SCHEMA = {
  type: 'object',
  properties: { id: { type: 'string' }, kind: { type: 'string' }, user: { type: 'string' }, n: { type: 'integer' }, ts: { type: 'integer' } },
  required: ['id', 'kind', 'n'],
} as const;

/** About 100 bytes: `{"id":"<uuid>","kind":"view","user":"u-123456","n":123,"ts":...}`. */
export function smallEvent(random: () => number): object {
  return { id: randomUUID(), kind: 'view', user: `u-${Math.floor(random() * 1e6)}`, n: Math.floor(random() * 1000), ts: Date.now() };
}

/** Schema of the small business events (besides `metadata`). */
export const SMALL_BUSINESS_SCHEMA = {
  type: 'object',
  properties: { n: { type: 'integer' } },
  required: ['n'],
} as const;

/** About 100 bytes: the business metadata (eid, occurred_at) and one field. */
export function smallBusinessEvent(random: () => number): object {
  return { metadata: { eid: randomUUID(), occurred_at: new Date().toISOString() }, n: Math.floor(random() * 1000) };
}
