/**
 * A probe preloaded into a benchmarked broker node (`NODE_OPTIONS=--import <this file>`, set by
 * {@link brokerProbeEnv}; the node's own flags stay as `BROKER_NODE_FLAGS` has them): it watches the
 * main thread's V8 garbage collections (`PerformanceObserver`, entry type `gc`) and its event loop delay
 * (`monitorEventLoopDelay`, 1 ms resolution). It listens on a loopback port of its own, written to the
 * file named by `BENCH_BROKER_PROBE_FILE`; each `GET` there answers what it saw since the previous one
 * ({@link ProbeMark}) and starts over. The bench marks the start and the end of a measured period with
 * a request each ({@link BrokerProbe}). Without that variable, or in a worker thread, it does nothing.
 *
 * Not a signal: the node gives SIGUSR1 and SIGUSR2 their own meanings (src/main.ts; before hyper-express's
 * `auto_close` was turned off, either closed the node's listening socket).
 */
import { appendFileSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { constants, monitorEventLoopDelay, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { isMainThread } from 'node:worker_threads';

/** One garbage collection: start (ms since the epoch), pause (ms) and kind. */
export interface GcPause {
  readonly at: number;
  readonly ms: number;
  readonly kind: 'scavenge' | 'mark-compact' | 'incremental' | 'weak-callbacks' | 'other';
  /** V8's GC callback flags (`perf_hooks.constants.NODE_PERFORMANCE_GC_FLAGS_*`): why it ran, e.g. external memory. */
  readonly flags: number;
}

/** What the probe saw between two signals. */
export interface ProbeMark {
  /** When the mark was taken (ms since the epoch). */
  readonly at: number;
  /** Event loop delay beyond the 1 ms sampling interval, in ms (the histogram's figures minus 1 ms, at least 0). */
  readonly loop: { readonly samples: number; readonly p50: number; readonly p99: number; readonly p999: number; readonly max: number };
  readonly gc: readonly GcPause[];
  /** `process.memoryUsage()` at the mark, and the new and old spaces' sizes (`v8.getHeapSpaceStatistics()`), in MB. */
  readonly memoryMB: { readonly rss: number; readonly heapUsed: number; readonly external: number; readonly arrayBuffers: number; readonly newSpace: number; readonly oldSpaceUsed: number };
}

const FILE_VARIABLE = 'BENCH_BROKER_PROBE_FILE';
/** Diagnostics: with this variable set to a path, the probe samples the main thread's allocations (collected ones too) and writes the top sites there at each mark. */
const ALLOCATIONS_VARIABLE = 'BENCH_BROKER_ALLOCATIONS_FILE';
/** Diagnostics: `1` turns on V8's `--trace-gc` in the node (each collection and its reason on stdout). */
const TRACE_GC_VARIABLE = 'BENCH_BROKER_TRACE_GC';
const RESOLUTION_MS = 1;

function kindOf(kind: number | undefined): GcPause['kind'] {
  switch (kind) {
    case constants.NODE_PERFORMANCE_GC_MINOR:
      return 'scavenge';
    case constants.NODE_PERFORMANCE_GC_MAJOR:
      return 'mark-compact';
    case constants.NODE_PERFORMANCE_GC_INCREMENTAL:
      return 'incremental';
    case constants.NODE_PERFORMANCE_GC_WEAKCB:
      return 'weak-callbacks';
    default:
      return 'other';
  }
}

function memoryMB(): ProbeMark['memoryMB'] {
  const m = process.memoryUsage();
  const mb = (bytes: number): number => Math.round(bytes / 1e5) / 10;
  const spaces = getHeapSpaceStatistics();
  const space = (name: string) => spaces.find((s) => s.space_name === name);
  return {
    rss: mb(m.rss),
    heapUsed: mb(m.heapUsed),
    external: mb(m.external),
    arrayBuffers: mb(m.arrayBuffers),
    newSpace: mb(space('new_space')?.space_size ?? 0),
    oldSpaceUsed: mb(space('old_space')?.space_used_size ?? 0),
  };
}

/** Starts the probe in this process when it is a broker's main thread with the file variable set. */
function install(file: string): void {
  let pauses: GcPause[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const detail = (entry as PerformanceEntry & { readonly detail?: { readonly kind?: number; readonly flags?: number } }).detail;
      pauses.push({ at: performance.timeOrigin + entry.startTime, ms: entry.duration, kind: kindOf(detail?.kind), flags: detail?.flags ?? 0 });
    }
  });
  observer.observe({ entryTypes: ['gc'] });
  const delay = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  delay.enable();
  const ms = (ns: number): number => Math.max(0, ns / 1e6 - RESOLUTION_MS);
  const server = http.createServer((_req, res) => {
    const mark: ProbeMark = {
      at: Date.now(),
      loop: { samples: delay.count, p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), p999: ms(delay.percentile(99.9)), max: ms(delay.max) },
      gc: pauses,
      memoryMB: memoryMB(),
    };
    pauses = [];
    delay.reset();
    res.end(JSON.stringify(mark));
  });
  server.listen(0, '127.0.0.1', () => {
    const address = server.address();
    if (address !== null && typeof address === 'object') writeFileSync(file, String(address.port));
  });
  // The probe must not keep a stopping node alive.
  server.unref();
  // Diagnostics: V8's own line per GC with its reason, on the node's stdout (the bench counts those lines as warnings).
  if (process.env[TRACE_GC_VARIABLE] === '1') setFlagsFromString('--trace-gc');
  const allocations = process.env[ALLOCATIONS_VARIABLE];
  if (allocations !== undefined && allocations !== '') sampleAllocations(server, allocations);
}

