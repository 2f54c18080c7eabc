import { randomUUID } from 'node:crypto';
import type { Subject } from '../auth/subject.js';
import { administratorsOnly, ensureServiceEventType } from './service-event-types.js';
import type { Logger } from '../observability/logger.js';
import type { EventTypeRegistry } from './event-types/event-type-registry.js';
import type { Publisher } from './publishing/publisher.js';
import type { Settings } from './settings.js';

/** The event type the audit log is published to (docs/operations.md "The broker's own event types"). */
export const AUDIT_EVENT_TYPE = 'broker.audit-log';

/** What changed: `data_type` of the audit event. */
export type AuditedResource = 'event_type' | 'subscription' | 'admins' | 'blacklist' | 'feature' | 'storage' | 'timeline' | 'quota';

/** One change, as the audit event records it. */
export interface AuditEntry {
  /** Who made it. */
  readonly subject: Subject;
  readonly resource: AuditedResource;
  /** The event type name, subscription id, blacklist entry `<TYPE>:<name>`, feature name, `admins`, storage id or `<event type>:<timeline order>`. */
  readonly resourceId: string;
  /** `C`reate, `U`pdate or `D`elete (the `data_op` of a data change event). */
  readonly op: 'C' | 'U' | 'D';
  /** The object before the change (absent for creations). */
  readonly previous?: unknown;
  /** The object after the change (absent for deletions). */
  readonly next?: unknown;
}

/** The audit event type's definition: a `data` change event whose `data` names who changed what, before and after. */
const DEFINITION = {
  name: AUDIT_EVENT_TYPE,
  owning_application: 'broker',
  category: 'data',
  enrichment_strategies: ['metadata_enrichment'],
  partition_strategy: 'hash',
  partition_key_fields: ['resource_id'],
  schema: {
    type: 'json_schema',
    schema: JSON.stringify({
      type: 'object',
      properties: {
        resource_type: { type: 'string' },
        resource_id: { type: 'string' },
        user: { type: 'string', description: 'the subject that made the change' },
        previous_object: { description: 'the object before the change; null for creations' },
        new_object: { description: 'the object after the change; null for deletions' },
      },
      required: ['resource_type', 'resource_id', 'user'],
    }),
  },
};

/**
 * The audit log (docs/operations.md "The broker's own event types"; feature `audit_log_collection`): while the
 * feature is on, every change to event types, subscriptions and settings is published as a data change
 * event of {@link AUDIT_EVENT_TYPE}: `data_type` the resource type, `data_op` C/U/D, `data` with the
 * resource id, the subject, and the previous and new object. Publishing happens after the change was
 * answered and never fails the change itself: a failure is logged.
 */
export class AuditLog {
  constructor(
    private readonly publisher: Publisher,
    private readonly settings: Settings,
    private readonly logger: Logger,
  ) {}

  /**
   * Registers the audit event type unless it exists (every node does at startup; the first wins). Only
   * the administrators may change it or publish to it (their `admins` list) and read it (any admin
   * list): forged or hidden audit events would defeat it.
   * @throws BrokerError 503
   */
  async ensureEventType(registry: EventTypeRegistry): Promise<void> {
    await ensureServiceEventType(registry, { ...DEFINITION, authorization: administratorsOnly(this.settings) });
  }

  private readonly listeners: ((entry: AuditEntry) => void)[] = [];

  /** Tells `listener` of every change, whether or not the audit log is on (the KPI change logs). */
  onChange(listener: (entry: AuditEntry) => void): void {
    this.listeners.push(listener);
  }

  /** Publishes `entry` when `audit_log_collection` is on (in the background); tells the listeners in any case. */
  record(entry: AuditEntry): void {
    for (const listener of this.listeners) listener(entry);
    if (!this.settings.enabled('audit_log_collection')) return;
    const event = {
      metadata: { eid: randomUUID(), occurred_at: new Date().toISOString() },
      data_type: entry.resource,
      data_op: entry.op,
      data: { resource_type: entry.resource, resource_id: entry.resourceId, user: entry.subject.id, previous_object: entry.previous ?? null, new_object: entry.next ?? null },
    };
    this.publisher
      .publish(AUDIT_EVENT_TYPE, Buffer.from(JSON.stringify([event])), { publishedBy: 'broker', flowId: randomUUID() })
      .then((outcome) => {
        if (outcome.status !== 200) this.logger.warn({ status: outcome.status, resource: entry.resource, id: entry.resourceId }, 'an audit event was not written');
      })
      .catch((err: unknown) => this.logger.warn({ err, resource: entry.resource, id: entry.resourceId }, 'an audit event was not written'));
  }
}
