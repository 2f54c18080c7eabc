import { describe, expect, it } from 'vitest';
import { warningTexts } from '../../src/cli/http-client.js';
import {
  ASSUMED_REDIS_BYTES_PER_JSON_BYTE,
  capacityWarning,
  eventTypeNeedBytes,
  formatBytes,
  judgeMaster,
  memoryReportOf,
  UsageHistory,
  warningHeader,
  type CapacityCheck,
} from '../../src/domain/storages/memory-budget.js';
import { errorCatalog } from '../../src/errors/catalog.js';
import { embeddedMaxmemoryBytes } from '../../src/storage/redis/embedded-redis.js';
import { writeFailure } from '../../src/storage/partition-store.js';
import { parseInfo } from '../../src/storage/redis/redis-checks.js';
import { storageError } from '../../src/storage/redis/redis-connection.js';
import { isOutOfMemory, storageFull, storageFullState } from '../../src/storage/storage-full.js';

/**
 * The arithmetic of the Redis memory budget (docs/operations.md "Memory and retention"): a master's limit,
 * mark and fullness from INFO memory, the projection to the mark, the capacity an event type needs and
 * its warning, and the one mapping of Redis's OOM refusals to the `STORAGE_FULL` problem.
 */

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;

describe('judging a master against the high-water mark', () => {
  it.each([
    // used, maxmemory, system, percent → limit, source, mark, full
    [50 * MIB, 100 * MIB, 16 * GIB, 90, 100 * MIB, 'maxmemory', Math.floor(90 * MIB), false],
    [90 * MIB, 100 * MIB, 16 * GIB, 90, 100 * MIB, 'maxmemory', Math.floor(90 * MIB), true],
    [95 * MIB, 100 * MIB, 16 * GIB, 90, 100 * MIB, 'maxmemory', Math.floor(90 * MIB), true],
    // maxmemory 0: the machine's memory is the limit
    [8 * GIB, 0, 16 * GIB, 50, 16 * GIB, 'system_memory', 8 * GIB, true],
    [1 * GIB, 0, 16 * GIB, 90, 16 * GIB, 'system_memory', Math.floor(16 * GIB * 0.9), false],
    // above 100 %: never full before Redis refuses
    [100 * MIB, 100 * MIB, 16 * GIB, 1000, 100 * MIB, 'maxmemory', 1000 * MIB, false],
    // nothing known: never full
    [100 * MIB, 0, 0, 90, 0, 'unknown', Infinity, false],
  ] as const)('used %d, maxmemory %d, system %d at %d %% → limit %d (%s), mark %d, full %s', (used, maxmemory, system, percent, limit, source, mark, full) => {
    const judged = judgeMaster('10.0.0.1:6379', { usedBytes: used, maxmemoryBytes: maxmemory, systemBytes: system }, percent);
    expect(judged).toMatchObject({ master: '10.0.0.1:6379', limitBytes: limit, limitSource: source, markBytes: mark, full });
    expect(judged.secondsToMark).toBe(full ? 0 : Infinity);
  });

  it('reads used_memory, maxmemory and total_system_memory from INFO memory', () => {
    const info = '# Memory\r\nused_memory:1234567\r\nused_memory_human:1.18M\r\nmaxmemory:2147483648\r\ntotal_system_memory:25276510208\r\nmaxmemory_policy:noeviction\r\n';
    expect(memoryReportOf(parseInfo(info))).toEqual({ usedBytes: 1234567, maxmemoryBytes: 2147483648, systemBytes: 25276510208 });
    expect(memoryReportOf(parseInfo('# Memory\r\nmaxmemory:0\r\n'))).toBeUndefined();
    // A managed Redis that hides total_system_memory: the limit is maxmemory alone.
    expect(memoryReportOf(parseInfo('used_memory:10\r\nmaxmemory:0\r\n'))).toEqual({ usedBytes: 10, maxmemoryBytes: 0, systemBytes: 0 });
  });
});

describe('the projection to the mark at the last minute\'s net rate', () => {
  it('takes the rate over the window and projects the seconds left; none when not growing', () => {
    const history = new UsageHistory(60_000);
    expect(history.secondsTo(100)).toBe(Infinity);
    history.add(0, 10);
    expect(history.rate()).toBe(0);
    history.add(10_000, 30); // 2 bytes per second
    expect(history.rate()).toBe(2);
    expect(history.secondsTo(130)).toBe(50);
    expect(history.secondsTo(20)).toBe(0);
    history.add(20_000, 20); // net: 10 bytes in 20 s
    expect(history.rate()).toBe(0.5);
    history.add(30_000, 0);
    expect(history.rate()).toBeLessThan(0);
    expect(history.secondsTo(100)).toBe(Infinity);
  });

  it('forgets samples older than the window (bounded) but keeps one at its start', () => {
    const history = new UsageHistory(60_000);
    for (let t = 0; t <= 300_000; t += 1000) history.add(t, t / 1000);
    expect(history.rate()).toBeCloseTo(1, 6);
    expect((history as unknown as { samples: unknown[] }).samples.length).toBeLessThanOrEqual(62);
  });
});

