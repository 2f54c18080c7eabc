import { randomUUID } from 'node:crypto';
import { ensureServiceEventType } from './service-event-types.js';
import type { Logger } from '../observability/logger.js';
import type { PublishBatchResult } from '../observability/meters.js';
import type { AuditEntry } from './audit-log.js';
import type { EventTypeRegistry } from './event-types/event-type-registry.js';
import type { Publisher } from './publishing/publisher.js';
import type { Settings } from './settings.js';

/**
 * The event types the KPIs are published to (docs/operations.md "The broker's own event types", feature
 * `kpi_collection`). All are `business` events owned by the application `broker`.
 */
export const KPI_EVENT_TYPES = {
  /** One per answered publish request: who published how much to which event type, how fast. */
  batchPublished: 'broker.batch.published',
  /** One per event type of an ended stream: who read how much of it, over which subscription. */
  dataStreamed: 'broker.data.streamed',
  /** One per event type creation, update or deletion. */
  eventTypeLog: 'broker.event-type.log',
  /** One per subscription creation, update or deletion. */
  subscriptionLog: 'broker.subscription.log',
  /** One per answered HTTP request (streams when they end). */
  accessLog: 'broker.access.log',
} as const;

type KpiEventType = (typeof KPI_EVENT_TYPES)[keyof typeof KPI_EVENT_TYPES];

const string = { type: 'string' };
const count = { type: 'integer', minimum: 0 };

/** JSON Schema properties (all required but those listed as optional) of each KPI event type. */
const SHAPES: Readonly<Record<KpiEventType, { properties: Record<string, object>; optional?: readonly string[] }>> = {
  [KPI_EVENT_TYPES.batchPublished]: {
    properties: { event_type: string, app: string, result: { enum: ['submitted', 'partially_failed', 'rejected', 'refused', 'failed'] }, number_of_events: count, batch_size: count, ms_spent: { type: 'number', minimum: 0 } },
  },
  [KPI_EVENT_TYPES.dataStreamed]: {
    properties: { event_type: string, app: string, subscription: string, number_of_events: count, bytes_streamed: count, batches_streamed: count },
    optional: ['subscription'],
  },
  [KPI_EVENT_TYPES.eventTypeLog]: {
    properties: { event_type: string, status: { enum: ['created', 'updated', 'deleted'] }, category: string, authz: { enum: ['enabled', 'disabled'] }, compatibility_mode: string },
    optional: ['category', 'authz', 'compatibility_mode'],
  },
  [KPI_EVENT_TYPES.subscriptionLog]: {
    properties: { subscription_id: string, status: { enum: ['created', 'updated', 'deleted'] } },
  },
  [KPI_EVENT_TYPES.accessLog]: {
    properties: {
      method: string,
      path: string,
      query: string,
      app: string,
      user_agent: string,
      status_code: count,
      response_time_ms: { type: 'number', minimum: 0 },
      accept_encoding: string,
      content_encoding: string,
      request_length: count,
    },
  },
};

/** A publish request as the batch-published KPI records it. */
export interface PublishedBatch {
  readonly eventType: string;
  /** The publishing subject. */
  readonly app: string;
  /** As `broker_publish_batches_total` labels it (answered batches only: submitted, partially_failed, rejected). */
  readonly result: PublishBatchResult;
  /** Events written. */
  readonly events: number;
  /** Bytes of the body as received (inflated). */
  readonly bytes: number;
  readonly ms: number;
}

/** What one ended stream sent of one event type. */
export interface StreamedData {
  readonly eventType: string;
  /** The consuming subject. */
  readonly app: string;
  /** Absent for low-level streams. */
  readonly subscription?: string;
  readonly events: number;
  /** Bytes of the batch lines that carried its events. */
  readonly bytes: number;
  readonly batches: number;
}

/** One answered HTTP request as the access-log KPI records it. */
export interface AccessLogEntry {
  readonly method: string;
  readonly path: string;
  /** The query string without `?`, '' when none. */
  readonly query: string;
  /** The subject, `unauthenticated` before or without authentication. */
  readonly app: string;
  readonly userAgent: string;
  readonly status: number;
  /** Until the answer was sent, or until a stream ended. */
  readonly ms: number;
  readonly acceptEncoding: string;
  readonly contentEncoding: string;
  /** The declared `Content-Length`, 0 when none. */
  readonly requestLength: number;
}

/** KPI events wait in memory at most this long before they are published. */
const DEFAULT_FLUSH_INTERVAL_MS = 1000;
/** Events of one KPI event type per publish batch. */
const FLUSH_BATCH = 1000;
/** Events of one KPI event type kept waiting; more are dropped (counted, logged) rather than grow memory. */
const MAX_PENDING = 20_000;

/**
 * KPI collection (docs/operations.md "The broker's own event types", feature `kpi_collection`).
 * While the feature is on, the request paths hand their figures to {@link batchPublished},
 * {@link dataStreamed}, {@link changed} and {@link accessed}; each becomes one event kept in memory and
 * published with the others of its event type every `flushIntervalMs` (and on {@link stop}), through the
 * same publisher as any batch (validated, enriched, `published_by` `broker`). A KPI never slows or fails
 * the request it describes: with the feature off each call is one flag check, a failed flush is logged
 * and its events are dropped, and above {@link MAX_PENDING} waiting events per type new ones are dropped
 * and counted in the next log line.
 */
export class KpiCollector {
  private readonly pending = new Map<KpiEventType, string[]>();
  private dropped = 0;
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> | undefined;

