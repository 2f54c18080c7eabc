/**
 * Redis memory as a budget (docs/operations.md "Memory and retention";
 * docs/decisions/0030-redis-memory-budget.md): pure arithmetic over what each Redis master reports in
 * `INFO memory` — its limit, the high-water mark, whether it is full, the projected time until the
 * mark at the last minute's net rate — and the memory an event type's declared rate and retention
 * need. No I/O here: `storage/redis/redis-memory.ts` reads the masters, `services/storage-usage.ts` measures
 * the event types.
 */

/** What one Redis master says about its memory in `INFO memory`, in bytes. */
export interface MasterMemoryReport {
  /** `used_memory`: what Redis's allocator holds for data and overhead (what `maxmemory` is compared with). */
  readonly usedBytes: number;
  /** `maxmemory`; 0 = no limit configured. */
  readonly maxmemoryBytes: number;
  /** `total_system_memory`: the machine's memory as Redis sees it; 0 when not reported. */
  readonly systemBytes: number;
}

/** Where a master's limit comes from: its `maxmemory`, the machine's memory (no `maxmemory`), or nowhere (neither is known). */
export type LimitSource = 'maxmemory' | 'system_memory' | 'unknown';

/** One master's memory as a node judges it (docs/metrics.md "Redis memory"). */
export interface MasterMemory {
  /** The master's address as the node reaches it (`host:port` or a unix socket path). */
  readonly master: string;
  readonly usedBytes: number;
  /** Its configured `maxmemory` (0 = none). */
  readonly maxmemoryBytes: number;
  /** The limit the mark is taken from: `maxmemory`, else the machine's total memory; 0 when neither is known. */
  readonly limitBytes: number;
  readonly limitSource: LimitSource;
  /** `limitBytes × redisMemory.highWaterPercent ÷ 100`, rounded down; Infinity when the limit is unknown. */
  readonly markBytes: number;
  /** `usedBytes ≥ markBytes`: publishes to this master's partitions are refused. */
  readonly full: boolean;
  /** Projected seconds until `usedBytes` reaches the mark at the net rate of the last minute: 0 when full, Infinity when not growing. */
  readonly secondsToMark: number;
}

/**
 * Judges one master's report against the high-water mark.
 * @param highWaterPercent `redisMemory.highWaterPercent` (1..1000: above 100 the node never refuses first)
 * @param secondsToMark from {@link UsageHistory.secondsTo} (default: Infinity)
 */
export function judgeMaster(master: string, report: MasterMemoryReport, highWaterPercent: number, secondsToMark = Infinity): MasterMemory {
  const limitSource: LimitSource = report.maxmemoryBytes > 0 ? 'maxmemory' : report.systemBytes > 0 ? 'system_memory' : 'unknown';
  const limitBytes = limitSource === 'maxmemory' ? report.maxmemoryBytes : limitSource === 'system_memory' ? report.systemBytes : 0;
  const markBytes = limitBytes > 0 ? Math.floor((limitBytes * highWaterPercent) / 100) : Infinity;
  const full = report.usedBytes >= markBytes;
  return { master, usedBytes: report.usedBytes, maxmemoryBytes: report.maxmemoryBytes, limitBytes, limitSource, markBytes, full, secondsToMark: full ? 0 : secondsToMark };
}

/**
 * The `INFO memory` fields a node reads, as numbers.
 * @param fields `field → value` of an `INFO memory` answer (`parseInfo`)
 * @returns undefined when `used_memory` is absent (not a Redis `INFO memory` answer)
 */
export function memoryReportOf(fields: ReadonlyMap<string, string>): MasterMemoryReport | undefined {
  const used = Number(fields.get('used_memory'));
  if (!Number.isFinite(used)) return undefined;
  const maxmemory = Number(fields.get('maxmemory') ?? 0);
  const system = Number(fields.get('total_system_memory') ?? 0);
  return { usedBytes: used, maxmemoryBytes: Number.isFinite(maxmemory) ? maxmemory : 0, systemBytes: Number.isFinite(system) ? system : 0 };
}

/**
 * A value's recent history (bytes over time), for its net rate over a window: samples older than the
 * window are dropped as new ones come, so it holds at most (window ÷ sampling interval) + 1 samples.
 */
export class UsageHistory {
  private readonly samples: { readonly atMs: number; readonly bytes: number }[] = [];

  /** @param windowMs how far back the rate looks (the last minute: 60,000) */
  constructor(private readonly windowMs = 60_000) {}

  /** Records a sample; `atMs` never goes back (a monotonic clock). */
  add(atMs: number, bytes: number): void {
    this.samples.push({ atMs, bytes });
    // Keep the newest sample at or before the window's start, so the rate spans the whole window.
    while (this.samples.length > 2 && (this.samples[1] as { atMs: number }).atMs <= atMs - this.windowMs) this.samples.shift();
  }

  /** The newest sample's bytes, or undefined before the first. */
  get latest(): number | undefined {
    return this.samples[this.samples.length - 1]?.bytes;
  }