describe('the memory an event type needs and the capacity warning', () => {
  const check = (overrides: Partial<CapacityCheck> = {}): CapacityCheck => ({
    eventType: 'order.created',
    statistic: { messages_per_minute: 60_000, message_size: 1000 },
    retentionMs: 2 * 86_400_000,
    redisBytesPerJsonByte: 1.5,
    ratioMeasured: true,
    storage: 'default',
    roomBytes: 10 * GIB,
    heldBytes: 0,
    ...overrides,
  });

  it('is messages per minute × size × retention in minutes × the ratio', () => {
    expect(eventTypeNeedBytes({ messages_per_minute: 60_000, message_size: 1000 }, 2 * 86_400_000, 1.5)).toBe(60_000 * 1000 * 2880 * 1.5);
    expect(ASSUMED_REDIS_BYTES_PER_JSON_BYTE).toBe(1.5);
  });

  it('warns only when the need exceeds the room plus what the event type holds already', () => {
    // 60,000/min × 1 KB × 2 days × 1.5 = 259 GB.
    const text = capacityWarning(check());
    expect(text).toBe(
      'event type "order.created" needs about 241 GiB of Redis memory (default_statistic 60000 messages per minute of 1000 bytes, retention 2 days, 1.50 Redis bytes per JSON byte as measured on stored events), ' +
        'but storage "default" has 10.0 GiB of room below its high-water mark; once it is full, publishes are refused with 507 (docs/operations.md "Memory and retention")',
    );
    expect(capacityWarning(check({ statistic: { messages_per_minute: 10, message_size: 100 } }))).toBeUndefined();
    expect(capacityWarning(check({ roomBytes: 200 * GIB, heldBytes: 50 * GIB }))).toBeUndefined();
    expect(capacityWarning(check({ ratioMeasured: false }))).toContain('(assumed: nothing measured yet)');
  });

  it('is sent as an RFC 9111 Warning, which the CLI reads back', () => {
    const header = warningHeader('event type "x" needs 1 GiB \\ × 2');
    expect(header).toBe('299 - "event type \\"x\\" needs 1 GiB \\\\ ? 2"');
    expect(warningTexts(header)).toEqual(['event type "x" needs 1 GiB \\ ? 2']);
    expect(warningTexts([header, '199 - "another"'])).toEqual(['event type "x" needs 1 GiB \\ ? 2', 'another']);
    expect(warningTexts(undefined)).toEqual([]);
  });

  it('formats bytes in binary units', () => {
    expect([formatBytes(512), formatBytes(1536), formatBytes(12.4 * GIB), formatBytes(Infinity)]).toEqual(['512 B', '1.50 KiB', '12.4 GiB', 'unlimited']);
  });
});

describe('Redis refusing writes for memory, mapped in one place', () => {
  const oomScript = new Error("OOM command not allowed when used memory > 'maxmemory'. script: 65732af5f1e2, on @user_script:76.");
  const master = judgeMaster('127.0.0.1:7001', { usedBytes: 19 * MIB, maxmemoryBytes: 20 * MIB, systemBytes: 16 * GIB }, 90);

  it('recognizes OOM from a command and from a script, nothing else', () => {
    expect(isOutOfMemory(oomScript)).toBe(true);
    expect(isOutOfMemory(new Error("OOM command not allowed when used memory > 'maxmemory'."))).toBe(true);
    expect(isOutOfMemory(new Error('ERR something else mentioning OOM'))).toBe(false);
    expect(isOutOfMemory(new Error('Command timed out'))).toBe(false);
  });

  it('fails a partition write without Redis\'s text', () => {
    const write = writeFailure(oomScript);
    expect(write).toMatchObject({ ok: false, outOfMemory: true });
    expect(write.ok ? '' : write.reason).toBe('Storage is full: Redis refused the write for lack of memory (used_memory above its maxmemory)');
  });

  it('answers a control-plane write with 507 STORAGE_FULL instead of a 500', () => {
    let thrown: unknown;
    try {
      storageError(oomScript);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toMatchObject({ code: 'STORAGE_FULL', status: 507, headers: { 'Retry-After': '5' } });
    expect((thrown as Error).message).not.toMatch(/OOM|script/);
  });

  it('names the master\'s state: at the mark, or refused by Redis', () => {
    expect(storageFullState(master, 'high_water_mark')).toBe('Redis master 127.0.0.1:7001 uses 19.0 MiB, at or above its high-water mark of 18.0 MiB (90 % of maxmemory 20.0 MiB)');
    expect(storageFullState(master, 'out_of_memory')).toBe('Redis master 127.0.0.1:7001 refused the write for lack of memory (maxmemory 20.0 MiB; 19.0 MiB used when last read)');
    const unlimited = judgeMaster('redis:6379', { usedBytes: 15 * GIB, maxmemoryBytes: 0, systemBytes: 16 * GIB }, 90);
    expect(storageFullState(unlimited, 'high_water_mark')).toContain("(90 % of the machine's 16.0 GiB (the master has no maxmemory))");
    const error = storageFull(master, 'high_water_mark');
    expect({ status: error.status, type: error.type, retryAfter: error.headers['Retry-After'] }).toEqual({ status: 507, type: '/problems/storage-full', retryAfter: '5' });
    expect(errorCatalog.STORAGE_FULL.status).toBe(507);
  });
});

describe('the embedded Redis\'s maxmemory', () => {
  it('is the configured bytes, or the configured share of the machine, never 0', () => {
    expect(embeddedMaxmemoryBytes({ maxmemoryBytes: 3 * GIB, maxmemoryPercent: 50 }, 16 * GIB)).toBe(3 * GIB);
    expect(embeddedMaxmemoryBytes({ maxmemoryBytes: 0, maxmemoryPercent: 50 }, 16 * GIB)).toBe(8 * GIB);
    expect(embeddedMaxmemoryBytes({ maxmemoryBytes: 0, maxmemoryPercent: 1 }, 10 * MIB)).toBe(MIB);
    expect(embeddedMaxmemoryBytes({ maxmemoryBytes: 0, maxmemoryPercent: 50 })).toBeGreaterThan(0);
  });
});