  constructor(
    private readonly publisher: Publisher,
    private readonly settings: Settings,
    private readonly logger: Logger,
    private readonly flushIntervalMs = DEFAULT_FLUSH_INTERVAL_MS,
  ) {}

  /**
   * Registers the KPI event types that do not exist yet (every node at startup; the first wins).
   * Only the service administrators (`admins` list) may publish to or change them; anyone
   * authenticated may read them.
   * @throws BrokerError 503 when storage fails
   */
  async ensureEventTypes(registry: EventTypeRegistry): Promise<void> {
    const admins = this.settings.admins().admins;
    const authorization = { admins, writers: admins, readers: [{ data_type: '*', value: '*' }] };
    await Promise.all(
      Object.entries(SHAPES).map(([name, shape]) => {
        const required = Object.keys(shape.properties).filter((p) => !(shape.optional ?? []).includes(p));
        const definition = {
          name,
          owning_application: 'broker',
          category: 'business',
          enrichment_strategies: ['metadata_enrichment'],
          partition_strategy: 'random',
          authorization,
          schema: { type: 'json_schema', schema: JSON.stringify({ type: 'object', properties: shape.properties, required }) },
        };
        return ensureServiceEventType(registry, definition);
      }),
    );
  }

  /** Publishes what is waiting every `flushIntervalMs`. */
  start(): void {
    this.timer = setInterval(() => void this.flush(), this.flushIntervalMs);
    this.timer.unref();
  }

  /** Stops the timer and publishes what is waiting (graceful shutdown). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  /** True while `kpi_collection` is on: callers skip gathering figures otherwise. */
  get enabled(): boolean {
    return this.settings.enabled('kpi_collection');
  }

  /** A publish request was answered (not for the KPI event types themselves: they are published internally). */
  batchPublished(batch: PublishedBatch): void {
    this.add(KPI_EVENT_TYPES.batchPublished, {
      event_type: batch.eventType,
      app: batch.app,
      result: batch.result,
      number_of_events: batch.events,
      batch_size: batch.bytes,
      ms_spent: Math.round(batch.ms * 1000) / 1000,
    });
  }

  /** A stream ended: one event per event type it sent events of. */
  dataStreamed(data: readonly StreamedData[]): void {
    for (const d of data) {
      this.add(KPI_EVENT_TYPES.dataStreamed, {
        event_type: d.eventType,
        app: d.app,
        ...(d.subscription === undefined ? {} : { subscription: d.subscription }),
        number_of_events: d.events,
        bytes_streamed: d.bytes,
        batches_streamed: d.batches,
      });
    }
  }

  /** An event type or subscription changed (the audit log's entries; other resources are not KPIs). */
  changed(entry: AuditEntry): void {
    const status = entry.op === 'C' ? 'created' : entry.op === 'U' ? 'updated' : 'deleted';
    if (entry.resource === 'subscription') {
      this.add(KPI_EVENT_TYPES.subscriptionLog, { subscription_id: entry.resourceId, status });
    } else if (entry.resource === 'event_type') {
      // The object is the event type record, or only `{partition_count}` for a repartitioning.
      const object = (entry.next ?? entry.previous) as { category?: unknown; authorization?: unknown; compatibility_mode?: unknown } | undefined;
      const record = typeof object?.category === 'string' ? object : undefined;
      this.add(KPI_EVENT_TYPES.eventTypeLog, {
        event_type: entry.resourceId,
        status,
        ...(record ? { category: record.category, authz: record.authorization ? 'enabled' : 'disabled' } : {}),
        ...(typeof record?.compatibility_mode === 'string' ? { compatibility_mode: record.compatibility_mode } : {}),
      });
    }
  }

  /** An HTTP request was answered. */
  accessed(entry: AccessLogEntry): void {
    this.add(KPI_EVENT_TYPES.accessLog, {
      method: entry.method,
      path: entry.path,
      query: entry.query,
      app: entry.app,
      user_agent: entry.userAgent,
      status_code: entry.status,
      response_time_ms: Math.round(entry.ms * 1000) / 1000,
      accept_encoding: entry.acceptEncoding,
      content_encoding: entry.contentEncoding,
      request_length: entry.requestLength,
    });
  }

  private add(eventType: KpiEventType, fields: Record<string, unknown>): void {
    if (!this.enabled) return;
    let queue = this.pending.get(eventType);
    if (!queue) this.pending.set(eventType, (queue = []));
    if (queue.length >= MAX_PENDING) {
      this.dropped++;
      return;
    }
    queue.push(JSON.stringify({ metadata: { eid: randomUUID(), occurred_at: new Date().toISOString() }, ...fields }));
  }

  /** Publishes every waiting event, at most {@link FLUSH_BATCH} per batch; one flush at a time. */
  flush(): Promise<void> {
    this.flushing ??= this.publishPending().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  private async publishPending(): Promise<void> {
    if (this.dropped > 0) {
      this.logger.warn({ dropped: this.dropped }, 'KPI events dropped: more were waiting than the collector keeps');
      this.dropped = 0;
    }
    for (const [eventType, queue] of this.pending) {
      while (queue.length > 0) {
        const batch = queue.splice(0, FLUSH_BATCH);
        try {
          const outcome = await this.publisher.publish(eventType, Buffer.from(`[${batch.join(',')}]`), { publishedBy: 'broker', flowId: randomUUID() });
          if (outcome.status !== 200) {
            const detail = outcome.items.find((item) => item.detail)?.detail;
            this.logger.warn({ eventType, status: outcome.status, events: batch.length, detail }, 'KPI events were not written');
          }
        } catch (err) {
          this.logger.warn({ err, eventType, events: batch.length }, 'KPI events were not written');
        }
      }
    }
  }
}
