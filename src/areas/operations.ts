/**
 * The operations area (docs/operations.md): what each event type holds in Redis and the headroom left,
 * retention and compaction, the broker's own event types (audit log, KPIs, dead letters), and what the
 * health, metrics, console and API description routes serve.
 */
import type { StoredTimeline } from '../domain/storages/timeline.js';
import type { RouteDependencies } from '../http/api/route-table.js';
import { apiDocsDeps } from '../http/routes/api-docs.js';
import { loadConsoleAssets } from '../http/routes/console.js';
import { AuditLog } from '../services/audit-log.js';
import { Compactor } from '../services/compaction.js';
import type { StreamedListener } from '../services/consumption/stream/event-stream.js';
import { DeletedEvents } from '../services/deleted-events.js';
import { KpiCollector } from '../services/kpi.js';
import { RetentionTrimmer } from '../services/retention.js';
import { StorageHeadroom } from '../services/storage-headroom.js';
import { StorageUsage } from '../services/storage-usage.js';
import { CompactionStore } from '../storage/compaction-store.js';
import type { Consumption } from './consumption.js';
import type { Foundation } from './foundation.js';
import type { Publishing } from './publishing.js';
import type { Registry } from './registry.js';

/** The operations area's services, and what its routes serve. */
export interface Operations {
  readonly storageUsage: StorageUsage;
  readonly headroom: StorageHeadroom;
  readonly retention: RetentionTrimmer;
  readonly compactor: Compactor;
  readonly deletedEvents: DeletedEvents;
  readonly audit: AuditLog;
  readonly kpi: KpiCollector;
  readonly routes: Pick<RouteDependencies, 'metricsScrape' | 'consoleAssets' | 'consoleLookups' | 'headroomView' | 'apiDocs' | 'capacity'>;
}

/**
 * Composes the operations area and creates the broker's own event types, which exist on every installation
 * (docs/operations.md "The broker's own event types"): the audit log, the KPIs (events flow only while
 * `kpi_collection` is on) and the dead-letter queue, created together.
 */
export async function composeOperations(f: Foundation, publishing: Publishing, registry: Registry, consumption: Consumption): Promise<Operations> {
  const { storageUsage, headroom } = watchStorage(f, publishing);
  const { retention, compactor, deletedEvents } = trimStorage(f, registry);
  const audit = new AuditLog(publishing.publisher, f.settings, f.logger);
  const kpi = new KpiCollector(publishing.publisher, f.settings, f.logger);
  await Promise.all([audit.ensureEventType(registry.eventTypes), kpi.ensureEventTypes(registry.eventTypes), consumption.deadLetters.ensureEventType(registry.eventTypes)]);
  audit.onChange((entry) => kpi.changed(entry));
  // A deleted subscription's series go with it.
  audit.onChange((entry) => {
    if (entry.resource === 'subscription' && entry.op === 'D') {
      f.metrics.forgetSubscription(entry.resourceId);
      consumption.consumerStatus.forget(entry.resourceId);
    }
  });
  const streamed: StreamedListener = ({ subject, subscription, streamed: tallies }) => {
    if (!kpi.enabled) return;
    kpi.dataStreamed([...tallies].map(([eventType, t]) => ({ eventType, app: subject.id, ...(subscription === undefined ? {} : { subscription }), events: t.events, bytes: t.bytes, batches: t.batches })));
  };
  consumption.lowLevelStreams.onStreamEnd(streamed);
  consumption.subscriptionStreams.onStreamEnd(streamed);
  const { metrics } = f;
  const routes: Operations['routes'] = {
    // /health, public; /metrics (Prometheus text format), authenticated like every route but /health (open in auth mode `off`).
    // /health/storage, public: whether this node's Redis masters have room for publishes (a readiness for balancers that route publishes).
    metricsScrape: { scrape: (openMetrics) => metrics.scrape(openMetrics), contentTypeOf: (openMetrics) => metrics.contentTypeOf(openMetrics), exemplars: metrics.exemplars, storageReadiness: () => headroom.readiness() },
    // The console (docs/console.md): its files from dist/ui, public; its API calls carry the user's token.
    consoleAssets: loadConsoleAssets(),
    consoleLookups: { eventType: (name) => registry.eventTypes.get(name), subscription: (id) => registry.subscriptions.get(id) },
    headroomView: () => headroom.view(),
    capacity: (record) => headroom.capacityWarning(record),
    // The API document and reference page (docs/http-api.md "API description"), public.
    apiDocs: apiDocsDeps(),
  };
  return { storageUsage, headroom, retention, compactor, deletedEvents, audit, kpi, routes };
}

/**
 * What each event type holds in Redis, measured in bounded rounds; the headroom the metrics, the storage
 * readiness, the console and the capacity warning of event type changes show (docs/operations.md "Memory
 * and retention"). Nothing outlives what it describes: a deleted event type's series and usage go.
 */
function watchStorage(f: Foundation, publishing: Publishing): { storageUsage: StorageUsage; headroom: StorageHeadroom } {
  const { metrics, cache, pool } = f;
  const storageUsage = new StorageUsage({ eventTypes: f.eventTypeStore, logs: f.logs, config: f.config.redisMemory, jsonBytesPerEvent: (name) => metrics.publishedBytesPerEvent(name), logger: f.logger });
  const headroom = new StorageHeadroom(() => f.storagePool.opened(), storageUsage, f.eventTypeStore, f.logs);
  metrics.observeStorage(() => headroom.snapshot());
  cache.onDeleted((name) => {
    metrics.forgetEventType(name);
    storageUsage.forget(name);
  });
  metrics.observeCaches(() => {
    const eventTypes = cache.sizes;
    const main = publishing.publisher.cacheSizes;
    return {
      event_types: eventTypes.entries,
      event_type_generations: eventTypes.generations,
      retired_schema_keys: eventTypes.retired,
      main_thread_validators: main.validators,
      worker_validators: pool.validatorCount,
    };
  });
  return { storageUsage, headroom };
}

/**
 * Retention, log compaction and deleted-events (docs/concepts.md "Retention and compaction"): one node per
 * event type compacts (a lock in Redis), on the storage of the event type's active timeline.
 */
function trimStorage(f: Foundation, registry: Registry): { retention: RetentionTrimmer; compactor: Compactor; deletedEvents: DeletedEvents } {
  const { config, logger, redis, eventTypeStore, logs } = f;
  const retention = new RetentionTrimmer(redis, eventTypeStore, f.partitionStore, config.retention.checkIntervalMs, logger, logs, registry.timelines);
  const compactionStore = new CompactionStore(redis, f.scripts, f.keys);
  const compactionStoreOf = async (t: StoredTimeline): Promise<CompactionStore> => {
    const handle = await logs.storageOf(t);
    return handle === f.storagePool.node ? compactionStore : new CompactionStore(handle.redis, handle.scripts, handle.keys);
  };
  const compactor = new Compactor(redis, eventTypeStore, compactionStore, config.compaction, logger, compactionStoreOf);
  return { retention, compactor, deletedEvents: new DeletedEvents(f.cache, compactionStore, redis, compactionStoreOf) };
}
