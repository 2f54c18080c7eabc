import { randomUUID } from 'node:crypto';
import { DEAD_LETTER_EVENT_TYPE, deadLetterEvent } from '../domain/subscription/dead-letter.js';
import { brokerError } from '../errors/catalog.js';
import type { EventTypeRegistry } from './event-types/event-type-registry.js';
import type { Publisher } from './publishing/publisher.js';
import { administratorsOnly, ensureServiceEventType } from './service-event-types.js';
import type { Settings } from './settings.js';

/** An event a subscription stream skipped in dead-letter search (docs/consuming.md "Dead letters"). */
export interface SkippedEvent {
  readonly subscriptionId: string;
  readonly eventType: string;
  readonly partition: string;
  /** The event's offset as the wire shows it (with its timeline). */
  readonly offset: string;
  /** Failed sends of its single-event batch. */
  readonly failedSends: number;
  /** The event's JSON text as stored. */
  readonly event: string;
}

/** The dead-letter event type's definition (the reference's schema; events as stored, any shape). */
const DEFINITION = {
  name: DEAD_LETTER_EVENT_TYPE,
  owning_application: 'broker',
  category: 'business',
  enrichment_strategies: ['metadata_enrichment'],
  partition_strategy: 'random',
  options: { retention_time: 172_800_000 },
  schema: {
    type: 'json_schema',
    schema: JSON.stringify({
      type: 'object',
      properties: {
        subscription_id: { type: 'string', format: 'uuid' },
        event_type: { type: 'string' },
        partition: { type: 'string' },
        offset: { type: 'string' },
        error: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] },
        event: { type: 'object' },
      },
      required: ['subscription_id', 'event_type', 'partition', 'offset', 'error', 'event'],
    }),
  },
};

/** Room left in a dead-letter event for the fields around the skipped event (bytes). */
const ENVELOPE_BYTES = 2048;

/**
 * The service's dead-letter queue (docs/consuming.md "Dead letters"): the event type {@link DEAD_LETTER_EVENT_TYPE},
 * created at startup like the audit log, and publishing skipped events to it as
 * `{subscription_id, event_type, partition, offset, error: {message}, event}`. An event too large to
 * fit in a dead-letter event (`publish.maxEventBytes`) is recorded with its `metadata` only, and the
 * message says so.
 */
export class DeadLetterQueue {
  constructor(
    private readonly publisher: Publisher,
    private readonly settings: Settings,
    /** `publish.maxEventBytes`: the largest dead-letter event. */
    private readonly maxEventBytes: number,
  ) {}

  /**
   * Registers the dead-letter event type unless it exists. The administrators own it and may read it
   * (any admin list), as with the audit log: it holds events of every subscription.
   * @throws BrokerError 503
   */
  async ensureEventType(registry: EventTypeRegistry): Promise<void> {
    await ensureServiceEventType(registry, { ...DEFINITION, authorization: administratorsOnly(this.settings) });
  }

  /**
   * Publishes one skipped event (and waits until it is stored).
   * @throws BrokerError when it was not stored (then the event must not be skipped yet)
   */
  async publish(skipped: SkippedEvent): Promise<void> {
    let event: unknown;
    let note = '';
    if (Buffer.byteLength(skipped.event) + ENVELOPE_BYTES > this.maxEventBytes) {
      event = { metadata: metadataOf(skipped.event) };
      note = ' (the event is too large for the dead-letter queue: only its metadata is kept)';
    } else {
      event = JSON.parse(skipped.event) as unknown;
    }
    const body = deadLetterEvent({ ...skipped, event, eid: randomUUID(), occurredAt: new Date().toISOString() });
    (body.error as { message: string }).message += note;
    const outcome = await this.publisher.publish(DEAD_LETTER_EVENT_TYPE, Buffer.from(JSON.stringify([body])), { publishedBy: 'broker', flowId: randomUUID() });
    if (outcome.status !== 200) {
      const detail = 'items' in outcome ? outcome.items.map((i) => i.detail).filter((d) => d !== '').join('; ') : '';
      throw brokerError('DEAD_LETTER_NOT_STORED', { outcome: `${outcome.status}${detail ? `: ${detail}` : ''}` });
    }
  }
}

/** The `metadata` object of an event's JSON text (`{}` when it has none). */
function metadataOf(text: string): unknown {
  const metadata = (JSON.parse(text) as { metadata?: unknown }).metadata;
  return typeof metadata === 'object' && metadata !== null ? metadata : {};
}
