import { familyHeader, labelText, sampleValue, type ExpositionSink, type FamilyDeclaration } from './exposition.js';
import type { MasterMemorySample, StorageSnapshot } from './meters.js';

// The Redis memory families of `/metrics` (docs/metrics.md "Redis memory"), written by the node itself
// from what it last read (the periodic `INFO memory` of every master, the measuring rounds of the event
// types' partitions): a scrape costs no Redis round trip.

/** A storage family: its declaration and label names. */
export interface StorageFamily extends FamilyDeclaration {
  readonly labelNames: readonly string[];
}

const MASTER_LABELS = ['storage', 'master'] as const;

const USED: StorageFamily = { name: 'broker_redis_memory_used_bytes', help: 'used_memory of each Redis master this node writes to (INFO memory, read every redisMemory.checkIntervalMs)', type: 'gauge', labelNames: MASTER_LABELS };
const LIMIT: StorageFamily = { name: 'broker_redis_memory_limit_bytes', help: 'The memory limit of each Redis master: its maxmemory, or its machine\'s total memory when it has none', type: 'gauge', labelNames: MASTER_LABELS };
const MARK: StorageFamily = { name: 'broker_redis_memory_high_water_mark_bytes', help: 'The high-water mark of each Redis master (redisMemory.highWaterPercent of its limit): at or above it, publishes to its partitions are refused with 507', type: 'gauge', labelNames: MASTER_LABELS };
const SECONDS_TO_MARK: StorageFamily = { name: 'broker_redis_memory_seconds_to_mark', help: 'Projected seconds until each Redis master reaches its high-water mark at the net rate of the last minute (0 at or above it, +Inf when not growing)', type: 'gauge', labelNames: MASTER_LABELS };
const EVENT_TYPE_BYTES: StorageFamily = { name: 'broker_event_type_stored_bytes', help: 'Redis bytes held by the partitions of an event type (MEMORY USAGE of each partition\'s keys, measured in bounded rounds: redisMemory.usageIntervalMs, usagePartitionsPerRound)', type: 'gauge', labelNames: ['event_type'] };
const EVENT_TYPE_GROWTH: StorageFamily = { name: 'broker_event_type_stored_growth_bytes_per_second', help: 'Net growth of an event type\'s Redis bytes, summed over its partitions, each between its last two measurements (negative when retention frees more than is published)', type: 'gauge', labelNames: ['event_type'] };
const RATIO: StorageFamily = { name: 'broker_storage_redis_bytes_per_json_byte', help: 'Redis bytes per byte of event JSON over the event types this node measured and published to (the ratio the capacity warning of event type creation uses); absent before anything was measured', type: 'gauge', labelNames: [] };

/** The storage families, in the order {@link writeStorageFamilies} writes them. */
export const STORAGE_FAMILIES: readonly StorageFamily[] = [USED, LIMIT, MARK, SECONDS_TO_MARK, EVENT_TYPE_BYTES, EVENT_TYPE_GROWTH, RATIO];

/**
 * Appends the Redis memory families of one scrape to its text, from the snapshot (no series kept
 * between scrapes: a master that left or an event type that was deleted is simply not written).
 * Without a snapshot the families are written without samples.
 */
export function writeStorageFamilies(out: ExpositionSink, snapshot: StorageSnapshot | undefined): void {
  const masters = snapshot?.masters ?? [];
  const labels = masters.map((m) => labelText(MASTER_LABELS, [m.storage, m.master]));
  const perMaster = (family: StorageFamily, value: (m: MasterMemorySample) => number): void => {
    out.push(familyHeader(family));
    masters.forEach((m, i) => out.push(`${family.name}{${labels[i] as string}} ${sampleValue(value(m))}\n`));
  };
  perMaster(USED, (m) => m.usedBytes);
  perMaster(LIMIT, (m) => m.limitBytes);
  perMaster(MARK, (m) => m.markBytes);
  perMaster(SECONDS_TO_MARK, (m) => m.secondsToMark);
  const eventTypes = snapshot?.eventTypes ?? [];
  const eventTypeLabels = eventTypes.map((e) => labelText(['event_type'], [e.eventType]));
  out.push(familyHeader(EVENT_TYPE_BYTES));
  eventTypes.forEach((e, i) => out.push(`${EVENT_TYPE_BYTES.name}{${eventTypeLabels[i] as string}} ${sampleValue(e.bytes)}\n`));
  out.push(familyHeader(EVENT_TYPE_GROWTH));
  eventTypes.forEach((e, i) => out.push(`${EVENT_TYPE_GROWTH.name}{${eventTypeLabels[i] as string}} ${sampleValue(e.growthBytesPerSecond)}\n`));
  out.push(familyHeader(RATIO));
  if (snapshot?.redisBytesPerJsonByte !== undefined) out.push(`${RATIO.name} ${sampleValue(snapshot.redisBytesPerJsonByte)}\n`);
}