interface SamplingNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly selfSize: number;
  readonly children: readonly SamplingNode[];
}

/** Diagnostics ({@link ALLOCATIONS_VARIABLE}): at each request to the probe, the top allocation sites since the previous one go to `file`. */
function sampleAllocations(server: http.Server, file: string): void {
  const session = new Session();
  session.connect();
  const start = (): void =>
    session.post('HeapProfiler.startSampling', { samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true } as object);
  start();
  server.prependListener('request', () => {
    session.post('HeapProfiler.stopSampling', (err, result) => {
      if (err === null) {
        const sites = new Map<string, number>();
        const walk = (node: SamplingNode, stack: string): void => {
          const frame = `${node.callFrame.functionName || '(anonymous)'} ${node.callFrame.url.replace(/^.*\/(node_modules|dist)\//, '$1/')}:${node.callFrame.lineNumber + 1}`;
          const path = stack === '' ? frame : `${stack} < ${frame}`;
          if (node.selfSize > 0) sites.set(path, (sites.get(path) ?? 0) + node.selfSize);
          for (const child of node.children) walk(child, frame);
        };
        walk((result as { profile: { head: SamplingNode } }).profile.head, '');
        const total = [...sites.values()].reduce((a, b) => a + b, 0);
        const top = [...sites].sort((a, b) => b[1] - a[1]).slice(0, 40);
        appendFileSync(file, `total ${(total / 1e6).toFixed(1)} MB\n${top.map(([site, bytes]) => `${(bytes / 1e6).toFixed(1).padStart(8)} MB  ${site}`).join('\n')}\n\n`);
      }
      start();
    });
  });
}

const file = process.env[FILE_VARIABLE];
if (isMainThread && file !== undefined && file !== '' && process.argv[1]?.endsWith(path.join('src', 'main.js')) === true) install(file);

/**
 * The bench's side of the probe: the environment that preloads it into a broker, and the marks.
 * Call {@link mark} at the start and the end of a measured period and read the second mark.
 */
export class BrokerProbe {
  readonly file = path.join(os.tmpdir(), `broker-probe-${process.pid}-${Date.now()}.port`);

  /** Extra environment for `startStack`: preloads this module into the broker with the probe file set. */
  env(): Record<string, string> {
    const inherited = process.env.NODE_OPTIONS ?? '';
    return { NODE_OPTIONS: `${inherited} --import ${import.meta.url}`.trim(), [FILE_VARIABLE]: this.file };
  }

  /**
   * What the broker saw since the previous mark (since it started, for the first).
   * @throws Error when the probe did not start in the broker (no port in its file) or does not answer
   */
  mark(): Promise<ProbeMark> {
    let port: string;
    try {
      port = readFileSync(this.file, 'utf8');
    } catch {
      return Promise.reject(new Error(`the broker probe wrote no port to ${this.file}: was the broker started with its env()?`));
    }
    return new Promise((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port: Number(port), path: '/', agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as ProbeMark));
        res.on('error', reject);
      });
      req.setTimeout(10_000, () => req.destroy(new Error('the broker probe did not answer within 10 s')));
      req.on('error', reject);
    });
  }

  /** Removes the probe's port file. */
  remove(): void {
    rmSync(this.file, { force: true });
  }
}
