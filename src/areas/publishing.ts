/**
 * The publishing area (docs/publishing.md): the publisher (inline path and worker pool), the partition and
 * cursor lookups, and the publishing quotas of the settings.
 */
import { CursorService } from '../services/cursor-service.js';
import { PublishQuotas } from '../services/publish-quotas.js';
import { Publisher } from '../services/publishing/publisher.js';
import { QuotaStore } from '../storage/quota-store.js';
import type { Foundation } from './foundation.js';

/** The publishing area's services. */
export interface Publishing {
  readonly publisher: Publisher;
  readonly cursors: CursorService;
  readonly quotas: PublishQuotas;
}

/** Composes the publishing area over the foundation and ties its validators to the event type cache. */
export function composePublishing(f: Foundation): Publishing {
  const { config, cache, metrics } = f;
  const publisher = new Publisher({
    cache,
    pool: f.pool,
    logs: f.logs,
    redis: f.redis,
    config: config.publish,
    redisTimeoutMs: config.redis.commandTimeoutMs,
    compileTimeoutMs: config.eventTypes.schemaCompileTimeoutMs,
    mainThreadValidators: { maxEntries: config.caches.mainThreadValidatorEntries, maxBytes: config.caches.mainThreadValidatorBytes },
    logger: f.logger,
    storageFullMeter: metrics,
  });
  // No cold path (docs/decisions/0019-validators-prepared-before-the-first-batch.md): a node that learns of a created or changed event type by its change
  // notice compiles its validator in the workers then, not on its first batch.
  cache.onChange((name) => {
    if (name !== undefined) void publisher.prepare(name);
  });
  // Validators of schemas no event type uses any more are dropped on the main thread and in every worker thread.
  cache.onSchemaRetired((schemaKey) => void publisher.retire(schemaKey));
  // Publishing quotas counted for the cluster in Redis, failing open when it does not answer in time (docs/decisions/0034-cluster-wide-publishing-quotas.md).
  const quotas = new PublishQuotas((kind, name) => f.settings.quota(kind, name), new QuotaStore(f.scripts, f.keys), { timeoutMs: config.publish.quotaTimeoutMs, failOpenMs: config.publish.quotaFailOpenMs }, f.logger, metrics);
  f.settings.onChange(() => quotas.prune());
  return { publisher, cursors: new CursorService(f.eventTypeStore, f.logs), quotas };
}