  /**
   * Net bytes per second between the oldest and the newest sample of the window (negative when it
   * shrinks); 0 with fewer than two samples.
   */
  rate(): number {
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    if (first === undefined || last === undefined || last.atMs <= first.atMs) return 0;
    return ((last.bytes - first.bytes) * 1000) / (last.atMs - first.atMs);
  }

  /** Projected seconds until the value reaches `targetBytes` at {@link rate}: 0 when it is there, Infinity when it does not grow. */
  secondsTo(targetBytes: number): number {
    const latest = this.latest;
    if (latest === undefined) return Infinity;
    if (latest >= targetBytes) return 0;
    const rate = this.rate();
    return rate > 0 ? (targetBytes - latest) / rate : Infinity;
  }
}

/**
 * Redis bytes per byte of event JSON assumed until a node has measured the ratio on stored events:
 * ~774 bytes of `used_memory` per ~518-byte event in 1,000-event batches, stored as plain JSON text
 * (docs/decisions/0030-redis-memory-budget.md).
 */
export const ASSUMED_REDIS_BYTES_PER_JSON_BYTE = 1.5;

/**
 * The Redis memory an event type's declared traffic needs over its retention: `messages_per_minute ×
 * message_size × retention in minutes × redisBytesPerJsonByte` (docs/operations.md "Memory and retention").
 * @param retentionMs `options.retention_time`
 * @param redisBytesPerJsonByte the measured ratio of Redis bytes to event JSON bytes (or {@link ASSUMED_REDIS_BYTES_PER_JSON_BYTE})
 */
export function eventTypeNeedBytes(statistic: { readonly messages_per_minute: number; readonly message_size: number }, retentionMs: number, redisBytesPerJsonByte: number): number {
  return statistic.messages_per_minute * statistic.message_size * (retentionMs / 60_000) * redisBytesPerJsonByte;
}

/** Bytes in binary units with three significant digits: `512 B`, `1.50 KiB`, `12.4 GiB`. */
export function formatBytes(bytes: number): string {
  if (!Number.isFinite(bytes)) return 'unlimited';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let value = Math.max(0, bytes);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${Math.round(value)} B` : `${value.toPrecision(3)} ${units[unit] as string}`;
}

/** A duration in ms in the largest whole-ish unit: `90 s`, `3 h`, `2 days`. */
function formatDuration(ms: number): string {
  const s = ms / 1000;
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172_800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86_400)} days`;
}

/** What {@link capacityWarning} weighs. */
export interface CapacityCheck {
  readonly eventType: string;
  readonly statistic: { readonly messages_per_minute: number; readonly message_size: number };
  readonly retentionMs: number;
  readonly redisBytesPerJsonByte: number;
  /** Whether the ratio was measured on stored events (else it is {@link ASSUMED_REDIS_BYTES_PER_JSON_BYTE}). */
  readonly ratioMeasured: boolean;
  /** The storage the event type's events go to. */
  readonly storage: string;
  /** Bytes below the high-water mark over the storage's masters (Σ max(0, mark − used)). */
  readonly roomBytes: number;
  /** Bytes the event type holds already (an update: they are part of what it needs, not extra). */
  readonly heldBytes: number;
}

/**
 * The warning an event type creation or update carries when its declared traffic cannot fit (docs/operations.md
 * "Memory and retention"): the memory it needs ({@link eventTypeNeedBytes}) exceeds the room below the
 * mark plus what it holds already. Nothing is refused for it. ASCII only (an HTTP header value).
 * @returns the text, or undefined when it fits
 */
export function capacityWarning(check: CapacityCheck): string | undefined {
  const need = eventTypeNeedBytes(check.statistic, check.retentionMs, check.redisBytesPerJsonByte);
  if (need <= check.roomBytes + check.heldBytes) return undefined;
  const ratio = `${check.redisBytesPerJsonByte.toFixed(2)} Redis bytes per JSON byte${check.ratioMeasured ? ' as measured on stored events' : ' (assumed: nothing measured yet)'}`;
  return (
    `event type "${check.eventType}" needs about ${formatBytes(need)} of Redis memory ` +
    `(default_statistic ${check.statistic.messages_per_minute} messages per minute of ${check.statistic.message_size} bytes, retention ${formatDuration(check.retentionMs)}, ${ratio}), ` +
    `but storage "${check.storage}" has ${formatBytes(check.roomBytes + check.heldBytes)} of room below its high-water mark; ` +
    'once it is full, publishes are refused with 507 (docs/operations.md "Memory and retention")'
  );
}

/**
 * An RFC 9111 `Warning` header value: code 299 (miscellaneous persistent warning), no agent (`-`), the
 * text as a quoted string (`"` and `\` escaped; characters outside printable ASCII replaced by `?`).
 */
export function warningHeader(text: string): string {
  const quoted = text.replace(/[\\"]/g, (c) => `\\${c}`).replace(/[^\x20-\x7e]/g, '?');
  return `299 - "${quoted}"`;
}
